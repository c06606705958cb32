"""Mamba / linear-attention state on TensorRT-LLM's PyTorch backend: held for every request max_batch_size allows
before any token of KV is counted.

tensorrt_llm/_torch/pyexecutor/_util.py (as stored in 2026, read_file id 54555926407) routes a hybrid model to
CppMambaHybridCacheManager by default, which keeps the states inside the KV pool and prices the pool as
bytes = slope x tokens + intercept (kv_cache/mamba_cache_manager.py get_cache_size_per_token ->
_estimate_mamba_hybrid_cache_cost, read_file ids 56688095080 and 68572734154): the slope is the attention layers'
KV per token, the intercept (max_batch_size x pp + 1 CUDA-graph dummy slot) x the stage's states per rank (conv
(conv_kernel - 1) x conv_dim / tp in the model dtype, SSM heads / tp x head_dim x state in mamba_ssm_cache_dtype,
'auto' being the config's own). CacheCost.tokens_for_budget then gives (memory - intercept) // slope tokens. The
legacy MambaCacheManager (TRTLLM_USE_PY_MAMBA, disaggregated serving) allocates the same max_batch_size + 1
slots beside the pool before the profiling run. Prefix-caching snapshots (mamba_state_config) are not modelled."""

from __future__ import annotations

from kvplan.capacity import pipeline_stages
from kvplan.engines.base import PlanInput
from kvplan.models.layers import RecurrentState, StateOnly
from kvplan.units import dtype_bytes

DUMMY_SLOTS = 1  # num_reserved_dummy_slots=1 in CppMambaHybridCacheManager.get_cache_size_per_token


def state_bytes_per_rank(target: PlanInput, decoder_layers: int, last: bool, model_bytes: int) -> int:
    """One request's states over the stage's Mamba / linear-attention layers on one rank; the SSM state in
    kv_cache_config.mamba_ssm_cache_dtype where one is given (model_loader.py validate_and_set_mamba_ssm_cache_dtype),
    else the config's."""
    spec, dep = target.spec, target.deployment
    spans = pipeline_stages(spec.num_layers, dep.pipeline_parallel_size)
    span = next((s for i, s in enumerate(spans) if len(s) == decoder_layers and (i == len(spans) - 1) == last),
                spans[-1])
    forced = (dtype_bytes(dep.mamba_ssm_cache_dtype, dep.where("mamba_ssm_cache_dtype"))
              if dep.mamba_ssm_cache_dtype != "auto" else None)
    total = 0
    for cache in (cache for index in span for cache in spec.layers[index].cache_layers()):
        if isinstance(cache, RecurrentState) and forced is not None:
            total += cache.as_served(model_bytes, forced, 0, 0).state_page_bytes(dep.tensor_parallel_size)
        elif isinstance(cache, (RecurrentState, StateOnly)):
            total += cache.sequence_state_bytes(model_bytes, model_bytes, dep.tensor_parallel_size)
    return total


def state_intercept(target: PlanInput, max_batch_size: int, state_bytes: int) -> int:
    """The pool's fixed cost: every resident request's states and the dummy slot's."""
    return (max_batch_size * target.deployment.pipeline_parallel_size + DUMMY_SLOTS) * state_bytes
