"""A compressed-tensors quantization_config.kv_cache_scheme (an llm-compressor checkpoint's FP8 KV cache) is not
read by kvplan: the plan says so, naming the key, the dtype kvplan planned and what vLLM 0.33.0 does with it
(model_executor/layers/attention/attention.py Attention.__init__: kv_cache_dtype auto becomes fp8 wherever the
quant config carries a scheme; compressed_tensors.py CompressedTensorsKVCacheMethod.validate_kv_cache_scheme).

Per-token bytes by hand from Llama-3.1-8B's config.json: 32 layers x (K, V) x 8 KV heads x head_dim 4,096 / 32 =
128, in bfloat16 (2 B) 131,072 B, in fp8 (1 B) 65,536 B."""

from __future__ import annotations

import json
from pathlib import Path

from kvplan.api import estimate

LLAMA = Path(__file__).parent / "fixtures" / "configs" / "frontier" / "meta-llama__Meta-Llama-3.1-8B"
SCHEME = {"num_bits": 8, "type": "float", "strategy": "tensor", "dynamic": False, "symmetric": True}


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


def test_hand_figures():
    assert 32 * 2 * 8 * (4096 // 32) * 2 == 131_072
    assert 32 * 2 * 8 * (4096 // 32) * 1 == 65_536


def test_an_unread_scheme_is_named_with_what_kvplan_planned(tmp_path):
    path = _checkpoint(tmp_path, SCHEME)
    result = _plan(path)
    assert (result.kv_dtype, result.layout.bytes_per_token) == ("bfloat16", 131_072)
    note = next(n for n in result.notes if "kv_cache_scheme" in n)
    assert ('quantization_config.kv_cache_scheme {"dynamic": false, "num_bits": 8, "strategy": "tensor", '
            '"symmetric": true, "type": "float"} is not read: kvplan plans the KV cache in bfloat16 '
            "(kv_cache_dtype auto)") in note
    assert "vLLM 0.33.0 serves its attention layers in fp8 under auto" in note
    # the way the note gives: vLLM's fp8 cache, one byte an element
    fp8 = _plan(path, kv_cache_dtype="fp8")
    assert fp8.layout.bytes_per_token == 65_536
    assert any("kv_cache_dtype fp8" in n for n in fp8.notes if "kv_cache_scheme" in n)


def test_no_scheme_no_note(tmp_path):
    # kv_cache_scheme null (as Kimi-K3's config.json writes it): nothing to say
    result = _plan(_checkpoint(tmp_path, None))
    assert not any("kv_cache_scheme" in n for n in result.notes)
