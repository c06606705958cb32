"""Where SGLang puts a speculative draft, by release. From 0.5.14 the target's pool holds it: the draft's weights
are in the memory the target profiles and its KV is in the target's cell (model_executor/pool_configurator.py
DefaultPoolConfigurator, cell x (1 + draft layers / layers); 0.5.23 the same). Before, the draft worker starts after
the target's pool is sized (0.5.9 model_runner_kv_cache_mixin.py: draft_runner_cache_size, the target's token count)
and both its weights and its KV come out of the share the default fraction reserves for it."""

from __future__ import annotations

from kvplan.engines import common
from kvplan.engines.base import PlanInput
from kvplan.engines.sglang.releases import DRAFT_IN_POOL_FROM, release_of
from kvplan.models.layers import Layer
from kvplan.plan import EngineSettings
from kvplan.units import dtype_bytes
from kvplan.weights import weight_layout


def outside_pool(target: PlanInput) -> bool:
    """Whether the release keeps the draft out of the target's profiled pool (before 0.5.14)."""
    return bool(target.deployment.speculative_config) and release_of(
        target.deployment.engine_version) < DRAFT_IN_POOL_FROM


def draft_share(target: PlanInput, settings: EngineSettings) -> tuple[int, int]:
    """(cache layers, weight bytes per rank) the draft adds to the last stage, as kvplan's common preparation adds
    them (engines/common.py draft_layers)."""
    spec, dep = target.spec, target.deployment
    dtype = common.model_dtype(spec, dep, target.gpu)[0]
    weights = weight_layout(spec, dtype_bytes(dtype), common.quantization_method(spec, dep), settings.mxfp4_experts)
    layers, total, _ = common.draft_layers(target, dtype, weights)
    return sum(len(layer.cache_layers()) for layer in layers), -(-total // dep.tensor_parallel_size)


def target_layers(target: PlanInput, settings: EngineSettings, layers: list[Layer]) -> list[Layer]:
    """A stage's cache layers without the draft's where the release keeps it out of the pool: the draft's come last
    on the last stage (engines/common.py stages)."""
    if not outside_pool(target):
        return layers
    drafts, _ = draft_share(target, settings)
    last = common.stages(target.spec, target.deployment, [], True)[-1]
    own = len(last.layers)  # the stage's own cache layers
    return layers[:own] if drafts and len(layers) == own + drafts else layers


NOTE = ("speculative decoding, SGLang before 0.5.14: the draft loads after the target's KV pool is sized and takes "
        "its weights and as many KV tokens from the share the default fraction reserves for it (2 GiB for EAGLE / MTP "
        "in 0.5.9, 4 GiB in 0.5.10-0.5.13, 6 GiB for a draft model): the pool is the target's alone")
