"""The vision towers whose layout was checked to the parameter against a published count: each wrapper's
model_type (config.json) names its tower's modules (transformers' modeling files, as vLLM 0.33.0 loads them)."""

from __future__ import annotations

from collections.abc import Callable

from kvplan.models.fields import ConfigFields


def _linear(inputs: int, outputs: int) -> int:
    return inputs * outputs + outputs  # every tower projection below carries a bias


def qwen2_5_vl(vision: ConfigFields, text_hidden: int) -> int:
    """Qwen2.5-VL (qwen2_5_vl/modeling_qwen2_5_vl.py, vLLM qwen2_5_vl.py): a Conv3d patch embedding without bias
    (channels x temporal_patch_size x patch^2 -> hidden); per block two RMSNorms, qkv and proj with biases and a
    gated SiLU MLP with biases; the patch merger's RMSNorm and its MLP from spatial_merge_size^2 x hidden through
    the same width to out_hidden_size. Qwen2.5-VL-7B: 676,550,144, the visual module a public count prints."""
    hidden, inner = vision.integer("hidden_size"), vision.integer("intermediate_size")
    patch, temporal = vision.integer("patch_size", 14), vision.integer("temporal_patch_size", 2)
    merged = hidden * vision.integer("spatial_merge_size", 2) ** 2
    patch_embed = vision.integer(("in_chans", "in_channels"), 3) * temporal * patch * patch * hidden
    block = 2 * hidden + _linear(hidden, 3 * hidden) + _linear(hidden, hidden) + 2 * _linear(hidden, inner) \
        + _linear(inner, hidden)
    merger = hidden + _linear(merged, merged) + _linear(merged, vision.integer("out_hidden_size", text_hidden))
    return patch_embed + vision.integer("depth") * block + merger


def qwen3_vl(vision: ConfigFields, text_hidden: int) -> int:
    """Qwen3-VL (qwen3_vl/modeling_qwen3_vl.py, vLLM qwen3_vl.py): a Conv3d patch embedding with bias, learned
    positions (num_position_embeddings x hidden); per block two LayerNorms, qkv and proj with biases and a plain
    two-layer MLP with biases; the merger (a LayerNorm of hidden, then spatial_merge_size^2 x hidden through the
    same width to out_hidden_size) and one deepstack merger per deepstack_visual_indexes entry, whose LayerNorm
    takes the merged width. Qwen3-VL-8B-Instruct: 576,388,336 beside the Qwen3 text model's 8,190,735,360, the
    8,767,123,696 of its safetensors total."""
    hidden, inner = vision.integer("hidden_size"), vision.integer("intermediate_size")
    patch, temporal = vision.integer("patch_size"), vision.integer("temporal_patch_size", 2)
    merged = hidden * vision.integer("spatial_merge_size", 2) ** 2
    out = vision.integer("out_hidden_size", text_hidden)
    patch_embed = _linear(vision.integer(("in_channels", "in_chans"), 3) * temporal * patch * patch, hidden)
    positions = vision.integer("num_position_embeddings") * hidden
    block = 4 * hidden + _linear(hidden, 3 * hidden) + _linear(hidden, hidden) + _linear(hidden, inner) \
        + _linear(inner, hidden)
    mlp = _linear(merged, merged) + _linear(merged, out)
    deepstack = len(vision.array("deepstack_visual_indexes") or [])
    return (patch_embed + positions + vision.integer("depth") * block + 2 * hidden + mlp
            + deepstack * (2 * merged + mlp))


TOWERS: dict[str, Callable[[ConfigFields, int], int]] = {
    "qwen2_5_vl": qwen2_5_vl, "qwen3_vl": qwen3_vl,
}


def count(top: ConfigFields, vision: ConfigFields, text_hidden: int) -> int | None:
    """The tower's exact count where its wrapper's layout is known, else None."""
    rule = TOWERS.get(top.text("model_type") or "")
    return rule(vision, text_hidden) if rule else None
