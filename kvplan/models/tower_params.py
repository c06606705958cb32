"""The towers counted module by module: each wrapper's model_type (config.json) names its tower's modules
(transformers' modeling files, as vLLM 0.33.0 loads them). Qwen2-VL, Qwen2.5-VL, Qwen3-VL, Kimi-K3, InternVL3 and
Qwen2-Audio's audio tower match a published count to the parameter; Gemma 4's vision and audio towers match their
model card's ~550M and ~300M and brought the gemma-4-31b-it weights to 0.24 GiB under its vLLM log
(hybrid_calibration.yaml Y13, 'Model loading took 58.99 GiB'; 0.53 GiB before); with the V slot vLLM fills from K
(models/resident.py) the weights term is 63,301,887,572 B = 58.95 GiB, 0.04 GiB under (63,303,249,452 B, still
58.96 GiB, with the text model's norms, q / k norms and MoE router scales counted in params.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

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


def qwen2_vl(vision: ConfigFields, text_hidden: int) -> int:
    """Qwen2-VL (vLLM 0.33.0 qwen2_vl.py Qwen2VisionTransformer; Qwen2VLVisionConfig names the width embed_dim and
    the merger's output hidden_size): a Conv3d patch embedding without bias (channels x temporal_patch_size x
    patch^2 -> embed_dim); per block two LayerNorms (weight and bias), qkv and proj with biases and a two-layer
    MLP of int(embed_dim x mlp_ratio) with biases; the merger's LayerNorm of embed_dim and its MLP from
    spatial_merge_size^2 x embed_dim through the same width to hidden_size. Qwen2-VL-7B-Instruct: 675,759,104,
    which beside its Qwen2 text model's 7,615,616,512 is the 8,291,375,616 its safetensors give
    (tests/test_tower_peak_issue20_more.py)."""
    width = vision.integer("embed_dim")
    inner = int(width * (vision.number("mlp_ratio") or 4))  # Qwen2VLVisionConfig's mlp_ratio 4
    patch, temporal = vision.integer("patch_size", 14), vision.integer("temporal_patch_size", 2)
    merged = width * vision.integer("spatial_merge_size", 2) ** 2
    patch_embed = vision.integer(("in_chans", "in_channels"), 3) * temporal * patch * patch * width
    block = 4 * width + _linear(width, 3 * width) + _linear(width, width) + _linear(width, inner) \
        + _linear(inner, width)
    merger = 2 * width + _linear(merged, merged) + _linear(merged, vision.integer("hidden_size", text_hidden))
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


def internvl_chat(top: ConfigFields, vision: ConfigFields, text_hidden: int) -> int:
    """InternVL (vLLM 0.33.0 internvl.py InternVLChatModel with intern_vit.py InternVisionModel), where the
    InternVisionConfig defaults of the checkpoints' remote code (configuration_intern_vit.py: qkv_bias false,
    qk_normalization true, norm_type rms_norm, image_size 224, patch_size 14, InternViT-6B's widths) fill what
    vision_config leaves out, and InternVLChatConfig's (select_layer -1, downsample_ratio 0.5) what the wrapper
    does. The embeddings: class_embedding of hidden, a Conv2d of 3 channels with bias (Conv2dLayer's default),
    (image_size / patch)^2 + 1 learned positions; vLLM builds the layers up to select_layer
    (_init_vision_model: num_hidden_layers + select_layer + 1 for a negative one), each qkv (with qkv_bias' bias),
    q_norm and k_norm RMSNorms of hidden under qk_normalization, proj and the MLP's fc1 / fc2 with biases, norm1
    and norm2 (nn.LayerNorm for layer_norm, weight and bias; RMSNorm for rms_norm, weight) and ls1 / ls2 of hidden;
    no post-norm. mlp1: a LayerNorm and Linear over hidden x (1 / downsample_ratio)^2 to the text width, a Linear
    text width to text width. InternVL3-8B (InternViT-300M-448px-V2_5, 24 layers of 1,024): 304,012,288 and
    mlp1's 27,540,480 beside its Qwen2 text model's 7,612,820,992, the Hub's 7,944,373,760
    (tests/test_published_totals.py)."""
    hidden = vision.integer("hidden_size", 3200)
    inner = vision.integer("intermediate_size", 12800)
    patch = vision.integer("patch_size", 14)
    depth = vision.integer("num_hidden_layers", 48)
    select = top.integer("select_layer", -1, minimum=-depth)
    layers = depth + select + 1 if select < 0 else select + 1
    if not 0 < layers <= depth:
        raise top.fail("select_layer", f"must pick one of the vision tower's {depth} layers, got {select}")
    norm = 2 * hidden if (vision.text("norm_type") or "rms_norm") == "layer_norm" else hidden
    qk_norms = 2 * hidden if vision.flag("qk_normalization", True) else 0
    qkv = hidden * 3 * hidden + (3 * hidden if vision.flag("qkv_bias", False) else 0)
    layer = qkv + qk_norms + _linear(hidden, hidden) + _linear(hidden, inner) + _linear(inner, hidden) \
        + 2 * norm + 2 * hidden
    positions = ((vision.integer("image_size", 224) // patch) ** 2 + 1) * hidden
    embeddings = hidden + 3 * patch * patch * hidden + hidden + positions
    ratio = top.number("downsample_ratio", 0.5) or 0.5  # towers.VisionTower reads and bounds it to (0, 1]
    shuffled = hidden * int(1 / ratio) ** 2
    mlp1 = 2 * shuffled + _linear(shuffled, text_hidden) + _linear(text_hidden, text_hidden)
    return embeddings + layers * layer + mlp1


def moonvit_3d(vision: ConfigFields, text_hidden: int) -> int:
    """Kimi-K3's and Kimi-K2.5's MoonViT-3D and projector, module by module as vLLM 0.33.0 builds them
    (model_executor/models/kimi_k25_vit.py MoonViT3dPretrainedModel, KimiK25MultiModalProjector; the vt_* names are
    transformers_utils/configs/kimi_k3.py's): a Conv2d patch embedding (channels x patch^2 -> hidden, bias by
    patch_embed_proj_bias), learned positions init_pos_emb_height x init_pos_emb_width x hidden (the temporal table
    is a buffer); per block two norms (RMSNorm: a weight, LayerNorm: weight and bias), wqkv hidden -> 3 x
    qkv_hidden_size and wo back (biases by attn_bias), the two-layer MLP (biases by linear_bias); a final norm; the
    projector by mm_projector_type (MOONVIT_PROJECTORS), merged = hidden x merge_kernel_size. Where the config names
    no norm_type, attn_bias, linear_bias or patch_embed_proj_bias (Kimi-K2.5's), MoonViT3dPretrainedModel's defaults:
    layernorm, biases on. Kimi-K2.5: 678,528 + 4,718,592 + 27 x 15,239,504 + 2,304 + 54,277,888 = 471,143,920
    (tests/test_frontier_hub_totals.py). Kimi-K3: 401,214,464 + 46,144,512 = 447,358,976; with the text model's
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
    kind = vision.text("mm_projector_type") or "patchmerger"  # KimiK25MultiModalProjector's default
    projector = MOONVIT_PROJECTORS.get(kind)
    if projector is None:
        raise vision.fail("mm_projector_type", f"names a projector kvplan does not count, got {kind!r:.40}; known: "
                                               f"{', '.join(MOONVIT_PROJECTORS)}")
    return (patch_embed + positions + vision.integer("vt_num_hidden_layers") * block + norm
            + projector(hidden, merged, text_hidden))


def _patchmerger_v2(hidden: int, merged: int, text_hidden: int) -> int:
    """Kimi-K3's patchmergerv2 (vLLM 0.33.0 kimi_k25_vit.py KimiK25MultiModalProjector): linear_1 merged -> merged
    and linear_2 merged -> the text width without biases, post_norm an RMSNorm of the text width."""
    return merged * merged + merged * text_hidden + text_hidden


def _patchmerger(hidden: int, merged: int, text_hidden: int) -> int:
    """Kimi-K2.5's patchmerger (the same class's other branch): pre_norm, a LayerNorm of the vision width (weight
    and bias), then linear_1 merged -> merged and linear_2 merged -> the text width, both with biases."""
    return 2 * hidden + _linear(merged, merged) + _linear(merged, text_hidden)


MOONVIT_PROJECTORS: dict[str, Callable[[int, int, int], int]] = {
    "patchmergerv2": _patchmerger_v2, "patchmerger": _patchmerger,
}



CLIP_BOUNDS = 4  # Gemma4ClippableLinear's input_min, input_max, output_min, output_max: checkpoint scalars


@dataclass(frozen=True)
class EncoderShape:
    """A vision encoder's sizes as its config gives them (the config class's defaults where it leaves them out):
    what an engine needs to say which of the tower's modules it splits over TP."""

    layers: int
    hidden: int
    inner: int
    heads: int
    kv_heads: int
    head_dim: int

    def layer_projections(self) -> int:
        """One encoder layer's q, k, v and o projections and its gated MLP (gate, up, down), weights only."""
        return (2 * self.hidden * self.heads * self.head_dim + 2 * self.hidden * self.kv_heads * self.head_dim
                + 3 * self.hidden * self.inner)


@dataclass(frozen=True)
class AudioShape:
    """Gemma 4's audio encoder sizes (Gemma4AudioConfig's defaults where the config leaves them out)."""

    layers: int
    hidden: int
    heads: int
    channels: tuple[int, int]  # subsampling_conv_channels: the two Conv2d's output channels
    conv_kernel: int
    output_dims: int
    clipped: bool  # use_clipped_linears

    @property
    def subsampled(self) -> int:
        """input_proj_linear's input width: c0 // 4 x c1 (the two stride-2 convs over 128 mel bins, as
        transformers' Gemma4AudioSubSampleConvProjection lays them out)."""
        return self.channels[0] // 4 * self.channels[1]


def gemma4_vision_shape(vision: ConfigFields) -> EncoderShape:
    """Gemma4VisionConfig's sizes (transformers configuration_gemma4.py defaults where left out)."""
    return EncoderShape(vision.integer("num_hidden_layers", 16), vision.integer("hidden_size", 768),
                        vision.integer("intermediate_size", 3072), vision.integer("num_attention_heads", 12),
                        vision.integer("num_key_value_heads", 12), vision.integer("head_dim", 64))


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
    shape, patch = gemma4_vision_shape(vision), vision.integer("patch_size", 16)
    hidden = shape.hidden
    embedder = 3 * patch * patch * hidden + 2 * vision.integer("position_embedding_size", 10 * 1024) * hidden
    clips = 7 * CLIP_BOUNDS if vision.flag("use_clipped_linears", False) else 0
    layer = shape.layer_projections() + 2 * shape.head_dim + 4 * hidden + clips
    standardize = 2 * hidden if vision.flag("standardize", False) else 0
    return embedder + shape.layers * layer + standardize + hidden * text_hidden


def gemma4_audio_shape(audio: ConfigFields) -> AudioShape:
    """Gemma4AudioConfig's sizes (transformers configuration_gemma4.py defaults where left out)."""
    channels = audio.array("subsampling_conv_channels") or [128, 32]
    if len(channels) != 2 or not all(isinstance(c, int) and not isinstance(c, bool) and c > 0 for c in channels):
        raise audio.fail("subsampling_conv_channels", "must be two positive integers")
    return AudioShape(audio.integer("num_hidden_layers", 12), audio.integer("hidden_size", 1024),
                      audio.integer("num_attention_heads", 8), (channels[0], channels[1]),
                      audio.integer("conv_kernel_size", 5), audio.integer("output_proj_dims", 1536),
                      audio.flag("use_clipped_linears", True))


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
    shape = gemma4_audio_shape(audio)
    hidden, heads, out = shape.hidden, shape.heads, shape.output_dims
    width = heads * (hidden // heads)
    first, second = shape.channels
    subsample = 9 * first + first + 9 * first * second + second + shape.subsampled * hidden
    feed_forward = 2 * 4 * hidden * hidden + 2 * hidden
    attention = 4 * hidden * width + hidden * hidden + hidden // heads
    light_conv = 3 * hidden * hidden + shape.conv_kernel * hidden + 2 * hidden
    clips = 10 * CLIP_BOUNDS if shape.clipped else 0
    layer = 2 * feed_forward + attention + light_conv + 3 * hidden + clips
    return subsample + shape.layers * layer + hidden * out + out + out * text_hidden


def qwen2_audio(audio: ConfigFields, text_hidden: int) -> int:
    """Qwen2-Audio's audio tower and projector, module by module as vLLM 0.33.0 qwen2_audio.py builds them
    (Qwen2AudioForConditionalGeneration: transformers' Qwen2AudioEncoder from audio_config, and
    Qwen2AudioMultiModalProjector, an nn.Linear d_model -> the text width with a bias; SGLang 0.5.23
    srt/models/qwen2_audio.py builds the same two): conv1 (num_mel_bins -> d_model, 3 taps) and conv2 (d_model ->
    d_model, 3 taps, stride 2), each with a bias; the learned embed_positions table of max_source_positions x
    d_model; per encoder layer (a Whisper layer) q, v and out_proj with biases and k_proj without,
    self_attn_layer_norm, fc1 (d_model -> encoder_ffn_dim) and fc2 back with biases and final_layer_norm, the two
    LayerNorms with weight and bias; a closing layer_norm; the average pooler has none. Defaults are
    Qwen2AudioEncoderConfig's. Qwen2-Audio-7B: 642,215,936, which with the Qwen2 text model's 7,754,878,976 is the
    8,397,094,912 its safetensors index gives (tests/test_audio_towers_issue20.py)."""
    width, inner = audio.integer("d_model", 1280), audio.integer("encoder_ffn_dim", 5120)
    convs = _linear(audio.integer("num_mel_bins", 128) * 3, width) + _linear(width * 3, width)
    positions = audio.integer("max_source_positions", 1500) * width
    layer = 3 * _linear(width, width) + width * width + _linear(width, inner) + _linear(inner, width) + 4 * width
    return convs + positions + audio.integer("encoder_layers", 32) * layer + 2 * width + _linear(width, text_hidden)


TOWERS: dict[str, Callable[[ConfigFields, int], int]] = {
    "qwen2_vl": qwen2_vl, "qwen2_5_vl": qwen2_5_vl, "qwen3_vl": qwen3_vl, "kimi_k3": moonvit_3d, "gemma4": gemma4_vision,
    # vLLM 0.33.0 qwen3_vl_moe.py and qwen3_5.py (Qwen3_5ForConditionalGeneration) build the same
    # Qwen3_VisionTransformer from vision_config (Qwen3.5's deepstack_visual_indexes empty)
    "qwen3_vl_moe": qwen3_vl, "qwen3_5": qwen3_vl, "qwen3_5_moe": qwen3_vl,
    # vLLM 0.33.0 kimi_k25.py KimiK25ForConditionalGeneration: MoonViT3dPretrainedModel and KimiK25MultiModalProjector
    # (Kimi-K2.5, K2.6, K2.7-Code: the patchmerger projector)
    "kimi_k25": moonvit_3d,
}
VISION_SHAPES: dict[str, Callable[[ConfigFields], EncoderShape]] = {"gemma4": gemma4_vision_shape}
# the towers whose layout the wrapper's own keys shape too (InternVL's select_layer and downsample_ratio)
WRAPPER_TOWERS: dict[str, Callable[[ConfigFields, ConfigFields, int], int]] = {"internvl_chat": internvl_chat}


@dataclass(frozen=True)
class AudioRule:
    """How a wrapper (its model_type) counts its audio tower with the projector into the language model."""

    params: Callable[[ConfigFields, int], int]
    # where the engines build the vision tower from vision_config whatever the config holds: a config with an
    # audio_config and no vision_config does not load there, so it is refused (the reason)
    vision_required: str = ""
    shape: Callable[[ConfigFields], AudioShape] | None = None  # the encoder's sizes, where an engine rule needs them
    vllm_layout: str = ""  # how vLLM places the tower over TP ranks (multimodal.py Processor.whole_tower)


AUDIO_TOWERS: dict[str, AudioRule] = {
    "gemma4": AudioRule(gemma4_audio, "vLLM 0.33.0 and SGLang 0.5.23 gemma4_mm.py build the vision tower from "
                                      "vision_config whatever the config holds, so neither loads a Gemma 4 "
                                      "config without one", gemma4_audio_shape),
    "qwen2_audio": AudioRule(qwen2_audio, vllm_layout="whole on each TP rank: 0.33.0 qwen2_audio.py builds "
                                                     "transformers' Qwen2AudioEncoder and an nn.Linear projector"),
}


def count(top: ConfigFields, vision: ConfigFields, text_hidden: int) -> int | None:
    """The towers' exact count (the vision tower's, and the audio tower's beside it) where the wrapper's layout
    is known, else None."""
    heard = audio(top, text_hidden)
    wrapper = top.text("model_type") or ""
    rule = TOWERS.get(wrapper)
    if rule is not None:
        return rule(vision, text_hidden) + heard
    wrapped = WRAPPER_TOWERS.get(wrapper)
    return wrapped(top, vision, text_hidden) + heard if wrapped else None


def audio(top: ConfigFields, text_hidden: int) -> int:
    """The audio tower's parameters with its projector into the language model: 0 without an audio_config;
    an audio_config of a wrapper whose audio layout is not known is refused rather than left out."""
    config = top.nested("audio_config")
    if config is None:
        return 0
    rule = AUDIO_TOWERS.get(top.text("model_type") or "")
    if rule is None:
        raise top.fail("audio_config", "is of a wrapper whose audio tower kvplan does not count")
    return rule.params(config, text_hidden)


def vllm_layout(top: ConfigFields) -> str:
    rule = AUDIO_TOWERS.get(top.text("model_type") or "")
    return rule.vllm_layout if rule is not None and rule.vllm_layout else "not read"


def audio_alone(top: ConfigFields, text_hidden: int) -> int:
    """The audio tower of a wrapper without a vision_config (Qwen2-Audio), counted on its own; a wrapper whose
    engines need the vision tower too is refused (AudioRule.vision_required)."""
    rule = AUDIO_TOWERS.get(top.text("model_type") or "")
    if top.nested("audio_config") is not None and rule is not None and rule.vision_required:
        raise top.fail("vision_config", f"is missing beside audio_config: {rule.vision_required}")
    return audio(top, text_hidden)


def shapes(top: ConfigFields) -> tuple[EncoderShape | None, AudioShape | None]:
    """The vision and audio encoders' sizes, where the wrapper's rules read them (Gemma 4), else None."""
    vision, audio_config = top.nested("vision_config"), top.nested("audio_config")
    vision_rule = VISION_SHAPES.get(top.text("model_type") or "")
    audio_rule = AUDIO_TOWERS.get(top.text("model_type") or "")
    return (vision_rule(vision) if vision is not None and vision_rule else None,
            audio_rule.shape(audio_config) if audio_config is not None and audio_rule and audio_rule.shape else None)
