"""Parameter count from the config: embeddings, attention, MLP or experts, norms, lm_head, vision tower.
Exact for the families whose layout was checked against published counts (see tests/test_params.py)."""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.models.families import Family
from kvplan.models.fields import ConfigFields
from kvplan.models.layers import Layer
from kvplan.models.model import MoE, ParamCount


@dataclass(eq=False)
class Decoder:
    """What the config parser has read of the decoder: the shape every parameter rule works from."""

    model_type: str
    family: Family
    hidden: int
    heads: int
    vocab: int
    intermediate: int
    layers: tuple[Layer, ...]
    moe: MoE | None
    tied: bool


def count(lm: ConfigFields, top: ConfigFields, decoder_shape: Decoder) -> ParamCount:
    """lm: the language model's part of the config; top: the whole config (a vision tower sits there)."""
    shape = decoder_shape
    family, model_type, hidden, heads, vocab = shape.family, shape.model_type, shape.hidden, shape.heads, shape.vocab
    intermediate, layers, moe, tied = shape.intermediate, shape.layers, shape.moe, shape.tied
    norm = hidden * (2 if family.layer_norm else 1)
    norms_per_layer = family.norms_per_layer
    if lm.flag("new_decoder_architecture", False):
        norms_per_layer = 2
    if heads == 0:
        pad = lm.optional_int("pad_vocab_size_multiple") or 1
        vocab = -(-vocab // pad) * pad

    decoder = experts = 0
    mixers = _Mixers(lm, family, hidden, heads, intermediate)
    for index, layer in enumerate(layers):
        decoder += layer.mixer_params(mixers)
        if not layer.has_mlp:
            decoder += norm
            continue
        mlp, expert_part = _mlp(lm, family, hidden, intermediate, moe, index)
        experts += expert_part
        decoder += mlp + norms_per_layer * norm

    embeddings = vocab * hidden
    if family.position_rows_extra is not None:
        lengths = [lm.integer(k) for k in ("n_positions", "max_position_embeddings") if lm.has(k)]
        embeddings += (max(lengths, default=0) + family.position_rows_extra) * hidden
    if family.embedding_norm:
        embeddings += norm
    lm_head = 0 if tied else vocab * hidden + (vocab if family.lm_head_bias else 0)
    vision, vision_exact = _vision(top, hidden)
    total = embeddings + decoder + norm + lm_head + vision

    exact = family.exact and vision_exact
    note = "" if exact else (
        f"parameter count for model_type '{model_type}' is derived from the standard layout and was not "
        "checked against a published count" if not family.exact else
        "vision tower parameters are estimated")
    return ParamCount(total=total, exact=exact, note=note, embeddings=embeddings, lm_head=lm_head,
                      experts=experts, vision=vision)


@dataclass(eq=False)
class _Mixers:
    """The parameter rule of each kind of mixer, read from one config (a layers.MixerCounter)."""

    lm: ConfigFields
    family: Family
    hidden: int
    heads: int
    intermediate: int

    def kv_attention(self, kv_heads: int, head_dim: int) -> int:
        lm, family, hidden, heads = self.lm, self.family, self.hidden, self.heads
        qkv_bias = lm.flag("attention_bias", family.qkv_bias) if lm.has("attention_bias") else family.qkv_bias
        o_bias = lm.flag("attention_bias", family.o_bias) if lm.has("attention_bias") else family.o_bias
        if lm.has("bias"):  # Falcon's single switch for every linear layer
            qkv_bias = o_bias = lm.flag("bias", False)
        q_width = heads * head_dim
        kv_width = kv_heads * head_dim
        total = hidden * (q_width + 2 * kv_width) + q_width * hidden
        if qkv_bias:
            total += q_width + 2 * kv_width
        if o_bias:
            total += hidden
        if family.qk_norm:
            total += 2 * head_dim
        if family.attention_sinks:
            total += heads
        return total

    def latent_attention(self) -> int:
        lm, hidden, heads = self.lm, self.hidden, self.heads
        kv_lora = lm.integer("kv_lora_rank")
        rope = lm.integer("qk_rope_head_dim", 0, minimum=0)
        nope = lm.integer("qk_nope_head_dim", 0, minimum=0)
        v_dim = lm.integer("v_head_dim")
        q_lora = lm.optional_int("q_lora_rank")
        q_width = heads * (nope + rope)
        q = hidden * q_width if not q_lora else hidden * q_lora + q_lora + q_lora * q_width
        return (q + hidden * (kv_lora + rope) + kv_lora + kv_lora * heads * (nope + v_dim)
                + heads * v_dim * hidden)

    def state_mixer(self) -> int:
        lm, hidden, intermediate = self.lm, self.hidden, self.intermediate
        state = lm.integer(("state_size", "mamba_d_state", "ssm_state_size"), 16)
        conv = lm.integer(("conv_kernel", "mamba_d_conv"), 4)
        dt_rank = lm.optional_int("time_step_rank") or -(-hidden // 16)
        conv_bias = intermediate if lm.flag("use_conv_bias", True) else 0
        proj_bias = 2 * intermediate + hidden if lm.flag("use_bias", False) else 0
        return (hidden * 2 * intermediate + intermediate * conv + conv_bias
                + intermediate * (dt_rank + 2 * state) + dt_rank * intermediate + intermediate
                + intermediate * state + intermediate + intermediate * hidden + proj_bias)


def _mlp(lm: ConfigFields, family: Family, hidden: int, intermediate: int, moe: MoE | None,
         index: int) -> tuple[int, int]:
    """Parameters of one layer's MLP, and how many of them are routed experts."""
    if moe is None or index in moe.dense_layers:
        size = lm.optional_int("intermediate_size_mlp") if moe else None
        return _dense_mlp(family, hidden, size or intermediate), 0
    expert = _dense_mlp(family, hidden, moe.expert_intermediate_size)
    experts = moe.num_experts * expert
    router = hidden * moe.num_experts + (moe.num_experts if family.mlp_bias else 0)
    shared = _dense_mlp(family, hidden, moe.shared_intermediate_size) if moe.shared_intermediate_size else 0
    if lm.has("shared_expert_intermediate_size"):
        shared += hidden  # the shared expert's sigmoid gate
    if lm.text("topk_method") == "noaux_tc":
        router += moe.num_experts  # e_score_correction_bias
    return experts + router + shared, experts


def _dense_mlp(family: Family, hidden: int, size: int) -> int:
    if family.gated_mlp:
        return 3 * hidden * size + ((2 * size + hidden) if family.mlp_bias else 0)
    return 2 * hidden * size + ((size + hidden) if family.mlp_bias else 0)


def _vision(top: ConfigFields, text_hidden: int) -> tuple[int, bool]:
    """The vision tower of a multimodal wrapper, with its projector into the language model."""
    vision = top.nested("vision_config")
    if vision is None:
        return 0, True
    hidden = vision.integer(("hidden_size", "embed_dim"))
    depth = vision.integer(("num_hidden_layers", "depth"))
    inner = vision.integer("intermediate_size", 4 * hidden)
    patch = vision.integer("patch_size", 14)
    channels = vision.integer(("num_channels", "in_chans"), 3)
    per_layer = 4 * (hidden * hidden + hidden) + 2 * hidden * inner + inner + hidden + 4 * hidden
    patch_embed = channels * patch * patch * hidden + hidden
    if vision.text("model_type") == "siglip_vision_model":
        # SigLIP: learned positions for every patch, a post-layernorm, and Gemma 3's projector
        # (a hidden x text_hidden matrix and an RMSNorm of the vision width).
        positions = (vision.integer("image_size") // patch) ** 2 * hidden
        projector = hidden * text_hidden + hidden
        return patch_embed + positions + depth * per_layer + 2 * hidden + projector, True
    return patch_embed + depth * per_layer + 2 * hidden + hidden * text_hidden, False
