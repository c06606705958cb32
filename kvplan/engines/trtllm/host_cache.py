"""TensorRT-LLM's host KV cache (kv_cache_config.host_cache_size): a secondary pool of blocks in host memory that
the primary (GPU) pool offloads to, as the PyTorch backend's KVCacheManager sizes it.

tensorrt_llm/_torch/pyexecutor/resource_manager.py KVCacheManager.calculate_max_num_blocks (as stored in 2026;
read_file id 56108752801): blocks_in_secondary_pool = host_cache_size // bytes per token // tokens_per_block
(int(host_cache_size / bytes per token / tokens_per_block) at d2a5560a: the same whole blocks). host_cache_size
is bytes (KvCacheConfig, llmapi/llm_args.py), given to every rank's manager: each rank pins its own. The GPU pool
is unchanged. kvplan carries it in the Deployment's kv_offloading_size, in GiB per rank (options.py converts)."""

from __future__ import annotations

from kvplan.capacity import PoolLayout
from kvplan.deployment import Deployment
from kvplan.errors import KvplanError
from kvplan.units import GiB


def host_tier(dep: Deployment, layout: PoolLayout, split: bool) -> tuple[int, list[str]]:
    """The secondary pool's tokens on each rank and the panel's note; (0, []) without a host cache."""
    if not dep.kv_offloading_size:
        return 0, []
    if split or layout.num_groups != 1:
        raise KvplanError("TensorRT-LLM's host cache is modelled for one KV pool (not per-window or Mamba pools)",
                          dep.where("kv_offloading_size"))
    size = int(dep.kv_offloading_size * GiB)
    per_token = layout.bytes_per_token
    tokens = size // per_token // layout.block_size * layout.block_size
    ranks = dep.tensor_parallel_size * dep.pipeline_parallel_size
    host = tokens * per_token * ranks
    return tokens, [f"host KV cache (kv_cache_config.host_cache_size {size:,} B per rank): {tokens:,} tokens of "
                    f"{per_token:,} B in {tokens // layout.block_size:,} blocks on each rank; the host needs "
                    f"{host / GiB:.2f} GiB pinned for the {ranks} rank(s)"]
