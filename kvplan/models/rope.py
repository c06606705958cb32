"""The rotary-embedding tables a config implies: each distinct RoPE the attention layers use is one cos/sin table
of (positions x rotary width) values that the engine builds when the model is created, beside the weights."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kvplan.models.families import Family
from kvplan.models.fields import MAX_CONTEXT, ConfigFields

# vLLM's model files read config.max_position_embeddings with 8192 where the config has none (llama.py, falcon.py).
DEFAULT_POSITIONS = 8192
# the layer types transformers v5 keys a per-type rope_parameters by
LAYER_TYPES = ("full_attention", "sliding_attention", "chunked_attention")
# M-RoPE's table is 4 x its length (below): a table past this is no real model's
MAX_POSITIONS = 4 * MAX_CONTEXT


@dataclass(frozen=True)
class RopeTable:
    """One cos/sin cache: `positions` rows of `rotary_dim` values (cos and sin halves side by side)."""

    positions: int
    rotary_dim: int
    scaling: str = "default"
    float32: bool = False  # kept in float32 whatever the model dtype (else the model's)

    def values(self) -> int:
        return self.positions * self.rotary_dim


# Rows of the table by scaling type, as vLLM's rotary classes size them (layers/rotary_embedding/), from
# (max_position_embeddings, the pre-training length, the factor).
Rows = Callable[[int, int, float], int]


def _longest_scaled(longest: int, original: int, factor: float) -> int:
    return int(longest * factor)  # LinearScaling / DynamicNTKScaling reach max_position x factor


def _original_scaled(longest: int, original: int, factor: float) -> int:
    return int(original * factor)  # YaRN and DeepSeek's YaRN build from the pre-training length


def _stacked(longest: int, original: int, factor: float) -> int:
    return original + longest  # Phi-3 LongRoPE stacks the short table (pre-training length) on the long one


def _longest(longest: int, original: int, factor: float) -> int:
    return longest  # default, llama3, ntk, dynamic alpha


ROWS: dict[str, Rows] = {"linear": _longest_scaled, "dynamic": _longest_scaled, "yarn": _original_scaled,
                         "deepseek_yarn": _original_scaled, "deepseek_llama_scaling": _original_scaled,
                         "longrope": _stacked, "su": _stacked}
# M-RoPE (MRotaryEmbedding, mrope.py) is what get_rope builds for these types with an mrope_section, 4 x the length
# for multimodal positions (video frames)
MROPE_TYPES = ("default", "mrope", "yarn")


def _table(scaling: ConfigFields | None, longest: int, original: int, rotary_dim: int,
           float32: bool) -> RopeTable:
    if scaling is None:
        return RopeTable(longest, rotary_dim, "default", float32)
    kind = scaling.text(("rope_type", "type")) or "default"
    factor = scaling.number("factor") or 1.0
    original = scaling.integer("original_max_position_embeddings", original)
    if kind == "dynamic" and scaling.has("alpha"):  # DynamicNTKAlpha keeps max_position
        kind = "dynamic_alpha"
    rows = ROWS.get(kind, _longest)(longest, original, factor)
    if kind in MROPE_TYPES and (kind == "mrope" or scaling.has("mrope_section")):
        kind, rows = "mrope", 4 * rows
    if rows > MAX_POSITIONS:
        raise scaling.fail("factor" if scaling.has("factor") else "rope_type",
                           f"gives a RoPE table of {rows:,} positions, beyond any real model")
    return RopeTable(rows, rotary_dim, kind, float32)


def _per_layer_type(parameters: ConfigFields | None, has_sliding: bool) -> list[ConfigFields]:
    """transformers v5's one RoPE per layer type (Gemma 3: full and sliding attention), for the types present."""
    if parameters is None or not any(key in LAYER_TYPES for key in parameters.data):
        return []
    found: list[ConfigFields] = []
    for key in LAYER_TYPES:
        if key not in parameters.data or (key == "sliding_attention" and not has_sliding):
            continue
        fields = parameters.nested(key)
        # get_rope keeps one table per distinct RoPE (_ROPE_DICT): identical entries share it
        if fields is not None and all(fields.data != seen.data for seen in found):
            found.append(fields)
    return found


def rope_tables(lm: ConfigFields, family: Family, head_dim: int, has_sliding: bool) -> tuple[RopeTable, ...]:
    """The distinct RoPE tables of the model's attention layers; none for learned, ALiBi or no positions."""
    if not family.rotary or lm.flag("alibi", False) or head_dim == 0:
        return ()
    if not lm.flag("use_mem_rope", True):  # Zamba2 (vLLM 0.33.0 zamba2.py: rotary_emb only where use_mem_rope)
        return ()
    parameters = lm.nested("rope_parameters")
    partial = (lm.number("partial_rotary_factor") or (parameters.number("partial_rotary_factor") if parameters
                                                     else None) or lm.number("rotary_pct") or 1.0)
    if partial > 1:
        raise lm.fail("partial_rotary_factor", f"({partial:g}) must be at most 1")
    explicit = lm.optional_int("rotary_dim")
    if explicit and explicit > head_dim:
        raise lm.fail("rotary_dim", f"({explicit}) is wider than the {head_dim}-wide attention heads")
    rotary_dim = lm.optional_int("qk_rope_head_dim") or explicit or int(head_dim * partial)
    longest = lm.optional_int("max_position_embeddings") or family.max_position_default or DEFAULT_POSITIONS
    # Phi-3.5 keeps the pre-training length beside rope_scaling, not in it
    original = lm.optional_int("original_max_position_embeddings") or longest
    float32 = family.rope_float32
    per_type = _per_layer_type(parameters, has_sliding)
    if per_type:
        tables = [_table(fields, longest, original, rotary_dim, float32) for fields in per_type]
    else:
        tables = [_table(lm.nested("rope_scaling") or parameters, longest, original, rotary_dim, float32)]
        # sliding layers that rotate with a base of their own (Gemma 3's rope_local_base_freq) keep a second,
        # unscaled table; transformers' Gemma3TextConfig gives them 10,000 against rope_theta 1,000,000
        local = lm.number("rope_local_base_freq")
        own_base = local != lm.number("rope_theta") if local is not None else family.local_rope_base
        if own_base and has_sliding:
            tables.append(RopeTable(longest, rotary_dim, "default", float32))
    return tuple(tables)
