"""What one SGLang rank holds of a multimodal model's towers (params.vision, the audio tower's included), module by
module as SGLang 0.5.23 builds them: a tower linear built on its parallel linears (srt/layers/linear.py
QKVParallelLinear, MergedColumnParallelLinear, ColumnParallelLinear, RowParallelLinear; with no parallel_group
they take the "tp" group, so the whole TP size) holds 1 / TP of its weight on each rank; everything else
(ReplicatedLinear, plain nn modules, norms, tables) is whole on every rank that builds the tower.
engines/common.stage_weights splits the towers over TP like the decoder; stage_extra_bytes is what a rank holds
beyond that share. The parameters are kvplan's count (the checkpoint's); SGLang's scalar buffers (the clip bounds
its Clippable linears create whether or not the checkpoint holds them, layer_scalar, gradient_clipping, softcap)
and computed ones (inv_timescales, causal_valid_mask) are not counted: a few thousand values."""

from __future__ import annotations

from kvplan.engines import common
from kvplan.engines.base import PlanInput
from kvplan.engines.sglang.multimodal import tower_skipped
from kvplan.models.model import ModelSpec
from kvplan.units import GiB, dtype_bytes


class TowerLayout:
    """How SGLang builds a wrapper's towers: which of their parameters it splits over TP, and on which pipeline
    stages."""

    every_stage = False  # built on every pipeline stage (else on the first only, as stage_weights puts them)
    source = ""  # the SGLang 0.5.23 files read

    def sharded(self, spec: ModelSpec) -> int:
        """The towers' parameters SGLang splits over the TP group (the rest are whole on each rank)."""
        return 0


class Gemma4Towers(TowerLayout):
    """srt/models/gemma4_mm.py Gemma4ForConditionalGeneration builds the towers on the first PP rank only. Split
    over TP (gemma4_vision.py, gemma4_audio.py, layers/clippable_linear.py): the vision encoder layers' fused qkv
    (ClippableQKVParallelLinear), o_proj and down_proj (ClippableRowParallelLinear) and gate_up
    (ClippableGateUpParallelLinear); in each audio conformer layer the feed-forwards' ffw_layer_1 (column) and
    ffw_layer_2 (row), the attention's qkv, relative_position_embedding.pos_proj (column) and post (row), the light
    conv's linear_start (ClippableGLUParallelLinear), linear_end (row), and its depthwise_conv1d and conv_norm,
    built hidden / TP wide (their weight_loader narrows the checkpoint's); the subsampler's input_proj_linear and
    output_proj's weight (RowParallelLinear; output_proj's bias is whole). Whole: the patch embedder's input_proj
    (nn.Linear) and position table, every norm, q_norm / k_norm, per_dim_scale, the two Conv2d of the subsampler
    and their LayerNorms, std_bias / std_scale, and both embedders (Gemma4MultimodalEmbedder's embedding_projection
    is a ReplicatedLinear)."""

    source = "gemma4_mm.py, gemma4_vision.py, gemma4_audio.py"

    def sharded(self, spec: ModelSpec) -> int:
        tower = spec.tower
        if tower is None:
            return 0
        vision = tower.encoder.layers * tower.encoder.layer_projections() if tower.encoder else 0
        audio = tower.audio
        if audio is None:
            return vision
        hidden, width = audio.hidden, audio.heads * (audio.hidden // audio.heads)
        feed_forwards = 2 * (hidden * 4 * hidden + 4 * hidden * hidden)
        attention = hidden * width + hidden * 3 * width + width * hidden  # pos_proj, qkv, post
        light_conv = hidden * 2 * hidden + audio.conv_kernel * hidden + hidden + hidden * hidden
        return (vision + audio.layers * (feed_forwards + attention + light_conv)
                + audio.subsampled * hidden + hidden * audio.output_dims)


class WholeTowers(TowerLayout):
    """Towers built from transformers' own modules, nothing split over TP."""


class Qwen2AudioTowers(WholeTowers):
    """srt/models/qwen2_audio.py Qwen2AudioForConditionalGeneration: transformers' Qwen2AudioEncoder and
    Qwen2AudioMultiModalProjector (an nn.Linear), built in __init__ on every rank with no pipeline-stage guard."""

    every_stage = True
    source = "qwen2_audio.py"


# srt/models/*.py EntryClass: the architecture picks the model class
LAYOUTS: dict[str, TowerLayout] = {
    "Gemma4ForConditionalGeneration": Gemma4Towers(),
    "Qwen2AudioForConditionalGeneration": Qwen2AudioTowers(),
}


def _param_bytes(target: PlanInput) -> int:
    """One tower parameter's bytes: the model dtype (weights.weight_layout keeps the towers there)."""
    return dtype_bytes(common.model_dtype(target.spec, target.deployment, target.gpu)[0])


def _tower_bytes(target: PlanInput) -> int:
    return target.spec.params.vision * _param_bytes(target)


def held_bytes(target: PlanInput, first: bool) -> int:
    """The towers' bytes one rank of the stage holds; none where the run builds no tower (multimodal.tower_skipped);
    a layout not read here splits them over TP on the first stage (stage_weights' share)."""
    spec, tp = target.spec, target.deployment.tensor_parallel_size
    if tower_skipped(target) is not None:
        return 0
    total = _tower_bytes(target)
    layout = LAYOUTS.get(spec.architecture)
    if layout is None:
        return total // tp if first else 0
    if not (first or layout.every_stage):
        return 0
    split = layout.sharded(spec) * _param_bytes(target)
    return split // tp + (total - split)


def stage_extra_bytes(target: PlanInput, first: bool) -> int:
    """What one rank of the stage holds of the towers beyond stage_weights' TP share of them."""
    if not target.spec.params.vision:
        return 0
    return held_bytes(target, first) - (_tower_bytes(target) // target.deployment.tensor_parallel_size
                                        if first else 0)


def note(target: PlanInput) -> str | None:
    """How the towers sit on the ranks, where TP splits anything or every pipeline stage builds them."""
    spec, dep = target.spec, target.deployment
    layout = LAYOUTS.get(spec.architecture)
    every_stage = layout is not None and layout.every_stage and dep.pipeline_parallel_size > 1
    if tower_skipped(target) is not None:
        return None  # multimodal.notes says so
    if not spec.params.vision or (dep.tensor_parallel_size == 1 and not every_stage):
        return None
    if layout is None:
        return (f"towers ({spec.params.vision:,} parameters): how SGLang splits {spec.architecture}'s towers over "
                "TP is not read; taken as split like the decoder")
    total, held = _tower_bytes(target), held_bytes(target, True)
    where = " (on every pipeline stage)" if every_stage else ""
    return (f"towers: {held / GiB:.2f} GiB of their {total / GiB:.2f} GiB on each rank{where}, "
            f"{layout.sharded(spec):,} of {spec.params.vision:,} parameters split over TP {dep.tensor_parallel_size} "
            f"(SGLang 0.5.23 {layout.source})")
