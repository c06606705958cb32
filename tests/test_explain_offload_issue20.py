"""Issue 20: explain reads the lines the offload tiers print and sets them against the plan. Each log line below is
written in the format string of the release that prints it (cited at each), with figures derived by hand:

- vLLM 0.33.0 v1/kv_offload/cpu/shared_offload_region.py: "Created mmap file %s (%.2f GB)", num_chunks x the
  aligned chunk / 1e9. Qwen2.5-7B, --kv-offloading-size 64: 74,898 chunks x 917,504 B = 68,719,214,592 B, "68.72 GB"
  (tests/test_kv_offload_issue20.py derives the chunks).
- lmcache 0.5.6 v1/cache_engine.py: "Creating LMCacheEngine with config: %s"; the dict form as LMCache/LMCache#2522
  printed it, the repr form as LMCache/LMCache#1088 did.
- SGLang 0.5.23 mem_cache/pool_host/base.py: "Allocating %s hierarchical KV host pool: %d tokens, %.2f GB host
  memory." Qwen2.5-7B, --hicache-size 100: 100e9 // 57,344 + 1 = 1,743,862 tokens, x 57,344 B = 100.00 GB."""

from __future__ import annotations

import pytest

from kvplan.explain import explain

ARGS = "(EngineCore_DP0 pid=339) INFO 12-01 10:00:00 [utils.py:300] non-default args: {'model': 'Qwen/Qwen2.5-7B', " \
       "'max_model_len': 32768"
KV = "(EngineCore_DP0 pid=339) INFO 12-01 10:00:10 [gpu_worker.py:400] Available KV cache memory: 54.12 GiB\n"


def _native(printed_gb: str) -> str:
    return (f"{ARGS}, 'kv_offloading_size': 64.0}}\n{KV}(EngineCore_DP0 pid=339) INFO 12-01 10:00:11 "
            f"[shared_offload_region.py:177] Created mmap file /dev/shm/vllm_offload_e1.mmap ({printed_gb} GB)\n")


def test_the_native_tiers_region_is_checked_against_the_plan():
    result = explain(_native("68.72"), gpu="h100")
    check = next(c for c in result.checks if c.figure == "offload_host_bytes")
    assert check.logged == 68_720_000_000 and check.low == check.high == 74_898 * 917_504 and check.matches
    assert not explain(_native("34.36"), gpu="h100").checks[0].matches  # half the region: not this plan's


@pytest.mark.parametrize("config", [
    "{'chunk_size': 512, 'local_cpu': True, 'max_local_cpu_size': 40.0, 'reserve_local_cpu_size': 0.0}",
    "LMCacheEngineConfig(chunk_size=512, local_cpu=True, max_local_cpu_size=40.0, local_disk=None)",
])
def test_lmcache_settings_in_the_log_size_the_planned_tier(config):
    # vLLM prints its kv_transfer_config as KVTransferConfig(...), no literal: the LMCache line says which connector
    log = (f"{ARGS}, 'kv_transfer_config': KVTransferConfig(kv_connector='LMCacheConnectorV1', kv_role='kv_both')}}\n"
           f"(EngineCore_DP0 pid=339) [2026-01-31 02:09:20,573] LMCache INFO: Creating LMCacheEngine with config: "
           f"{config} (cache_engine.py:109:lmcache.v1.cache_engine)\n{KV}")
    result = explain(log, gpu="h100")
    assert result.replay is not None
    # 40 x 2^30 // (57,344 x 512 = 29,360,128 B) = 1,462 chunks of 512 tokens
    assert result.replay.capacity.offload_tokens == 40 * 2**30 // (57_344 * 512) * 512 == 748_544
    assert result.replay.capacity.offload_host_bytes == 40 * 2**30


def test_sglangs_host_pool_line_is_read():
    log = "[2026-01-01 10:00:00 TP0] Allocating kv hierarchical KV host pool: 1743862 tokens, 100.00 GB host memory.\n"
    run = explain(log).run
    assert run.engine == "sglang"
    assert run.first("capacity", "offload_tokens") == 100 * 10**9 // 57_344 + 1 == 1_743_862
    assert run.first("capacity", "offload_rank_host_bytes") == 100 * 10**9
