"""Issue 22's leftovers: TensorRT-LLM's DeepSeek-V4 (refused by name, saying where the engine builds its pools),
MiMo-V2-Flash's MTP layer."""

from __future__ import annotations

from pathlib import Path

import pytest

import kvplan
from kvplan.errors import KvplanError
from kvplan.models.layers import FullAttention, SlidingWindow
from kvplan.models.sources import resolve
from tests.conftest import run_cli

FRONTIER = Path(__file__).parent / "fixtures" / "configs" / "frontier"
FLASH = FRONTIER / "deepseek-ai__DeepSeek-V4-Flash"


def test_trtllm_refuses_deepseek_v4_naming_its_cache_manager():
    # NVIDIA/TensorRT-LLM (stored sources) runs DeepSeek-V4 on DeepseekV4CacheManager
    # (tensorrt_llm/_torch/attention_backend/sparse/deepseek_v4/cache_manager.py), whose pool split kvplan
    # does not model: the refusal names it instead of the old "flat token pool (TensorRT-LLM)"
    with pytest.raises(KvplanError, match="DeepseekV4CacheManager") as refused:
        kvplan.estimate(str(FLASH), gpu="h200", tensor_parallel_size=8, engine="trtllm")
    assert "flat token pool" not in str(refused.value)


def test_trtllm_refusal_is_one_line_exit_2(capsys):
    code, out, err = run_cli(capsys, "estimate", "--model", str(FLASH), "--gpu", "h200", "--engine", "trtllm",
                             "--tp-size", "8")
    assert code == 2
    assert "DeepSeek-V4 on TensorRT-LLM is not modelled" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_trtllm_still_plans_other_mla_models():
    # the hook refuses DeepSeek-V4's packed caches only: DeepSeek-V3's MLA layers keep every token as before
    # (config.json: kv_lora_rank 512 + qk_rope_head_dim 64 = 576 values x 61 layers x 2 B bfloat16 = 70,272 B)
    plan = kvplan.estimate(str(FRONTIER / "deepseek-ai__DeepSeek-V3"), gpu="h200", tensor_parallel_size=8,
                           engine="trtllm").to_dict()
    assert plan["kv"]["bytes_per_token"] == 576 * 61 * 2 == 70_272


def test_mimo_v2_flash_mtp_layer_is_a_sliding_window_layer():
    # vLLM 0.33.0 model_executor/models/mimo_v2_mtp.py (and SGLang 0.5.23 srt/models/mimo_v2_nextn.py) build the one
    # MTP layer from swa_num_key_value_heads 8, swa_head_dim 192, swa_v_head_dim 128, sliding_window_size 128;
    # layer 0 (hybrid_layer_pattern[0] == 0) is full attention with 4 KV heads, which kvplan copied before
    spec = resolve("XiaomiMiMo/MiMo-V2-Flash")
    assert spec.mtp_layer == SlidingWindow(8, 192, 128, 128)
    assert spec.layers[0] == FullAttention(4, 192, 128)


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_mimo_v2_flash_mtp_adds_the_sliding_layers_bytes(engine):
    # by hand at TP 2: a sliding layer 8 / 2 heads x (192 + 128) x 2 B = 2,560 B a token, a full one 4 / 2 x 320 x 2
    # = 1,280 B; the target 39 x 2,560 + 9 x 1,280 = 111,360 B; its MTP layer adds a sliding layer's 2,560 (a copy of
    # layer 0 added 1,280)
    def per_token(**extra):
        return kvplan.estimate("XiaomiMiMo/MiMo-V2-Flash", gpu="h200", engine=engine, tensor_parallel_size=2,
                               max_model_len=32_768, kv_cache_memory_bytes=40 * 2**30, **extra).to_dict()["kv"]
    assert per_token()["bytes_per_token"] == 39 * 2_560 + 9 * 1_280 == 111_360
    mtp = per_token(speculative_config={"method": "mtp", "num_speculative_tokens": 1})
    assert mtp["bytes_per_token"] == 111_360 + 2_560
