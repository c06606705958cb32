"""kv_cache_dtype auto on a ModelOpt checkpoint whose kv_cache_quant_algo is not FP8 (issue 22 item 2): NVFP4
and a value no engine knows, per engine and release, as each release's code decides it:

- vLLM utils/torch_utils.py get_kv_cache_quant_algo_string, MODELOPT_TO_VLLM_KV_CACHE_DTYPE_MAP read in the
  wheels: {"fp8"} 0.14.0-0.19.0, {"fp8", "nvfp4"} 0.20.0-0.33.0; any other value logs "Unknown
  kv_cache_quant_algo ... Falling back to 'auto'" (the model dtype); 0.13.0 has no such resolution.
- SGLang 0.5.23 mem_cache/kv_cache_dtype.py configure_kv_cache_dtype (0.5.9 model_runner.py): FP8 alone.
- TensorRT-LLM _torch/model_config.py ModelConfig._build_modelopt_quant_config: QuantAlgo(value), NVFP4 a
  member, an unknown name a ValueError.

Every number is derived by hand from Llama-3.1-8B's config.json: 32 layers, 8 KV heads, head_dim 4,096 / 32 =
128, bfloat16."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kvplan.api import estimate
from kvplan.errors import KvplanError

LLAMA = Path(__file__).parent / "fixtures" / "configs" / "frontier" / "meta-llama__Meta-Llama-3.1-8B"
HOSTILE = "INT4_ZZZ"

# NVFP4 (units.py Nvfp4Kv; vLLM nvfp4_kv_cache_full_dim): a head vector of 128 is 128 / 2 = 64 bytes of fp4
# pairs and 128 / 16 = 8 fp8 scales, 72 B; K and V of 8 heads over 32 layers: 32 x 2 x 8 x 72
NVFP4_PER_TOKEN = 32 * 2 * 8 * (128 // 2 + 128 // 16)
BF16_PER_TOKEN = 32 * 2 * 8 * 128 * 2


def test_hand_figures():
    assert NVFP4_PER_TOKEN == 36_864
    assert BF16_PER_TOKEN == 131_072


def checkpoint(tmp_path: Path, kv_algo: str) -> str:
    folder = tmp_path / f"llama-{kv_algo.lower()}"
    folder.mkdir()
    shutil.copy(LLAMA / "config.json", folder / "config.json")
    quant = {"producer": {"name": "modelopt", "version": "0.37.0"},
             "quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": kv_algo, "group_size": 16,
                              "exclude_modules": ["lm_head"]}}
    (folder / "hf_quant_config.json").write_text(json.dumps(quant))
    return str(folder)


def plan(path: str, **kwargs):
    return estimate(path, gpu="b200", max_model_len=8192, **kwargs)


def test_vllm_nvfp4_from_0_20(tmp_path):
    path = checkpoint(tmp_path, "NVFP4")
    for release in ("0.20.0", "0.33.0"):
        result = plan(path, engine_version=release)
        assert (result.kv_dtype, result.layout.bytes_per_token) == ("nvfp4", NVFP4_PER_TOKEN)
        assert any(note.startswith("KV cache in nvfp4: the checkpoint's hf_quant_config.json names an NVFP4")
                   for note in result.notes)
        assert not any("Unknown kv_cache_quant_algo" in note for note in result.notes)


def test_vllm_nvfp4_before_0_20_warns_and_keeps_bf16(tmp_path):
    # 0.19.0's map is {"fp8": "fp8_e4m3"} alone: the warning, then the model dtype
    path = checkpoint(tmp_path, "NVFP4")
    result = plan(path, engine_version="0.19.0")
    assert (result.kv_dtype, result.layout.bytes_per_token) == ("bfloat16", BF16_PER_TOKEN)
    assert any("Unknown kv_cache_quant_algo 'NVFP4'" in note and "(supported: fp8)" in note for note in result.notes)
    # 0.13.0 never reads the checkpoint's KV algorithm: the model dtype, and nothing to echo
    old = plan(path, engine_version="0.13.0")
    assert old.kv_dtype == "bfloat16"
    assert not any("kv_cache_quant_algo" in note for note in old.notes)


def test_vllm_hostile_value_falls_back_with_the_warning(tmp_path):
    path = checkpoint(tmp_path, HOSTILE)
    result = plan(path)
    assert (result.kv_dtype, result.layout.bytes_per_token) == ("bfloat16", BF16_PER_TOKEN)
    assert any(f"Unknown kv_cache_quant_algo '{HOSTILE}'" in note and "(supported: fp8, nvfp4)" in note
               for note in result.notes)
    # an explicit dtype is not resolved from the checkpoint: no warning
    explicit = plan(path, kv_cache_dtype="fp8")
    assert not any("Unknown kv_cache_quant_algo" in note for note in explicit.notes)


@pytest.mark.parametrize("kv_algo", ["NVFP4", HOSTILE])
def test_sglang_keeps_the_model_dtype(tmp_path, kv_algo):
    path = checkpoint(tmp_path, kv_algo)
    for release in ("0.5.9", "0.5.23"):
        result = plan(path, engine="sglang", engine_version=release)
        assert result.kv_dtype == "bfloat16"
        assert any(f"names kv_cache_quant_algo {kv_algo}; SGLang applies only FP8" in note for note in result.notes)


def test_trtllm_nvfp4_pool(tmp_path):
    path = checkpoint(tmp_path, "NVFP4")
    result = plan(path, engine="trtllm")
    assert (result.kv_dtype, result.layout.bytes_per_token) == ("nvfp4", NVFP4_PER_TOKEN)
    assert plan(path, engine="trtllm", kv_cache_dtype="nvfp4").kv_dtype == "nvfp4"
    with pytest.raises(KvplanError, match="names an NVFP4 KV cache"):
        plan(path, engine="trtllm", kv_cache_dtype="fp8")


def test_trtllm_refuses_a_hostile_value_in_one_line(tmp_path):
    path = checkpoint(tmp_path, HOSTILE)
    with pytest.raises(KvplanError) as error:
        plan(path, engine="trtllm")
    assert f"kv_cache_quant_algo '{HOSTILE}'" in str(error.value)
    assert "hf_quant_config.json" in str(error.value)
    result = subprocess.run([sys.executable, "-m", "kvplan.cli.app", "estimate", "--model", path, "--gpu", "b200",
                             "--engine", "trtllm", "--max-model-len", "8192"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and HOSTILE in lines[0] and "hf_quant_config.json" in lines[0]


def test_inline_kv_cache_scheme_of_4_bit_floats(tmp_path):
    # config.json's own quantization_config (ModelOpt 0.29+): a kv_cache_scheme of 4-bit floats is nvfp4 in
    # vLLM 0.20.0+ (get_kv_cache_quant_algo_string's num_bits 4 branch), unknown before it
    folder = tmp_path / "inline"
    folder.mkdir()
    config = json.loads((LLAMA / "config.json").read_text())
    config["quantization_config"] = {"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16,
                                     "kv_cache_scheme": {"type": "float", "num_bits": 4, "dynamic": False},
                                     "ignore": ["lm_head"]}
    (folder / "config.json").write_text(json.dumps(config))
    result = plan(str(folder))
    assert (result.kv_dtype, result.layout.bytes_per_token) == ("nvfp4", NVFP4_PER_TOKEN)
    assert plan(str(folder), engine_version="0.19.0").kv_dtype == "bfloat16"
