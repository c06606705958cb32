"""ModelSpec: the normalized architecture of one model. Pure data; parsing lives in models.hf_config."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from kvplan.models.layers import Layer
from kvplan.models.resident import ResidentCopy
from kvplan.models.rope import RopeTable
from kvplan.models.towers import VisionTower


@dataclass(eq=False)
class SpecSource:
    """Where a spec was read from."""

    kind: str  # "bundled", "user", "local", "hub", "hub-cache"
    location: str
    revision: str | None = None


@dataclass(eq=False)
class MoE:
    """The mixture-of-experts layout of a model."""

    num_experts: int
    experts_per_token: int
    expert_intermediate_size: int
    shared_experts: int = 0
    shared_intermediate_size: int = 0
    dense_layers: tuple[int, ...] = ()  # layers with one dense MLP in place of the experts
    # layers with neither experts nor an MLP: Nemotron-H's Mamba ('M') and attention ('*') blocks
    mlp_free_layers: tuple[int, ...] = ()
    # the width the routed experts run in, where it is not the hidden size (Nemotron-3's latent MoE); 0: hidden
    latent_size: int = 0

    def expert_layer_count(self, num_layers: int) -> int:
        """Decoder layers that hold routed experts."""
        return num_layers - len(self.dense_layers) - len(self.mlp_free_layers)


@dataclass(eq=False)
class Quantization:
    """The checkpoint's own quantization, from its config."""

    method: str
    bits: int | None = None
    group_size: int | None = None
    unquantized: tuple[str, ...] = ()
    # ModelOpt's kv_cache_quant_algo ("FP8", "NVFP4"), upper-cased; None: the KV cache is not quantized
    kv_cache_quant_algo: str | None = None
    # the file ModelOpt's settings were read from (hf_quant_config.json, or config.json where its
    # quantization_config is ModelOpt's own); empty for any other quantization
    source: str = ""
    # the routed experts' own format beside the rest's (DeepSeek-V4's expert_dtype "fp4": MXFP4); None: the same
    expert_format: str | None = None
    # MIXED_PRECISION's quantized_layers, as (decoder layer, role, quant_algo) once each; lm_head at layer -1
    # (kvplan.models.modelopt.mixed_formats); empty for any other quantization
    formats: tuple[tuple[int, str, str], ...] = ()
    # a non-ModelOpt quantization_config's kv_cache_scheme (compressed-tensors) as sorted JSON; kvplan does not
    # size the KV cache from it, and says so in a note (engines/common.py kv_cache_scheme_note)
    kv_cache_scheme: str | None = None


@dataclass(frozen=True)
class LayerParams:
    """One decoder layer's parameters by what a quantized checkpoint does with them: its mixer's linear
    projections, its MLP's outside the routed experts, the routed experts', and the rest (norms, biases,
    convolutions, SSM per-head parameters, the router), which no weight format quantizes."""

    mixer: int
    mlp: int
    experts: int
    loose: int
    float32: int = 0  # of loose, the parameters the engines hold in float32 whatever the model dtype
    score_bias: int = 0  # of loose, the router's e_score_correction_bias (weights.SCORE_BIAS: its dtype by engine)


@dataclass(eq=False)
class ParamCount:
    """Parameters in all, and by the role that decides how each is stored."""

    total: int
    exact: bool
    note: str = ""
    # Parameters by the role that decides their storage format under quantization.
    embeddings: int = 0
    lm_head: int = 0
    experts: int = 0
    vision: int = 0
    by_layer: tuple[LayerParams, ...] = ()  # each decoder layer, in order (empty: not counted per layer)
    # the checkpoint's MTP module as vLLM builds it for an MTP draft, outside total (0: not counted apart)
    mtp: int = 0

    @property
    def decoder(self) -> int:
        """The decoder layers' parameters: all but the embeddings, lm_head and the towers."""
        return self.total - self.embeddings - self.lm_head - self.vision

    @property
    def linear_non_expert(self) -> int:
        return self.decoder - self.experts


@dataclass(frozen=True)
class ModelSpec:
    """The normalized architecture of one model: its layers, sizes and where it came from."""

    id: str
    source: SpecSource
    architecture: str
    model_type: str
    num_layers: int
    hidden_size: int
    num_attention_heads: int
    vocab_size: int
    intermediate_size: int
    tie_word_embeddings: bool
    dtype: str
    max_context: int
    layers: tuple[Layer, ...]
    params: ParamCount
    moe: MoE | None = None
    quantization: Quantization | None = None
    mtp_layers: int = 0  # multi-token-prediction layers shipped with the checkpoint (speculative drafts)
    mtp_layer: Layer | None = None  # what one MTP layer caches, where the checkpoint gives it its own geometry
    stored_weight_bytes: int | None = None  # from the Hub's safetensors headers, for quantized checkpoints
    rope_tables: tuple[RopeTable, ...] = ()  # the cos/sin tables the engine builds beside the weights
    tower: VisionTower | None = None  # a multimodal wrapper's vision tower (models/towers.py)
    # weights the engines hold beyond the checkpoint's count (models/resident.py); params stays the published count
    resident: tuple[ResidentCopy, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def kv_layers(self) -> tuple[Layer, ...]:
        return tuple(layer for layer in self.layers if layer.holds_kv)

    @property
    def num_kv_layers(self) -> int:
        return len(self.kv_layers)

    @property
    def num_kv_heads(self) -> int:
        return max((layer.kv_heads for layer in self.kv_layers), default=0)

    @property
    def head_dim(self) -> int:
        return max((layer.head_dim for layer in self.kv_layers), default=0)

    @property
    def attention(self) -> str:
        """A short label: the kinds present, with counts when mixed ('full' or 'sliding:52+full:10')."""
        counts = Counter(layer.kind for layer in self.layers)
        if len(counts) == 1:
            return next(iter(counts))
        return "+".join(f"{kind}:{n}" for kind, n in counts.most_common())

    def kv_bytes_per_token(self, kv_bytes: int, tp: int = 1) -> int:
        return sum(layer.bytes_per_token(kv_bytes, tp) for layer in self.layers)

    def summary(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "num_layers": self.num_layers,
            "kv_layers": self.num_kv_layers,
            "num_kv_heads": self.num_kv_heads,
            "head_dim": self.head_dim,
            "attention": self.attention,
            "params": self.params.total,
        }


def layer_runs(layers: tuple[Layer, ...]) -> list[dict[str, Any]]:
    """Consecutive identical layers folded into runs: {"kind", "count", "first", ...the kind's fields}."""
    runs: list[dict[str, Any]] = []
    for index, layer in enumerate(layers):
        if runs and runs[-1]["_layer"] == layer:
            runs[-1]["count"] += 1
            continue
        runs.append({"_layer": layer, "first": index, "count": 1, "kind": layer.kind,
                     **{k: v for k, v in asdict(layer).items() if v is not None}})
    for run in runs:
        del run["_layer"]
    return runs


def _quantization_dict(quant: Quantization | None) -> dict[str, Any] | None:
    """The checkpoint's quantization; ModelOpt's KV algorithm and source file only where they are set."""
    if quant is None:
        return None
    shown = asdict(quant)
    for key in ("kv_cache_quant_algo", "source"):
        if not shown[key]:
            del shown[key]
    formats = shown.pop("formats")
    if formats:  # how many decoder layers (and lm_head) hold each role in each format
        shown["formats"] = dict(Counter(f"{role} {algo}" for _, role, algo in formats))
    return shown


def spec_to_dict(spec: ModelSpec) -> dict[str, Any]:
    return {
        **spec.summary(),
        "source": asdict(spec.source),
        "architecture": spec.architecture,
        "model_type": spec.model_type,
        "hidden_size": spec.hidden_size,
        "num_attention_heads": spec.num_attention_heads,
        "vocab_size": spec.vocab_size,
        "intermediate_size": spec.intermediate_size,
        "tie_word_embeddings": spec.tie_word_embeddings,
        "dtype": spec.dtype,
        "max_context": spec.max_context,
        "params_exact": spec.params.exact,
        "params_breakdown": {"embeddings": spec.params.embeddings, "lm_head": spec.params.lm_head,
                             "experts": spec.params.experts, "vision": spec.params.vision},
        "moe": asdict(spec.moe) if spec.moe else None,
        "quantization": _quantization_dict(spec.quantization),
        "mtp_layers": spec.mtp_layers,
        "stored_weight_bytes": spec.stored_weight_bytes,
        "kv_bytes_per_token_16bit": spec.kv_bytes_per_token(2),
        "layers": layer_runs(spec.layers),
        "notes": list(spec.notes),
    }
