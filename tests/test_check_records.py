"""kvplan check is never silent: every file given or found yields a record in every format (checked, skipped with
its reason, or an error), and a multi-document file with a broken document still checks the others."""

from __future__ import annotations

import json
import textwrap
from xml.etree import ElementTree as ET

from kvplan.check import Options, check_paths
from kvplan.check.findings import exit_code
from kvplan.check.reporters import REPORTERS

GOOD = """\
    # kvplan: {gpu: h100}
    model: Qwen/Qwen2.5-7B
    max-model-len: 4096
"""


def write(folder, name, text):
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def test_every_file_has_a_record_in_every_format(tmp_path):
    good = write(tmp_path, "repo/serve.yaml", GOOD)
    other = write(tmp_path, "repo/notes.yaml", "title: hello\n")
    broken = write(tmp_path, "repo/broken.yaml", "deployments: [\n")
    report = check_paths([str(tmp_path / "repo")], Options())
    assert [(r.path, r.status) for r in report.records] == [
        (str(broken), "errored"), (str(other), "skipped"), (str(good), "checked")]
    text = REPORTERS["text"]().render(report)
    assert f"{other}: KV000 skip: not a file kind kvplan check reads" in text
    assert f"{good}: KV000 pass: 1 deployment(s) read as vLLM --config file" in text
    assert "3 file(s) (1 checked, 1 skipped, 1 errored), 1 deployment(s)" in text
    files = {f["file"] for f in json.loads(REPORTERS["json"]().render(report)) if f["rule"] == "KV000"}
    assert files == {str(good), str(other), str(broken)}
    github = REPORTERS["github"]().render(report)
    assert f"::notice file={other},title=KV000::not a file kind" in github
    assert f"::notice file={good},title=KV000::1 deployment(s)" in github
    assert f"::error file={broken},title=KV000::" in github
    assert "::notice title=kvplan check::3 file(s) (1 checked, 1 skipped, 1 errored)" in github
    suites = {suite.get("name"): suite for suite in ET.fromstring(REPORTERS["junit"]().render(report))}
    assert set(suites) == {str(good), str(other), str(broken)}
    assert suites[str(other)].get("skipped") == "1" and suites[str(broken)].get("errors") == "1"
    sarif = json.loads(REPORTERS["sarif"]().render(report))["runs"][0]["results"]
    kinds = {(r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"].rsplit("/", 1)[-1], r.get("kind"),
              r["level"]) for r in sarif if r["ruleId"] == "KV000"}
    assert kinds == {("serve.yaml", "pass", "none"), ("notes.yaml", "notApplicable", "none"),
                     ("broken.yaml", None, "error")}
    assert exit_code(report.findings) == 2


def test_a_named_file_of_no_kind_is_an_error_and_a_found_one_a_skip(tmp_path):
    other = write(tmp_path, "notes.yaml", "title: hello\n")
    named = check_paths([str(other)], Options())
    assert [(f.rule, f.status) for f in named.findings] == [("KV000", "error")]
    assert exit_code(named.findings) == 2 and named.count("errored") == 1
    found = check_paths([str(tmp_path)], Options())
    assert [(f.rule, f.status) for f in found.findings] == [("KV000", "skip")] and exit_code(found.findings) == 0
    globbed = check_paths([f"{tmp_path}/*.yaml"], Options())  # a glob finds files, it does not name them
    assert [(f.rule, f.status) for f in globbed.findings] == [("KV000", "skip")]


def test_a_kubernetes_object_of_another_kind_is_skipped_with_its_kind(tmp_path):
    service = write(tmp_path, "svc.yaml", "apiVersion: v1\nkind: Service\nmetadata: {name: x}\n")
    report = check_paths([str(service)], Options())
    assert [(f.status, f.message) for f in report.findings] == [
        ("skip", "a Kubernetes Service: no pod in it runs a model server")]


def test_a_workload_with_no_model_server_says_so(tmp_path):
    redis = write(tmp_path, "redis.yaml", """\
        apiVersion: apps/v1
        kind: Deployment
        metadata: {name: cache}
        spec:
          template:
            spec:
              containers: [{name: redis, image: "redis:7"}]
    """)
    report = check_paths([str(redis)], Options())
    assert [f.status for f in report.findings] == ["skip"]
    assert report.findings[0].message.startswith("Kubernetes manifest: no container runs a model server")


MULTI = """\
    apiVersion: apps/v1
    kind: Deployment
    metadata: {name: good}
    spec:
      template:
        spec:
          nodeSelector: {nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}
          containers:
            - name: vllm
              image: vllm/vllm-openai:v0.10.1
              args: [--model, Qwen/Qwen2.5-7B, --max-model-len, "4096"]
              resources: {limits: {nvidia.com/gpu: 1}}
    ---
    apiVersion: v1
    kind: Service
    metadata: {name: [broken
"""


def test_a_broken_document_is_an_error_with_its_line_and_the_others_are_checked(tmp_path):
    path = write(tmp_path, "multi.yaml", MULTI)
    report = check_paths([str(path)], Options())
    errors = [f for f in report.findings if f.status == "error"]
    # the second document starts at line 14; its flow sequence is never closed (the parser stops at line 17)
    assert [(f.rule, f.line) for f in errors] == [("KV000", 17)] and "invalid YAML at line 17" in errors[0].message
    assert any(f.rule == "KV011" and f.status == "pass" and f.deployment == "good" for f in report.findings)
    assert report.records[0].status == "errored" and report.deployments == 1
    assert exit_code(report.findings) == 2
