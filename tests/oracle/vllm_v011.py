"""vLLM 0.11-0.32 (scratch venv only): v1/engine/core.py _initialize_kv_caches' sequence: from 0.29
resolve_kv_cache_layout first, kv_cache_utils.get_kv_cache_configs over the workers (it logs the token count and
the concurrency through 0.28), generate_scheduler_kv_cache_config, the smallest group block size as
cache_config.block_size, and from 0.29 update_kv_cache_capacity (which logs them there)."""

from __future__ import annotations

from typing import Any

SOURCE = "vllm.v1.core.kv_cache_utils.get_kv_cache_configs"


def plan(config: Any, specs: dict[str, Any], memory: int) -> dict[str, Any]:
    from vllm.v1.attention.backends import utils
    from vllm.v1.core import kv_cache_utils

    if hasattr(utils, "resolve_kv_cache_layout"):  # 0.29+: the engine core resolves the layout first
        layout = utils.resolve_kv_cache_layout(config, [["NHD"]], specs.values())
        if hasattr(utils, "record_kv_cache_layout"):  # what the workers' set_kv_cache_layout does
            utils.record_kv_cache_layout(config.cache_config, layout.name)
    configs = kv_cache_utils.get_kv_cache_configs(config, [specs], [memory])
    scheduler = kv_cache_utils.generate_scheduler_kv_cache_config(configs)
    groups = scheduler.kv_cache_groups
    config.cache_config.num_gpu_blocks = scheduler.num_blocks
    config.cache_config.block_size = min(group.kv_cache_spec.block_size for group in groups)
    if hasattr(kv_cache_utils, "update_kv_cache_capacity"):
        kv_cache_utils.update_kv_cache_capacity(config, scheduler)
    found = {"num_blocks": scheduler.num_blocks, "groups": len(groups), "block_size": config.cache_config.block_size}
    return found | stored(config)


def stored(config: Any) -> dict[str, Any]:
    """What update_kv_cache_capacity stored (0.29+), as it logs it; the log line, when caught, says the same."""
    tokens = getattr(config.cache_config, "kv_cache_size_tokens", None)
    concurrency = getattr(config.cache_config, "kv_cache_max_concurrency", None)
    if tokens is None or concurrency is None:
        return {}
    return {"tokens": int(tokens), "max_concurrency": float(f"{concurrency:.2f}")}
