"""Issue 20, SGLang's LoRA pool: per target module and decoder layer an A of (slots, rank x slices, input) and a B
of (slots, output, rank) in the model dtype, out of the KV pool (SGLang 0.5.23 lora/mem_pool.py get_lora_A_shape
and get_lora_B_shape; model_runner.py builds it before the KV cache is sized). Qwen2.5-7B: the same shapes as
vLLM's (tests/test_lora_issue20.py: 4 slots of rank 64 = 1,291,845,632 B), so 8 slots are twice that."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kvplan.api import estimate

FOUR_SLOTS = 1_291_845_632
ALL_LINEAR = "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj"


def plan(**knobs):
    return estimate("Qwen/Qwen2.5-7B", gpu="h100", engine="sglang", max_model_len=32768, **knobs)


def test_the_default_eight_slots_come_out_of_the_pool():
    base = plan()
    lora = plan(enable_lora=True, max_lora_rank=64, lora_target_modules=ALL_LINEAR)
    assert lora.memory.weights_bytes - base.memory.weights_bytes == 2 * FOUR_SLOTS
    assert lora.capacity.tokens < base.capacity.tokens
    four = plan(enable_lora=True, max_lora_rank=64, lora_target_modules="qkv_proj,o_proj,gate_up_proj,down_proj",
                max_loras_per_batch=4)
    assert four.memory.weights_bytes - base.memory.weights_bytes == FOUR_SLOTS


@pytest.mark.parametrize(("flags", "message"), [
    (["--max-lora-rank", "64"], "you need to specify both --max-lora-rank and --lora-target-modules"),
    (["--max-lora-rank", "64", "--lora-target-modules", "all"], "embedding LoRA buffers"),
])
def test_what_sglang_refuses_or_kvplan_does_not_model_is_one_line(flags, message):
    result = subprocess.run([sys.executable, "-m", "kvplan.cli.app", "estimate", "--gpu", "h100", "--", "python",
                             "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen2.5-7B", "--enable-lora", *flags],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and message in result.stderr, result.stderr
