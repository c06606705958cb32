"""A wrapper's language sub-config as transformers builds it: a multimodal config class turns its text_config dict
into the sub-config class its model_type names (CONFIG_MAPPING[model_type](**text_config)), so a key the dict
leaves out takes that class's default. Qwen2-Audio's published config.json gives its qwen2 text_config only the
sizes that differ from Qwen2Config's (intermediate_size, vocab_size, max_position_embeddings), not hidden_size or
the layer count. Applied only to a sub-config that names no layer count: every other config reads as it did."""

from __future__ import annotations

from typing import Any

from kvplan.models.fields import ConfigFields

# transformers models/qwen2/configuration_qwen2.py Qwen2Config: the fields kvplan reads (use_sliding_window false:
# its __post_init__ then drops sliding_window, so every layer is full attention)
QWEN2_DEFAULTS: dict[str, Any] = {
    "vocab_size": 151936, "hidden_size": 4096, "intermediate_size": 22016, "num_hidden_layers": 32,
    "num_attention_heads": 32, "num_key_value_heads": 32, "max_position_embeddings": 32768,
    "tie_word_embeddings": False, "use_sliding_window": False, "max_window_layers": 28,
}
CLASS_DEFAULTS: dict[str, dict[str, Any]] = {"qwen2": QWEN2_DEFAULTS}


def with_class_defaults(nested: ConfigFields, layer_keys: tuple[str, ...]) -> ConfigFields:
    """The sub-config with its class's defaults under the keys it gives, where it names no layer count and its
    model_type has a default table here; else the sub-config as it is."""
    defaults = CLASS_DEFAULTS.get(nested.text("model_type") or "")
    if defaults is None or nested.first_key(layer_keys):
        return nested
    return ConfigFields({**defaults, **nested.data}, nested.where, nested.path, nested.accessed)
