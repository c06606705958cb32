"""Issue 22: TensorRT-LLM's DeepSeek-V4 with an FP8 KV cache on SM 90, planned instead of refused. KvCacheCreator
(_torch/pyexecutor/_util.py@00043967 configure_kv_cache_capacity) takes a context-MLA workspace reserve from the
free memory's share before it becomes KVCacheManagerV2's quota, min(w x L_cap, share x w / (k + w)), by hand:

- w (TrtllmAttention.runtime_workspace_bytes_per_token, trtllm.py@017aa0ca -> AttentionOp::
  contextMlaWorkspaceBytesPerToken): an FP8 cache on SM 90 is not the sparse path (SM 100/103/107), so w = heads /
  TP x (qk_rope_head_dim + qk_nope_head_dim + v_head_dim) fp8 bytes. DeepSeek-V4's config is TensorRT-LLM's own
  DeepseekV4Config (_torch/configs/deepseekv4.py@17371747, registered for deepseek_v4): qk_rope_head_dim 64 (the
  checkpoint's), qk_nope_head_dim 448 (the class default; the checkpoint names none), v_head_dim 512 (the
  checkpoint's head_dim, which the class takes as v_head_dim). Flash, 64 heads at TP 8: 8 x (64 + 448 + 512) = 8,192.
- k (DeepseekV4CacheManager.get_cache_size_per_token, cache_manager.py@015279e0 _estimate_bytes_per_token, FP8 rows
  of 1 B; compressed buffers over their ratio, compressor states fp32): Flash's 43 layers are 2 of ratio 1, 21 of 4,
  20 of 128; every layer a 512 B sliding-window row (43 x 512 = 22,016); a ratio-4 layer 512 / 4 = 128 (latent) +
  (128 + 4) / 4 = 33 (indexer key) + 2 x 2 x 512 x 4 = 8,192 (compressor kv, score) + 2 x 2 x 128 x 4 = 2,048
  (indexer states): 10,401; a ratio-128 layer 512 / 128 = 4 + 2 x 512 x 4 = 4,096: 4,100.
  k = 22,016 + 21 x 10,401 + 20 x 4,100 = 322,437.
- L_cap (get_mla_context_workspace_kv_len_cap, block reuse on and chunked prefill off, TensorRT-LLM's defaults):
  min(max_batch_size 2,048, max_num_tokens 8,192) x max_seq_len 1,048,576 = 2,147,483,648 tokens; w x L_cap is
  about 1.8e13 B, far above the share, so the reserve is share x w / (k + w).
"""

from __future__ import annotations

from pathlib import Path

from conftest import cdiv as _ceil

import kvplan

FLASH = Path(__file__).parent / "fixtures" / "configs" / "frontier" / "deepseek-ai__DeepSeek-V4-Flash"
FRACTION = 0.8999999761581421  # KvCacheConfig's 0.9 as a C++ float
GRAIN = 32 << 20
W, K = 8 * (64 + 448 + 512), 43 * 512 + 21 * (128 + 33 + 8192 + 2048) + 20 * (4 + 4096)


def _fp8(**flags) -> dict:
    return kvplan.estimate(str(FLASH), gpu="h200", tensor_parallel_size=8, engine="trtllm", kv_cache_dtype="fp8",
                           **flags).to_dict()


def test_the_rates_by_hand():
    assert (W, K) == (8_192, 322_437)
    assert 8_192 * 2_048 * 1_048_576 > 116_299_228_988  # w x L_cap: the split wins


def test_fp8_on_hopper_quota_is_the_share_less_the_workspace():
    plan = _fp8()
    memory = plan["memory"]
    used = memory["weights_bytes"] + memory["activation_bytes"] + memory["non_torch_bytes"]
    share = int((memory["total_bytes"] - used - memory["cuda_graph_bytes"]) * FRACTION)
    # the share is BF16's (tests/test_trtllm_deepseek_v4.py): the KV dtype does not change what is used before it
    assert share == 116_299_228_988
    # int(share - share x w / (k + w)) = share x k // (k + w) = 116,299,228,988 x 322,437 // 330,629
    assert memory["kv_cache_bytes"] == share * K // (K + W) == 113_417_681_138
    note = next(n for n in plan["notes"] if "KVCacheManagerV2's GPU quota" in n)
    assert "context-MLA workspace reserve" in note and "w = 8,192 B a token" in note
    assert "k = 322,437 B a token" in note and "L_cap = 2,147,483,648 tokens" in note


def test_fp8_on_hopper_pools_by_hand():
    # FP8 rows halve the latents of tests/test_trtllm_deepseek_v4.py's BF16 pools (the fp32 states stay): a slot of
    # window 128 is 40 x 262,144 + 43 x 65,536 B, of window 8 42 x 524,288 + 42 x 131,072 B, of the compressed group
    # 21 x 16,384 + 21 x 4,224 + 20 x 512 B. 113,417,681,138 B in 32 MiB grains (2 MiB << min(4, int(log2(105.6))):
    # ceil(/ 2^25) = 3,381; the windowed groups pinned at their 64-block minimum take ceil(64 x 10,485,760 / 2^25)
    # + ceil(64 x 2,818,048 / 2^25) + ceil(64 x 22,020,096 / 2^25) + ceil(64 x 5,505,024 / 2^25) = 20 + 6 + 42 + 11
    # = 79 grains; the compressed group the most n with its pools in the other 3,302.
    plan = _fp8()
    grains = _ceil(113_417_681_138, GRAIN)
    windowed = (_ceil(64 * 10_485_760, GRAIN) + _ceil(64 * 2_818_048, GRAIN) + _ceil(64 * 22_020_096, GRAIN)
                + _ceil(64 * 5_505_024, GRAIN))
    assert (grains, windowed) == (3_381, 79)

    def compressed(n: int) -> int:
        return _ceil(n * 344_064, GRAIN) + _ceil(n * 88_704, GRAIN) + _ceil(n * 10_240, GRAIN)

    assert compressed(250_039) == 3_302 == grains - windowed < compressed(250_040)
    assert plan["capacity"]["num_blocks"] == 250_039
    assert plan["capacity"]["tokens"] == 250_039 * 128 == 32_004_992
    pools = next(n for n in plan["notes"] if n.startswith("DeepSeek-V4 (TensorRT-LLM"))
    assert "window 128 64 blocks (851,443,712 B: 40 x 262,144 B + 43 x 65,536 B)" in pools


def test_bytes_below_the_reduced_share_are_the_quota():
    # KvCacheCreator keeps min(share - reserve, max_gpu_total_bytes): 40 GiB is under 113,417,681,138 B
    assert _fp8(kv_cache_memory_bytes=40 << 30)["memory"]["kv_cache_bytes"] == 40 << 30
    # 110 GiB (118,111,600,640 B) is above it: the reduced share is the quota
    assert _fp8(kv_cache_memory_bytes=110 << 30)["memory"]["kv_cache_bytes"] == 113_417_681_138


def test_the_cap_wins_where_it_is_smaller():
    # max_seq_len 4,096 and max_batch_size 8: L_cap = min(8, 8,192) x 4,096 = 32,768 tokens, w x L_cap = 268,435,456
    # B, under the split share x w / (k + w) (about 2.9e9 B here): the reserve is w x L_cap
    plan = _fp8(max_model_len=4096, max_num_seqs=8)
    memory = plan["memory"]
    used = memory["weights_bytes"] + memory["activation_bytes"] + memory["non_torch_bytes"]
    share = int((memory["total_bytes"] - used - memory["cuda_graph_bytes"]) * FRACTION)
    assert W * 8 * 4096 == 268_435_456 < share * W // (K + W)
    assert memory["kv_cache_bytes"] == share - 268_435_456
