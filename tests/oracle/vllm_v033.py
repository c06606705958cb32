"""vLLM 0.33+ (scratch venv only): grouping moved to v1/core/kv_cache_planning (get_global_kv_cache_groups, then
get_kv_cache_configs with the groups); the rest as v1/engine/core.py _initialize_kv_caches: the scheduler's config,
the smallest prefix-cacheable group block size, kv_cache_utils.update_kv_cache_capacity (which logs)."""

from __future__ import annotations

from typing import Any

SOURCE = "vllm.v1.core.kv_cache_planning.get_kv_cache_configs"


def plan(config: Any, specs: dict[str, Any], memory: int) -> dict[str, Any]:
    from vllm.v1.attention.backends.utils import resolve_kv_cache_layout
    from vllm.v1.core import kv_cache_planning, kv_cache_utils

    resolve_kv_cache_layout(config, [["NHD"]], specs.values())
    groups = kv_cache_planning.get_global_kv_cache_groups(config, [specs])
    configs = kv_cache_planning.get_kv_cache_configs(config, [specs], [memory], groups)
    scheduler = kv_cache_utils.generate_scheduler_kv_cache_config(configs)
    kv_groups = scheduler.kv_cache_groups
    config.cache_config.num_gpu_blocks = scheduler.num_blocks
    cacheable = [g.kv_cache_spec.block_size for g in kv_groups if getattr(g.kv_cache_spec, "prefix_cacheable", True)]
    config.cache_config.block_size = min(cacheable or [g.kv_cache_spec.block_size for g in kv_groups])
    kv_cache_utils.update_kv_cache_capacity(config, scheduler)
    found = {"num_blocks": scheduler.num_blocks, "groups": len(kv_groups), "block_size": config.cache_config.block_size}
    return found | stored(config)


def stored(config: Any) -> dict[str, Any]:
    """What update_kv_cache_capacity stored (0.29+), as it logs it; the log line, when caught, says the same."""
    tokens = getattr(config.cache_config, "kv_cache_size_tokens", None)
    concurrency = getattr(config.cache_config, "kv_cache_max_concurrency", None)
    if tokens is None or concurrency is None:
        return {}
    return {"tokens": int(tokens), "max_concurrency": float(f"{concurrency:.2f}")}
