"""ModelOpt's hf_quant_config.json beside config.json (issue 22 item 2): read from a local directory, a kvplan spec
document's "hf_quant_config" entry and the Hub; the weights weighed per layer and role in the format it names
(exclude_modules at the model dtype); kv_cache_dtype auto as fp8_e4m3 where kv_cache_quant_algo is FP8, for the
engine releases that do so. Every number below is derived by hand from the config."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hub_server import FakeHub

from kvplan.api import estimate
from kvplan.errors import KvplanError
from kvplan.models.modelopt import excluded_roles
from kvplan.models.sources import read_local
from kvplan.weights import weight_layout

FRONTIER = Path(__file__).parent / "fixtures" / "configs" / "frontier"
NANO = FRONTIER / "nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4"
NANO_BF16 = FRONTIER / "nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B-BF16"
LLAMA_FP8 = FRONTIER / "nvidia__Llama-3.1-70B-Instruct-FP8"

# Nemotron-3-Nano-30B-A3B (hidden 2,688; pattern 'MEMEM*E...': 23 Mamba-2, 23 MoE, 6 attention layers).
H = 2688
MAMBA_LINEAR = H * (4096 + 6144 + 64) + 4096 * H  # in_proj (gate, x, B and C, dt) and out_proj: 38,707,200
MAMBA_LOOSE = 6144 * 4 + 6144 + 3 * 64 + 4096 + H  # conv1d and its bias, A, D, dt bias, gated norm, layer norm
ATTENTION_LINEAR = H * 4096 + 2 * H * 256 + 4096 * H  # q, k, v (2 KV heads x 128), o: 23,396,352
EXPERTS = 128 * 2 * H * 1856  # relu2 experts: up and down, 1,277,165,568
SHARED = 2 * H * 3712  # the shared expert
MOE_LOOSE = H * 128 + 128 + H  # router and e_score_correction_bias (unquantized), layer norm


def nvfp4(count: int) -> int:
    """Bytes of `count` NVFP4 weights: two 4-bit values a byte, one FP8 scale per 16 (vLLM 0.33.0
    quantization/modelopt.py KNvfp4Static.create_weights: weight uint8 [out, in // 2], weight_scale
    float8_e4m3fn [out, in // group_size])."""
    return count // 2 + count // 16


def decoder_bytes(spec, method):
    params = spec.params
    layout = weight_layout(spec, 2, method)
    linear = params.total - params.embeddings - params.lm_head - params.vision
    from kvplan.weights import _decoder_bytes

    return layout, sum(_decoder_bytes(spec, linear, 2, method)[0])


def test_nemotron_nano_nvfp4_is_read_from_its_quant_file():
    spec = read_local(NANO)
    quant = spec.quantization
    assert quant is not None and (quant.method, quant.bits, quant.group_size) == ("modelopt_fp4", 4, 16)
    assert quant.kv_cache_quant_algo == "FP8" and quant.source == "hf_quant_config.json"
    assert len(quant.unquantized) == 60
    # layer 4's in_proj/out_proj and layer 5's q/k/v/o are listed; layer 0 only its conv1d (no linear module)
    assert excluded_roles(quant.unquantized, 4) == {"mixer"}
    assert excluded_roles(quant.unquantized, 5) == {"mixer"}
    assert excluded_roles(quant.unquantized, 0) == frozenset()
    assert excluded_roles(quant.unquantized, 1) == frozenset()


def test_nemotron_nano_nvfp4_weight_bytes_by_hand():
    spec = read_local(NANO)
    # 6 Mamba layers (4, 11, 18, 25, 32, 41) and the 6 attention layers are excluded: 16-bit; 17 Mamba layers
    # and every MoE layer (experts and shared expert) NVFP4; norms, convs, SSM parameters, routers 16-bit.
    hand = (6 * MAMBA_LINEAR * 2 + 17 * nvfp4(MAMBA_LINEAR) + 23 * MAMBA_LOOSE * 2
            + 6 * (ATTENTION_LINEAR + H) * 2
            + 23 * (nvfp4(EXPERTS) + nvfp4(SHARED) + MOE_LOOSE * 2) + H * 2)
    assert hand == 17_914_614_912
    layout, decoder = decoder_bytes(spec, "modelopt_fp4")
    assert decoder == hand
    # embeddings and the excluded lm_head stay bfloat16: 131,072 x 2,688 x 2 each
    assert layout.embeddings == layout.lm_head == 704_643_072
    # the BF16 release of the same model, which has no hf_quant_config.json: 2 bytes a parameter, as before, but the
    # 23 x 128 = 2,944 score biases the engines hold in float32 (kvplan/weights.py ScoreBiasFloat32): 2 B more each
    bf16 = read_local(NANO_BF16)
    assert bf16.quantization is None
    assert decoder_bytes(bf16, None)[1] == (bf16.params.total - 2 * 131072 * H) * 2 + 2_944 * 2


def test_nemotron_nano_nvfp4_kv_is_fp8_under_auto():
    # 6 attention layers x 2 (K, V) x 2 KV heads x 128 x 1 byte = 3,072 B a token (6,144 in bfloat16)
    assert read_local(NANO).kv_bytes_per_token(1) == 3072
    plan = estimate(str(NANO), gpu="h100", max_model_len=32768)
    assert (plan.kv_dtype, plan.kv_bytes) == ("fp8_e4m3", 1)
    assert any("kv_cache_quant_algo FP8" in note for note in plan.notes)
    # vLLM 0.13.0 has no resolve_kv_cache_dtype_string (0.14.0 utils/torch_utils.py is the first): bfloat16
    old = estimate(str(NANO), gpu="h100", max_model_len=32768, engine_version="0.13.0")
    assert (old.kv_dtype, old.kv_bytes) == ("bfloat16", 2)
    explicit = estimate(str(NANO), gpu="h100", max_model_len=32768, kv_cache_dtype="bfloat16")
    assert explicit.kv_dtype == "bfloat16"
    # SGLang 0.5.23 mem_cache/kv_cache_dtype.py configure_kv_cache_dtype (0.5.9 model_runner.py): fp8_e4m3
    sglang = estimate(str(NANO), gpu="h100", max_model_len=32768, engine="sglang")
    assert sglang.kv_dtype == "fp8_e4m3"
    assert estimate(str(NANO), gpu="h100", max_model_len=32768, engine="sglang",
                    engine_version="0.5.8").kv_dtype == "bfloat16"
    # TensorRT-LLM: kv_cache_dtype auto keeps the checkpoint's KV quantization (validate_and_set_kv_cache_quant,
    # tensorrt_llm/_torch/pyexecutor/model_loader.py@b51992a3): fp8_e4m3
    trtllm = estimate(str(NANO), gpu="h100", max_model_len=32768, engine="trtllm")
    assert trtllm.kv_dtype == "fp8_e4m3"


def test_llama_fp8_modelopt_by_hand():
    spec = read_local(LLAMA_FP8)
    assert spec.quantization is not None and spec.quantization.method == "modelopt"
    # each of 80 layers: q, k, v, o (8,192 x (8,192 + 2 x 1,024) + 8,192 x 8,192) and gate, up, down (3 x 8,192
    # x 28,672) at 1 byte (vLLM 0.33.0 modelopt.py KFp8StaticTensor: weight float8_e4m3fn), two norms at 2
    per_layer = 8192 * (8192 + 2048) + 8192 * 8192 + 3 * 8192 * 28672 + 2 * 8192 * 2
    assert per_layer == 855_670_784
    assert decoder_bytes(spec, "modelopt")[1] == 80 * per_layer + 8192 * 2
    # 80 layers x 2 x 8 KV heads x 128 x 1 byte
    plan = estimate(str(LLAMA_FP8), gpu="h200", max_model_len=8192, tensor_parallel_size=1)
    assert (plan.kv_dtype, plan.layout.bytes_per_token) == ("fp8_e4m3", 163_840)


def test_spec_document_entry(tmp_path):
    config = json.loads((LLAMA_FP8 / "config.json").read_text())
    quant = json.loads((LLAMA_FP8 / "hf_quant_config.json").read_text())
    path = tmp_path / "llama-fp8.json"
    path.write_text(json.dumps({"_kvplan": {"id": "acme/llama-fp8"}, "config": config, "hf_quant_config": quant}))
    spec = read_local(path)
    assert spec.quantization is not None and spec.quantization.kv_cache_quant_algo == "FP8"
    assert decoder_bytes(spec, "modelopt")[1] == 80 * 855_670_784 + 8192 * 2


def test_models_import_keeps_the_quant_file(tmp_path):
    env = {"KVPLAN_SPEC_DIR": str(tmp_path / "specs")}
    result = _cli(["models", "import", str(NANO), "--id", "acme/nano-nvfp4"], tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    stored = json.loads((tmp_path / "specs" / "acme__nano-nvfp4.json").read_text())
    assert stored["hf_quant_config"] == json.loads((NANO / "hf_quant_config.json").read_text())
    shown = _cli(["models", "show", "acme/nano-nvfp4", "--json"], tmp_path, env=env)
    assert json.loads(shown.stdout)["quantization"]["method"] == "modelopt_fp4"


def test_hub_download_fetches_the_quant_file(tmp_path):
    with FakeHub() as hub:
        hub.files[("acme/nano-nvfp4", "main")] = (NANO / "config.json").read_bytes()
        hub.serve_quant_config("acme/nano-nvfp4", (NANO / "hf_quant_config.json").read_bytes())
        result = _cli(["models", "show", "acme/nano-nvfp4", "--json"], tmp_path, hub.url)
        assert result.returncode == 0, result.stderr
        quant = json.loads(result.stdout)["quantization"]
        assert (quant["method"], quant["kv_cache_quant_algo"]) == ("modelopt_fp4", "FP8")
        assert any(r.startswith("GET /acme/nano-nvfp4/resolve/main/hf_quant_config.json") for r in hub.requests)


@pytest.mark.parametrize(("quantization", "key"), [
    ({"quant_algo": "INT3"}, "quantization.quant_algo"),
    ({"quant_algo": "FP8", "kv_cache_quant_algo": 8}, "quantization.kv_cache_quant_algo"),
    ({"quant_algo": "NVFP4", "exclude_modules": "lm_head"}, "quantization.exclude_modules"),
    ({"quant_algo": "NVFP4", "group_size": "16"}, "quantization.group_size"),
    ([], "'quantization'"),
])
def test_malformed_quant_file_is_one_line(tmp_path, quantization, key):
    folder = tmp_path / "model"
    folder.mkdir()
    shutil.copy(LLAMA_FP8 / "config.json", folder / "config.json")
    (folder / "hf_quant_config.json").write_text(json.dumps({"producer": {"name": "modelopt"},
                                                             "quantization": quantization}))
    with pytest.raises(KvplanError) as caught:
        read_local(folder)
    assert key in str(caught.value) and str(caught.value).startswith(str(folder / "hf_quant_config.json"))
    result = _cli(["models", "show", str(folder)], tmp_path)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "hf_quant_config.json" in lines[0] and key in lines[0]


def _cli(args, tmp_path, hub_url=None, env=None):
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("HF_")}, **(env or {})}
    env.update({"HF_HOME": str(tmp_path / "hf-home"), "XDG_CACHE_HOME": str(tmp_path / "cache"),
                "HF_HUB_DISABLE_TELEMETRY": "1", "HF_HUB_ETAG_TIMEOUT": "3", "HF_HUB_DOWNLOAD_TIMEOUT": "3"})
    if hub_url:
        env["HF_ENDPOINT"] = hub_url
    return subprocess.run([sys.executable, "-m", "kvplan.cli.app", *args], capture_output=True, text=True, env=env,
                          timeout=60)
