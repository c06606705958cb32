"""Typed reads of a Hugging Face config dict, with aliases and one-line errors naming file and key."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from kvplan.errors import KvplanError

# The largest value each config key may take. Generous (no real model comes within 10x of most of these) but
# finite, so that a corrupt or hostile config fails at once with a line naming the key instead of building a
# ten-million-layer tuple. The largest real values seen: DeepSeek-V3 61 layers and 256 experts, vocabulary
# 262,208 (Gemma 3), Llama 4 context 10,485,760, hidden size 14,848, 232 attention heads.
MAX_LAYERS = 4096
MAX_CONTEXT = 2**31
_LIMITS: dict[tuple[str, ...], int] = {
    ("num_hidden_layers", "n_layer", "n_layers", "num_layers", "depth", "num_nextn_predict_layers",
     "first_k_dense_replace", "max_window_layers", "attn_layer_period", "attn_layer_offset", "decoder_sparse_step",
     "interleave_moe_layer_step", "moe_layer_freq", "no_rope_layer_interval", "sliding_window_pattern",
     "_sliding_window_pattern"): MAX_LAYERS,
    ("hidden_size", "n_embd", "n_embed", "d_model", "embed_dim"): 10**6,
    ("intermediate_size", "ffn_dim", "n_inner", "ffn_hidden_size", "moe_intermediate_size",
     "shared_expert_intermediate_size", "intermediate_size_mlp", "mamba_d_inner"): 10**7,
    ("num_attention_heads", "n_head", "n_heads", "n_head_kv", "num_kv_heads", "num_key_value_heads",
     "multi_query_group_num", "kv_n_heads"): 8192,
    ("head_dim", "attention_head_dim", "hidden_size_per_head", "qk_rope_head_dim", "qk_nope_head_dim",
     "v_head_dim", "kv_lora_rank", "q_lora_rank", "state_size", "mamba_d_state", "ssm_state_size", "rotary_dim"): 65536,
    ("num_local_experts", "num_experts", "n_routed_experts", "num_experts_per_tok", "experts_per_token",
     "moe_topk", "n_shared_experts"): 65536,
    ("vocab_size", "pad_vocab_size_multiple"): 10**8,
    ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "max_sequence_length",
     "max_seq_length", "seq_len", "original_max_position_embeddings", "sliding_window", "sliding_window_size",
     "attention_chunk_size"): MAX_CONTEXT,
    ("expansion_ratio", "expand", "mamba_expand", "num_channels", "in_channels", "in_chans", "pooling_kernel_size"): 1024,
    ("conv_kernel", "mamba_d_conv", "patch_size", "max_dynamic_patch"): 4096,
    ("time_step_rank", "image_size"): 10**6,
    ("bits", "w_bit", "weight_bits", "num_bits"): 64,
    ("group_size", "q_group_size"): 2**24,
}
INT_LIMITS: dict[str, int] = {key: limit for keys, limit in _LIMITS.items() for key in keys}
DEFAULT_INT_LIMIT = 10**9  # a key without its own entry
FLOAT_LIMITS: dict[str, float] = {"factor": 1024.0}
DEFAULT_FLOAT_LIMIT = 1e9


class ConfigFields:
    """A view of one config dict (optionally a nested language config) that reads typed values."""

    def __init__(self, data: dict[str, Any], where: str, path: tuple[str, ...] = (),
                 accessed: set[tuple[str, ...]] | None = None) -> None:
        self.data = data
        self.where = where
        self.path = path
        # Every key path read, shared with nested views: `models import` keeps exactly these.
        self.accessed: set[tuple[str, ...]] = set() if accessed is None else accessed

    @property
    def prefix(self) -> str:
        return "".join(f"{p}." for p in self.path)

    def _key(self, key: str) -> str:
        return f"{self.prefix}{key}"

    def _mark(self, key: str) -> None:
        if key in self.data:
            self.accessed.add((*self.path, key))

    def fail(self, key: str, message: str) -> KvplanError:
        return KvplanError(f"key '{self._key(key)}' {message}", self.where)

    def has(self, key: str) -> bool:
        self._mark(key)
        return self.data.get(key) is not None

    def first_key(self, keys: Sequence[str]) -> str | None:
        found = next((k for k in keys if self.data.get(k) is not None), None)
        if found is not None:
            self._mark(found)
        return found

    def integer(self, keys: str | Sequence[str], default: int | None = None, *, minimum: int = 1,
            required: bool = True) -> int:
        names = [keys] if isinstance(keys, str) else list(keys)
        key = self.first_key(names)
        if key is None:
            if default is not None or not required:
                return default  # type: ignore[return-value]
            raise self.fail(names[0], "is missing" + (f" (also looked for {', '.join(names[1:])})"
                                                       if len(names) > 1 else ""))
        value = self.data[key]
        if isinstance(value, float) and math.isfinite(value) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(key, f"must be an integer, got {value!r:.60}")
        if value < minimum:
            raise self.fail(key, f"must be at least {minimum}, got {value}")
        limit = INT_LIMITS.get(key, DEFAULT_INT_LIMIT)
        if value > limit:
            raise self.fail(key, f"is {value:,}, beyond any real model (at most {limit:,})")
        return value

    def optional_int(self, keys: str | Sequence[str], *, minimum: int = 1) -> int | None:
        return self.integer(keys, minimum=minimum, required=False)

    def number(self, key: str, default: float | None = None) -> float | None:
        self._mark(key)
        value = self.data.get(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            raise self.fail(key, f"must be a positive number, got {value!r:.60}")
        limit = FLOAT_LIMITS.get(key, DEFAULT_FLOAT_LIMIT)
        if value > limit:
            raise self.fail(key, f"is {value:,}, beyond any real model (at most {limit:,})")
        return float(value)

    def flag(self, key: str, default: bool) -> bool:
        self._mark(key)
        value = self.data.get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self.fail(key, f"must be true or false, got {value!r:.60}")
        return value

    def text(self, keys: str | Sequence[str], default: str | None = None) -> str | None:
        names = [keys] if isinstance(keys, str) else list(keys)
        key = self.first_key(names)
        if key is None:
            return default
        value = self.data[key]
        if not isinstance(value, str):
            raise self.fail(key, f"must be a string, got {value!r:.60}")
        return value

    def array(self, key: str) -> list[Any] | None:
        self._mark(key)
        value = self.data.get(key)
        if value is None:
            return None
        if not isinstance(value, list):
            raise self.fail(key, f"must be a list, got {value!r:.60}")
        return value

    def mapping(self, key: str) -> dict[str, Any] | None:
        self._mark(key)
        value = self.data.get(key)
        if value is None:
            return None
        if not isinstance(value, dict):
            raise self.fail(key, f"must be an object, got {value!r:.60}")
        return value

    def nested(self, key: str) -> ConfigFields | None:
        value = self.data.get(key)
        if value is None:
            return None
        if not isinstance(value, dict):
            raise self.fail(key, f"must be an object, got {value!r:.60}")
        return ConfigFields(value, self.where, (*self.path, key), self.accessed)


def trimmed(data: dict[str, Any], accessed: set[tuple[str, ...]]) -> dict[str, Any]:
    """Only the key paths that were read, in the config's own key order."""
    result: dict[str, Any] = {}
    for key, value in data.items():
        if (key,) in accessed:
            result[key] = value
        elif isinstance(value, dict):
            inner = trimmed(value, {p[1:] for p in accessed if len(p) > 1 and p[0] == key})
            if inner:
                result[key] = inner
    return result
