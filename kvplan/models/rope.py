"""The rotary-embedding tables a config implies: each distinct RoPE the attention layers use is one cos/sin table
of (positions x rotary width) values that the engine builds when the model is created, beside the weights."""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.models.families import Family
from kvplan.models.fields import ConfigFields

# vLLM's model files read config.max_position_embeddings with 8192 where the config has none (llama.py, falcon.py).
DEFAULT_POSITIONS = 8192


@dataclass(frozen=True)
class RopeTable:
    """One cos/sin cache: `positions` rows of `rotary_dim` values (cos and sin halves side by side)."""

    positions: int
    rotary_dim: int
    scaling: str = "default"
    float32: bool = False  # kept in float32 whatever the model dtype (else the model's)

    def values(self) -> int:
        return self.positions * self.rotary_dim


def _positions(scaling: ConfigFields | None, max_position: int, original_default: int) -> tuple[str, int]:
    """Rows of the cache by scaling type, as vLLM's rotary classes size them (layers/rotary_embedding/)."""
    if scaling is None:
        return "default", max_position
    kind = scaling.text(("rope_type", "type")) or "default"
    factor = scaling.number("factor") or 1.0
    original = scaling.integer("original_max_position_embeddings", original_default)
    if kind == "mrope" or scaling.has("mrope_section"):
        # MRotaryEmbedding (mrope.py) enlarges its table 4 x for multimodal positions (video frames)
        return "mrope", 4 * (int(original * factor) if kind == "yarn" else max_position)
    if kind in ("linear", "dynamic") and not scaling.has("alpha"):
        # LinearScaling / DynamicNTKScaling: the table reaches max_position x factor
        return kind, int(max_position * factor)
    if kind in ("yarn", "deepseek_yarn", "deepseek_llama_scaling"):
        # YaRN and DeepSeek's YaRN build from the pre-training length: original x factor
        return kind, int(original * factor)
    if kind in ("longrope", "su"):
        # Phi-3 LongRoPE keeps the short table (original length) and the long one (max_position) stacked
        return kind, original + max_position
    return kind, max_position  # default, llama3, mrope, ntk, dynamic alpha


def rope_tables(lm: ConfigFields, family: Family, head_dim: int, has_sliding: bool) -> tuple[RopeTable, ...]:
    """The distinct RoPE tables of the model's attention layers; none for learned, ALiBi or no positions."""
    if not family.rotary or lm.flag("alibi", False) or head_dim == 0:
        return ()
    parameters = lm.nested("rope_parameters")
    per_type = [parameters.nested(key) for key, value in parameters.data.items()
                if isinstance(value, dict)] if parameters else []
    partial = (lm.number("partial_rotary_factor") or (parameters.number("partial_rotary_factor") if parameters
                                                     else None) or lm.number("rotary_pct") or 1.0)
    if partial > 1:
        raise lm.fail("partial_rotary_factor", f"({partial:g}) must be at most 1")
    rotary_dim = lm.optional_int(("qk_rope_head_dim", "rotary_dim")) or int(head_dim * partial)
    max_position = lm.optional_int("max_position_embeddings") or family.max_position_default or DEFAULT_POSITIONS
    # Phi-3.5 keeps the pre-training length beside rope_scaling, not in it
    original = lm.optional_int("original_max_position_embeddings") or max_position
    if per_type:  # transformers v5 nests one RoPE per layer type (Gemma 3: full and sliding attention)
        kinds = [_positions(fields, max_position, original) for fields in per_type]
    else:
        kinds = [_positions(lm.nested("rope_scaling") or parameters, max_position, original)]
        if family.local_rope_base and has_sliding:
            # sliding layers rotate with their own base (Gemma 3's rope_local_base_freq), unscaled: a second table
            kinds.append(("default", max_position))
    return tuple(RopeTable(positions, rotary_dim, kind, family.rope_float32) for kind, positions in kinds)
