"""A compressed-tensors quantization_config.kv_cache_scheme (an llm-compressor checkpoint's FP8 KV cache), read as
each vLLM release's attention layer reads it (engines/vllm/kv_scheme.py, from the wheels): 0.6.0-0.14.1 no rule;
0.15.0-0.21.0 Attention.__init__ sets fp8 for any scheme whatever kv_cache_dtype says; 0.22.0-0.33.0 only under
auto. Other engines: noted as not read, the dtype planned named.

Per-token bytes by hand from Llama-3.1-8B's config.json: 32 layers x (K, V) x 8 KV heads x head_dim 4,096 / 32 =
128, in bfloat16 (2 B) 131,072 B, in fp8 (1 B) 65,536 B."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvplan.api import estimate
from kvplan.errors import KvplanError

LLAMA = Path(__file__).parent / "fixtures" / "configs" / "frontier" / "meta-llama__Meta-Llama-3.1-8B"
SCHEME = {"num_bits": 8, "type": "float", "strategy": "tensor", "dynamic": False, "symmetric": True}
SCHEME_TEXT = '{"dynamic": false, "num_bits": 8, "strategy": "tensor", "symmetric": true, "type": "float"}'
BF16, FP8 = 131_072, 65_536


def _checkpoint(tmp_path: Path, scheme: dict | None) -> str:
    config = json.loads((LLAMA / "config.json").read_text())
    config["quantization_config"] = {
        "quant_method": "compressed-tensors", "format": "float-quantized", "ignore": ["lm_head"],
        "config_groups": {"group_0": {"targets": ["Linear"],
                                      "weights": {"num_bits": 8, "type": "float", "strategy": "channel"}}},
        "kv_cache_scheme": scheme}
    folder = tmp_path / "ct"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    return str(folder)


def _plan(path: str, **flags):
    return estimate(path, gpu="h100", max_model_len=8192, **flags)


def _note(result) -> str:
    return next(n for n in result.notes if "kv_cache_scheme" in n)


def test_hand_figures():
    assert BF16 == 32 * 2 * 8 * (4096 // 32) * 2
    assert FP8 == 32 * 2 * 8 * (4096 // 32) * 1


@pytest.mark.parametrize(("version", "dtype", "per_token"), [
    ("0.33.0", "fp8", FP8), ("0.22.0", "fp8", FP8), ("0.19.0", "fp8", FP8), ("0.15.0", "fp8", FP8),
    ("0.14.1", "bfloat16", BF16)])
def test_auto_is_fp8_from_vllm_0_15(tmp_path, version, dtype, per_token):
    result = _plan(_checkpoint(tmp_path, SCHEME), engine_version=version)
    assert (result.kv_dtype, result.layout.bytes_per_token) == (dtype, per_token)
    if dtype == "fp8":
        assert _note(result) == (f"KV cache in fp8: vLLM {version}'s Attention serves kv_cache_dtype auto in fp8 "
                                 f"for quantization_config.kv_cache_scheme {SCHEME_TEXT}")
    else:
        assert "vLLM 0.14.1 takes no dtype from it (from 0.15.0 it serves fp8): KV cache in bfloat16" in _note(result)


def test_an_explicit_dtype_wins_from_0_22_and_is_noted_before(tmp_path):
    path = _checkpoint(tmp_path, SCHEME)
    new = _plan(path, kv_cache_dtype="bfloat16")
    assert new.layout.bytes_per_token == BF16
    assert "--kv-cache-dtype bfloat16 wins over it (vLLM 0.33.0 applies it under auto only)" in _note(new)
    # 0.15.0-0.21.0 (0.21.0 model_executor/layers/attention/attention.py Attention.__init__): cache_config.cache_dtype
    # = "fp8" for any scheme, before the KV cache is sized, so the pool is fp8 whatever was typed
    for version in ("0.21.0", "0.15.0"):
        old = _plan(path, kv_cache_dtype="bfloat16", engine_version=version)
        assert (old.kv_dtype, old.layout.bytes_per_token) == ("fp8", FP8)
        assert _note(old) == (f"KV cache in fp8: vLLM {version}'s Attention serves fp8 for quantization_config."
                              f"kv_cache_scheme {SCHEME_TEXT} whatever --kv-cache-dtype says (not the bfloat16 given; "
                              "0.22.0 honours an explicit one)")
    assert _plan(path, kv_cache_dtype="bfloat16", engine_version="0.14.1").layout.bytes_per_token == BF16


def test_a_scheme_vllm_refuses_is_refused(tmp_path):
    # 0.33.0 validate_kv_cache_scheme: type != "float" or num_bits != 8 raises
    # (tests/test_vllm_triton_buffer_and_kv_scheme.py)
    with pytest.raises(KvplanError, match="vLLM 0.33.0 refuses quantization_config.kv_cache_scheme at start-up"):
        _plan(_checkpoint(tmp_path, {**SCHEME, "type": "int"}))


def test_other_engines_name_it_as_not_read(tmp_path):
    # SGLang 0.5.23 reads kv_cache_scheme only from ModelOpt configs (srt/layers/quantization/modelopt_quant.py)
    result = _plan(_checkpoint(tmp_path, SCHEME), engine="sglang")
    assert result.layout.bytes_per_token == BF16
    assert _note(result) == (f"quantization_config.kv_cache_scheme {SCHEME_TEXT} is not read for SGLang: kvplan "
                             "plans the KV cache in bfloat16 (kv_cache_dtype auto)")


def test_no_scheme_no_note(tmp_path):
    # kv_cache_scheme null (as Kimi-K3's config.json writes it): nothing to say
    result = _plan(_checkpoint(tmp_path, None))
    assert not any("kv_cache_scheme" in n for n in result.notes)


@pytest.mark.parametrize("scheme", [[1, 2], "FP8", 8])
def test_a_compressed_tensors_scheme_that_is_no_object_is_refused(tmp_path, scheme):
    # compressed-tensors reads kv_cache_scheme as an object (its num_bits, type, strategy); ModelOpt's inline string
    # form ("FP8", Qwen3-32B-FP8-Static-PerTensor's config.json) is a quant_algo-style export of another method
    from kvplan.errors import KvplanError

    with pytest.raises(KvplanError, match=r"quantization_config\.kv_cache_scheme' must be an object"):
        _plan(_checkpoint(tmp_path, scheme))
