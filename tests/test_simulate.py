"""kvplan simulate's physics: what contiguous reservation strands and what paging with sharing saves, with the
expected figures derived by hand in each test (the PagedAttention paper, Kwon et al., SOSP 2023, reports 60-80%
of KV memory wasted by contiguous reservation and under 4% by paging)."""

from __future__ import annotations

import pytest

from kvplan.simulate.allocators import ALLOCATORS, make_allocator
from kvplan.simulate.allocators.address_space import AddressSpace
from kvplan.simulate.distributions import parse_distribution
from kvplan.simulate.pool import Pool
from kvplan.simulate.scheduler import simulate
from kvplan.simulate.sharing import BeamSearch, ParallelSamples
from kvplan.simulate.workload import Request, Workload, synthetic

SLOT = 2  # bytes per token slot: any value; the figures below are in blocks and shares


def pool(blocks: int, block_size: int = 16, max_model_len: int = 2048, max_num_seqs: int = 1024,
         max_num_batched_tokens: int = 8192) -> Pool:
    return Pool(blocks * block_size * SLOT, block_size, block_size * SLOT, max_model_len, max_num_seqs,
                max_num_batched_tokens)


def run_all(workload: Workload, the_pool: Pool, prefix_caching: bool = True) -> dict[str, dict]:
    return {name: simulate(workload, the_pool, make_allocator(name, the_pool, prefix_caching)).to_dict()
            for name in ALLOCATORS}


def peak_blocks(result: dict, the_pool: Pool) -> float:
    return result["peak_allocated_bytes"] / the_pool.block_bytes


def chat(count: int = 2000) -> Workload:
    return synthetic(count, parse_distribution("uniform:200-400", "p"), parse_distribution("uniform:200-400", "o"),
                     seed=3)


def test_chat_workload_contiguous_strands_most_paging_wastes_little():
    # 4,096 blocks x 16 = 65,536 slots, max_model_len 2,048. contiguous-max: 65,536 / 2,048 = 32 requests at once,
    # each holding on average a 300-token prompt + half of a 300-token output = 450 real tokens of its 2,048:
    # 22% real KV, about 78% stranded (reserved + fragmented). Paged: about 65,536 / 450 = 145 requests at once;
    # waste = the unused half of a 16-token block per request (7.5 / 450 = 1.7%) + what stays free while one
    # waits (the 1% watermark, 40 blocks) -> under 4%.
    the_pool = pool(4096)
    results = run_all(chat(), the_pool)
    cmax, pow2, oracle, paged = (results[name] for name in ALLOCATORS)
    stranded = cmax["reserved_pct"] + cmax["internal_fragmentation_pct"] + cmax["external_fragmentation_pct"]
    assert 75 <= stranded <= 80 and 20 <= cmax["token_states_pct"] <= 25
    assert cmax["peak_running"] == 32
    waste = paged["internal_fragmentation_pct"] + paged["external_fragmentation_pct"] + paged["reserved_pct"]
    assert waste < 4 and paged["memory_bound_steps_pct"] > 50  # measured where memory is the limit
    assert 1.2 <= paged["internal_fragmentation_pct"] <= 2.0
    assert paged["mean_running"] >= 3.5 * cmax["mean_running"]  # 145 / 32 = 4.5, less what preemption costs
    assert cmax["mean_running"] < pow2["mean_running"] < oracle["mean_running"] < paged["mean_running"]
    real = [result["token_states_pct"] for result in (cmax, pow2, oracle, paged)]
    assert real == sorted(real)
    # oracle reserves exactly prompt + output: no internal fragmentation, only slots reserved for later tokens
    assert oracle["internal_fragmentation_pct"] == 0 and oracle["reserved_pct"] > 15
    assert all(result["completed"] == 2000 for result in results.values())


@pytest.mark.parametrize("block_size, paged_blocks", [
    # 2,000 = 125 x 16: the prompt's 125 blocks once, then 5 samples x cdiv(100, 16) = 7 blocks: 125 + 35 = 160
    (16, 160),
    # 2,000 = 62 x 32 + 16: 62 full blocks once; the partial block (16 prompt tokens) is copied into each sample,
    # which then holds 16 + 100 = 116 tokens = cdiv(116, 32) = 4 blocks: 62 + 5 x 4 = 82
    (32, 82),
])
def test_parallel_samples_store_the_prompt_once(block_size, paged_blocks):
    the_pool = pool(20_000 // block_size * 2, block_size, max_model_len=4096)  # 40,000 slots
    workload = Workload([Request(0, 0.0, 2000, 100, ParallelSamples(5))])
    results = run_all(workload, the_pool)
    assert peak_blocks(results["paged"], the_pool) == paged_blocks
    # contiguous: five full copies; oracle 5 x 2,100 slots, max 5 x 4,096 slots
    assert results["contiguous-oracle"]["peak_allocated_bytes"] == 5 * 2100 * SLOT
    assert results["contiguous-max"]["peak_allocated_bytes"] == 5 * 4096 * SLOT
    assert results["paged"]["shared_saved_pct"] > 70 and results["contiguous-oracle"]["shared_saved_pct"] == 0


def test_shared_system_prompt_with_prefix_caching():
    # 32 requests of a 1,024-token shared prefix + 64 own prompt tokens + 1,536 output tokens, all admitted in step 0
    # (budget 65,536 >= 32 x 1,088) and decoding in lockstep from length 1,089 to 2,624 (1,536 steps). Without
    # sharing each holds cdiv(L, 16) blocks; with it the 64 prefix blocks are held once, so 31 x 64 = 1,984 blocks
    # are saved at every step. Over L = 1,089..2,624: sum cdiv(L, 16) = 16 x 69 + 16 x (70 + ... + 164) = 178,944,
    # a mean of 116.5 blocks per request: saved = 1,984 / (32 x 116.5) = 62 / 116.5 = 53.22%.
    the_pool = pool(100_000, max_model_len=4096, max_num_seqs=32, max_num_batched_tokens=65536)
    workload = synthetic(32, parse_distribution("fixed:64", "p"), parse_distribution("fixed:1536", "o"),
                         shared_prefix=1024, prefix_groups=1)
    results = run_all(workload, the_pool)
    assert results["paged"]["shared_saved_pct"] == 53.22
    assert results["paged"]["steps"] == 1536
    off = run_all(workload, the_pool, prefix_caching=False)
    assert off["paged"]["shared_saved_pct"] == 0


def test_beam_search_shares_more_than_parallel_sampling():
    # Width 4, prompt 2,000, output 100, blocks of 16. Parallel: 125 + 4 x 7 = 153 blocks at the end. Beams share
    # every full block and own only their last one: cdiv(2,100, 16) - 1 + 4 = 132 - 1 + 4 = 135 blocks.
    the_pool = pool(2000, max_model_len=4096)
    parallel = run_all(Workload([Request(0, 0.0, 2000, 100, ParallelSamples(4))]), the_pool)["paged"]
    beams = run_all(Workload([Request(0, 0.0, 2000, 100, BeamSearch(4))]), the_pool)["paged"]
    assert peak_blocks(parallel, the_pool) == 153 and peak_blocks(beams, the_pool) == 135
    assert beams["shared_saved_pct"] > parallel["shared_saved_pct"]


def test_paged_preempts_the_newest_when_a_sequence_cannot_grow():
    # 10 blocks of 16, no watermark (1% of 10 blocks rounds to 0). Requests 0 (prompt 16, output 65: 81 tokens) and
    # 1 (prompt 16, output 100: 116 tokens) are admitted in step 0 with cdiv(17, 16) = 2 blocks each; step s brings
    # them to 17 + s tokens. In step 64 (81 tokens) both need a 6th block with all 10 taken: the newest, request 1,
    # is preempted and its 5 blocks freed; request 0 finishes in that step. Request 1 is recomputed from its 80
    # tokens in step 65 and needs 116 - 80 = 36 more tokens: it finishes in step 65 + 36 - 1 = 100.
    the_pool = pool(10, max_model_len=2048)
    workload = Workload([Request(0, 0.0, 16, 65), Request(1, 0.0, 16, 100)])
    outcome = simulate(workload, the_pool, make_allocator("paged", the_pool))
    assert outcome.preemptions == 1 and outcome.completed == 2
    assert outcome.finished_at == {0: 64, 1: 100}
    assert outcome.meter.peak_allocated == 10 * 16


def test_the_watermark_holds_back_admission_not_growth():
    # 100 blocks: the watermark is 1% = 1 block. A prompt of 1,599 tokens needs cdiv(1,600, 16) = 100 blocks to
    # start (its prompt and first output token), leaving 0 < 1 free: it can never be admitted. One of 1,583 tokens
    # and output 2 starts with cdiv(1,584, 16) = 99 blocks (1 left) and grows into the last one (1,585 tokens).
    the_pool = pool(100, max_model_len=4096)
    too_big = simulate(Workload([Request(0, 0.0, 1599, 1)]), the_pool, make_allocator("paged", the_pool))
    assert too_big.rejected == 1
    fits = simulate(Workload([Request(0, 0.0, 1583, 2)]), the_pool, make_allocator("paged", the_pool))
    assert fits.completed == 1 and fits.meter.peak_allocated == 100 * 16


def test_contiguous_reservations():
    # One request of 300 + 200 tokens: max reserves max_model_len (2,048), pow2 512, oracle exactly 500.
    the_pool = pool(1000)
    results = run_all(Workload([Request(0, 0.0, 300, 200)]), the_pool)
    assert [results[name]["peak_allocated_bytes"] // SLOT for name in ALLOCATORS] == \
        [2048, 512, 500, 32 * 16]  # paged: cdiv(500, 16) = 32 blocks


def test_request_too_big_for_the_pool_is_rejected_not_waited_for():
    # 100 blocks x 16 = 1,600 slots < max_model_len 2,048: contiguous-max can never place a request.
    the_pool = pool(100)
    results = run_all(Workload([Request(0, 0.0, 100, 100)]), the_pool)
    assert results["contiguous-max"]["rejected"] == 1 and results["contiguous-max"]["completed"] == 0
    assert results["paged"]["completed"] == 1


def test_first_fit_leaves_holes_a_larger_request_cannot_use():
    space = AddressSpace(12)
    first, second, third = (space.allocate(4) for _ in range(3))
    assert (first, second, third) == (0, 4, 8)
    space.free(0, 4)
    space.free(8, 4)
    assert space.allocate(8) is None  # 8 slots free, in two holes of 4: external fragmentation
    space.free(4, 4)
    assert space.allocate(12) == 0  # the three holes merged back into one


@pytest.mark.parametrize("groups", [{}, {"full_groups": 1, "windows": ((200, 2),), "state_group_blocks": 1}])
def test_every_allocator_gives_back_the_whole_pool(groups):
    # Mixed sharing, shared prefixes, preemption, window groups: after the run every block is free again (cached
    # prefix blocks count as free) and nothing is left reserved or fragmented.
    the_pool = Pool(600 * 16 * SLOT, 16, 16 * SLOT, 2048, 1024, 8192, **groups)
    workloads = [
        synthetic(300, parse_distribution("uniform:50-600", "p"), parse_distribution("zipf:1.1,1-900", "o"),
                  shared_prefix=100, prefix_groups=3, seed=1),
        synthetic(100, parse_distribution("uniform:50-600", "p"), parse_distribution("uniform:1-300", "o"),
                  sharing=ParallelSamples(3), seed=2),
        synthetic(100, parse_distribution("uniform:50-600", "p"), parse_distribution("uniform:1-300", "o"),
                  sharing=BeamSearch(3), seed=2),
    ]
    for workload in workloads:
        for name in ALLOCATORS:
            allocator = make_allocator(name, the_pool)
            outcome = simulate(workload, the_pool, allocator)
            usage = allocator.usage()
            assert outcome.completed + outcome.rejected == len(workload.requests)
            assert (usage.tokens, usage.reserved, usage.internal, usage.free) == (0, 0, 0, the_pool.slots), name


@pytest.mark.parametrize("groups, blocks", [
    # One request, prompt 16, output 200: 216 tokens, cdiv(216, 16) = 14 blocks in a full-attention group.
    ({}, 14),
    # A window of 64: the next token attends to the last 64, so blocks wholly before (L - 63) are freed; at most
    # cdiv(63, 16) + 1 = 5 blocks are held at once (vLLM's bound for a sliding window).
    ({"full_groups": 0, "windows": ((64, 1),)}, 5),
    ({"full_groups": 1, "windows": ((64, 1),)}, 14 + 5),
    # a paged recurrent state: one block per sequence whatever its length
    ({"state_group_blocks": 1}, 14 + 1),
])
def test_window_and_state_groups(groups, blocks):
    the_pool = Pool(1000 * 16 * SLOT, 16, 16 * SLOT, 2048, 256, 8192, **groups)
    allocator = make_allocator("paged", the_pool)
    outcome = simulate(Workload([Request(0, 0.0, 16, 200)]), the_pool, allocator)
    assert outcome.meter.peak_allocated == blocks * 16
    assert allocator.usage().free == the_pool.slots
    # contiguous reserves every token in every token group: 216 x groups slots
    oracle = simulate(Workload([Request(0, 0.0, 16, 200)]), the_pool, make_allocator("contiguous-oracle", the_pool))
    assert oracle.meter.peak_allocated == 216 * the_pool.token_groups + 16 * groups.get("state_group_blocks", 0)


def test_the_watermark_delays_a_request_that_would_leave_no_headroom():
    # 100 blocks, watermark 1. Request 0 (prompt 783, output 10) starts with cdiv(784, 16) = 49 blocks, leaving 51.
    # Request 1 (prompt 815, output 1) needs cdiv(816, 16) = 51: 51 - 51 = 0 < 1 free, so it waits until request 0
    # finishes in step 9 (its prefill step 0 plus 9 decode steps), then runs in step 10.
    the_pool = pool(100, max_model_len=4096)
    workload = Workload([Request(0, 0.0, 783, 10), Request(1, 0.0, 815, 1)])
    outcome = simulate(workload, the_pool, make_allocator("paged", the_pool))
    assert outcome.finished_at == {0: 9, 1: 10}


def test_window_frees_blocks_as_they_leave_it():
    # Window 64, blocks of 16, one request of prompt 16 and output 200: in step s it holds L = 17 + s tokens, of
    # which the blocks wholly before token L - 63 are freed: cdiv(L, 16) - max(0, L - 63) // 16 blocks. Summed over
    # its 200 steps (the rule written out once more here, independently of the allocator):
    expected = sum(-(-length // 16) - max(0, length - 63) // 16 for length in range(17, 217))
    the_pool = Pool(1000 * 16 * SLOT, 16, 16 * SLOT, 2048, 256, 8192, full_groups=0, windows=((64, 1),))
    outcome = simulate(Workload([Request(0, 0.0, 16, 200)]), the_pool, make_allocator("paged", the_pool))
    tokens, reserved, internal = outcome.meter.everywhere[:3]
    assert outcome.meter.steps == 200 and (tokens + reserved + internal) == expected * 16


def test_split_is_averaged_over_the_steps_that_wait_for_memory():
    # contiguous-max in a pool of exactly one max_model_len (128 blocks x 16 = 2,048 slots): two requests of prompt
    # 100 and output 50. Request 0 runs in steps 0..49 while request 1 waits (memory-bound), then request 1 runs in
    # steps 50..99: 50 of 100 steps memory-bound. In those, step s holds 101 + s real tokens (mean 125.5 =
    # 6.13% of 2,048), 150 - (101 + s) reserved for later tokens (mean 24.5 = 1.20%) and 2,048 - 150 = 1,898 never
    # used (92.68%); nothing else is free.
    the_pool = pool(128)
    result = run_all(Workload([Request(0, 0.0, 100, 50), Request(1, 0.0, 100, 50)]), the_pool)["contiguous-max"]
    assert result["steps"] == 100 and result["memory_bound_steps_pct"] == 50
    assert (result["token_states_pct"], result["reserved_pct"], result["internal_fragmentation_pct"],
            result["external_fragmentation_pct"]) == (6.13, 1.2, 92.68, 0)


@pytest.mark.parametrize("second_prefix, steps", [(0, 20), (1, 24)])
def test_a_cached_prefix_is_reused_after_its_request_ended(second_prefix, steps):
    # One sequence at a time (max_num_seqs 1), chunks of 256 tokens, 66 blocks of 16. Request 0: prompt 1,040 (a
    # 1,024-token prefix = 64 full blocks, then 16 own tokens), 8 output tokens: cdiv(1,040, 256) = 5 prefill steps
    # (the last yields the first token) + 7 decode steps = 12. Its 64 prefix blocks stay cached, unreferenced, when
    # it ends. Request 1 with the same prefix finds them: it prefills only its 16 own tokens (1 step) + 7 = 8, so
    # 20 steps in all; with another prefix it evicts them and prefills all 1,040: 12 + 12 = 24. At the end the
    # pool is 2 free blocks and 64 cached ones (66 - 64) either way, and without prefix caching all 66 are free.
    the_pool = pool(66, max_model_len=4096, max_num_seqs=1, max_num_batched_tokens=256)
    workload = Workload([Request(0, 0.0, 1040, 8, prefix_id=0, prefix_len=1024),
                         Request(1, 0.0, 1040, 8, prefix_id=second_prefix, prefix_len=1024)])
    paged = make_allocator("paged", the_pool, True)
    result = simulate(workload, the_pool, paged).to_dict()
    assert (result["completed"], result["steps"]) == (2, steps)
    assert (paged.free, paged.cache.evictable) == (2, 64)
    uncached = make_allocator("paged", the_pool, False)
    assert simulate(workload, the_pool, uncached).to_dict()["steps"] == 24 and uncached.free == 66
