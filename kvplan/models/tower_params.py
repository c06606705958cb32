"""The towers counted module by module: each wrapper's model_type (config.json) names its tower's modules
(transformers' modeling files, as vLLM 0.33.0 loads them). Qwen2.5-VL, Qwen3-VL and Kimi-K3 match a published
count to the parameter; Gemma 4's vision and audio towers match their model card's ~550M and ~300M and bring the
gemma-4-31b-it weights to 0.24 GiB under its vLLM log (engine-calibration Y13; 0.53 GiB before)."""

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



CLIP_BOUNDS = 4  # Gemma4ClippableLinear's input_min, input_max, output_min, output_max: checkpoint scalars


def gemma4_vision(vision: ConfigFields, text_hidden: int) -> int:
    """Gemma 4's vision tower and its embedder, as vLLM 0.33.0 gemma4_mm.py builds them
    (AutoModel.from_config(vision_config): transformers 5.16-5.20 modeling_gemma4.py Gemma4VisionModel; embed_vision
    a Gemma4MultimodalEmbedder), no linear with a bias: the patch embedder's input_proj (3 x patch^2 -> hidden)
    and its 2 x position_embedding_size x hidden table; per encoder layer q and o of heads x head_dim, k and v of
    key-value heads x head_dim, q_norm and k_norm of head_dim (v_norm has no weight), the gated MLP (gate, up,
    down) and four RMSNorms, with four clipping scalars on each of the seven ClippableLinears where
    use_clipped_linears; with standardize the std_bias and std_scale buffers (hidden each, in the checkpoint);
    the pooler has none. embed_vision: a weightless RMSNorm and hidden -> the text width. Defaults are
    Gemma4VisionConfig's."""
    hidden, inner = vision.integer("hidden_size", 768), vision.integer("intermediate_size", 3072)
    heads, kv_heads = vision.integer("num_attention_heads", 12), vision.integer("num_key_value_heads", 12)
    head, patch = vision.integer("head_dim", 64), vision.integer("patch_size", 16)
    embedder = 3 * patch * patch * hidden + 2 * vision.integer("position_embedding_size", 10 * 1024) * hidden
    attention = 2 * hidden * heads * head + 2 * hidden * kv_heads * head + 2 * head
    clips = 7 * CLIP_BOUNDS if vision.flag("use_clipped_linears", False) else 0
    layer = attention + 3 * hidden * inner + 4 * hidden + clips
    standardize = 2 * hidden if vision.flag("standardize", False) else 0
    return embedder + vision.integer("num_hidden_layers", 16) * layer + standardize + hidden * text_hidden


def gemma4_audio(audio: ConfigFields, text_hidden: int) -> int:
    """Gemma 4's audio tower and its embedder, module by module as vLLM 0.33.0 gemma4_mm.py builds them
    (Gemma4ForConditionalGeneration: AutoModel.from_config(audio_config), i.e. transformers 5.16-5.20's
    modeling_gemma4.py Gemma4AudioModel, the layout unchanged from 5.5 to 5.24; embed_audio a
    Gemma4MultimodalEmbedder). Defaults are Gemma4AudioConfig's. Without biases but output_proj's:
    the subsampler, two 3x3 Conv2d (1 -> c0 -> c1 channels) each with a weight-only LayerNorm, then
    input_proj_linear (c0 // 4 x c1 -> hidden); per conformer layer (Gemma4AudioLayer) two feed-forwards
    (hidden -> 4 hidden -> hidden, a pre and a post RMSNorm each), attention (q, k, v, relative_k_proj of
    heads x head_dim, post hidden -> hidden, per_dim_scale of head_dim), the light conv (linear_start to
    2 hidden, a depthwise conv of conv_kernel_size taps, linear_end, two RMSNorms) and three RMSNorms; with
    use_clipped_linears each of the ten ClippableLinears a layer holds stores four clipping scalars; then
    output_proj hidden -> output_proj_dims with a bias. embed_audio: a weightless RMSNorm and
    output_proj_dims -> the text width. The relative-position table and softcap are non-persistent buffers."""
    hidden = audio.integer("hidden_size", 1024)
    heads = audio.integer("num_attention_heads", 8)
    width = heads * (hidden // heads)
    channels = audio.array("subsampling_conv_channels") or [128, 32]
    if len(channels) != 2 or not all(isinstance(c, int) and not isinstance(c, bool) and c > 0 for c in channels):
        raise audio.fail("subsampling_conv_channels", "must be two positive integers")
    first, second = channels
    out = audio.integer("output_proj_dims", 1536)
    subsample = 9 * first + first + 9 * first * second + second + first // 4 * second * hidden
    feed_forward = 2 * 4 * hidden * hidden + 2 * hidden
    attention = 4 * hidden * width + hidden * hidden + hidden // heads
    light_conv = 3 * hidden * hidden + audio.integer("conv_kernel_size", 5) * hidden + 2 * hidden
    clips = 10 * CLIP_BOUNDS if audio.flag("use_clipped_linears", True) else 0
    layer = 2 * feed_forward + attention + light_conv + 3 * hidden + clips
    return subsample + audio.integer("num_hidden_layers", 12) * layer + hidden * out + out + out * text_hidden


TOWERS: dict[str, Callable[[ConfigFields, int], int]] = {
    "qwen2_5_vl": qwen2_5_vl, "qwen3_vl": qwen3_vl, "kimi_k3": moonvit_3d, "gemma4": gemma4_vision,
}
AUDIO_TOWERS: dict[str, Callable[[ConfigFields, int], int]] = {"gemma4": gemma4_audio}


def count(top: ConfigFields, vision: ConfigFields, text_hidden: int) -> int | None:
    """The towers' exact count (the vision tower's, and the audio tower's beside it) where the wrapper's layout
    is known, else None."""
    heard = audio(top, text_hidden)
    rule = TOWERS.get(top.text("model_type") or "")
    return rule(vision, text_hidden) + heard if rule else None


def audio(top: ConfigFields, text_hidden: int) -> int:
    """The audio tower's parameters with its projector into the language model: 0 without an audio_config;
    an audio_config of a wrapper whose audio layout is not known is refused rather than left out."""
    config = top.nested("audio_config")
    if config is None:
        return 0
    rule = AUDIO_TOWERS.get(top.text("model_type") or "")
    if rule is None:
        raise top.fail("audio_config", "is of a wrapper whose audio tower kvplan does not count")
    return rule(config, text_hidden)
