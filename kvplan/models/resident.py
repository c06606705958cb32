"""Weights the engines hold on the GPU beyond the checkpoint's parameters.

The parameter count (models/params.py) is the checkpoint's, as the Hub publishes it. Where an engine builds a module
larger than what the checkpoint ships and fills the rest from tensors it already has, the GPU holds more: each such
case is a type here with its own count, which the weights term adds (kvplan.weights.resident_params) while the
published count stays as it is."""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.models.fields import ConfigFields
from kvplan.models.layers import FullAttention, Layer, SharedKv


@dataclass(frozen=True)
class ValueFromKey:
    """Gemma 4's attention_k_eq_v: its full-attention layers ship k_proj only and use K as V, yet every supported
    engine builds the whole fused QKV projection for them and copies K's weights into the V slot:

    - vLLM 0.19.0, 0.23.0 and 0.33.0 model_executor/models/gemma4.py: Gemma4Attention builds one QKVParallelLinear
      of num_heads, num_kv_heads (num_global_key_value_heads in these layers) and head_dim for every layer that has
      K and V; 0.19.0 and 0.23.0 Gemma4ForCausalLM.load_weights re-emit each k_proj of a full-attention layer as its
      v_proj, 0.33.0 _gemma4_layer_weights_mapper loads it into the shards ["k", "v"].
    - SGLang 0.5.11 and 0.5.23 srt/models/gemma4_causal.py (and gemma4_mm.py): Gemma4Attention's QKVParallelLinear,
      load_weights's should_dup_k_to_v for the layers _get_k_eq_v_layers names.
    - TensorRT-LLM _torch/models/modeling_gemma4.py@00e7d103 Gemma4Attention (a QKNormRoPEAttention with its fused
      qkv_proj; the weight mapper duplicates k_proj as v_proj).

    The V slot is as wide as K's (kv heads x head dim) and, in a quantized checkpoint, in K's format: it is counted
    as attention parameters of the layers that hold it."""

    layers: tuple[int, ...]  # decoder layers whose V slot is filled from K
    width: tuple[int, ...]  # each one's K output width, kv heads x head dim
    hidden: int  # the projection's input size

    def by_layer(self) -> dict[int, int]:
        """Parameters beyond the checkpoint's, by decoder layer."""
        return {index: width * self.hidden for index, width in zip(self.layers, self.width, strict=True)}

    def params(self) -> int:
        return sum(self.by_layer().values())

    def held_by(self, engine: str | None) -> bool:
        """Whether this engine allocates it (every engine does)."""
        return True

    def shown_widths(self) -> str:
        return " or ".join(f"{width:,}" for width in sorted(set(self.width)))

    def note(self) -> str:
        return (f"weights include the V slot the engines fill from K (attention_k_eq_v): {len(self.layers)} "
                f"full-attention layers x {self.shown_widths()} x {self.hidden:,} = {self.params():,} parameters "
                "beyond the checkpoint's count")

    def spec_note(self) -> str | None:
        """The model's own note, where the engines differ on holding it (None: every engine does)."""
        return None


@dataclass(frozen=True)
class SharedLayerValue(ValueFromKey):
    """The V slot of a KV-shared full-attention layer under attention_k_eq_v (num_kv_shared_layers: the layer reads
    an earlier layer's KV), which SGLang alone allocates. SGLang 0.5.23 srt/models/gemma4_causal.py Gemma4Attention
    builds one QKVParallelLinear of num_heads, total_num_kv_heads and head_dim for every layer, the KV-shared ones
    included (is_kv_shared_layer only picks the cache layer its RadixAttention reads and drops save_kv_cache); a
    full layer's head_dim and KV heads are the full-attention shape (srt/utils/hf_transformers/config.py
    _apply_gemma4_attention_overrides). vLLM 0.33.0 and TensorRT-LLM build a Q projection alone there (the V slot
    is not theirs). params.py counts such a layer's q, k and o (kv_attention less V under attention_k_eq_v), so
    what SGLang holds beyond it is V: kv heads x head dim x hidden."""

    def held_by(self, engine: str | None) -> bool:
        return engine == "sglang"

    def note(self) -> str:
        return (f"weights include the V slot SGLang's whole QKV holds in KV-shared full-attention layers "
                f"(attention_k_eq_v, num_kv_shared_layers): {len(self.layers)} layers x {self.shown_widths()} x "
                f"{self.hidden:,} = {self.params():,} parameters beyond the checkpoint's count")

    def spec_note(self) -> str | None:
        return (f"attention_k_eq_v: the V slot of {len(self.layers)} KV-shared full-attention layers is counted in "
                "SGLang's weights alone (SGLang 0.5.23 builds a whole QKV there, vLLM 0.33.0 and TensorRT-LLM a Q "
                "projection alone)")


ResidentCopy = ValueFromKey  # every kind of resident extra the spec can carry (SharedLayerValue is one)


def resident_copies(lm: ConfigFields, layers: tuple[Layer, ...], hidden: int) -> tuple[ResidentCopy, ...]:
    """What the engines allocate beyond the checkpoint for this config. The layers are those whose V params.py
    leaves out of the count (kv_attention: a layer of global_head_dim under attention_k_eq_v) and that compute their
    own K (ValueFromKey, every engine); a layer that reads an earlier layer's KV (num_kv_shared_layers) is built
    differently by each engine (vLLM 0.33.0 and TensorRT-LLM a Q projection alone, SGLang 0.5.23 the whole QKV),
    so its V slot is SGLang's alone (SharedLayerValue)."""
    if not lm.flag("attention_k_eq_v", False):
        return ()
    global_dim = lm.optional_int("global_head_dim")
    copies: list[ResidentCopy] = []
    for kind, cls in ((FullAttention, ValueFromKey), (SharedKv, SharedLayerValue)):
        held = [(index, layer.kv_heads * layer.head_dim) for index, layer in enumerate(layers)
                if isinstance(layer, kind) and layer.head_dim == global_dim]
        if held:
            copies.append(cls(tuple(i for i, _ in held), tuple(w for _, w in held), hidden))
    return tuple(copies)

