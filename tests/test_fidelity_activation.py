"""vLLM v0.17+: the profiled activation peak follows max_num_batched_tokens (the dummy forward) and max_num_seqs
(the sampler), the larger of the two (kvplan/engines/vllm.py, Era.peak_of_larger)."""

from __future__ import annotations

from kvplan.api import gpu_choices, load_model
from kvplan.deployment import Deployment
from kvplan.engines import plan_deployment

FIXED = int(0.12 * 2**30)  # the era's fixed term, 128,849,018 B


def activation(**knobs) -> int:
    # V1's sampler (VLLM_USE_V2_MODEL_RUNNER=0): V2's, the 0.29 default, is tests/test_vllm_sampler_v2.py's
    dep = Deployment.from_mapping({"gpu": "h100", "engine_version": "0.29", "v2_model_runner": False, **knobs})
    return plan_deployment(load_model("meta-llama/Llama-3.1-8B-Instruct"), dep, gpu_choices(dep)[0]).memory.activation_bytes


def test_a_long_prefill_chunk_raises_the_peak():
    # Llama-3.1-8B: hidden 4,096, intermediate 14,336, vocab 128,256.
    # 131,072-token chunk: forward 131,072 x (3 x 4,096 + 3 x 14,336) x 2 B = 14,495,514,624 B; sampler
    # 3.79 x 1,024 seqs x 128,256 x 4 B = 1,991,025,623 B; the forward is larger: 14,495,514,624 + FIXED.
    assert activation(max_num_batched_tokens=131072) == 14_495_514_624 + FIXED
    # 512-token chunk with 256 seqs: forward 512 x 55,296 x 2 = 56,623,104 B; sampler 3.79 x 256 x 128,256 x 4
    # = 497,756,405 B plus FlashInfer's cached row states (1,048,576 B: 0.29 samples through FlashInfer, then
    # forward_native, tests/test_vllm_sampler_v1.py) = 498,804,981 B, the larger: 498,804,981 + FIXED.
    assert activation(max_num_batched_tokens=512, max_num_seqs=256) == 498_804_981 + FIXED


def test_the_default_chunk_is_sampler_bound():
    # 8,192 tokens: forward 8,192 x 55,296 x 2 = 905,969,664 B < sampler 1,991,025,623 B (the v0.19 logs'
    # 1.89 GiB peak for this model, C11 in docs/calibration.md, is the sampler's), + 1,048,576 B of FlashInfer's
    # row states in 0.29 = 1,992,074,199 B.
    assert activation() == 1_992_074_199 + FIXED
