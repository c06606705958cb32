"""DeepSeek-V4 in SGLang 0.5.23 (issue 22): the pools DSV4PoolConfigurator (model_executor/pool_configurator.py)
sizes for the default launch on CUDA, kvplan.engines.sglang.compressed. The hand derivations use the published
config's numbers (deepseek-ai/DeepSeek-V4-Flash: head_dim 512 = 448 NoPE + 64 RoPE, index_head_dim 128,
sliding_window 128, compress_ratios over 43 layers: 2 sliding-only, 21 of ratio 4, 20 of ratio 128) and the
launch defaults SGLang 0.5.23 resolves for it on an H200 at TP 8 (ServerArgs.resolve_once: page_size 256,
swa_full_tokens_ratio 0.1 recorded as explicitly set, max_running_requests 256, dsv4_attn_backend flashmla,
kv_cache_dtype fp8_e4m3). The oracle figures are what the release's own DSV4PoolConfigurator.calculate_pool_sizes
and finalize_with_max_running_requests returned on CPU, run with tests/oracle/sglang_adapter.py's stand-ins and its
ServerArgs resolution (the configurator given the resolved ModelConfig and a stand-in KVCacheConfigurator)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

import kvplan
from kvplan.api import estimates
from kvplan.deployment import Deployment
from kvplan.errors import KvplanError

FRONTIER = Path(__file__).parent / "fixtures" / "configs" / "frontier"
FLASH = FRONTIER / "deepseek-ai__DeepSeek-V4-Flash"
PRO = FRONTIER / "deepseek-ai__DeepSeek-V4-Pro"
GIB40 = 40 * 2**30


def plan(path: Path = FLASH, **extra):
    return kvplan.estimate(str(path), gpu="h200", engine="sglang", tensor_parallel_size=8,
                           kv_cache_memory_bytes=GIB40, **extra)


def test_flash_pools_by_hand():
    # KVLayout.V4 row: 448 fp8 NoPE + 64 x 2 B RoPE + 8 scale bytes = 584 B; a page padded to a multiple of 576 B.
    #   SWA pool, page 256: 256 x 584 = 149,504 -> 149,760 B, 585 B a token, in all 43 layers      = 25,155
    #     + the c4 compressor states it addresses: 8 ring rows a 256-token page, each
    #       2 x 2 x 512 x 4 + 2 x 2 x 128 x 4 = 10,240 B, in 21 layers: 8 / 256 x 10,240 x 21    =  6,720
    #     bytes per SWA token                                                                      = 31,875
    #   c4 pool, page 256 / 4 = 64: 64 x 584 = 37,376 -> 37,440 B, 585 B a row; a full token adds 585 / 4 and the
    #     indexer's 128 + 128 / 128 x 4 = 132 B / 4: 179.25 B, in 21 layers                      = 3,764.25
    #   c128 pool, page 256 / 128 = 2: 2 x 584 = 1,168 -> 1,728 B, 864 B a row; / 128 = 6.75 B x 20 =   135
    #   bytes per full token: 0.1 x 31,875 + 3,764.25 + 135                                      = 7,086.75
    #   c128 states, fixed: (256 + 1) x 128 ring rows + 128 + 1 = 33,025 -> 33,152 rows (a multiple of 128),
    #     each 2 x 512 x 4 B, in 20 layers: 33,152 x 4,096 x 20                                 = 2,715,811,840
    # 40 GiB = 42,949,672,960 B: full = int((42,949,672,960 - 2,715,811,840) / 7,086.75) = 5,677,336 -> 5,677,312
    # (whole pages); swa = int(0.1 x 5,677,312) = 567,731 -> 567,552; c4 = 5,677,312 // 4 = 1,419,328;
    # c128 = 5,677,312 // 128 = 44,354; c4 states 567,552 // 256 x 8 = 17,736; c128 states 257 x 128 = 32,896.
    # SGLang 0.5.23's own DSV4PoolConfigurator on CPU (oracle): full 5,677,312, swa 567,552, c4 1,419,328,
    # c128 44,354, c4_state 17,736, c128_state 32,896
    found = plan()
    full, swa = found.pools.pools
    assert (full.name, full.tokens, swa.name, swa.tokens) == ("full", 5_677_312, "swa", 567_552)
    assert swa.bytes_per_token == 31_875 and full.bytes_per_token == 3_900  # 3,764.25 + 135, rounded up
    assert found.capacity.tokens == 5_677_312 and found.capacity.num_blocks == 5_677_312 // 256
    note = next(note for note in found.notes if "DSV4PoolConfigurator" in note)
    assert "c4 1,419,328" in note and "c128 44,354" in note and "c4 state 17,736" in note
    assert "c128 state 32,896" in note and "585 B" in note and "864 B" in note and "indexer 132 B" in note
    assert found.capacity.max_concurrency == round(5_677_312 / 1_048_576, 2)  # whole 1M context, 5.41x


def test_flags_move_the_split():
    # --max-running-requests 1024, --swa-full-tokens-ratio 0.2: full token 0.2 x 31,875 + 3,899.25 = 10,274.25 B;
    # c128 states (1,025 x 128 + 129 = 131,329 -> 131,456 rows) x 4,096 x 20 = 10,768,875,520 B fixed;
    # full = int((42,949,672,960 - 10,768,875,520) / 10,274.25) = 3,132,179 -> 3,132,160; swa = 626,432.
    # SGLang 0.5.23 (oracle): full 3,132,160, swa 626,432, c4_state 19,576, c128_state 131,200
    found = plan(max_num_seqs=1024, swa_full_tokens_ratio=0.2)
    assert [pool.tokens for pool in found.pools.pools] == [3_132_160, 626_432]
    note = next(note for note in found.notes if "DSV4PoolConfigurator" in note)
    assert "c4 state 19,576" in note and "c128 state 131,200" in note


def test_pro_against_the_release():
    # Pro: 61 layers, 30 of ratio 4, 31 of ratio 128 (oracle: bytes_per_swa_token 45,285, bytes_per_full_token
    # 10,115.25, c128 fixed 4,209,508,352 B): full 3,829,760, swa 382,976
    assert [pool.tokens for pool in plan(PRO).pools.pools] == [3_829_760, 382_976]


def test_max_running_requests():
    # kv_cache_configurator.resolve_max_num_reqs: min(max_running_requests per worker, full // 2), where
    # deepseek_v4_hook sets 256 when none is given. With swa_full_tokens_ratio 1.0 (full token 31,875 + 3,899.25 =
    # 35,774.25 B) the pools hold int(40,233,861,120 / 35,774.25) // 256 x 256 = 1,124,608 tokens each, so 2,048-token
    # requests are not KV-limited (1,124,608 // 2,304 = 488 in the SWA pool) but capped at 256
    rung = plan(swa_full_tokens_ratio=1.0).capacity.ladder[0]
    assert (rung.context, rung.concurrency) == (2_048, 256) and rung.kv_limited == 488
    # a given --max-running-requests 100: min(100, full // 2) = 100 (and 101 x 128 c128 state rows)
    found = plan(max_num_seqs=100)
    assert found.capacity.ladder[0].concurrency == 100
    assert "c128 state 12,928" in next(note for note in found.notes if "DSV4PoolConfigurator" in note)


def test_default_launch_settings():
    # SGLang 0.5.23 ServerArgs.resolve_once for Flash on an H200 at TP 8 (oracle, tests/oracle/sglang_adapter.py):
    # mem_fraction_static 0.897 (cuda_graph_hook disable_breakable_cudagraph_if_incompatible turns DeepSeek-V4's
    # prefill graphs off, so their reserve is not taken), kv_cache_dtype fp8_e4m3 (_deepseek_v4_kv_cache_dtype),
    # page_size 256, chunked_prefill_size 8192
    found = kvplan.estimate(str(FLASH), gpu="h200", engine="sglang", tensor_parallel_size=8)
    assert found.engine.gpu_memory_utilization == 0.897 and found.kv_dtype == "fp8_e4m3"
    assert (found.engine.block_size, found.engine.max_num_batched_tokens) == (256, 8_192)
    assert not any("656 B" in note for note in found.notes)  # the DSA note's latent, not DeepSeek-V4's


def test_attention_data_parallel():
    # --dp-size 8 --enable-dp-attention: each worker's max_running_requests 256 // 8 = 32, so the c128 states are
    # (33 x 128 + 129 = 4,353 -> 4,480 rows) x 4,096 x 20 = 367,001,600 B; full = int((42,949,672,960 -
    # 367,001,600) / 7,086.75) = 6,008,772 -> 6,008,576, swa 600,832. SGLang 0.5.23 (oracle): full 6,008,576,
    # swa 600,832, c128_state 4,224, max_running_requests 32; the default launch's fraction 0.769, chunk 1,024
    found = plan(attention_data_parallel_size=8)
    assert [pool.tokens for pool in found.pools.pools] == [6_008_576, 600_832]
    assert found.capacity.ladder[0].concurrency == 32
    assert "c128 state 4,224" in next(note for note in found.notes if "DSV4PoolConfigurator" in note)
    default = kvplan.estimate(str(FLASH), gpu="h200", engine="sglang", tensor_parallel_size=8,
                              attention_data_parallel_size=8)
    assert (default.engine.gpu_memory_utilization, default.engine.max_num_batched_tokens) == (0.769, 1_024)


@pytest.mark.parametrize(("extra", "match"), [
    ({"speculative_config": {"method": "mtp", "num_speculative_tokens": 1}}, "speculative draft"),
    ({"max_total_tokens": 100_000}, "max-total-tokens"),
    ({"pipeline_parallel_size": 2}, "pipeline parallelism"),
    ({"kv_cache_dtype": "bfloat16"}, "fp8 FlashMLA rows only"),
    ({"engine_version": "0.5.22"}, "SGLang 0.5.22 is not read"),
], ids=["mtp", "max-total-tokens", "pp", "bf16", "older-release"])
def test_other_paths_are_refused_by_name(extra, match):
    with pytest.raises(KvplanError, match=match):
        plan(**extra)


@pytest.mark.parametrize("flags", [["--dsv4-attn-backend", "trtllm"], ["--enable-hisparse"],
                                   ["--enable-encoder-swa-bounded-replay"]], ids=["trtllm", "hisparse", "replay"])
def test_pool_modes_of_a_pasted_command_are_refused_by_name(flags):
    # each takes DSV4PoolConfigurator off the default path: trtllm's 512 B uniform-FP8 rows (kv_bytes =
    # attn_head_dim), HiSparse's c4 shrink factor, encoder replay's request windows
    dep = Deployment.from_vllm_args(["python", "-m", "sglang.launch_server", "--model-path", str(FLASH), "--tp", "8",
                                     *flags])
    with pytest.raises(KvplanError, match=f"pools with {flags[0]} are not modelled"):
        estimates(replace(dep, gpu="h200"))
