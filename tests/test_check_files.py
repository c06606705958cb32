"""kvplan check's file kinds, hostile input, reporters and command line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from kvplan.check import Options, check_paths
from kvplan.check.findings import exit_code

EXAMPLES = Path(__file__).parent.parent / "examples"


def write(tmp_path, name, text):
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(textwrap.dedent(text))
    return path


def findings_of(*paths, **options):
    return check_paths([str(p) for p in paths], Options(**options)).findings


def by_rule(findings, deployment=None):
    return {f.rule: f for f in findings if deployment is None or f.deployment == deployment}


K8S = """\
    apiVersion: v1
    kind: Service
    metadata: {name: llama}
    spec: {ports: [{port: 80}]}
    ---
    apiVersion: apps/v1
    kind: StatefulSet
    metadata:
      name: llama
      annotations:
        kvplan/min_concurrency: "2"
    spec:
      template:
        spec:
          affinity:
            nodeAffinity:
              requiredDuringSchedulingIgnoredDuringExecution:
                nodeSelectorTerms:
                  - matchExpressions:
                      - {key: nvidia.com/gpu.product, operator: In, values: [NVIDIA-A100-SXM4-80GB]}
          containers:
            - name: server
              image: vllm/vllm-openai:v0.10.1
              command: ["/bin/sh", "-c"]
              args:
                - pip list && exec vllm serve meta-llama/Llama-3.1-8B --max-model-len 16384 --max-num-seqs 32
              env:
                - {name: HF_HOME, value: /models}
              resources:
                limits: {nvidia.com/gpu: "1"}
            - name: metrics
              image: prom/node-exporter
"""


def test_kubernetes_manifest(tmp_path):
    findings = findings_of(write(tmp_path, "k8s.yaml", K8S))
    rules = by_rule(findings)
    # the sidecar and the Service are not deployments
    assert {f.deployment for f in findings if f.rule != "KV000"} == {"llama"}
    # nvidia.com/gpu.product NVIDIA-A100-SXM4-80GB is the catalogue's a100-80gb-sxm alias A100-SXM4-80GB
    assert "A100-SXM4-80GB" in rules["KV006"].message and rules["KV006"].line == 20
    assert rules["KV030"].status == "pass"
    assert rules["KV020"].status == "pass"  # the annotation's requirement was read
    assert rules["KV043"].status == "pass"  # pinned v0.10.1
    assert all(f.status in ("pass", "skip") for f in findings), findings


@pytest.mark.parametrize(("entry", "status"), [
    ("{name: VLLM_USE_FLASHINFER_SAMPLER}", "fail"),  # no value: the Kubernetes API's EnvVar.value defaults to ""
    ("{name: VLLM_USE_FLASHINFER_SAMPLER, value: ''}", "fail"),
    ("{name: VLLM_USE_FLASHINFER_SAMPLER, value: '0'}", "pass"),
    ("{name: VLLM_USE_FLASHINFER_SAMPLER, valueFrom: {configMapKeyRef: {name: c, key: k}}}", "pass")])
def test_an_empty_vllm_switch_in_a_container_env_is_vllms_start_up_error(tmp_path, entry, status):
    # vLLM 0.33.0 envs.py reads VLLM_USE_FLASHINFER_SAMPLER as bool(int(value)): int('') stops it at start-up. A
    # valueFrom is known only at deploy time and is not read
    text = K8S.replace("- {name: HF_HOME, value: /models}", f"- {{name: HF_HOME, value: /models}}\n"
                       f"                - {entry}")
    known = by_rule(findings_of(write(tmp_path, "k8s.yaml", text)))["KV002"]
    assert known.status == status
    if status == "fail":
        assert "VLLM_USE_FLASHINFER_SAMPLER: set but empty" in known.message


def test_unmappable_gpu_product_says_so(tmp_path):
    text = K8S.replace("NVIDIA-A100-SXM4-80GB", "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb")
    found = by_rule(findings_of(write(tmp_path, "k8s.yaml", text)))["KV006"]
    assert found.status == "skip" and "not in kvplan's catalogue" in found.message
    # --gpu stands in for it
    assert by_rule(findings_of(write(tmp_path, "k8s.yaml", text), gpu="a100-40gb-sxm"))["KV006"].status == "pass"


def test_leader_worker_set_counts_every_pod(tmp_path):
    text = """\
        apiVersion: leaderworkerset.x-k8s.io/v1
        kind: LeaderWorkerSet
        metadata: {name: big}
        spec:
          leaderWorkerTemplate:
            size: 2
            leaderTemplate:
              spec:
                nodeSelector: {nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}
                containers:
                  - name: leader
                    image: vllm/vllm-openai:v0.11.0
                    command: [vllm, serve, meta-llama/Llama-3.1-70B, -tp, "8", -pp, "2", --max-model-len, "32768"]
                    resources: {limits: {nvidia.com/gpu: 8}}
    """
    rules = by_rule(findings_of(write(tmp_path, "lws.yaml", text)))
    # 2 pods x 8 GPUs = 16 = TP 8 x PP 2
    assert rules["KV030"].status == "pass" and "16 GPU(s)" in rules["KV030"].message


def test_helm_values(tmp_path):
    text = """\
        servingEngineSpec:
          modelSpec:
            - name: qwen
              repository: vllm/vllm-openai
              tag: v0.11.0
              modelURL: Qwen/Qwen2.5-7B
              requestGPU: 2
              vllmConfig:
                maxModelLen: 32768
                tensorParallelSize: 2
                pipelineParallelSize: 1
                extraArgs: ["--max-num-seqs", "64"]
            - name: off
              enabled: false
              modelURL: Qwen/Qwen2.5-7B
    """
    findings = findings_of(write(tmp_path, "values.yaml", text), gpu="l4")
    rules = by_rule(findings)
    assert {f.deployment for f in findings if f.rule != "KV000"} == {"qwen"}  # enabled: false is not deployed
    # the chart's template passes only the keys it names; pipelineParallelSize never reaches vLLM
    assert rules["KV002"].status == "fail" and "pipelineParallelSize" in rules["KV002"].message
    assert rules["KV002"].line == 11
    fixed = findings_of(write(tmp_path, "values.yaml", text.replace("pipelineParallelSize: 1", "maxNumSeqs: 32")), gpu="l4")
    rules = by_rule(fixed)
    assert rules["KV030"].status == "pass" and rules["KV011"].status == "pass"


def test_compose_service(tmp_path):
    text = """\
        services:
          vllm:
            image: vllm/vllm-openai:v0.11.0
            command: ["--model", "Qwen/Qwen2.5-7B", "--max-model-len", "16384", "-tp", "2"]
            deploy:
              resources:
                reservations:
                  devices: [{driver: nvidia, count: 1, capabilities: [gpu]}]
          cache:
            image: redis
    """
    findings = findings_of(write(tmp_path, "compose.yaml", text), gpu="h100")
    rules = by_rule(findings)
    assert {f.deployment for f in findings if f.rule != "KV000"} == {"vllm"}
    assert rules["KV030"].status == "fail" and "gives 1 GPU(s), but TP 2" in rules["KV030"].message


def test_vllm_config_with_kvplan_settings_in_a_comment(tmp_path):
    text = """\
        # kvplan: {gpu: h100, vllm_version: "0.10.0", min_kv_tokens: 1K}
        model: Qwen/Qwen2.5-7B
        max_model_len: 8192
        num-scheduler-steps: 8
        port: 8000
    """
    rules = by_rule(findings_of(write(tmp_path, "serve.yaml", text)))
    assert rules["KV006"].status == "pass"
    assert rules["KV003"].status == "warn" and rules["KV003"].line == 4  # 0.10.0 still has it
    assert rules["KV021"].status == "pass" and rules["KV002"].status == "pass"


def test_a_kvplan_key_in_a_vllm_config_is_refused(tmp_path):
    # vLLM's FlexibleArgumentParser.load_config_file turns every top-level key into a flag: `kvplan:` becomes
    # `--kvplan {...}`, which vllm serve refuses as an unrecognized argument.
    text = "kvplan: {gpu: h100}\nmodel: Qwen/Qwen2.5-7B\nmax-model-len: 4096\n"
    rules = by_rule(findings_of(write(tmp_path, "serve.yaml", text)))
    assert rules["KV002"].status == "fail" and "# kvplan:" in rules["KV002"].message and rules["KV002"].line == 1


def test_a_malformed_kvplan_comment_is_an_error(tmp_path):
    bad = write(tmp_path, "serve.yaml", "# kvplan: gpu h100\nmodel: Qwen/Qwen2.5-7B\nmax-model-len: 4096\n")
    errors = [f for f in findings_of(bad) if f.status == "error"]
    assert len(errors) == 1 and errors[0].line == 1 and "one-line mapping" in errors[0].message


def test_vllm_config_typo_is_a_flag_error(tmp_path):
    rules = by_rule(findings_of(write(tmp_path, "serve.yaml", "model: Qwen/Qwen2.5-7B\nmax-num-seqz: 8\n")))
    assert rules["KV002"].status == "fail" and "--max-num-seqs" in rules["KV002"].message and rules["KV002"].line == 2


def test_same_setup_same_numbers_as_estimate(tmp_path):
    from kvplan.api import estimate

    plan = estimate("meta-llama/Llama-3.1-8B", gpu="l40s", max_model_len=16384)
    found = by_rule(findings_of(write(tmp_path, "serve.yaml", "# kvplan: {gpu: l40s}\nmodel: meta-llama/Llama-3.1-8B\n"
                                                              "max-model-len: 16384\n")))["KV011"]
    assert f"holds {plan.capacity.tokens:,} tokens" in found.message


def test_files_of_other_kinds_are_skipped(tmp_path):
    write(tmp_path, "repo/.github/workflows/ci.yaml", "on: push\njobs: {}\n")
    write(tmp_path, "repo/.pre-commit-config.yaml", "repos: []\n")
    write(tmp_path, "repo/package.json", '{"name": "x"}')
    write(tmp_path, "repo/notes.yaml", "title: hello\n")
    report = check_paths([str(tmp_path / "repo")], Options())
    assert exit_code(report.findings) == 0
    repo = tmp_path / "repo"  # dot folders are not searched; package.json is not a config.json
    assert report.skipped_files == [str(repo / ".pre-commit-config.yaml"), str(repo / "notes.yaml")]
    # found by walking the folder: each is a skip record with its reason, in the findings every format prints
    assert [(f.file, f.rule, f.status) for f in report.findings] == [(path, "KV000", "skip") for path in
                                                                     report.skipped_files]
    assert all("not a file kind kvplan check reads" in f.message for f in report.findings)


def test_globs(tmp_path):
    write(tmp_path, "a/serve.yaml", "model: Qwen/Qwen2.5-7B\n")
    findings = findings_of(f"{tmp_path}/**/*.yaml")
    assert {f.file for f in findings} == {str(tmp_path / "a" / "serve.yaml")}
    missing = findings_of(f"{tmp_path}/*.yml")
    assert [(f.rule, f.status) for f in missing] == [("KV000", "error")]


LAUGHS = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 10)}]\n" for i in range(8))


@pytest.mark.parametrize(("name", "content", "words"), [
    ("laughs.yaml", LAUGHS, "expands to more than 100,000 values"),
    ("dup.yaml", "deployments:\n  - name: a\n    model: m\n    model: n\n", "'deployments.0.model' is given twice"),
    ("dup-top.yaml", "model: a\nmodel: b\n", "given twice"),
    ("list.yaml", "deployments:\n  - [model, Qwen/Qwen2.5-7B]\n", "expected a mapping"),
    ("nameless.yaml", "deployments:\n  - model: Qwen/Qwen2.5-7B\n", "each deployment needs a name"),
    ("binary.yaml", bytes(range(256)) * 4, "not UTF-8"),
    ("latin1.yaml", "model: caf\xe9\n".encode("latin-1"), "not UTF-8"),
    ("empty.yaml", "", "file is empty"),
    ("nul.yaml", "model: a\x00b\n", "invalid YAML"),
    ("bad.json", '{"architectures": [', "invalid JSON"),
    ("settings.yaml", "# kvplan: [h100]\nmodel: Qwen/Qwen2.5-7B\n", "expected a one-line mapping"),
])
def test_bad_files_are_one_line_errors(tmp_path, name, content, words):
    good = write(tmp_path, "good.yaml", "# kvplan: {gpu: h100}\nmodel: Qwen/Qwen2.5-7B\nmax-model-len: 4096\n")
    bad = write(tmp_path, name, content)
    started = time.perf_counter()
    findings = findings_of(bad, good)
    assert time.perf_counter() - started < 30  # bounded (a loose guard against a hang, not a speed test)
    errors = [f for f in findings if f.file == str(bad)]
    assert len(errors) == 1 and errors[0].rule == "KV000" and errors[0].status == "error"
    assert words in errors[0].message and "\n" not in errors[0].message
    assert any(f.file == str(good) and f.rule == "KV011" and f.status == "pass" for f in findings)  # still checked
    assert exit_code(findings) == 2


def test_list_error_points_at_its_line(tmp_path):
    findings = findings_of(write(tmp_path, "list.yaml", "deployments:\n  - name: a\n    model: m\n  - [x]\n"))
    assert findings[0].line == 4


def test_huge_file_is_refused_without_reading_it(tmp_path):
    path = tmp_path / "huge.yaml"
    with path.open("wb") as handle:
        handle.truncate(100 * 2**20)  # 100 MB (sparse)
    assert "over 1,048,576 bytes" in findings_of(path)[0].message


def test_symlink_loop_in_a_walk(tmp_path):
    write(tmp_path, "fleet/serve.yaml", "model: Qwen/Qwen2.5-7B\n")
    os.symlink("..", tmp_path / "fleet" / "up")
    os.symlink("self.yaml", tmp_path / "fleet" / "self.yaml")
    findings = findings_of(tmp_path / "fleet")
    errors = [(Path(f.file).name, f.message) for f in findings if f.status == "error"]
    assert len(errors) == 2  # each reported once: the walk does not descend through the loop
    assert dict(errors)["up"].startswith("symbolic link loop: it leads back to a folder already searched")
    assert any(f.file.endswith("serve.yaml") for f in findings)


def test_a_recursive_glob_through_a_symlink_loop_reads_each_file_once(tmp_path):
    # glob's ** follows the link fleet/up -> .. round and round; the file it keeps finding is one file.
    write(tmp_path, "fleet/serve.yaml", "model: Qwen/Qwen2.5-7B\n")
    os.symlink("..", tmp_path / "fleet" / "up")
    findings = findings_of(str(tmp_path / "**" / "*.yaml"))
    assert {f.file for f in findings} == {str(tmp_path / "fleet" / "serve.yaml")}
    assert len([f for f in findings if f.rule == "KV001"]) == 1


def test_reporters(tmp_path):
    from xml.etree import ElementTree as ET

    from kvplan.check.reporters import REPORTERS

    path = write(tmp_path, "fleet.yaml", """\
        deployments:
          - name: big
            model: meta-llama/Llama-3.1-70B
            gpu: h100
            tensor_parallel_size: 2
            max_model_len: 131072
    """)
    report = check_paths([str(path), str(tmp_path / "missing.yaml")], Options())
    documents = json.loads(REPORTERS["json"]().render(report))
    assert all(set(d) == {"file", "deployment", "rule", "status", "message", "line"} for d in documents)
    github = REPORTERS["github"]().render(report).splitlines()
    assert f"::error file={path},line=6,title=KV011::big: vLLM would refuse to start" in "\n".join(github)
    assert any(line.startswith(f"::error file={tmp_path}/missing.yaml,title=KV000::") for line in github)
    suites = ET.fromstring(REPORTERS["junit"]().render(report))
    suite = next(s for s in suites if s.get("name") == str(path))
    failures = [c for c in suite if c.find("failure") is not None]
    assert int(suite.get("failures")) == len(failures) >= 1 and int(suite.get("tests")) == len(list(suite))
    sarif = json.loads(REPORTERS["sarif"]().render(report))
    check_sarif(sarif)
    assert {r["ruleId"] for r in sarif["runs"][0]["results"]} >= {"KV011", "KV000"}


def check_sarif(log):
    """The required properties of SARIF 2.1.0 (OASIS sarif-v2.1.0, sarif-schema-2.1.0.json): sarifLog needs
    version and runs; run needs tool; tool needs driver; toolComponent needs name; result needs message;
    message needs text or id; reportingDescriptor needs id; a region's startLine is >= 1."""
    assert log["version"] == "2.1.0" and isinstance(log["runs"], list)
    for run in log["runs"]:
        driver = run["tool"]["driver"]
        assert isinstance(driver["name"], str)
        ids = [rule["id"] for rule in driver.get("rules", [])]
        for result in run.get("results", []):
            assert "text" in result["message"] or "id" in result["message"]
            assert result["level"] in ("none", "note", "warning", "error")
            assert ids[result["ruleIndex"]] == result["ruleId"]
            for location in result.get("locations", []):
                physical = location["physicalLocation"]
                assert isinstance(physical["artifactLocation"]["uri"], str)
                assert physical.get("region", {"startLine": 1})["startLine"] >= 1


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "kvplan.cli.app", "check", *args], capture_output=True, text=True,
                          timeout=120)


def test_cli_exit_codes_on_the_examples():
    passing = [str(EXAMPLES / name) for name in ("deployments-pass.yaml", "vllm-config.yaml", "k8s-deployment.yaml",
                                                 "production-stack-values.yaml")]
    ok = run_cli(*passing)
    assert ok.returncode == 0, ok.stdout
    assert "4 file(s) (4 checked, 0 skipped, 0 errored), 6 deployment(s)" in ok.stdout
    failing = run_cli(str(EXAMPLES / "deployments-fail.yaml"), "--format", "github")
    assert failing.returncode == 1 and "::error file=" in failing.stdout
    bad = run_cli(str(EXAMPLES / "deployments-pass.yaml"), "no-such-file.yaml")
    assert bad.returncode == 2 and "KV000 error: no such file" in bad.stdout


def test_cli_schema_and_rules():
    schema = run_cli("--schema")
    document = json.loads(schema.stdout)
    entry = document["properties"]["deployments"]["items"]["properties"]
    assert {"name", "gpu_count", "min_concurrency", "min_requests_at", "max_model_len", "max-model-len"} <= set(entry)
    items = document["properties"]["deployments"]["items"]
    assert items["required"] == ["name"] and items["additionalProperties"] is True  # other keys: engine flags
    rules = run_cli("--list-rules")
    assert rules.returncode == 0 and "KV011  request-fits" in rules.stdout and "fix:" in rules.stdout
    wrong = run_cli(str(EXAMPLES / "vllm-config.yaml"), "--format", "xml")
    assert wrong.returncode == 2 and wrong.stderr.startswith("kvplan: error: --format: unknown format")


def test_odd_shapes_never_crash(tmp_path):
    """Documents shaped like each kind with arbitrary values inside: one-line errors or findings, never a
    traceback."""
    import yaml
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    leaf = st.one_of(st.none(), st.booleans(), st.integers(-3, 10**6), st.floats(allow_nan=False, width=32),
                     st.sampled_from(["h100", "Qwen/Qwen2.5-7B", "vllm", "serve", "--max-model-len", "-tp", "latest",
                                      "nvidia.com/gpu", "4", "vllm/vllm-openai:v0.10.1", "sh -c 'vllm serve x'"]))
    keys = st.sampled_from(["name", "model", "gpu", "gpu_count", "command", "args", "image", "containers", "spec",
                            "template", "resources", "limits", "nvidia.com/gpu", "vllmConfig", "modelURL",
                            "extraArgs", "requestGPU", "deploy", "min_requests_at", "kvplan", "max_model_len",
                            "tensor_parallel_size", "env", "nodeSelector", "affinity"])
    values = st.recursive(leaf, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(keys, inner, max_size=4),
                          max_leaves=12)
    shapes = st.sampled_from([
        lambda v: {"deployments": v}, lambda v: {"deployments": [v]},
        lambda v: {"servingEngineSpec": {"modelSpec": [v]}}, lambda v: {"services": {"s": v}},
        lambda v: {"apiVersion": "v1", "kind": "Pod", "spec": v},
        lambda v: {"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"template": {"spec": v}}},
        lambda v: {"model": "Qwen/Qwen2.5-7B", "kvplan": v}, lambda v: {"model": v},
    ])

    @settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(shapes, values)
    def run(shape, value):
        path = tmp_path / "odd.yaml"
        path.write_text(yaml.safe_dump(shape(value)))
        findings = check_paths([str(path)], Options(gpu="h100")).findings
        assert all("\n" not in f.message for f in findings)

    run()


def test_kind_forces_the_reading(tmp_path):
    inert = write(tmp_path, "serve.yaml", "port: 8000\nhost: 0.0.0.0\n")  # no knob: not recognised as a vLLM config
    named = check_paths([str(inert)], Options())  # named on the command line and of no kind: an error, exit 2
    assert [(f.rule, f.status) for f in named.findings] == [("KV000", "error")] and exit_code(named.findings) == 2
    assert "--kind reads it as one" in named.findings[0].message
    assert check_paths([str(inert)], Options(skip_unknown=True)).skipped_files == [str(inert)]
    assert check_paths([str(tmp_path)], Options()).skipped_files == [str(inert)]  # found in a folder: skipped
    forced = by_rule(findings_of(inert, kind="vllm-config"))
    assert forced["KV002"].status == "pass" and forced["KV001"].status == "fail"  # read as one: it names no model
    wrong = findings_of(inert, kind="helm-values")
    assert [(f.rule, f.status) for f in wrong] == [("KV000", "error")] and "servingEngineSpec" in wrong[0].message


def test_other_yaml_with_a_model_key_is_not_a_vllm_config(tmp_path):
    training = write(tmp_path, "train.yaml", "model: resnet50\nlr: 0.1\nepochs: 90\n")
    assert check_paths([str(training)], Options(skip_unknown=True)).skipped_files == [str(training)]
    typo = write(tmp_path, "serve.yaml", "model: Qwen/Qwen2.5-7B\nmax-model-len: 4096\nmax-num-seqz: 8\n")
    assert by_rule(findings_of(typo))["KV002"].status == "fail"  # two of three keys are vLLM's: it is one
