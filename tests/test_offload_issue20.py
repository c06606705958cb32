"""Issue 20, weight offloading (vLLM --cpu-offload-gb): per GPU, whole parameters of the stage's decoder layers
moved in named_parameters order until the amount is reached, as the vLLM 0.33.0 wheel does it
(model_executor/offloader/uva.py _maybe_offload_to_cpu, models/utils.py make_layers, config/offload.py). Derived
here by hand for Qwen2.5-7B in bfloat16 (hidden 3584, 28 heads and 4 KV heads of 128, intermediate 18944, q/k/v
bias)."""

from __future__ import annotations

import subprocess
import sys

from kvplan.api import estimate

H, Q, KV, INTER = 3584, 28 * 128, 4 * 128, 18944
# one layer's parameters in order: qkv_proj weight and bias, o_proj, gate_up_proj, down_proj, the two norms
LAYER = [(Q + 2 * KV) * H * 2, (Q + 2 * KV) * 2, Q * H * 2, 2 * INTER * H * 2, INTER * H * 2, H * 2, H * 2]


def moved_by_hand(limit: int, layers: int = 28) -> tuple[int, int]:
    moved = count = 0
    for index in range(layers * len(LAYER)):
        if moved >= limit:
            break
        moved += LAYER[index % len(LAYER)]
        count += 1
    return moved, count


def test_four_gib_moves_nine_layers_and_part_of_the_tenth():
    assert sum(LAYER) == 466_115_584
    moved, count = moved_by_hand(4 * 2**30)
    # 9 layers = 4,195,040,256 B; then q/k/v, its bias and o_proj (4,253,769,728 B, below 4 GiB) and gate_up_proj
    assert (moved, count) == (4_525_350_912, 67)
    base = estimate("Qwen/Qwen2.5-7B", gpu="rtx4090", max_model_len=32768)
    off = estimate("Qwen/Qwen2.5-7B", gpu="rtx4090", max_model_len=32768, cpu_offload_gb=4)
    assert base.memory.weights_bytes - off.memory.weights_bytes == moved
    assert off.memory.kv_cache_bytes - base.memory.kv_cache_bytes == moved  # the pool gets all of it
    # tests/test_pinned.py's RTX 4090 pool, 6,351,989,461 B // 917,504 = 6,923 blocks; + the moved bytes
    # 10,877,340,373 // 917,504 = 11,855
    assert (base.capacity.tokens, off.capacity.tokens) == (110_768, 189_680)
    assert any("4.21 GiB per GPU (67 whole parameters of the first 10 decoder layers" in n for n in off.notes)


def test_the_amount_is_per_gpu_and_the_host_holds_it_for_each():
    off = estimate("Qwen/Qwen2.5-7B", gpu="rtx4090", max_model_len=32768, cpu_offload_gb=4, tensor_parallel_size=2)
    assert any("the host needs 8.12 GiB for the 2 GPU(s)" in n for n in off.notes)


def test_unmodelled_layouts_are_refused_in_one_line():
    result = subprocess.run([sys.executable, "-m", "kvplan.cli.app", "estimate", "-m", "Qwen/Qwen3-30B-A3B",
                             "--gpu", "h100", "--cpu-offload-gb", "4"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "--cpu-offload-gb: cpu_offload_gb is modelled for unquantized dense" in result.stderr


def test_sglang_moves_the_same_parameters_and_its_pool_gets_them():
    # SGLang 0.5.23 utils/offloader.py OffloaderV1: the same walk over the stage's decoder layers
    base = estimate("Qwen/Qwen2.5-7B", gpu="rtx4090", engine="sglang", max_model_len=32768)
    off = estimate("Qwen/Qwen2.5-7B", gpu="rtx4090", engine="sglang", max_model_len=32768, cpu_offload_gb=4)
    moved, _ = moved_by_hand(4 * 2**30)
    assert base.memory.weights_bytes - off.memory.weights_bytes == moved
    assert off.memory.kv_cache_bytes - base.memory.kv_cache_bytes == moved
    # SGLang 0.5.23's fraction on an RTX 4090 is 0.704 (tests/test_sglang_releases_issue18.py): free before load
    # 24,728,274,207 B, held back int(x 0.296) = 7,319,569,165, pool int(24,728,274,207 - 15,231,233,024
    # - 7,319,569,165.27) = 2,177,472,017 B // 57,344 = 37,972 tokens; + 4,525,350,912 B moved: 116,887
    assert (base.capacity.tokens, off.capacity.tokens) == (37_972, 116_887)
