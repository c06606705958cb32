"""vLLM's CPU KV tier (--kv-offloading-size, --kv-offloading-backend), as the 0.33.0 wheel sizes it.

config/vllm.py _post_init_kv_transfer_config: the native backend is the OffloadingConnector with cpu_bytes_to_use
= kv_offloading_size x 2^30 (GiB, summed over the TP ranks, config/cache.py); lmcache hands the tier to the
LMCache server process and passes no size. v1/kv_offload/cpu/spec.py CPUOffloadingSpec: a CPU chunk holds
blocks_per_chunk (1 by default) GPU blocks of every worker (worker_kv_bytes_per_block, one block across all the
worker's layers: offloading/config.py, from the single KV tensor v1/core/kv_cache_planning.py lays out), rounded up
to the host page (BLOCK_SIZE_ALIGNMENT = mmap.PAGESIZE, 4,096 B); num_chunks = cpu_bytes_to_use // that. The GPU
pool is what the release computes without the tier; the CPU tier adds num_chunks x block_size tokens of prefix
cache in pinned host memory."""

from __future__ import annotations

from kvplan.capacity import PoolLayout
from kvplan.deployment import Deployment
from kvplan.errors import KvplanError
from kvplan.units import GiB

HOST_PAGE = 4096  # mmap.PAGESIZE on x86-64 and most aarch64 Linux hosts


def cpu_tier(dep: Deployment, layout: PoolLayout) -> tuple[int, list[str]]:
    """Tokens the CPU tier holds and the panel's note; (0, []) without --kv-offloading-size."""
    if dep.kv_offloading_size is None:
        return 0, []
    if dep.kv_offloading_backend == "lmcache":
        return 0, ["KV offloading through LMCache (LMCacheMPConnector): the CPU tier lives in the LMCache server "
                   "process and is sized by its own configuration, not --kv-offloading-size; no CPU tokens counted"]
    if dep.pipeline_parallel_size > 1:
        raise KvplanError("the CPU KV tier is modelled without pipeline parallelism (each stage's workers hold "
                          "different layers)", dep.where("kv_offloading_size"))
    workers = dep.tensor_parallel_size
    chunk = -(-layout.block_bytes * workers // HOST_PAGE) * HOST_PAGE
    cpu_bytes = int(dep.kv_offloading_size * (1 << 30))
    chunks = cpu_bytes // chunk
    tokens = chunks * layout.block_size
    return tokens, [f"CPU KV tier (--kv-offloading-size {dep.kv_offloading_size:g}, OffloadingConnector): "
                    f"{chunks:,} blocks of {chunk:,} B over the {workers} TP rank(s) = {tokens:,} tokens of prefix "
                    f"cache in pinned host memory; the host needs {chunks * chunk / GiB:.2f} GiB free"]
