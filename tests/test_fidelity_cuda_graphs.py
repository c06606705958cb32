"""vLLM's CUDA-graph estimate (v0.21+): how many batch sizes it captures, and a first capture plus a part per further
size."""

from __future__ import annotations

import pytest

from kvplan import engine_calibration as calibration
from kvplan.engines.vllm import cuda_graph_sizes

MiB = 2**20
BY_ID = {entry["id"]: entry for entry in calibration.entries()}


@pytest.mark.parametrize("seqs, batched, spec, sizes", [
    # vLLM's default list (config/vllm.py _set_cudagraph_sizes): 1, 2, 4, then every 8 below 256, every 16 from 256,
    # up to min(max_num_seqs x (1 + speculative tokens) x 2, 512, max_num_batched_tokens).
    (1024, 8192, 0, 51),  # up to 512: 3 + 31 (8..248) + 17 (256..512): the v0.19 H100 logs' capture count
    (8, 8192, 0, 5),  # up to 16: 1, 2, 4, 8, 16
    (2, 8192, 0, 3),  # up to 4: 1, 2, 4 (engine-calibration Y06: max_num_seqs 2, no drafter)
    (1024, 256, 0, 35),  # capped by 256 batched tokens: 3 + 31 + 1
    # MTP 3 (Y02, Y03): up to 2 x 4 x 2 = 16, each size rounded up to a multiple of 4: {4, 8, 16}
    (2, 8192, 3, 3),
    # vLLM issue #32324: max_num_seqs 40 and 3 speculative tokens give a largest size of 320: 3 + 31 + 5 sizes, and
    # rounding to multiples of 4 folds 1, 2 and 4 into one
    (40, 8192, 3, 37),
])
def test_capture_sizes_follow_vllms_default_list(seqs, batched, spec, sizes):
    assert cuda_graph_sizes(seqs, batched, spec) == sizes


def test_the_estimate_is_a_first_capture_plus_a_part_per_size():
    # Y02 (vLLM 0.24 inferred, 2 x RTX 3090, max_num_seqs 2, MTP 3): 3 sizes, 64 decoder layers on the rank. The
    # 51-size figure is 18 MiB x 64 = 1,207,959,552 B; split as the PR #30515 log splits it (146 MiB first capture +
    # 50 x 6 MiB = 446), 3 sizes keep 146 + 2 x 6 = 158 of 446: 1,207,959,552 x 158 // 446 = 427,931,859 B.
    memory = calibration.vllm_plan(BY_ID["Y02"]).memory
    assert memory.cuda_graph_bytes == 427_931_859


def test_the_default_51_sizes_keep_18_mib_per_layer():
    # The v0.19 H100 logs behind the 18 MiB per layer captured 51 sizes: at those the split gives the whole figure.
    from kvplan.engines.vllm import cuda_graph_bytes
    assert cuda_graph_bytes(32, 51) == 32 * 18 * MiB  # 0.5625 GiB; C11/C14 print 0.55 GiB for Llama-3.1-8B


def test_v0_20_subtracts_no_graphs():
    # Y04 (v0.20.1): VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS was opt-in before v0.21.0.
    assert calibration.vllm_plan(BY_ID["Y04"]).memory.cuda_graph_bytes == 0
