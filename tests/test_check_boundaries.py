"""Rules and reporters at their edges: a requirement met exactly passes, and each reporter puts a finding on the
line the text format names. Each test fails with its rule broken (>= made >, a line shifted by one, the JUnit
skipped count off)."""

from __future__ import annotations

import json
import textwrap
from xml.etree import ElementTree as ET

from kvplan.check import Options, check_paths
from kvplan.check.reporters import REPORTERS

# tests/test_check.py's seed on the simple engine: 8,501 blocks of 16 tokens = 136,016 tokens. At max_model_len
# 4,096 a request holds 256 blocks: 8,501 / 256 = 33.21 at once (two decimals), and the ladder's 4,096 rung
# holds floor(8,501 / 256) = 33 requests.
SEED = """\
    deployments:
      - name: a
        model: Qwen/Qwen2.5-7B
        engine: simple
        gpu_memory: 24GB
        weights_memory: 15.2GB
        reserve: 1GB
        gpu_memory_utilization: 1.0
        dtype: float16
        max_model_len: 4096
"""


def report(tmp_path, extra):
    path = tmp_path / "fleet.yaml"
    path.write_text(textwrap.dedent(SEED) + "".join(f"    {line}\n" for line in extra.splitlines()))
    return check_paths([str(path)], Options())


def status(found, rule_id):
    return next(f.status for f in found.findings if f.rule == rule_id)


def test_min_concurrency_met_exactly_passes(tmp_path):
    assert status(report(tmp_path, "min_concurrency: 33.21"), "KV020") == "pass"
    assert status(report(tmp_path, "min_concurrency: 33.22"), "KV020") == "fail"


def test_min_requests_at_exactly_max_model_len_is_judged_not_refused(tmp_path):
    at = report(tmp_path, 'min_requests_at: {context: 4096, requests: 33}')
    assert status(at, "KV023") == "pass"  # a context of exactly max_model_len is allowed: 33 such at once
    assert status(report(tmp_path, 'min_requests_at: {context: 4096, requests: 34}'), "KV023") == "fail"
    longer = report(tmp_path, 'min_requests_at: {context: 4097, requests: 1}')
    assert "longer than max_model_len" in next(f.message for f in longer.findings if f.rule == "KV023")


def test_reporters_put_findings_on_the_text_formats_line(tmp_path):
    found = report(tmp_path, "min_concurrency: 40\nmax-num-seqz: 3")
    failed = [f for f in found.findings if f.status == "fail"]
    assert [(f.rule, f.line) for f in failed] == [("KV002", 12)]  # the typo is the file's line 12
    sarif = json.loads(REPORTERS["sarif"]().render(found))["runs"][0]["results"]
    lines = {r["ruleId"]: r["locations"][0]["physicalLocation"]["region"]["startLine"] for r in sarif
             if r["level"] == "error"}
    assert lines == {"KV002": 12}
    suite = next(iter(ET.fromstring(REPORTERS["junit"]().render(found))))
    case = next(c for c in suite if c.get("name").startswith("KV002"))
    assert case.get("line") == "12"
    skipped = sum(1 for f in found.findings if f.status == "skip")
    assert skipped >= 1 and suite.get("skipped") == str(skipped) == str(sum(c.find("skipped") is not None
                                                                            for c in suite))
