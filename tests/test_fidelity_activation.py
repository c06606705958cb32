"""vLLM v0.17+: the profiled activation peak follows max_num_batched_tokens (the dummy forward) and max_num_seqs
(the sampler), the larger of the two (kvplan/engines/vllm.py, Era.peak_of_larger)."""

from __future__ import annotations

from kvplan.api import gpu_choices, load_model
from kvplan.deployment import Deployment
from kvplan.engines import plan_deployment

FIXED = int(0.12 * 2**30)  # the era's fixed term on the forward's side, 128,849,018 B
# the sampler's side (engines/vllm/sampler.py, read in the wheels): 3.5 float32 copies of rows x vocab, the Triton
# buffer (132 rows on an H100), the held hidden states (batched tokens + 2 x rows) x hidden x 2, FlashInfer's
# 1 MiB row states (0.29 samples through FlashInfer, then forward_native) and the cuBLAS workspace, 32 MiB on sm90
BUFFER, WORKSPACE, ROW_STATES = 132 * 128_256 * 4, 32 * 2**20, 2**20


def activation(**knobs) -> int:
    # V1's sampler (VLLM_USE_V2_MODEL_RUNNER=0): V2's, the 0.29 default, is tests/test_vllm_sampler_v2.py's
    dep = Deployment.from_mapping({"gpu": "h100", "engine_version": "0.29", "v2_model_runner": False, **knobs})
    return plan_deployment(load_model("meta-llama/Llama-3.1-8B-Instruct"), dep, gpu_choices(dep)[0]).memory.activation_bytes


def test_a_long_prefill_chunk_raises_the_peak():
    # Llama-3.1-8B: hidden 4,096, intermediate 14,336, vocab 128,256.
    # 131,072-token chunk: forward 131,072 x (3 x 4,096 + 3 x 14,336) x 2 B = 14,495,514,624 B + FIXED; sampler
    # 3.5 x 1,024 seqs x 128,256 x 4 B = 1,838,678,016 + 67,719,168 (buffer) + (131,072 + 2,048) x 4,096 x 2 =
    # 1,090,519,040 + 1,048,576 + 33,554,432 = 3,031,519,232 B; the forward is larger: 14,495,514,624 + FIXED.
    assert activation(max_num_batched_tokens=131072) == 14_495_514_624 + FIXED
    # 512-token chunk with 256 seqs: forward 512 x 55,296 x 2 = 56,623,104 B + FIXED = 185,472,122 B; sampler
    # 3.5 x 256 x 128,256 x 4 = 459,669,504 B + the buffer of min(next_power_of_2(min(132, 256)), 132) = 132 rows
    # 67,719,168 + (512 + 2 x 256) x 4,096 x 2 = 8,388,608 + 1,048,576 + 33,554,432 = 570,380,288 B, the larger.
    assert activation(max_num_batched_tokens=512, max_num_seqs=256) == int(3.5 * 256 * 128_256 * 4) + BUFFER + (
        512 + 2 * 256) * 4096 * 2 + ROW_STATES + WORKSPACE == 570_380_288


def test_the_default_chunk_is_sampler_bound():
    # 8,192 tokens: forward 8,192 x 55,296 x 2 = 905,969,664 B + FIXED < sampler 1,838,678,016 + 67,719,168 +
    # (8,192 + 2,048) x 4,096 x 2 = 83,886,080 + 33,554,432 = 2,023,837,696 B (1.885 GiB: the v0.19 logs' 1.89 GiB
    # peak for this model, C11 in docs/calibration.md, is the sampler's), + 1,048,576 B of FlashInfer's row states
    # in 0.29 = 2,024,886,272 B.
    assert activation() == 2_024_886_272
