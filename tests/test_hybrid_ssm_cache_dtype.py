"""vLLM's --mamba-ssm-cache-dtype: the SSM state's dtype alone, hence the state page and the raised attention block."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvplan import api
from kvplan.deployment import Deployment
from kvplan.errors import KvplanError

QWEN35 = str(Path(__file__).parent / "fixtures" / "configs" / "hybrid" / "qwen3.5-27b.json")


@pytest.mark.parametrize("flag, block", [
    # Qwen3.5-27B (mamba_ssm_dtype float32 in its config) at TP 1, bf16 KV: an attention token is 4 KV heads x 256 x
    # 2 (K, V) x 2 B = 4,096 B, 65,536 B per 16 tokens. A Gated DeltaNet state is the conv (2 x 16 x 128 + 48 x 128 =
    # 10,240 channels x 3 rows x 2 B = 61,440 B) plus the SSM (48 x 128 x 128 elements).
    ("auto", 784),  # the config's float32: 3,145,728 + 61,440 = 3,207,168 B -> 16 x cdiv(., 65,536) = 16 x 49
    ("float32", 784),
    ("bfloat16", 400),  # 1,572,864 + 61,440 = 1,634,304 B -> 16 x 25 (the flag wins over the config)
    ("float16", 400),
])
def test_ssm_dtype_sets_the_state_page(flag, block):
    plan = api.estimate(QWEN35, gpu="h100", engine_version="0.19.0", max_model_len=8192, mamba_ssm_cache_dtype=flag)
    assert plan.engine.block_size == block


def test_flag_is_read_from_a_pasted_command():
    dep = Deployment.from_vllm_args(["--mamba-ssm-cache-dtype", "float16"])
    assert dep.mamba_ssm_cache_dtype == "float16"


def test_a_dtype_vllm_refuses_is_blamed_on_the_flag():
    # vLLM's MambaDType (config/cache.py): auto, float32, float16, bfloat16.
    with pytest.raises(KvplanError, match="invalid choice 'fp8'") as error:
        Deployment.from_vllm_args(["--mamba-ssm-cache-dtype", "fp8"])
    assert error.value.where == "--mamba-ssm-cache-dtype"
