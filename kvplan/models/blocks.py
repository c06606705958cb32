"""Per-layer block lists, in the two spellings Nemotron-H configs use.

vLLM's nemotron_h.py (vllm 0.33.0 wheel, model_executor/models/nemotron_h.py) reads `hybrid_override_pattern`, one
symbol per decoder layer. Newer checkpoints (Nemotron-3 Ultra, Nemotron-3.5 Lightning) write `layers_block_type`,
one word per layer, which their configuration_nemotron_h.NemotronHConfig (named by the config's auto_map) turns
into that pattern: mamba -> 'M', attention -> '*', mlp -> '-', moe -> 'E'. Ultra gives no num_hidden_layers; the
list's length is the layer count.
"""

from __future__ import annotations

from kvplan.models.fields import ConfigFields

BLOCK_SYMBOLS = {"mamba": "M", "attention": "*", "mlp": "-", "moe": "E"}


def block_pattern(lm: ConfigFields) -> str | None:
    """One symbol per decoder layer, or None where the config names no block list."""
    pattern = lm.text("hybrid_override_pattern")
    if pattern is not None:
        return pattern
    words = lm.array("layers_block_type")
    if words is None:
        return None
    unknown = [word for word in words if word not in BLOCK_SYMBOLS]
    if unknown:
        raise lm.fail("layers_block_type", f"has an unknown block type {str(unknown[0])!r:.40}; expected "
                                           f"{', '.join(BLOCK_SYMBOLS)}")
    return "".join(BLOCK_SYMBOLS[word] for word in words)


def block_pattern_key(lm: ConfigFields) -> str:
    """The key an error about the block list names."""
    return "hybrid_override_pattern" if lm.has("hybrid_override_pattern") else "layers_block_type"
