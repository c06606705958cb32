"""PLaMo 2's layers, read as vLLM 0.8.5 to 0.26.0 build them (model_executor/models/plamo2.py; 0.27.0 dropped
the file, so later releases refuse the architecture by its registry).

A layer is a Mamba mixer where is_mamba(config, i): i % mamba_step != mamba_step // 2, or, with no more layers
than mamba_step // 2, every layer but the last; the others are full attention (Plamo2AttentionMixer: an Attention
of num_key_value_heads heads of hidden_size_per_head, no window). The Mamba state (Plamo2ForCausalLM.
get_mamba_state_shape_from_config) is MambaMixer2's shape with mamba_num_heads x hidden_size_per_head channels and
no groups. Its mixer's parameters differ from MambaMixer2's (params._Mixers.plamo2_mixer).
"""

from __future__ import annotations

from kvplan.models.fields import ConfigFields
from kvplan.models.layers import FullAttention, Layer, Mamba2State, checkpoint_conv_bytes


def is_plamo2_config(lm: ConfigFields) -> bool:
    return lm.has("mamba_step")


def plamo2_layers(lm: ConfigFields, num_layers: int) -> list[Layer]:
    step = lm.integer("mamba_step")
    if step < 2:
        raise lm.fail("mamba_step", f"({step}) must be at least 2 (vLLM plamo2.py is_mamba asserts mamba_step > 1)")
    if not lm.flag("mamba_enabled", True):
        raise lm.fail("mamba_enabled", "is false: a PLaMo 2 without Mamba layers is not modelled")
    head = lm.integer("hidden_size_per_head")
    heads = lm.integer("mamba_num_heads")
    state = Mamba2State(heads * head, heads, head, 0, lm.integer("mamba_d_state"), lm.integer("mamba_d_conv"),
                        lm.optional_int("mamba_chunk_size"))
    mamba = state.as_served(checkpoint_conv_bytes(lm), None, 0, 0)  # conv state in the checkpoint's dtype
    attention = FullAttention(lm.integer("num_key_value_heads"), head)
    return [mamba if _is_mamba(step, num_layers, index) else attention for index in range(num_layers)]


def _is_mamba(step: int, num_layers: int, index: int) -> bool:
    if num_layers <= step // 2:
        return index != num_layers - 1
    return index % step != step // 2
