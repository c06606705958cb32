"""TensorRT-LLM's DeepSeek-V4 pools (kvplan/engines/trtllm/deepseek_v4.py), derived by hand from the stored
NVIDIA/TensorRT-LLM sources: DeepseekV4CacheManager._build_cache_config (cache_manager.py@015279e0), get_token_bytes
(sparse/deepseek_v4/deepseek_v4.py@03c233a7), create_storage_config (kv_cache_manager_v2/_storage/_config.py@1148a82f),
AttnLifeCycle.get_stale_range (_life_cycle_registry.py@1548780d), StorageManager (_storage_manager.py@00f6bd61) and
ratio_to_slot_count_list (_storage/_core.py@02e3bf9a).

DeepSeek-V4-Flash's config.json: 43 layers, compress_ratios 0, 0, then 4 and 128 alternating (2 x ratio 0 -> 1,
21 x 4, 20 x 128), head_dim 512, index_head_dim 128, sliding_window 128. At TP 8 every rank holds every layer
(one latent head). kv_cache_dtype auto: BF16 (2 B); 128-token blocks.

Buffers a block, by life cycle (window):
- window 128: 43 sliding windows of 512 x 2 x 128 = 131,072 B; 20 x 2 ratio-128 compressor states (kv, score) of
  512 x 4 x 128 = 262,144 B. Pools, largest first: 40 x 262,144 = 10,485,760 and 43 x 131,072 = 5,636,096 B.
- compressed (no window): 21 ratio-4 latents of 512 x 2 x 128 / 4 = 32,768 B; 21 indexer keys of (128 + 128 / 128
  x 4) x 32 = 4,224 B; 20 ratio-128 latents of 512 x 2 x 1 = 1,024 B: 688,128, 88,704 and 20,480 B a slot.
- window 2 x 4 = 8: 42 ratio-4 compressor states of 2 x 512 x 4 x 128 = 524,288 B and 42 indexer states of 2 x 128
  x 4 x 128 = 131,072 B: 22,020,096 and 5,505,024 B a slot.

A 40 GiB quota: the granularity is 2 MiB << min(4, int(log2(40))) = 32 MiB, 1,280 grains. The typical step (one
context of max_num_tokens 8,192 = 64 blocks, 2,047 decodes at max_seq_len 1,048,576 with history 1,048,575) holds
8,192 - (1,048,576 - 128) // 128 = 1 block of each decode in the window-128 group, 8,192 - 1,048,568 // 128 = 1 in
the window-8 one and all 8,192 in the compressed one: 2,111 / 16,769,088 / 2,111 slots, so the windowed groups' share
of the 1,280 grains is a few grains, under their minimum (the constraints: one 8,192-token context, 64 blocks), and
each is pinned at 64 slots: ceil(64 x 10,485,760 / 2^25) + ceil(64 x 5,636,096 / 2^25) = 20 + 11 = 31 grains and
ceil(64 x 22,020,096 / 2^25) + ceil(64 x 5,505,024 / 2^25) = 42 + 11 = 53 (65 slots would take 32 and 54). The
compressed group gets the other 1,280 - 31 - 53 = 1,196 grains: the most slots n with ceil(21n / 1024) +
ceil(693n / 262144) + ceil(5n / 8192) <= 1,196 is 50,310 (1,032 + 133 + 31; 50,311 takes 1,197).
"""

from __future__ import annotations

from pathlib import Path

import pytest

import kvplan
from kvplan.engines.trtllm import deepseek_v4
from kvplan.errors import KvplanError
from kvplan.models.compressed_attention import CompressedSparseAttention
from kvplan.models.sources import resolve
from tests.conftest import run_cli

FLASH = Path(__file__).parent / "fixtures" / "configs" / "frontier" / "deepseek-ai__DeepSeek-V4-Flash"
GRAIN = 32 << 20


def _plan(**flags):
    return kvplan.estimate(str(FLASH), gpu="h200", tensor_parallel_size=8, engine="trtllm",
                           kv_cache_memory_bytes=40 << 30, **flags)


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def test_flash_life_cycles_and_their_buffers():
    pools = _plan()
    plan = pools.to_dict()
    note = next(n for n in plan["notes"] if n.startswith("DeepSeek-V4 (TensorRT-LLM"))
    assert "window 128 64 blocks (1,031,798,784 B: 40 x 262,144 B + 43 x 131,072 B)" in note
    assert "compressed 50,310 blocks (40,112,766,720 B: 21 x 32,768 B + 21 x 4,224 B + 20 x 1,024 B)" in note
    assert "window 8 64 blocks (1,761,607,680 B: 42 x 524,288 B + 42 x 131,072 B)" in note
    assert "32 MiB grains, 128-token blocks" in note


def test_flash_40gib_slots_by_hand():
    # the windowed groups pinned at 64 slots (31 and 53 grains), the compressed one the largest n in 1,196 grains
    assert _ceil(64 * 10_485_760, GRAIN) + _ceil(64 * 5_636_096, GRAIN) == 31
    assert _ceil(64 * 22_020_096, GRAIN) + _ceil(64 * 5_505_024, GRAIN) == 53

    def compressed(n: int) -> int:
        return _ceil(n * 688_128, GRAIN) + _ceil(n * 88_704, GRAIN) + _ceil(n * 20_480, GRAIN)

    assert compressed(50_310) == 1_196 < compressed(50_311) == 1_197 == 1_280 - 31 - 53 + 1
    capacity = _plan().to_dict()["capacity"]
    # tokens: the compressed group's 50,310 blocks x 128; a 1,048,576-token request holds 8,192 of them and one block
    # of each windowed group, so 64 run at short contexts and 50,310 / 8,192 = 6.14 at max_seq_len
    assert capacity["num_blocks"] == 50_310
    assert capacity["tokens"] == 50_310 * 128 == 6_439_680
    assert capacity["max_concurrency"] == round(50_310 / 8_192, 2) == 6.14
    rungs = {rung["context"]: rung["kv_limited"] for rung in capacity["ladder"]}
    assert rungs[2048] == 64 and rungs[131_072] == 50_310 // 1_024 == 49 and rungs[1_048_576] == 6


def test_fp8_halves_the_latent_rows():
    # fp8: 512 x 1 B rows; the indexer key and the fp32 states stay. Window 128: 40 x 262,144 + 43 x 65,536 B;
    # compressed: 21 x 16,384 + 21 x 4,224 + 20 x 512 B a slot
    layers = [layer for layer in resolve(str(FLASH)).layers if isinstance(layer, CompressedSparseAttention)]
    cycles = deepseek_v4.life_cycles(layers, 128, 1)
    assert [(c.window, c.pools) for c in cycles] == [
        (128, ((40, 262_144), (43, 65_536))),
        (None, ((21, 16_384), (21, 4_224), (20, 512))),
        (8, ((42, 524_288), (42, 131_072)))]


def test_granularity_steps_by_gib():
    # 2 MiB << min(4, int(log2(quota / 1 GiB))): under 2 GiB 2 MiB; 8 GiB 16 MiB; 16 GiB and above 32 MiB
    assert deepseek_v4.granularity(1 << 30) == 2 << 20
    assert deepseek_v4.granularity(8 << 30) == 16 << 20
    assert deepseek_v4.granularity(40 << 30) == deepseek_v4.granularity(16 << 30) == 32 << 20


def test_stale_blocks_follow_the_window():
    # get_stale_range: blocks before (history + 1 - window) // 128 are dropped; a fresh context keeps all
    cycle = deepseek_v4.LifeCycle("w", 128, ())
    assert cycle.blocks(1_048_576, 1_048_575, 128) == 1
    assert cycle.blocks(8_192, 0, 128) == 64
    assert cycle.blocks(300, 299, 128) == 3 - (300 - 128) // 128 == 2


@pytest.mark.parametrize(("flags", "message"), [
    ({"block_size": 32}, "tokens_per_block 128 or 256"),
    ({"kv_cache_dtype": "nvfp4"}, "BF16 or FP8 rows"),
    ({"pipeline_parallel_size": 2}, "pipeline parallelism"),
    ({"speculative_config": {"method": "mtp", "num_speculative_tokens": 1}}, "with MTP"),
])
def test_unmodelled_paths_are_refused_by_name(flags, message):
    kwargs = {"kv_cache_memory_bytes": 40 << 30, **flags}
    with pytest.raises(KvplanError, match=message):
        kvplan.estimate(str(FLASH), gpu="h200", tensor_parallel_size=8, engine="trtllm", **kwargs)


# The default case: no --kv-cache-memory. KvCacheCreator (_util.py@00043967) sets max_gpu_total_bytes to
# _cal_max_memory = (total - peak + estimation pool) x free_gpu_memory_fraction, less the context-MLA workspace
# reserve, which needs w = TrtllmAttention.runtime_workspace_bytes_per_token > 0: 0 without an FP8 KV cache
# (trtllm.py@017aa0ca), so a BF16 pool reserves nothing and the quota is the share. The peak's parts are kvplan's
# PyTorch-backend estimate (tests/test_trtllm_*.py); the rule checked here is what the share becomes.
FRACTION = 0.8999999761581421  # KvCacheConfig's 0.9 as a C++ float


def _share(memory: dict) -> int:
    used = memory["weights_bytes"] + memory["activation_bytes"] + memory["non_torch_bytes"]
    return int((memory["total_bytes"] - used - memory["cuda_graph_bytes"]) * FRACTION)


def test_default_quota_is_the_free_share_without_a_reserve():
    plan = kvplan.estimate(str(FLASH), gpu="h200", tensor_parallel_size=8, engine="trtllm").to_dict()
    memory = plan["memory"]
    assert memory["kv_cache_bytes"] == _share(memory) == 116_299_228_988
    # 116,299,228,988 B in 32 MiB grains: ceil(/ 2^25) = 3,466; the windowed groups stay pinned at 64 blocks
    # (31 + 53 grains, as at 40 GiB), the compressed group takes the largest n in 3,466 - 84 = 3,382 grains
    grains = _ceil(116_299_228_988, GRAIN)
    assert grains == 3_466

    def compressed(n: int) -> int:
        return _ceil(n * 688_128, GRAIN) + _ceil(n * 88_704, GRAIN) + _ceil(n * 20_480, GRAIN)

    assert compressed(142_287) == 3_382 == grains - 31 - 53 < compressed(142_288)
    assert plan["capacity"]["num_blocks"] == 142_287
    assert plan["capacity"]["tokens"] == 142_287 * 128 == 18_212_736
    assert plan["capacity"]["max_concurrency"] == round(142_287 / 8_192, 2) == 17.37
    assert any(n.startswith("free_gpu_memory_fraction 0.9 of the memory free") and "(116,299,228,988 B)" in n
               for n in plan["notes"])


def _default(**flags) -> dict:
    return kvplan.estimate(str(FLASH), gpu="h200", tensor_parallel_size=8, engine="trtllm", **flags).to_dict()


def test_bytes_above_the_free_share_leave_the_share():
    # KvCacheCreator keeps min(share - reserve, max_gpu_total_bytes): 200 GiB on an H200 is cut to the share
    plan = _default(kv_cache_memory_bytes=200 << 30)
    assert plan["memory"]["kv_cache_bytes"] == _share(plan["memory"]) == 116_299_228_988
    assert plan["capacity"]["num_blocks"] == 142_287


def test_zero_bytes_are_none_given():
    # _util.py keeps max_gpu_total_bytes only where it is > 0: 0 B plans from the share, as none given
    assert _default(kv_cache_memory_bytes=0)["memory"]["kv_cache_bytes"] == 116_299_228_988


def test_fp8_on_blackwell_reserves_nothing():
    # SM 100: DeepSeek-V4's sparse MLA reads K/V from the paged cache (useSparseMLA), w = 0, the quota is the share
    plan = kvplan.estimate(str(FLASH), gpu="b200", tensor_parallel_size=8, engine="trtllm",
                           kv_cache_dtype="fp8").to_dict()
    assert plan["memory"]["kv_cache_bytes"] == _share(plan["memory"])


def test_fp8_on_hopper_with_block_reuse_plans_the_reserve(capsys):
    # SM 90, FP8, block reuse on and chunked prefill off (the defaults): w = heads / TP x (qk_rope + qk_nope +
    # v_head_dim) B and a reserve of min(w x L_cap, share x w / (k + w)), by hand in
    # tests/test_issue22_trtllm_fp8_sm90.py (113,417,681,138 B of the 116,299,228,988 B share); planned, exit 0
    code, out, _ = run_cli(capsys, "estimate", "--model", str(FLASH), "--gpu", "h200", "--engine", "trtllm",
                           "--tp-size", "8", "--kv-cache-dtype", "fp8", "--json")
    assert code == 0 and "context-MLA workspace reserve" in out and "113417681138" in out


def test_sm120_is_refused_by_name():
    # TrtllmAttention.__init__: DeepSeek-V4 sparse MLA on SM 120/121 requires kv_cache_config.dtype fp8_ds_mla
    with pytest.raises(KvplanError, match="fp8_ds_mla"):
        kvplan.estimate(str(FLASH), gpu="rtx-pro-6000-blackwell", tensor_parallel_size=8, engine="trtllm",
                        kv_cache_memory_bytes=40 << 30)


def test_a_huge_max_batch_size_is_counted_not_listed():
    # 2^31 - 1 requests in the typical step: each decode needs 8,192 compressed blocks (797,312 B a slot) against
    # one block of each windowed group (16,121,856 + 27,525,120 B), so the windowed shares stay under their 64-block
    # floors and the compressed group keeps its 50,310 blocks, as at 2,048; planned at once, not request by request
    plan = _plan(max_num_seqs=2**31 - 1).to_dict()
    assert plan["capacity"]["num_blocks"] == 50_310


def test_a_tiny_quota_is_raised_to_the_minimum_slots_and_the_note_says_so():
    # StorageManager._compute_slot_count_for_level (_storage_manager.py@b2dd2882) shares
    # max(_min_quota_for_level, round_up(quota, granularity)). A 1 GiB quota: 2 MiB << min(4, int(log2(1))) = 2 MiB
    # grains (2,097,152 B). The minimum slots (the constraints): 64 in each windowed group (one 8,192-token context),
    # 1,048,576 / 128 = 8,192 in the compressed one (one decode at max_seq_len). Grains, each pool rounded up:
    # window 128: 64 x 10,485,760 / 2 MiB = 320, 64 x 5,636,096 / 2 MiB = 172; compressed: 8,192 x 688,128 / 2 MiB
    # = 2,688, ceil(8,192 x 88,704 / 2 MiB) = ceil(346.5) = 347, 8,192 x 20,480 / 2 MiB = 80; window 8:
    # 64 x 22,020,096 / 2 MiB = 672, 64 x 5,505,024 / 2 MiB = 168. 492 + 3,115 + 840 = 4,447 grains = 9,326,034,944 B.
    assert 320 + 172 + 2_688 + 347 + 80 + 672 + 168 == 4_447
    plan = kvplan.estimate(str(FLASH), gpu="h200", tensor_parallel_size=8, engine="trtllm",
                           kv_cache_memory_bytes=1 << 30).to_dict()
    notes = plan["notes"]
    # the memory panel holds the bytes the pools take, not the quota given
    assert plan["memory"]["kv_cache_bytes"] == 4_447 * 2_097_152 == 9_326_034_944
    pools = next(n for n in notes if n.startswith("DeepSeek-V4 (TensorRT-LLM"))
    assert "9,326,034,944 B, not the 1,073,741,824 B quota: StorageManager raises the quota" in pools
    assert "compressed 8,192 blocks" in pools
    quota = next(n for n in notes if n.startswith("--kv-cache-memory (1,073,741,824 B)"))
    assert "the pools hold 9,326,034,944 B" in quota
    # a quota above the minimum is shared as given (40 GiB: the note names the quota alone)
    assert "a 42,949,672,960 B quota in 32 MiB grains" in "".join(_plan().to_dict()["notes"])
