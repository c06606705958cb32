"""vLLM 0.8-0.10 (scratch venv only): the engine core's KV planning as v1/engine/core.py _initialize_kv_caches
calls it: kv_cache_utils.get_kv_cache_config per worker, then unify_kv_cache_configs; the token count and the
concurrency are what get_kv_cache_config logs."""

from __future__ import annotations

from typing import Any

SOURCE = "vllm.v1.core.kv_cache_utils.get_kv_cache_config"


def plan(config: Any, specs: dict[str, Any], memory: int) -> dict[str, Any]:
    from vllm.v1.core import kv_cache_utils

    kv_config = kv_cache_utils.get_kv_cache_config(config, specs, memory)
    kv_cache_utils.unify_kv_cache_configs([kv_config])
    groups = kv_config.kv_cache_groups
    return {"num_blocks": kv_config.num_blocks, "groups": len(groups),
            "block_size": min(group.kv_cache_spec.block_size for group in groups)}
