"""Zamba2's layers: a Mamba-2 backbone with shared transformer blocks applied at its 'hybrid' positions.

Read as vLLM 0.33.0 model_executor/models/zamba2.py builds them from transformers' Zamba2Config
(models/zamba2/configuration_zamba2.py, transformers 5.24.0): layers_block_type names each layer 'mamba' (which
transformers remaps to 'linear_attention', configuration_utils._LEGACY_LAYER_TYPE_REMAP) or 'hybrid'; every layer
has its own Mamba-2 mixer of mamba_expand x hidden channels, n_mamba_heads heads and the config's groups, state
and conv width (Zamba2ForCausalLM.get_mamba_state_shape_from_config); the hybrid positions cycle through
num_mem_blocks shared blocks (Zamba2Model: itertools.cycle), each position with an attention cache of its own
(layers.SharedBlockHybrid). The attention is 2 x hidden wide over num_attention_heads heads; Zamba2Config derives
attention_hidden_size, attention_head_dim and mamba_headdim from hidden_size and the head counts, so a config that
writes other values is refused by name rather than planned with either.
"""

from __future__ import annotations

from kvplan.models.fields import ConfigFields
from kvplan.models.layers import FullAttention, Layer, Mamba2State, SharedBlockHybrid, checkpoint_conv_bytes

HYBRID = "hybrid"
MAMBA_WORDS = ("mamba", "linear_attention")


def is_shared_block_config(lm: ConfigFields) -> bool:
    """A layers_block_type list with 'hybrid' entries (Zamba2); Nemotron-H's lists have none."""
    words = lm.data.get("layers_block_type")
    return isinstance(words, list) and HYBRID in words


def shared_block_layers(lm: ConfigFields, num_layers: int, hidden: int, heads: int) -> list[Layer]:
    words = lm.array("layers_block_type") or []
    if len(words) != num_layers:
        raise lm.fail("layers_block_type", f"has {len(words)} entries for {num_layers} layers")
    unknown = [word for word in words if word != HYBRID and word not in MAMBA_WORDS]
    if unknown:
        raise lm.fail("layers_block_type", f"has an unknown block type {str(unknown[0])!r:.40}; expected "
                                           f"{', '.join(MAMBA_WORDS)} or {HYBRID}")
    hybrid = [index for index, word in enumerate(words) if word == HYBRID]
    listed = lm.array("hybrid_layer_ids")  # Zamba2Config recomputes it from layers_block_type
    if listed is not None and list(listed) != hybrid:
        raise lm.fail("hybrid_layer_ids", "does not list the hybrid layers of layers_block_type")
    blocks = lm.integer("num_mem_blocks", 1)  # Zamba2Config's default
    attention = _attention(lm, hidden, heads)
    state = _mamba2(lm, hidden)
    layers: list[Layer] = [state] * num_layers
    for position, index in enumerate(hybrid):
        layers[index] = SharedBlockHybrid(attention, state, owns_block=position < blocks)
    return layers


def _derived(lm: ConfigFields, key: str, value: int) -> int:
    """A size Zamba2Config derives: the config's own copy, where written, must agree with it."""
    written = lm.optional_int(key)
    if written is not None and written != value:
        raise lm.fail(key, f"({written}) is not the {value} transformers' Zamba2Config derives and vLLM builds")
    return value


def _attention(lm: ConfigFields, hidden: int, heads: int) -> FullAttention:
    width = _derived(lm, "attention_hidden_size", 2 * hidden)
    if width % heads:
        raise lm.fail("num_attention_heads", f"({heads}) does not divide the attention width {width}")
    # Zamba2Attention builds its Attention without num_kv_heads: one KV head per attention head, whatever
    # num_key_value_heads says
    lm.optional_int("num_key_value_heads")
    return FullAttention(heads, _derived(lm, "attention_head_dim", width // heads))


def _mamba2(lm: ConfigFields, hidden: int) -> Layer:
    inner = lm.integer("mamba_expand", 2) * hidden
    heads = lm.integer("n_mamba_heads", 8)
    if inner % heads:
        raise lm.fail("n_mamba_heads", f"({heads}) does not divide the Mamba width {inner}")
    state = Mamba2State(inner, heads, _derived(lm, "mamba_headdim", inner // heads), lm.integer("mamba_ngroups", 1),
                        lm.integer("mamba_d_state", 64), lm.integer("mamba_d_conv", 4),
                        lm.optional_int("chunk_size"))
    # the conv state in the checkpoint's dtype until an engine says otherwise (as hf_config._state_layer)
    return state.as_served(checkpoint_conv_bytes(lm), None, 0, 0)
