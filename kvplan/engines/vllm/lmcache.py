"""LMCache inside vLLM's workers (--kv-transfer-config '{"kv_connector": "LMCacheConnectorV1", ...}'): the CPU tier
each worker pins, as the lmcache 0.5.6 wheel sizes it.

Its settings (v1/config.py _CONFIG_DEFINITIONS): max_local_cpu_size 5.0 GiB and chunk_size 256 tokens by default,
read from LMCACHE_MAX_LOCAL_CPU_SIZE / LMCACHE_CHUNK_SIZE (integration/vllm/utils.py lmcache_get_or_create_config,
from_env; an LMCACHE_CONFIG_FILE is not read by kvplan), then overridden by the connector's extra config keys
"lmcache.max_local_cpu_size" and "lmcache.chunk_size" (vllm_v1_adapter.py _apply_extra_config). Every worker builds
its own engine (vllm_service_factory.py: kv_shape = (layers of the stage, 2 or 1 for MLA, chunk_size, KV heads
per rank, head size) in the KV cache dtype), whose LocalCPUBackend (v1/storage_backend/__init__.py, created when
max_local_cpu_size > 0) pins int(max_local_cpu_size x 1024^3) bytes (local_cpu_backend.py initialize_allocator);
the allocator aligns every chunk to 4,096 B (memory_management.py AddressManager.ALIGN_BYTES), and only full
chunks are stored (save_unfull_chunk False). So a worker holds that // aligned chunk bytes chunks of chunk_size
tokens; the host pins the size once per worker. vLLM 0.33.0's --kv-offloading-size never reaches this connector
(config/vllm.py _post_init_kv_transfer_config replaces it with its own)."""

from __future__ import annotations

from typing import Any

from kvplan.capacity import PoolLayout
from kvplan.deployment import Deployment
from kvplan.engines.vllm.tier import CpuTier
from kvplan.errors import KvplanError
from kvplan.units import GiB

DEFAULT_CPU_GIB = 5.0
DEFAULT_CHUNK = 256
ALIGN = 4096
SETTING_MAXIMUM = 2**20  # the lmcache_* knobs' bound


def lmcache_tier(dep: Deployment, layout: PoolLayout) -> CpuTier:
    where = dep.where("kv_transfer_config")
    if dep.pipeline_parallel_size > 1:
        raise KvplanError("LMCache's CPU tier is modelled without pipeline parallelism (each stage's workers hold "
                          "different layers)", where)
    if not layout.single_spec:
        raise KvplanError("LMCache's CPU tier is modelled for one KV spec on every layer (not sliding-window, "
                          "Mamba, draft or mixed pools)", where)
    if layout.groups[0].layer.latent_cache and dep.tensor_parallel_size > 1:
        raise KvplanError("LMCache's save_only_first_rank for MLA over TP ranks is not modelled", where)
    extra = (dep.kv_transfer_config or {}).get("kv_connector_extra_config") or {}
    if not isinstance(extra, dict):
        raise KvplanError(f"kv_connector_extra_config: expected a JSON object, got {extra!r:.40}", where)
    size = _setting(extra, "max_local_cpu_size", float, dep.lmcache_max_local_cpu_size, DEFAULT_CPU_GIB, where, 0)
    chunk_tokens = _setting(extra, "chunk_size", int, dep.lmcache_chunk_size, DEFAULT_CHUNK, where, 1)
    workers = dep.tensor_parallel_size
    if size <= 0:
        return CpuTier(notes=["LMCache (LMCacheConnectorV1): max_local_cpu_size 0, no CPU tier"])
    pinned = int(size * 1024**3)
    chunk = -(-layout.bytes_per_token * chunk_tokens // ALIGN) * ALIGN
    chunks = pinned // chunk
    tokens = chunks * chunk_tokens
    return CpuTier(tokens, pinned * workers, [
        f"CPU KV tier (LMCache, LMCacheConnectorV1, max_local_cpu_size {size:g} GiB per worker): {chunks:,} chunks "
        f"of {chunk_tokens} tokens ({chunk:,} B each) = {tokens:,} tokens of prefix cache; the host needs "
        f"{pinned * workers / GiB:.2f} GiB pinned for the {workers} worker(s)"])


def _setting(extra: dict[str, Any], key: str, kind: type, env_value: Any, default: Any, where: str,
             minimum: int) -> Any:
    """The connector's "lmcache.<key>" if given, else the LMCACHE_ environment variable's, else LMCache's default."""
    value = extra.get(f"lmcache.{key}")
    if value is None:
        return default if env_value is None else env_value
    try:
        number = kind(value)
        exact = number == float(value)
    except (TypeError, ValueError):
        raise KvplanError(f'kv_connector_extra_config "lmcache.{key}": expected a number, got {value!r:.40}',
                          where) from None
    if not exact or not minimum <= number <= SETTING_MAXIMUM:
        what = "an integer" if kind is int else "a number"
        raise KvplanError(f'kv_connector_extra_config "lmcache.{key}" must be {what} from {minimum} to '
                          f'{SETTING_MAXIMUM:,}, got {value!r:.40}', where)
    return number
