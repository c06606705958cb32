"""Issue 20, LoRA (vLLM): the stacked A and B buffers each slot holds per layer, as the vLLM 0.33.0 wheel sizes
them (vllm/lora/layers/base_linear.py and column_parallel_linear.py create_lora_weights: A is slots x rank x input
per slice, B slots x output x rank; over TP the column layers' B and the row layers' A are sharded), derived here
by hand for Qwen2.5-7B (28 layers, hidden 3584, 28 heads and 4 KV heads of 128, intermediate 18944, bfloat16)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from kvplan.api import estimate
from kvplan.errors import KvplanError

MODEL, GPU = "Qwen/Qwen2.5-7B", "h100"
SLOTS, RANK, HIDDEN, HEADS, KV, DIM, INTER, LAYERS = 4, 64, 3584, 28, 4, 128, 18944, 28


def by_hand(tp: int) -> int:
    """Bytes of A and B on one rank, all layers."""
    q, kv = HEADS // tp * DIM, max(KV // tp, 1) * DIM
    qkv = 3 * RANK * HIDDEN + (q + 2 * kv) * RANK  # merged q/k/v: three A slices of the whole input, B sharded
    o_proj = RANK * (HEADS * DIM // tp) + HIDDEN * RANK  # row-parallel: A over the sharded input, B whole
    gate_up = 2 * RANK * HIDDEN + 2 * (INTER // tp) * RANK
    down = RANK * (INTER // tp) + HIDDEN * RANK
    return SLOTS * (qkv + o_proj + gate_up + down) * 2 * LAYERS  # bfloat16


def plan(**knobs):
    return estimate(MODEL, gpu=GPU, max_model_len=32768, **knobs)


def test_four_slots_of_rank_64_are_about_1_2_gib_of_weights():
    assert by_hand(1) == 1_291_845_632  # 23,068,672 values per layer x 2 B x 28 layers = 1.20 GiB
    base, lora = plan(), plan(enable_lora=True, max_loras=SLOTS, max_lora_rank=RANK)
    assert lora.memory.weights_bytes - base.memory.weights_bytes == by_hand(1)
    # the profiling run's largest shrink buffer: q/k/v's 3 slices x 8,192 tokens x rank 64 x 4 B (float32)
    assert lora.memory.activation_bytes - base.memory.activation_bytes == 3 * 8192 * RANK * 4
    assert lora.capacity.tokens < base.capacity.tokens
    assert any("LoRA: 4 slots of rank 64 (bfloat16)" in note and "1.20 GiB" in note for note in lora.notes)


def test_tensor_parallel_shards_b_of_the_column_layers_and_a_of_the_row_layers():
    base = plan(tensor_parallel_size=2)
    lora = plan(tensor_parallel_size=2, enable_lora=True, max_loras=SLOTS, max_lora_rank=RANK)
    # 3,686,400 values per layer x 4 slots x 2 B x 28 layers
    assert lora.memory.weights_bytes - base.memory.weights_bytes == by_hand(2) == 825_753_600


def test_fully_sharded_and_target_modules():
    base = plan(tensor_parallel_size=2)
    full = plan(tensor_parallel_size=2, enable_lora=True, max_loras=SLOTS, max_lora_rank=RANK,
                fully_sharded_loras=True)
    # fully sharded: the column layers' A over the rank (32 of 64), the row layers' B over the output (1792)
    qkv = 3 * 32 * HIDDEN + (HEADS // 2 * DIM + 2 * 2 * DIM) * RANK
    o_proj = RANK * (HEADS * DIM // 2) + HIDDEN // 2 * RANK
    gate_up = 2 * 32 * HIDDEN + 2 * (INTER // 2) * RANK
    down = RANK * (INTER // 2) + HIDDEN // 2 * RANK
    assert full.memory.weights_bytes - base.memory.weights_bytes == SLOTS * (qkv + o_proj + gate_up + down) * 2 * 28
    only_o = plan(tensor_parallel_size=2, enable_lora=True, max_loras=SLOTS, max_lora_rank=RANK,
                  lora_target_modules="o_proj")
    assert only_o.memory.weights_bytes - base.memory.weights_bytes == SLOTS * (RANK * 1792 + HIDDEN * RANK) * 2 * 28


def test_cuda_graphs_are_captured_per_lora_case():
    base, lora = plan(), plan(enable_lora=True, max_loras=SLOTS, max_lora_rank=RANK)
    # vLLM 0.33.0 cudagraph_dispatcher._get_lora_cases: [0, max_loras + 1], so every size of each mode twice: the
    # first capture once and a further 0.1875 MiB x 28 layers per added graph (51 PIECEWISE and 51 FULL on an H100)
    added = (51 + 51) * 3 * 2**20 // 16 * 28
    assert lora.memory.cuda_graph_bytes - base.memory.cuda_graph_bytes == added


@pytest.mark.parametrize(("flags", "message"), [
    (["--max-lora-rank", "48"], "--max-lora-rank: invalid choice 48 (choose from 1, 8, 16, 32, 64, 128, 256, 320, 512)"),
    (["--max-loras", "4", "--max-cpu-loras", "2"], "--max-cpu-loras: max_cpu_loras (2) must be >= max_loras (4)."),
    (["--lora-target-modules", "lm_head"], "--lora-target-modules: not a LoRA module of a dense decoder layer: lm_head"),
])
def test_bad_lora_settings_are_one_line(flags, message):
    result = subprocess.run([sys.executable, "-m", "kvplan.cli.app", "estimate", "-m", MODEL, "--gpu", GPU,
                             "--enable-lora", *flags], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert message in result.stderr


def test_moe_lora_is_refused_not_guessed():
    with pytest.raises(KvplanError, match="LoRA slots are modelled for dense attention decoders"):
        estimate("Qwen/Qwen3-30B-A3B", gpu=GPU, enable_lora=True)


def test_without_lora_nothing_changes_and_the_flags_are_no_longer_noted():
    result = subprocess.run([sys.executable, "-m", "kvplan.cli.app", "estimate", "--gpu", GPU, "--json", "--",
                             "vllm", "serve", MODEL, "--max-model-len", "32768", "--enable-lora", "--max-loras", "4",
                             "--max-lora-rank", "64"], capture_output=True, text=True, timeout=60)
    document = json.loads(result.stdout)
    assert not any("accepted but not modelled" in note and "lora" in note for note in document["notes"])
    assert document["memory"]["weights_bytes"] == plan().memory.weights_bytes + by_hand(1)
