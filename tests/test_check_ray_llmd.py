"""KubeRay RayService with Ray Serve LLM, Ray Serve LLM config files and llm-d ModelService values (issue 19,
item 6), each read as its operator reads it. The real files in tests/fixtures/check/real (SOURCES there):
kuberay ray-operator/config/samples/ray-service.llm-serve.yaml, ray doc/source/llm/doc_code/serve/qwen/
llm_config_example.yaml, llm-d-modelservice examples/values-pd.yaml; the chart's command and GPU count as its
templates/_helpers.tpl builds them (vllmServeModelCommand, imageDefaultModelCommand, numGpuPerWorker)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from conftest import check_findings as findings

from kvplan.check import Options, check_paths
from kvplan.check.findings import exit_code

REAL = Path(__file__).parent / "fixtures" / "check" / "real"


@pytest.fixture(autouse=True)
def hub_offline(monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)



def by_rule(found, deployment=None):
    chosen: dict[str, object] = {}
    for f in found:
        if deployment is None or f.deployment == deployment:
            chosen.setdefault(f.rule, f)
    return chosen


def test_the_kuberay_llm_sample_is_read_at_its_own_lines():
    found = check_paths([str(REAL / "kuberay-ray-service.llm-serve.yaml")], Options(gpu="h100")).findings
    rules = by_rule(found)
    assert rules["KV000"].message == "1 deployment(s) read as KubeRay RayService"
    # serveConfigV2 starts at line 6 (`|`): model_source is line 15, max_model_len 18, device 19, utilization 20
    assert rules["KV001"].line == 15 and rules["KV001"].message.startswith("Qwen/Qwen2.5-7B-Instruct")
    assert rules["KV011"].line == 18 and "1,024 tokens" in rules["KV011"].message
    assert rules["KV003"].line == 19 and "--device" in rules["KV003"].message
    # 0.75 x 79.18 GiB; Model Runner V2's sampler side at 1,024 rows on an H100: 3.5 x 1,024 x 152,064 x 4 + 1 MiB,
    # beside it the held hidden states (8,192 + 1,024) x 3,584 x 2 = 66,060,288 and the Hopper cuBLAS workspace
    # 33,554,432 B (in place of int(0.12 GiB) = 128,849,018: 29,234,298 B, 0.03 GiB, more left than 41.41 GiB)
    assert rules["KV040"].line == 20 and rules["KV010"].message.endswith("of a 59.38 GiB budget; 41.44 GiB left "
                                                                         "for the KV cache")
    # the worker group's 4 GPUs serve up to 4 replicas of TP 1: a cluster's total is no replica's count
    assert "KV030" not in rules and rules["KV005"].message == "TP 1 x PP 1 x DP 1"


def test_the_ray_serve_llm_config_example_is_two_deployments_on_a10g():
    report = check_paths([str(REAL / "ray-serve-llm-config-qwen.yaml")], Options())
    assert exit_code(report.findings) == 0
    for name, model_line, gpu_line, model in (("qwen-0.5b", 7, 8, "Qwen/Qwen2.5-0.5B-Instruct"),
                                              ("qwen-1.5b", 15, 16, "Qwen/Qwen2.5-1.5B-Instruct")):
        rules = by_rule(report.findings, name)
        assert rules["KV001"].line == model_line and rules["KV001"].message.startswith(model)
        assert rules["KV006"].line == gpu_line and rules["KV006"].message == "1 x NVIDIA A10G (22.06 GiB)"


RAY_SERVICE = """\
    apiVersion: ray.io/v1
    kind: RayService
    metadata: {name: qwen}
    spec:
      serveConfigV2: |
        applications:
        - name: llms
          import_path: ray.serve.llm:build_openai_app
          args:
            llm_configs:
            - model_loading_config: {model_id: qwen, model_source: Qwen/Qwen2.5-7B-Instruct}
              accelerator_type: L4
              engine_kwargs: {tensor_parallel_size: 2, max_model_len: 8192}
              PLACEMENT
      rayClusterConfig:
        workerGroupSpecs:
        - groupName: gpus
          template:
            spec:
              containers: [{name: w, image: rayproject/ray-llm:2.50.1, resources: {limits: {nvidia.com/gpu: "8"}}}]
"""


def test_a_replica_gpu_count_is_its_placement_group_never_the_cluster(tmp_path):
    alone = by_rule(findings(tmp_path, RAY_SERVICE.replace("PLACEMENT", "")))
    assert "KV030" not in alone and alone["KV006"].message.startswith("2 x NVIDIA L4")  # 8 GPUs: not compared
    two = by_rule(findings(tmp_path, RAY_SERVICE.replace("PLACEMENT", "placement_group_config: {bundles: "
                                                                      "[{GPU: 1}, {GPU: 1}]}")))
    assert two["KV030"].status == "pass" and two["KV030"].message == "2 GPU(s) = TP 2 x PP 1 x DP 1"
    one = by_rule(findings(tmp_path, RAY_SERVICE.replace("PLACEMENT", "placement_group_config: {bundles: "
                                                                      "[{GPU: 1}]}")))
    assert one["KV030"].status == "fail" and one["KV030"].line == 14
    assert one["KV030"].message.startswith("the file gives 1 GPU(s), but TP 2 x PP 1 x DP 1 = 2")


def test_a_quoted_serve_config_keeps_its_key_line_and_a_broken_one_is_an_error(tmp_path):
    quoted = RAY_SERVICE.replace("PLACEMENT", "").split("  serveConfigV2: |\n")
    body = textwrap.dedent(quoted[1].split("  rayClusterConfig:")[0])
    text = textwrap.dedent(quoted[0]) + "  serveConfigV2: " + repr(body).replace("'", '"') + "\n"
    rules = by_rule(findings(tmp_path, text, gpu="l4"))
    assert rules["KV001"].line == 5 and rules["KV011"].line == 5  # a quoted string's lines are not the file's
    broken = findings(tmp_path, RAY_SERVICE.replace("PLACEMENT", "engine_kwargs: [unclosed"))
    assert exit_code(broken) == 2
    error = by_rule(broken)["KV000"]
    assert error.status == "error" and "serveConfigV2 is not YAML" in error.message and "\n" not in error.message
    assert error.line == 15 and "at line 15 " in error.message  # the block's line 10 is the file's 5 + 10
    middle = by_rule(findings(tmp_path, RAY_SERVICE.replace("PLACEMENT", "").replace("- name: llms",
                                                                                    "- name: llms: x")))["KV000"]
    assert middle.line == 7 and "at line 7 column 17: mapping values" in middle.message  # `    - name: llms: x`


def test_an_llm_config_given_as_a_file_is_read_from_beside_it(tmp_path):
    (tmp_path / "qwen.yaml").write_text("model_loading_config: {model_id: qwen, model_source: Qwen/Qwen2.5-7B}\n"
                                        "accelerator_type: L4\nengine_kwargs: {max_model_len: 300000}\n")
    serve = "applications:\n- args:\n    llm_configs: [qwen.yaml]\n  import_path: ray.serve.llm:build_openai_app\n"
    found = findings(tmp_path, serve, name="serve.yaml")
    assert by_rule(found)["KV000"].message == "1 deployment(s) read as Ray Serve LLM config"
    assert any(f.rule in ("KV004", "KV011") and f.status == "fail" for f in found)  # 300,000 > Qwen's 131,072
    missing = findings(tmp_path, serve.replace("qwen.yaml", "gone.yaml"), name="serve.yaml")
    assert exit_code(missing) == 2 and "'gone.yaml', which is not there" in by_rule(missing)["KV000"].message
    (tmp_path / "loop.yaml").write_text("llm_configs: [loop.yaml]\n")
    looped = findings(tmp_path, serve.replace("qwen.yaml", "loop.yaml"), name="serve.yaml")
    assert exit_code(looped) == 2 and "names another file" in by_rule(looped)["KV000"].message


def test_the_llm_d_pd_example_is_a_prefill_and_a_decode_deployment(tmp_path):
    report = check_paths([str(REAL / "llm-d-modelservice-values-pd.yaml")], Options(gpu="h100"))
    assert by_rule(report.findings)["KV000"].message == "2 deployment(s) read as llm-d ModelService values"
    for role, gpu_line in (("prefill", 122), ("decode", 81)):  # resources.limits nvidia.com/gpu: "1"
        rules = by_rule(report.findings, role)
        assert rules["KV001"].line == 11 and rules["KV001"].message.startswith("facebook/opt-125m")  # {{ }} rendered
        assert rules["KV030"].line == gpu_line and rules["KV030"].message == "1 GPU(s) = TP 1 x PP 1 x DP 1"
        assert rules["KV002"].status == "pass"  # --kv-transfer-config and the chart's --port, --served-model-name
    text = (REAL / "llm-d-modelservice-values-pd.yaml").read_text().replace("facebook/opt-125m", "Qwen/Qwen2.5-7B")
    rules = by_rule(findings(tmp_path, text, gpu="h100"), "decode")
    assert rules["KV011"].status == "pass" and rules["KV006"].message.startswith("1 x NVIDIA H100")


LLM_D = """\
    multinode: true
    modelArtifacts: {name: Qwen/Qwen2.5-7B, uri: "pvc+hf://models/hub/Qwen/Qwen2.5-7B"}
    decode:
      parallelism: {tensor: 2, data: 4, dataLocal: 2}
      acceleratorTypes: {labelKey: cloud.google.com/gke-accelerator, labelValues: [nvidia-l4]}
      containers:
      - name: vllm
        image: ghcr.io/llm-d/llm-d:v0.2.0
        modelCommand: COMMAND
        ARGS
"""


def test_llm_d_parallelism_becomes_the_command_and_the_gpu_count(tmp_path):
    # data 4 over dataLocal 2: 2 workers (an LWS group) of dataLocal x tensor = 4 GPUs each, the chart's count
    rules = by_rule(findings(tmp_path, LLM_D.replace("COMMAND", "vllmServe").replace("ARGS", "")))
    assert rules["KV001"].message.startswith("Qwen/Qwen2.5-7B")  # pvc+hf: NAMESPACE/MODEL
    assert rules["KV005"].message == "TP 2 x PP 1 x DP 4" and rules["KV005"].line == 4
    assert rules["KV030"].status == "pass" and rules["KV030"].message == "8 GPU(s) = TP 2 x PP 1 x DP 4"
    assert rules["KV006"].message.startswith("8 x NVIDIA L4")  # the role's acceleratorTypes label
    limited = LLM_D.replace("COMMAND", "imageDefault").replace("ARGS", "resources: {limits: {nvidia.com/gpu: 2}}")
    rules = by_rule(findings(tmp_path, limited))
    assert rules["KV030"].status == "fail" and rules["KV030"].line == 10
    assert rules["KV030"].message.startswith("the file gives 4 GPU(s), but TP 2 x PP 1 x DP 4 = 8")


def test_llm_d_custom_commands_and_bad_model_commands(tmp_path):
    custom = LLM_D.replace("COMMAND", "custom").replace("ARGS", 'command: [sh, -c, "vllm serve Qwen/Qwen2.5-7B '
                                                                "--tensor-parallel-size $(TP_SIZE) "
                                                                '--max-model-lenn 4096"]')
    custom = custom.replace("data: 4, dataLocal: 2", "dataLocal: 1")
    rules = by_rule(findings(tmp_path, custom.replace("-lenn", "-len")))
    assert rules["KV005"].message == "TP 2 x PP 1 x DP 1"  # $(TP_SIZE): the chart's env from parallelism
    assert rules["KV030"].message == "2 GPU(s) = TP 2 x PP 1 x DP 1"
    rules = by_rule(findings(tmp_path, custom))
    assert rules["KV002"].status == "fail" and rules["KV002"].line == 10 and "max-model-lenn" in rules["KV002"].message
    sidecar = findings(tmp_path, LLM_D.replace("COMMAND", "custom").replace("ARGS", "command: [sleep, infinity]"))
    assert by_rule(sidecar)["KV000"].status == "skip" and "no prefill or decode container" in sidecar[0].message
    bad = findings(tmp_path, LLM_D.replace("COMMAND", "vllmserve").replace("ARGS", ""))
    assert exit_code(bad) == 2 and "the chart refuses modelCommand 'vllmserve'" in by_rule(bad)["KV000"].message
