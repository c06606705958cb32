"""vLLM's CPU KV tier (--kv-offloading-size, --kv-offloading-backend, or a --kv-transfer-config connector), as the
0.33.0 wheel sizes it.

config/vllm.py _post_init_kv_transfer_config: the native backend is the OffloadingConnector with cpu_bytes_to_use
= kv_offloading_size x 2^30 (GiB, summed over the TP ranks, config/cache.py); lmcache hands the tier to the
LMCache server process (LMCacheMPConnector) and passes no size. Either replaces the connector a
--kv-transfer-config named. v1/kv_offload/cpu/spec.py CPUOffloadingSpec: a CPU chunk holds blocks_per_chunk (1 by
default) GPU blocks of every worker (worker_kv_bytes_per_block, one block across all the worker's layers:
offloading/config.py, from the single KV tensor v1/core/kv_cache_planning.py lays out; one copy for an MLA latent
over TP, replicated_layout), rounded up to the host page
(BLOCK_SIZE_ALIGNMENT = mmap.PAGESIZE, 4,096 B); num_chunks = cpu_bytes_to_use // that. The GPU pool is what the
release computes without the tier; the CPU tier adds num_chunks x block_size tokens of prefix cache in pinned host
memory. A --kv-transfer-config with LMCacheConnectorV1 runs LMCache inside each worker (engines/vllm/lmcache.py)."""

from __future__ import annotations

from kvplan.capacity import PoolLayout
from kvplan.deployment import Deployment
from kvplan.engines.vllm.lmcache import lmcache_tier
from kvplan.engines.vllm.tier import CpuTier
from kvplan.errors import KvplanError
from kvplan.units import GiB

HOST_PAGE = 4096  # mmap.PAGESIZE on x86-64 and most aarch64 Linux hosts
LMCACHE_MP_NOTE = ("the CPU tier lives in the LMCache server process and is sized by its own configuration, not "
                   "--kv-offloading-size; no CPU tokens counted")


def cpu_tier(dep: Deployment, layout: PoolLayout) -> CpuTier:
    """The CPU tier's tokens, the host memory it pins and the panel's note; empty without one."""
    if dep.kv_offloading_size is not None:
        if dep.kv_offloading_backend == "lmcache":
            return CpuTier(notes=[f"KV offloading through LMCache (LMCacheMPConnector): {LMCACHE_MP_NOTE}"])
        return _native(dep, layout)
    connector = (dep.kv_transfer_config or {}).get("kv_connector")
    if connector == "LMCacheConnectorV1":
        return lmcache_tier(dep, layout)
    if connector == "LMCacheMPConnector":
        return CpuTier(notes=[f"--kv-transfer-config LMCacheMPConnector: {LMCACHE_MP_NOTE}"])
    if connector:
        return CpuTier(notes=[f"--kv-transfer-config {connector}: the KV connector's own buffers are not modelled"])
    return CpuTier()


def _native(dep: Deployment, layout: PoolLayout) -> CpuTier:
    assert dep.kv_offloading_size is not None
    if dep.pipeline_parallel_size > 1:
        raise KvplanError("the CPU KV tier is modelled without pipeline parallelism (each stage's workers hold "
                          "different layers)", dep.where("kv_offloading_size"))
    # offloading/config.py: an MLA latent, whole on every TP rank, is kept once (replicated_layout, in the shared
    # /dev/shm region of a single-node CUDA deployment)
    replicated = bool(layout.groups) and layout.groups[0].layer.latent_cache and dep.tensor_parallel_size > 1
    workers = 1 if replicated else dep.tensor_parallel_size
    chunk = -(-layout.block_bytes * workers // HOST_PAGE) * HOST_PAGE
    cpu_bytes = int(dep.kv_offloading_size * (1 << 30))
    chunks = cpu_bytes // chunk
    tokens = chunks * layout.block_size
    how = "kept once for" if replicated else "over"
    return CpuTier(tokens, chunks * chunk, [
        f"CPU KV tier (--kv-offloading-size {dep.kv_offloading_size:g}, OffloadingConnector): {chunks:,} blocks of "
        f"{chunk:,} B {how} the {dep.tensor_parallel_size} TP rank(s) = {tokens:,} tokens of prefix cache in pinned "
        f"host memory; the host needs {chunks * chunk / GiB:.2f} GiB free"])

