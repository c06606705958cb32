"""A sliding-window layer holds window - 1 cached tokens plus the new ones, as vLLM's
SlidingWindowSpec.max_memory_usage_bytes counts them: min(window - 1 + max_num_batched_tokens, max_model_len)
tokens, plus one block for a window that does not start on a block boundary. A window of 17 with blocks of 16 is
where window - 1 and window fall on either side of a block boundary."""

from __future__ import annotations

import pytest

from kvplan.capacity import pool_layout
from kvplan.models.layers import SlidingWindow
from kvplan.simulate.allocators import make_allocator
from kvplan.simulate.pool import Pool
from kvplan.simulate.scheduler import simulate
from kvplan.simulate.workload import Request, Workload

WINDOW_17 = SlidingWindow(2, 16, 17)


@pytest.mark.parametrize("context, batched, blocks", [
    (131_072, 2048, 130),  # cdiv(16 + 2,048, 16) + 1 = 129 + 1; counting the window itself: cdiv(2,065, 16) + 1 = 131
    (131_072, 16, 3),  # cdiv(16 + 16, 16) + 1 = 2 + 1; with the window: cdiv(33, 16) + 1 = 4
    (20, 2048, 3),  # max_model_len 20 caps it: cdiv(20, 16) + 1 = 2 + 1
])
def test_a_window_of_17_holds_16_tokens_plus_the_new_ones(context, batched, blocks):
    assert WINDOW_17.blocks_per_request(context, 16, batched) == blocks
    layout = pool_layout([WINDOW_17] * 2, 16, 2, 1)  # one KV-cache group of two window layers
    assert layout.blocks_per_request(context, batched) == blocks


@pytest.mark.xfail(strict=True, reason="simulate drops a window group's leading blocks at admission; vLLM v1 frees "
                                       "them only from the next step's schedule (remove_skipped_blocks)")
def test_simulate_holds_a_window_prompt_whole_in_its_prefill_step():
    # A 47-token prompt (chunk limit 8,192) is prefilled in one step: vLLM allocates cdiv(47, 16) = 3 blocks for it
    # and frees none before the next schedule (num_computed_tokens is 0), as capacity's min(16 + 47, 47) counts.
    # simulate holds 1: cdiv(48, 16) = 3 minus (48 - 17 + 1) // 16 = 2 it drops at once.
    pool = Pool(100 * 32, 16, 32, 4096, 1, 8192, full_groups=0, windows=((17, 1),))
    outcome = simulate(Workload([Request(0, 0.0, 47, 1)]), pool, make_allocator("paged", pool)).to_dict()
    assert outcome["peak_allocated_bytes"] // pool.slot_bytes // pool.block_size >= 3
