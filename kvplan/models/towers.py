"""The vision tower's geometry, as a multimodal config.json gives it: what an engine needs to size the items its
encoder is profiled with (patch and merge sizes, tokens per image) and the width of the embeddings it hands the
language model. Engine rules (budgets, processor defaults) live with each engine, not here."""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.models import tower_params
from kvplan.models.fields import ConfigFields


@dataclass(frozen=True)
class Tiling:
    """InternVL's dynamic tiling as config.json sets it, with the defaults of the checkpoints' remote-code
    configuration_internvl_chat.py InternVLChatConfig where left out (vLLM 0.33.0's adapted copy,
    transformers_utils/configs/skyworkr1v.py, keeps them); the engine's processor decides the tiles from it and
    its --mm-processor-kwargs."""

    min_patches: int = 1
    max_patches: int = 6
    dynamic: bool = False
    thumbnail: bool = False


@dataclass(frozen=True)
class AudioEncoder:
    """A Whisper-style audio encoder's sizes (Qwen2-Audio's audio_config, with Qwen2AudioEncoderConfig's defaults
    where left out, as tower_params.qwen2_audio counts it): two Conv1d over num_mel_bins x (2 x positions) mel
    frames, the second of stride 2, then `layers` encoder layers of `width` with a `inner`-wide MLP over
    max_source_positions positions."""

    width: int
    inner: int
    layers: int
    heads: int
    mel_bins: int
    positions: int


@dataclass(frozen=True)
class VisionTower:
    config_type: str  # the wrapper's model_type (qwen2_5_vl, gemma3, gemma4, ...): which processor reads it
    vision_type: str  # vision_config.model_type, where the config names one
    patch_size: int
    merge_size: int  # spatial_merge_size: patches merged into one token per side (Qwen-VL), 0 where not given
    temporal_patch_size: int  # frames per temporal patch (Qwen-VL), 0 where not given
    pooling_kernel_size: int  # patches pooled into one soft token per side (Gemma 4), 1 where none
    shuffle_factor: int  # patches folded into one token by pixel shuffle, 1 / pixel_shuffle_ratio^2 (Llama 4), 1 if none
    image_size: int  # the tower's square input side, 0 where images are resized by pixel count
    tokens_per_image: int  # a fixed soft-token count per image (Gemma 3 mm_tokens_per_image, Gemma 4), 0 if none
    output_width: int  # one embedding handed to the language model: the text width, times deepstack levels
    has_audio: bool
    bidirectional: bool  # text_config use_bidirectional_attention "vision": image tokens attend both ways (Gemma 4)
    # the encoder of an audio tower beside no vision tower (Qwen2-Audio): has_vision False, the vision fields 0
    audio_encoder: AudioEncoder | None = None
    has_vision: bool = True
    norm_type: str = ""  # vision_config norm_type as given (InternViT: layer_norm or rms_norm), "" where left out
    qk_normalization: bool | None = None  # vision_config qk_normalization as given (InternViT), None where left out
    hidden_size: int = 0  # the tower's own width, its MLP's and one head's (0 where the config leaves them out)
    intermediate_size: int = 0
    head_dim: int = 0
    position_embedding_size: int = 0  # rows of a learned 2-D position table (Gemma 4), 0 where none
    channels: int = 3  # colour channels of a patch
    tiling: Tiling | None = None  # InternVL's dynamic tiling, as the config sets it (None: not tiled)
    text_type: str = ""  # the language model's model_type
    audio_params: int = 0  # the audio tower's and its embedder's parameters, within params.vision (Gemma 4)
    depth: int = 0  # the tower's encoder layers (depth, num_hidden_layers), 0 where the config leaves them out
    num_heads: int = 0  # its attention heads (num_heads, num_attention_heads), 0 where left out
    deepstack: tuple[int, ...] = ()  # deepstack_visual_indexes: the layers whose outputs feed the text model too
    # the encoders' sizes where the wrapper's rules read them (tower_params.shapes: Gemma 4), None elsewhere
    encoder: tower_params.EncoderShape | None = None
    audio: tower_params.AudioShape | None = None
    # vision_config's num_hidden_layers and hidden_size keys as given (each None where left out), the two attributes
    # SGLang's adjust_mem_fraction_for_vlm reads by those names (a Qwen-VL tower's `depth` is not one of them); None
    # without a vision_config
    named_sizes: tuple[int | None, int | None] | None = None
    # the sub-config the language model sits under (SGLang's get_hf_text_config looks for thinker_config,
    # llm_config, language_config, text_config in that order), "" where the text model's keys are at the top
    text_subconfig: str = ""
    language_model_only: bool = False  # config.json's language_model_only: the checkpoint declares text-only serving


TEXT_SUBCONFIGS = ("thinker_config", "llm_config", "language_config", "text_config")


def vision_tower(top: ConfigFields, text_hidden: int) -> VisionTower | None:
    """The tower of a multimodal wrapper (a `vision_config` beside the language model, or an audio tower alone:
    audio_tower), None for a text model."""
    vision = top.nested("vision_config")
    if vision is None:
        return audio_tower(top, text_hidden)
    deepstack = vision.array("deepstack_visual_indexes") or []
    if not all(isinstance(index, int) and not isinstance(index, bool) for index in deepstack):
        raise vision.fail("deepstack_visual_indexes", f"must list layer indexes (integers), got {deepstack!r:.60}")
    # Qwen2VLVisionConfig names the ViT's width embed_dim and its MLP's mlp_ratio x that; its hidden_size is the
    # merger's output (vLLM 0.33.0 qwen2_vl.py Qwen2VisionTransformer: blocks of embed_dim, mlp_hidden_dim =
    # int(dim * mlp_ratio), Qwen2VisionPatchMerger(d_model=hidden_size)). Elsewhere hidden_size is the width.
    width_key = "embed_dim" if vision.has("embed_dim") else "hidden_size"
    width = vision.optional_int(width_key) or 0
    ratio = vision.number("mlp_ratio")
    inner = vision.optional_int("intermediate_size") or (int(width * ratio) if ratio is not None else 0)
    merger_out = vision.optional_int("hidden_size") if width_key == "embed_dim" else None
    out = vision.optional_int("out_hidden_size") or merger_out or text_hidden
    shapes = tower_params.shapes(top)
    tokens = (vision.optional_int("default_output_length")
              or top.optional_int(("mm_tokens_per_image", "vision_soft_tokens_per_image")) or 0)
    qk_norm = vision.flag("qk_normalization", False) if vision.has("qk_normalization") else None
    return VisionTower(
        config_type=top.text("model_type") or "", vision_type=vision.text("model_type") or "",
        patch_size=vision.integer("patch_size", 14), merge_size=vision.optional_int("spatial_merge_size") or 0,
        temporal_patch_size=vision.optional_int("temporal_patch_size") or 0,
        pooling_kernel_size=vision.optional_int("pooling_kernel_size") or 1,
        shuffle_factor=_shuffle_factor(vision, top),
        image_size=vision.optional_int("image_size") or 0, tokens_per_image=tokens,
        output_width=out * (1 + len(deepstack)), has_audio=top.nested("audio_config") is not None,
        bidirectional=(top.nested("text_config") or top).text("use_bidirectional_attention") == "vision",
        hidden_size=width, intermediate_size=inner, norm_type=vision.text("norm_type") or "",
        qk_normalization=qk_norm,
        head_dim=vision.optional_int("head_dim") or 0,
        position_embedding_size=vision.optional_int("position_embedding_size") or 0,
        channels=vision.integer(("num_channels", "in_channels", "in_chans"), 3), tiling=_tiling(top),
        text_type=(top.nested("llm_config") or top.nested("text_config") or top).text("model_type") or "",
        audio_params=tower_params.audio(top, text_hidden),
        depth=vision.optional_int(("depth", "num_hidden_layers")) or 0,
        num_heads=vision.optional_int(("num_heads", "num_attention_heads")) or 0, deepstack=tuple(deepstack),
        encoder=shapes[0], audio=shapes[1],
        named_sizes=(vision.optional_int("num_hidden_layers"), vision.optional_int("hidden_size")),
        text_subconfig=next((key for key in TEXT_SUBCONFIGS if top.nested(key) is not None), ""),
        language_model_only=top.flag("language_model_only", False))


def _shuffle_factor(vision: ConfigFields, top: ConfigFields) -> int:
    source, key = (vision, "pixel_shuffle_ratio") if vision.number("pixel_shuffle_ratio") is not None else (
        top, "downsample_ratio")  # InternVL's pixel shuffle sits beside the configs
    ratio = source.number(key)
    if ratio is None:
        return 1
    if not 0 < ratio <= 1:
        raise source.fail(key, f"must be in (0, 1], got {ratio:g}")
    return round(1 / ratio**2)


def _tiling(top: ConfigFields) -> Tiling | None:
    """InternVL's min_dynamic_patch, max_dynamic_patch, dynamic_image_size and use_thumbnail."""
    if top.text("model_type") != "internvl_chat":
        return None
    default = Tiling()
    return Tiling(top.integer("min_dynamic_patch", default.min_patches),
                  top.integer("max_dynamic_patch", default.max_patches),
                  top.flag("dynamic_image_size", default.dynamic), top.flag("use_thumbnail", default.thumbnail))


# the wrappers (model_type) whose audio tower stands without a vision tower: vLLM 0.33.0 qwen2_audio.py
AUDIO_ALONE = {"qwen2_audio"}


def audio_tower(top: ConfigFields, text_hidden: int) -> VisionTower | None:
    """An audio tower beside no vision tower (Qwen2-Audio's audio_config), None otherwise. Qwen2AudioEncoderConfig's
    defaults where the config leaves a size out (transformers configuration_qwen2_audio.py, as
    tower_params.qwen2_audio counts it); the vision fields are 0 and the embeddings it hands the language model
    are the text width (Qwen2AudioMultiModalProjector)."""
    audio = top.nested("audio_config")
    if audio is None or (top.text("model_type") or "") not in AUDIO_ALONE:
        return None
    encoder = AudioEncoder(audio.integer("d_model", 1280), audio.integer("encoder_ffn_dim", 5120),
                           audio.integer("encoder_layers", 32), audio.integer("encoder_attention_heads", 20),
                           audio.integer("num_mel_bins", 128), audio.integer("max_source_positions", 1500))
    return VisionTower(
        config_type=top.text("model_type") or "", vision_type="", patch_size=0, merge_size=0,
        temporal_patch_size=0, pooling_kernel_size=1, shuffle_factor=1, image_size=0, tokens_per_image=0,
        output_width=text_hidden, has_audio=True, bidirectional=False, channels=0,
        text_type=(top.nested("text_config") or top).text("model_type") or "",
        audio_params=tower_params.audio(top, text_hidden), audio_encoder=encoder, has_vision=False)
