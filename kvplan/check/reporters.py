"""Reporters, one type per output format: text for people, JSON for scripts, GitHub annotations, JUnit XML
and SARIF 2.1.0 for CI systems and code-scanning."""

from __future__ import annotations

import json
from collections import Counter
from typing import Protocol

from kvplan.check.findings import ERROR, FAIL, FILE_RULE, PASS, SKIP, STATUSES, WARN, Finding
from kvplan.check.rules import RULES, Rule
from kvplan.check.runner import CHECKED, ERRORED, SKIPPED, Report

FILE_RULE_NAME = "file-readable"
FILE_RULE_SUMMARY = "the file can be read and parsed safely (size, encoding, YAML aliases, duplicate keys)"


class Reporter(Protocol):
    def render(self, report: Report) -> str: ...


def _location(finding: Finding) -> str:
    return f"{finding.file}:{finding.line}" if finding.line else finding.file


class Text:
    """One line per file, deployment and rule, then a table of counts by rule."""

    def render(self, report: Report) -> str:
        out = []
        for finding in report.findings:
            who = f" {finding.deployment}:" if finding.deployment else ""
            out.append(f"{_location(finding)}:{who} {finding.rule} {finding.status}: {finding.message}")
        counts = Counter((f.rule, f.status) for f in report.findings)
        rules = [r for r in (FILE_RULE, *(rule.id for rule in RULES)) if any(counts[(r, s)] for s in STATUSES)]
        names = {rule.id: rule.name for rule in RULES} | {FILE_RULE: FILE_RULE_NAME}
        if rules:
            out.append("")
            out.append(f"{'rule':<6} {'name':<27}" + "".join(f"{s:>7}" for s in STATUSES))
            for rule in rules:
                out.append(f"{rule:<6} {names[rule]:<27}" + "".join(f"{counts[(rule, s)]:>7}" for s in STATUSES))
        totals = Counter(f.status for f in report.findings)
        out.append(f"{summary(report)}: " + ", ".join(f"{totals[s]} {s}" for s in STATUSES))
        return "\n".join(out) + "\n"


def summary(report: Report) -> str:
    """Files by what became of them, deployments, and models the capacity rules could not look at."""
    unresolved = (f", {report.unresolved_models} with an unresolved model (capacity rules skipped)"
                  if report.unresolved_models else "")
    return (f"{report.files} file(s) ({report.count(CHECKED)} checked, {report.count(SKIPPED)} skipped, "
            f"{report.count(ERRORED)} errored), {report.deployments} deployment(s){unresolved}")


class Json:
    def render(self, report: Report) -> str:
        return json.dumps([finding.to_dict() for finding in report.findings], indent=2) + "\n"


def _escape_data(text: str) -> str:
    """GitHub's workflow-command escaping of a message."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


class Github:
    """`::error file=F,line=N::message` for failures and bad files, `::warning` for warnings."""

    LEVELS = {FAIL: "error", ERROR: "error", WARN: "warning"}

    def render(self, report: Report) -> str:
        out = []
        for finding in report.findings:
            level = self.LEVELS.get(finding.status) or ("notice" if finding.rule == FILE_RULE else None)
            if level is None:
                continue
            where = f"file={_escape_property(finding.file)}"
            if finding.line:
                where += f",line={finding.line}"
            who = f"{finding.deployment}: " if finding.deployment else ""
            out.append(f"::{level} {where},title={finding.rule}::{_escape_data(who + finding.message)}")
        out.append(f"::notice title=kvplan check::{_escape_data(summary(report))}")
        return "".join(line + "\n" for line in out)


class Junit:
    """One testsuite per file, one testcase per deployment and rule."""

    def render(self, report: Report) -> str:
        from xml.etree import ElementTree as ET

        suites = ET.Element("testsuites", name="kvplan check")
        by_file: dict[str, list[Finding]] = {}
        for finding in report.findings:
            by_file.setdefault(finding.file, []).append(finding)
        for path, findings in by_file.items():
            counts = Counter(f.status for f in findings)
            suite = ET.SubElement(suites, "testsuite", name=path, tests=str(len(findings)), failures=str(counts[FAIL]),
                                  errors=str(counts[ERROR]), skipped=str(counts[SKIP]))
            for finding in findings:
                case = ET.SubElement(suite, "testcase", name=f"{finding.rule} {_rule_name(finding.rule)}",
                                     classname=f"{path}.{finding.deployment or 'file'}", file=path)
                if finding.line:
                    case.set("line", str(finding.line))
                tag = {FAIL: "failure", ERROR: "error", SKIP: "skipped"}.get(finding.status)
                if tag is not None:
                    ET.SubElement(case, tag, message=finding.message)
                elif finding.status == WARN:
                    ET.SubElement(case, "system-out").text = f"warning: {finding.message}"
        ET.indent(suites)
        return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"


def _rule_name(rule_id: str) -> str:
    return next((rule.name for rule in RULES if rule.id == rule_id), FILE_RULE_NAME)


class Sarif:
    """SARIF 2.1.0: one run of the kvplan tool, its rules, a result per failure, warning or bad file."""

    SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
    LEVELS = {FAIL: "error", ERROR: "error", WARN: "warning"}

    def render(self, report: Report) -> str:
        from urllib.parse import quote

        from kvplan import __version__

        descriptors = [self._descriptor(FILE_RULE, FILE_RULE_NAME, FILE_RULE_SUMMARY, "fix the file as the "
                                        "message says")]
        descriptors += [self._descriptor(rule.id, rule.name, rule.summary, rule.hint) for rule in RULES]
        index = {descriptor["id"]: i for i, descriptor in enumerate(descriptors)}
        results = []
        for finding in report.findings:
            level = self.LEVELS.get(finding.status)
            if level is None and finding.rule != FILE_RULE:
                continue
            location: dict[str, object] = {"artifactLocation": {"uri": quote(finding.file.replace("\\", "/"))}}
            if finding.line:
                location["region"] = {"startLine": finding.line}
            who = f"{finding.deployment}: " if finding.deployment else ""
            result = {"ruleId": finding.rule, "ruleIndex": index[finding.rule], "level": level or "none",
                      "message": {"text": who + finding.message}, "locations": [{"physicalLocation": location}]}
            if level is None:  # a file checked, or skipped with its reason: SARIF's pass and notApplicable
                result["kind"] = "pass" if finding.status == PASS else "notApplicable"
            results.append(result)
        log = {"$schema": self.SCHEMA, "version": "2.1.0", "runs": [{
            "tool": {"driver": {"name": "kvplan", "version": __version__, "rules": descriptors}},
            "results": results}]}
        return json.dumps(log, indent=2) + "\n"

    @staticmethod
    def _descriptor(rule_id: str, name: str, summary: str, hint: str) -> dict[str, object]:
        return {"id": rule_id, "name": name, "shortDescription": {"text": summary}, "help": {"text": hint}}


REPORTERS: dict[str, type] = {"text": Text, "json": Json, "github": Github, "junit": Junit, "sarif": Sarif}


def rule_table(rules: tuple[Rule, ...] = RULES) -> str:
    """The rules with their ids, what each checks and how to fix a failure (kvplan check --list-rules)."""
    lines = [f"{FILE_RULE}  {FILE_RULE_NAME:<27} {FILE_RULE_SUMMARY} (exit 2)"]
    for rule in rules:
        lines.append(f"{rule.id}  {rule.name:<27} {rule.summary}")
        lines.append(f"{'':<35}fix: {rule.hint}")
    return "\n".join(lines) + "\n"
