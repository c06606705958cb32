"""SGLang's hierarchical cache (--enable-hierarchical-cache): a host KV pool beside the GPU pool, as the 0.5.23
wheel sizes it.

arg_groups/hicache_hook.py: --hicache-ratio defaults to 2.0 (1.2 in buffer_only mode, not modelled) unless
--hicache-size (GB, 10^9 B) is given. mem_cache/pool_host/base.py HostKVCache: with a size, int(hicache_size x 1e9
// size_per_token) tokens, else int(device pool tokens x ratio); then whole pages plus one padding page
(page_num = size // page_size + 1). pool_host/mha.py get_size_per_token: (K + V head dims) x KV heads x layers x
dtype bytes of the rank. Each TP rank holds its own host pool, so the host needs that many bytes per rank. The
GPU pool is unchanged."""

from __future__ import annotations

from kvplan.capacity import PoolLayout
from kvplan.deployment import Deployment
from kvplan.errors import KvplanError
from kvplan.units import GiB

DEFAULT_RATIO = 2.0


def host_tier(dep: Deployment, layout: PoolLayout, device_tokens: int, split: bool) -> tuple[int, list[str]]:
    """The host pool's tokens and the panel's note; (0, []) without the hierarchical cache."""
    if not dep.enable_hierarchical_cache:
        return 0, []
    if split or layout.num_groups != 1 or not layout.single_spec:
        raise KvplanError("the hierarchical cache is modelled for one full-attention KV pool (not SWA, Mamba or "
                          "mixed pools)", dep.where("enable_hierarchical_cache"))
    per_token = layout.bytes_per_token
    if dep.hicache_size:
        size = int(dep.hicache_size * 1e9 // per_token)
        how = f"--hicache-size {dep.hicache_size} GB"
    else:
        ratio = dep.hicache_ratio or DEFAULT_RATIO
        size = int(device_tokens * ratio)
        how = f"--hicache-ratio {ratio:g} x {device_tokens:,} device tokens"
    pages = size // layout.block_size + 1
    tokens = pages * layout.block_size
    ranks = dep.tensor_parallel_size * dep.pipeline_parallel_size
    host = tokens * per_token * ranks
    return tokens, [f"host KV tier (SGLang hierarchical cache, {how}): {tokens:,} tokens of {per_token:,} B per rank; "
                    f"the host needs {host / GiB:.2f} GiB for the {ranks} rank(s)"]
