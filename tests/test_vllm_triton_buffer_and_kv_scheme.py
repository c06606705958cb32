"""vLLM: Model Runner V2's Triton top-k / top-p buffer at 0.33, each release's
compressed-tensors kv_cache_scheme validator, and an inline ModelOpt kv_cache_scheme that names no KV format.

1. 0.33.0 v1/worker/gpu/sample/sampler.py _sample_random: off FlashInfer, apply_top_k_top_p (v1/sample/ops/
   topk_topp_sampler.py) takes apply_top_k_top_p_triton (topk_topp_triton.py), which caches a buffer of
   min(next_power_of_2(min(SMs, rows)), SMs) rows x vocab float32 (_TRITON_BUFFER_CACHE). The warm-up pass
   (SamplingParams.for_sampler_warmup: top-k 50, top-p 0.9 on every row) has no top-p-only row, so the split
   pipeline is not taken. Qwen3-8B on an H100 (132 SMs), 1,024 rows, vocab 151,936:
     buffer min(next_power_of_2(min(132, 1,024)) = 256, 132) = 132 rows x 151,936 x 4 = 80,222,208 B
     the 0.33 no-FlashInfer activation without it (tests/test_vllm_sampler_v2.py): 1,705,603,072 B
     with it: 1,705,603,072 + 80,222,208 = 1,785,825,280 B
   0.32.0's dummy requests ask for no top-k / top-p (SamplingStates defaults): no buffer, 1,595,380,858 B.
2. CompressedTensorsKVCacheMethod.validate_kv_cache_scheme (compressed_tensors.py), read in the wheels:
   0.10.0-0.23.0 refuse where type != "float" AND num_bits != 8; 0.24.0-0.33.0 where either differs; strategy
   "tensor" only through 0.14.1, "tensor" or "attn_head" from 0.15.0; symmetric must be true throughout. Per-token
   bytes of Llama-3.1-8B (tests/test_kv_cache_scheme.py): bfloat16 131,072 B, fp8 65,536 B; 0.15.0+ Attention
   serves any accepted scheme in fp8 under auto.
3. vLLM 0.33.0 modelopt.py ModelOptQuantConfigBase.from_config's flat branch: a kv_cache_scheme other than type
   float, num_bits 8 is no KV cache quantization; kv_cache_dtype auto falls back to auto (utils/torch_utils.py
   get_kv_cache_quant_algo_string): bfloat16, 131,072 B a token.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from kvplan.api import estimate
from kvplan.calibration.vllm import deployment
from kvplan.engines import plan_deployment
from kvplan.errors import KvplanError
from kvplan.models.sources import resolve

LLAMA = Path(__file__).parent / "fixtures" / "configs" / "frontier" / "meta-llama__Meta-Llama-3.1-8B"
SCHEME = {"num_bits": 8, "type": "float", "strategy": "tensor", "dynamic": False, "symmetric": True}
BF16, FP8 = 131_072, 65_536
BUFFER = 132 * 151_936 * 4


def test_hand_figures():
    assert BUFFER == 80_222_208
    assert 1_705_603_072 + BUFFER == 1_785_825_280
    assert (BF16, FP8) == (32 * 2 * 8 * 128 * 2, 32 * 2 * 8 * 128 * 1)


def _activation(version: str) -> int:
    entry = {"gpu": "h100", "version": version, "utilization": 0.9, "model": "Qwen/Qwen3-8B", "max_model_len": 8192}
    dep, choice = deployment(entry)
    plan = plan_deployment(resolve(entry["model"]), replace(dep, flashinfer_sampler=False), choice)
    assert plan.engine.model_runner == "V2"
    return plan.rank_zero_memory.activation_bytes


def test_v2_033_counts_the_triton_buffer_off_flashinfer():
    assert _activation("0.33.0") == 1_785_825_280
    assert _activation("0.32.0") == 1_595_380_858  # no top-k / top-p in the dummy batch: no buffer


def _checkpoint(tmp_path: Path, quantization: dict) -> str:
    config = json.loads((LLAMA / "config.json").read_text())
    config["quantization_config"] = quantization
    folder = tmp_path / "ckpt"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    return str(folder)


def _ct(tmp_path: Path, scheme: dict) -> str:
    return _checkpoint(tmp_path, {
        "quant_method": "compressed-tensors", "format": "float-quantized", "ignore": ["lm_head"],
        "config_groups": {"group_0": {"targets": ["Linear"],
                                      "weights": {"num_bits": 8, "type": "float", "strategy": "channel"}}},
        "kv_cache_scheme": scheme})


@pytest.mark.parametrize(("scheme", "version", "per_token"), [
    ({"num_bits": 8, "type": "int"}, "0.23.0", FP8),  # `and`: only one differs, accepted, Attention serves fp8
    ({"num_bits": 4, "type": "float"}, "0.19.0", FP8),
    ({"num_bits": 8, "type": "int"}, "0.14.1", BF16),  # accepted, no Attention rule before 0.15
    ({"strategy": "attn_head"}, "0.15.0", FP8),
])
def test_a_scheme_the_release_accepts_is_planned_as_served(tmp_path, scheme, version, per_token):
    result = estimate(_ct(tmp_path, {**SCHEME, **scheme}), gpu="h100", max_model_len=8192, engine_version=version)
    assert result.layout.bytes_per_token == per_token


@pytest.mark.parametrize(("scheme", "version", "why"), [
    ({"num_bits": 8, "type": "int"}, "0.24.0", "num_bits 8, type int (it takes num_bits 8, type float)"),
    ({"num_bits": 4, "type": "float"}, "0.33.0", "num_bits 4, type float"),
    ({"num_bits": 4, "type": "int"}, "0.19.0", "num_bits 4, type int"),  # `and`: both differ
    ({"strategy": "attn_head"}, "0.14.1", "strategy attn_head (it takes tensor)"),
    ({"strategy": "channel"}, "0.33.0", "strategy channel (it takes tensor or attn_head)"),
    ({"symmetric": False}, "0.33.0", "symmetric false"),
    # the release compares num_bits != 8: the string "8" is refused, and said quoted as config.json has it
    ({"num_bits": "8"}, "0.33.0", 'num_bits "8", type float (it takes num_bits 8, type float)'),
    ({"strategy": None}, "0.33.0", "strategy null (it takes tensor or attn_head)"),
])
def test_a_scheme_the_release_refuses_is_refused_in_one_line(tmp_path, scheme, version, why):
    with pytest.raises(KvplanError) as error:
        estimate(_ct(tmp_path, {**SCHEME, **scheme}), gpu="h100", max_model_len=8192, engine_version=version)
    line = str(error.value)
    assert "\n" not in line
    assert f"vLLM {version} refuses quantization_config.kv_cache_scheme at start-up: {why}" in line
    assert "quantization_config.kv_cache_scheme" in error.value.where


def test_allow_unmodelled_plans_a_refused_scheme_with_a_note(tmp_path):
    path = _ct(tmp_path, {**SCHEME, "num_bits": 4})
    result = estimate(path, gpu="h100", max_model_len=8192, allow_unmodelled=True)
    assert result.layout.bytes_per_token == FP8  # 0.33.0 Attention.__init__: any scheme under auto is fp8
    assert any(n.startswith("vLLM 0.33.0 refuses quantization_config.kv_cache_scheme") and "--allow-unmodelled" in n
               and n.endswith("KV cache in fp8") for n in result.notes)


def _modelopt(tmp_path: Path, scheme: dict) -> str:
    return _checkpoint(tmp_path, {"quant_method": "modelopt", "quant_algo": "FP8", "ignore": ["lm_head"],
                                  "kv_cache_scheme": scheme})


def test_modelopt_scheme_of_no_format_is_noted(tmp_path):
    result = estimate(_modelopt(tmp_path, {"num_bits": 8, "type": "int", "dynamic": False}), gpu="h100",
                      max_model_len=8192)
    assert result.layout.bytes_per_token == BF16
    note = next(n for n in result.notes if "kv_cache_scheme" in n)
    assert "vLLM 0.33.0 from_config takes it as no KV cache quantization" in note
    assert note.endswith("KV cache in bfloat16 (kv_cache_dtype auto)")


@pytest.mark.parametrize("dynamic", [False, True])
def test_modelopt_8_bit_float_scheme_is_not_flagged(tmp_path, dynamic):
    result = estimate(_modelopt(tmp_path, {"num_bits": 8, "type": "float", "dynamic": dynamic}), gpu="h100",
                      max_model_len=8192)
    assert not any("from_config takes it" in n for n in result.notes)


def test_other_engines_name_the_scheme_as_not_read(tmp_path):
    # TensorRT-LLM's _kv_cache_scheme_to_algo gives None for it: the KV cache at the model dtype
    result = estimate(_modelopt(tmp_path, {"num_bits": 8, "type": "int", "dynamic": False}), gpu="h100",
                      max_model_len=8192, engine="trtllm")
    assert result.layout.bytes_per_token == BF16
    assert any("kv_cache_scheme" in n and "is not read for" in n for n in result.notes)
