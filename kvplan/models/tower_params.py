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


def moonvit_3d(vision: ConfigFields, text_hidden: int) -> int:
    """Kimi-K3's MoonViT-3D and projector, module by module as vLLM 0.33.0 builds them
    (model_executor/models/kimi_k25_vit.py MoonViT3dPretrainedModel, KimiK25MultiModalProjector; the vt_* names are
    transformers_utils/configs/kimi_k3.py's): a Conv2d patch embedding (channels x patch^2 -> hidden, bias by
    patch_embed_proj_bias), learned positions init_pos_emb_height x init_pos_emb_width x hidden (the temporal table
    is a buffer); per block two norms (RMSNorm: a weight, LayerNorm: weight and bias), wqkv hidden -> 3 x
    qkv_hidden_size and wo back (biases by attn_bias), the two-layer MLP (biases by linear_bias); a final norm; the
    patchmergerv2 projector: merged = hidden x merge_kernel_size, merged -> merged -> text hidden without biases and
    an RMSNorm of the text width. Kimi-K3: 401,214,464 + 46,144,512 = 447,358,976; with the text model's
    2,779,484,476,000 that is the Hub's total for moonshotai/Kimi-K3 (2,779,931,837,184) but for the 2,208 A_log
    values its checkpoint pads (69 KDA layers x 32) and vLLM does not build."""
    hidden, inner = vision.integer("vt_hidden_size"), vision.integer("vt_intermediate_size")
    qkv = vision.integer("qkv_hidden_size", hidden)
    patch, channels = vision.integer("patch_size"), vision.integer(("num_channels", "in_chans"), 3)
    norm = hidden if vision.text("norm_type") == "rmsnorm" else 2 * hidden
    attn_bias, mlp_bias = vision.flag("attn_bias", True), vision.flag("linear_bias", True)
    patch_embed = channels * patch * patch * hidden + (hidden if vision.flag("patch_embed_proj_bias", True) else 0)
    positions = vision.integer("init_pos_emb_height") * vision.integer("init_pos_emb_width") * hidden
    block = (2 * norm + hidden * 3 * qkv + qkv * hidden + (3 * qkv + hidden if attn_bias else 0)
             + 2 * hidden * inner + (inner + hidden if mlp_bias else 0))
    merge = vision.array("merge_kernel_size") or [2, 2]  # KimiK3VisionConfig's default
    if len(merge) != 2 or not all(isinstance(m, int) and not isinstance(m, bool) and m > 0 for m in merge):
        raise vision.fail("merge_kernel_size", "must be two positive integers")
    merged = hidden * merge[0] * merge[1]
    if vision.text("mm_projector_type") != "patchmergerv2":
        raise vision.fail("mm_projector_type", "is not patchmergerv2: only Kimi-K3's projector is modelled")
    projector = merged * merged + merged * text_hidden + text_hidden
    return patch_embed + positions + vision.integer("vt_num_hidden_layers") * block + norm + projector



TOWERS: dict[str, Callable[[ConfigFields, int], int]] = {
    "qwen2_5_vl": qwen2_5_vl, "qwen3_vl": qwen3_vl, "kimi_k3": moonvit_3d,
}


def count(top: ConfigFields, vision: ConfigFields, text_hidden: int) -> int | None:
    """The tower's exact count where its wrapper's layout is known, else None."""
    rule = TOWERS.get(top.text("model_type") or "")
    return rule(vision, text_hidden) if rule else None
