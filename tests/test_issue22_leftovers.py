"""Issue 22's leftovers: TensorRT-LLM's DeepSeek-V4, refused by name with where the engine builds its pools."""

from __future__ import annotations

from pathlib import Path

import pytest

import kvplan
from kvplan.errors import KvplanError
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
