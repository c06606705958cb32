"""The kinds teams deploy with, each read as its operator reads it, and the real third-party files in
tests/fixtures/check/real (their sources in SOURCES there): every one read, none silently."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import check_findings as findings
from conftest import first_finding as rule

from kvplan.check import Options, check_paths
from kvplan.check.findings import exit_code

REAL = Path(__file__).parent / "fixtures" / "check" / "real"




@pytest.fixture(autouse=True)
def hub_offline(monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)


def test_kubeai_model(tmp_path):
    found = findings(tmp_path, """\
        apiVersion: kubeai.org/v1
        kind: Model
        metadata: {name: qwen}
        spec:
          url: hf://Qwen/Qwen2.5-7B
          engine: VLLM
          args: [--max-model-len=32768, --max-num-seqz=8]
          resourceProfile: nvidia-gpu-l4:1
    """)
    assert rule(found, "KV000").message == "1 deployment(s) read as KubeAI Model"
    assert rule(found, "KV002").status == "fail" and rule(found, "KV002").line == 7
    fixed = findings(tmp_path, """\
        apiVersion: kubeai.org/v1
        kind: Model
        metadata: {name: qwen}
        spec:
          url: hf://Qwen/Qwen2.5-7B
          engine: VLLM
          args: [--max-model-len=8192]
          resourceProfile: nvidia-gpu-l4:2
    """)
    assert "NVIDIA L4" in rule(fixed, "KV006").message  # the profile's GPU and its count
    assert rule(fixed, "KV030").message.startswith("the file gives 2 GPU(s), but TP 1 x PP 1 x DP 1 = 1")


def test_kserve_huggingface_runtime(tmp_path):
    found = findings(tmp_path, """\
        apiVersion: serving.kserve.io/v1beta1
        kind: InferenceService
        metadata: {name: llama3}
        spec:
          predictor:
            nodeSelector: {cloud.google.com/gke-accelerator: nvidia-l4}
            model:
              modelFormat: {name: huggingface}
              args: [--model_name=llama3, --model_id=meta-llama/Llama-3.1-8B-Instruct, --max-model-len=8192]
              storageUri: hf://meta-llama/meta-llama-3-8b-instruct
              resources: {limits: {nvidia.com/gpu: "1"}}
    """)
    assert rule(found, "KV001").message.startswith("meta-llama/Llama-3.1-8B-Instruct")  # --model_id wins
    assert rule(found, "KV011").status == "pass" and "8,192 tokens" in rule(found, "KV011").message
    assert rule(found, "KV002").status == "pass"  # --model_name is the runtime's own, not vLLM's


def test_a_tensorrt_llm_options_file_is_a_kind_of_its_own(tmp_path):
    found = findings(tmp_path, """\
        max_batch_size: 64
        kv_cache_config:
          free_gpu_memory_fraction: 0.85
        enable_chunked_prefil: true
    """, name="extra-llm-api-options.yaml")
    assert rule(found, "KV000").message == "1 deployment(s) read as engine options file"
    typo = rule(found, "KV002")
    assert typo.status == "fail" and "did you mean" in typo.message and "enable_chunked_prefill" in typo.message
    good = findings(tmp_path, "max_batch_size: 64\nkv_cache_config:\n  free_gpu_memory_fraction: 0.85\n",
                    name="options.yaml")
    assert rule(good, "KV002").status == "pass" and exit_code(good) == 0
    assert rule(good, "KV001").status == "skip" and "names no model" in rule(good, "KV001").message


def test_a_config_json_missing_its_layer_count_fails(tmp_path):
    found = findings(tmp_path, '{"architectures": ["LlamaForCausalLM"], "hidden_size": 4096}', name="config.json")
    assert rule(found, "KV050").status == "fail" and exit_code(found) == 1  # before: skipped, exit 0


def test_production_stack_ray_pipeline_parallel(tmp_path):
    found = check_paths([str(REAL / "production-stack-raycluster-pp.yaml")], Options(gpu="l4")).findings
    assert rule(found, "KV002").status == "pass"  # the chart renders pipelineParallelSize with raySpec.enabled
    assert rule(found, "KV001").status == "warn"  # distilbert/distilgpt2 is not bundled and the Hub is offline
    text = (REAL / "production-stack-raycluster-pp.yaml").read_text().replace("distilbert/distilgpt2", "Qwen/Qwen2.5-7B")
    bundled = findings(tmp_path, text, gpu="l4")
    assert rule(bundled, "KV005").message == "TP 1 x PP 2 x DP 1"
    off = findings(tmp_path, text.replace("enabled: true", "enabled: false"), gpu="l4")
    assert rule(off, "KV002").status == "fail"  # without Ray the chart drops it: it never reaches vLLM


def test_the_real_files_are_all_read(tmp_path):
    report = check_paths([str(REAL)], Options(gpu="h100"))
    assert report.count("checked") == len(list(REAL.glob("*.yaml"))) == 10 and report.count("skipped") == 0
    by_file = {}
    for f in report.findings:
        by_file.setdefault(Path(f.file).name, []).append(f)
    # kubernetes-sigs/lws vLLM: the launcher after `...leader --ray_cluster_size=$(LWS_GROUP_SIZE);`, 2 pods of 8
    lws = {f.rule: f for f in by_file["lws-vllm-gpu.yaml"]}
    assert lws["KV030"].message == "16 GPU(s) = TP 8 x PP 2 x DP 1"
    # kubernetes-sigs/lws SGLang: --tp 2 over --nnodes $(LWS_GROUP_SIZE) = 2 pods of 1 GPU
    sglang = {f.rule: f for f in by_file["lws-sglang.yaml"]}
    assert sglang["KV030"].message == "2 GPU(s) = TP 2 x PP 1 x DP 1"
    # GKE: --model=$(MODEL_ID) from env, the GKE accelerator label (8 x L4), and --swap-space, gone from vLLM
    gke = {f.rule: f for f in by_file["gke-vllm-gemma-3-27b-it.yaml"]}
    assert gke["KV003"].status == "fail" and "--swap-space" in gke["KV003"].message
    # KubeAI: --max-num-batched-token, never a registered flag (an argparse prefix)
    kubeai = {f.rule: f for f in by_file["kubeai-llama-3.1-8b-instruct-fp8-l4.yaml"]}
    assert kubeai["KV003"].status == "warn" and "--max-num-batched-token " in kubeai["KV003"].message
    # AIBrix: its quickstart Deployment (vllm/vllm-openai:v0.7.1, 1 GPU), and its StormService, whose prefill and
    # decode roles each run a pod of one GPU from an `sh -c` script (vllm/vllm-openai:v0.9.1)
    aibrix = {f.rule: f for f in by_file["aibrix-quickstart-model.yaml"]}
    assert aibrix["KV030"].message == "1 GPU(s) = TP 1 x PP 1 x DP 1" and aibrix["KV043"].status == "pass"
    storm = [f for f in by_file["aibrix-stormservice-pd.yaml"] if f.rule == "KV030"]
    assert [(f.deployment, f.line, f.message) for f in storm] == [
        ("vllm-1p1d/prefill", 65, "1 GPU(s) = TP 1 x PP 1 x DP 1"),
        ("vllm-1p1d/decode", 118, "1 GPU(s) = TP 1 x PP 1 x DP 1")]


def test_gke_sample_without_its_removed_flag_is_planned_on_its_labelled_gpu(tmp_path):
    text = (REAL / "gke-vllm-gemma-3-27b-it.yaml").read_text().replace("        - --swap-space=16\n", "")
    found = findings(tmp_path, text, name="gke.yaml")
    assert rule(found, "KV001").message.startswith("google/gemma-3-27b-it")  # $(MODEL_ID) from the env
    assert rule(found, "KV006").message.startswith("8 x NVIDIA L4")
    assert rule(found, "KV030").message == "8 GPU(s) = TP 8 x PP 1 x DP 1"


EXAMPLES = Path(__file__).parent.parent / "examples"


def test_examples_hold_a_passing_and_a_failing_file_of_every_kind():
    files = sorted(p for p in (EXAMPLES / "kinds").rglob("*") if p.is_file())
    kinds = set()
    for path in files:
        report = check_paths([str(path)], Options())
        kinds.update(f.message.split(" read as ", 1)[1] for f in report.findings if f.rule == "KV000")
        wanted = 0 if "-pass" in str(path.relative_to(EXAMPLES)) else 1
        assert exit_code(report.findings) == wanted, path
    assert kinds >= {"docker-compose file", "KubeAI Model", "KServe InferenceService", "engine options file",
                     "Kubernetes manifest", "production-stack Helm values", "vLLM --config file",
                     "Hugging Face config.json", "KubeRay RayService", "Ray Serve LLM config",
                     "llm-d ModelService values"}
