"""A compressed-tensors checkpoint's quantization_config.kv_cache_scheme (an llm-compressor FP8 KV cache) as vLLM
reads it, by release (attention layer's __init__, read in each wheel):

- 0.6.0-0.14.1 (vllm/attention/layer.py Attention.__init__): no rule; the scheme only loads the k/v scales
  (CompressedTensorsKVCacheMethod), and the KV cache is kv_cache_dtype's (auto: the model dtype);
- 0.15.0-0.21.0 (attention/layer.py, then model_executor/layers/attention/attention.py from 0.16.0): "llm-compressor
  mdls need to set cache_dtype to fp8 manually": any scheme makes the layer's and cache_config's dtype fp8,
  whatever kv_cache_dtype says;
- 0.22.0-0.33.0 (model_executor/layers/attention/attention.py): the same, but only where kv_cache_dtype is auto,
  so an explicit dtype wins.

The rule is Attention's alone: MLAAttention (mla_attention.py) has none, so a model of MLA layers keeps
kv_cache_dtype's dtype.

Before any of that, CompressedTensorsConfig.get_quant_method hands each Attention layer a
CompressedTensorsKVCacheMethod, whose __init__ runs validate_kv_cache_scheme (compressed_tensors.py, read in the
0.10.0, 0.14.0, 0.14.1, 0.15.0, 0.19.0, 0.22.0-0.27.0 and 0.33.0 wheels); a scheme it refuses stops the start-up
(NotImplementedError, or ValueError from QuantizationStrategy where the strategy is no strategy at all), and kvplan
refuses it too (Validator). MLAAttention is its own class from 0.12.0 (no Attention, so not validated); before it,
MLA ran through Attention(use_mla=True) and was. A scheme the release accepts is planned as it serves it: the
Attention rule above takes any scheme, so 0.15.0-0.23.0 serve fp8 for the 4-bit float or 8-bit int schemes their
`and` lets through."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from kvplan.deployment.declaration import Deployment
from kvplan.engines.vllm.releases import parse_version
from kvplan.errors import KvplanError
from kvplan.models.model import ModelSpec

FORCED_FROM = (0, 15)  # the first release whose Attention turns a scheme into fp8
AUTO_ONLY_FROM = (0, 22)  # from here only under kv_cache_dtype auto
SCHEME_DTYPE = "fp8"  # what Attention.__init__ sets (cache_config.cache_dtype = "fp8")


MLA_OWN_CLASS_FROM = (0, 12)  # 0.12.0 attention/layer.py has class MLAAttention; 0.11.0 Attention(use_mla=...)


@dataclass(frozen=True)
class Validator:
    """One era of CompressedTensorsKVCacheMethod.validate_kv_cache_scheme. either: refuse where type is not float
    OR num_bits is not 8 (0.24.0+); else only where both differ (`and`, 0.10.0-0.23.0). Then the strategy must be
    one of strategies and symmetric truthy (every release)."""

    either: bool
    strategies: tuple[str, ...]

    def refusal(self, scheme: dict[str, Any]) -> str | None:
        """Why the release refuses the scheme; None where it accepts it."""
        type_, bits = scheme.get("type"), scheme.get("num_bits")
        off = (type_ != "float", bits != 8)
        if any(off) if self.either else all(off):
            return f"num_bits {json.dumps(bits)}, type {_shown(type_)} (it takes num_bits 8, type float)"
        if scheme.get("strategy") not in self.strategies:
            return f"strategy {_shown(scheme.get('strategy'))} (it takes {' or '.join(self.strategies)})"
        if not scheme.get("symmetric"):
            return f"symmetric {_shown(scheme.get('symmetric'))} (it takes symmetric scales only)"
        return None


def _shown(value: Any) -> str:
    """A scheme's value as config.json writes it: a name bare, anything else as JSON (null, false, 5), so that
    num_bits "8" (a string, which != 8) does not read as the 8 it is refused for."""
    return value if isinstance(value, str) else json.dumps(value)


# (first release, validator): 0.10.0-0.14.1 `and`, strategy "tensor"; 0.15.0 adds "attn_head" (a string compare,
# QuantizationStrategy's enum by 0.19.0, the same two values); 0.24.0 `or` (0.23.0 still `and`).
VALIDATORS = (((0, 0), Validator(False, ("tensor",))), ((0, 15), Validator(False, ("tensor", "attn_head"))),
              ((0, 24), Validator(True, ("tensor", "attn_head"))))


def _scheme(spec: ModelSpec) -> dict[str, Any] | None:
    """The checkpoint's compressed-tensors kv_cache_scheme (not a ModelOpt config's: modelopt.py)."""
    quant = spec.quantization
    if quant is None or not quant.kv_cache_scheme or quant.method.lower().startswith("modelopt"):
        return None
    scheme = json.loads(quant.kv_cache_scheme)
    return scheme if isinstance(scheme, dict) else None


def refusal(spec: ModelSpec, wanted: tuple[int, ...]) -> str | None:
    """Why the release stops at start-up on the scheme; None where it accepts it or runs no validator (no
    Attention layer: MLA layers from 0.12.0)."""
    scheme = _scheme(spec)
    if scheme is None or (wanted[:2] >= MLA_OWN_CLASS_FROM and all(layer.latent_cache for layer in spec.layers)):
        return None
    validator = next(rule for first, rule in reversed(VALIDATORS) if wanted[:2] >= first)
    return validator.refusal(scheme)


def check(spec: ModelSpec, dep: Deployment, release: str) -> None:
    """Refuse a scheme the release refuses at start-up, in one line naming the key and the release (the plan's
    note says so instead with --allow-unmodelled)."""
    why = refusal(spec, parse_version(release))
    if why is not None and not dep.allow_unmodelled:
        raise KvplanError(f"vLLM {release} refuses quantization_config.kv_cache_scheme at start-up: {why} "
                          "(compressed_tensors.py validate_kv_cache_scheme); --allow-unmodelled plans it anyway",
                          f"{spec.source.location}: quantization_config.kv_cache_scheme")


def _applies(spec: ModelSpec, wanted: tuple[int, ...]) -> bool:
    """Attention's rule (0.15.0+) for any scheme that reached it: one the validator accepts, or one planned past
    it with --allow-unmodelled."""
    return (wanted[:2] >= FORCED_FROM and _scheme(spec) is not None
            and not any(layer.latent_cache for layer in spec.layers))


def auto_kv_cache_dtype(spec: ModelSpec, dep: Deployment, wanted: tuple[int, ...]) -> str | None:
    """What vLLM makes of kv_cache_dtype auto for this checkpoint's scheme: fp8 from 0.15.0; None where no rule.
    A scheme the release refuses has stopped before (check, from Vllm.settings)."""
    return SCHEME_DTYPE if dep.kv_cache_dtype == "auto" and _applies(spec, wanted) else None


def forced_kv_cache_dtype(spec: ModelSpec, dep: Deployment, wanted: tuple[int, ...]) -> str | None:
    """fp8 where the release serves the scheme in fp8 over an explicit kv_cache_dtype (0.15.0-0.21.0: Attention.__init__
    sets cache_config.cache_dtype before the KV cache is sized); None otherwise."""
    explicit = dep.kv_cache_dtype != "auto"
    return SCHEME_DTYPE if explicit and wanted[:2] < AUTO_ONLY_FROM and _applies(spec, wanted) else None


def note(spec: ModelSpec, dep: Deployment, release: str, kv_name: str) -> str | None:
    """What the plan says of the scheme: read as the release reads it, or why it is not."""
    text = spec.quantization.kv_cache_scheme if spec.quantization else None
    if text is None:
        return None
    wanted = parse_version(release)
    key = f"quantization_config.kv_cache_scheme {text}"
    if spec.quantization and spec.quantization.method.lower().startswith("modelopt"):
        return modelopt_note(key, kv_name, dep)
    if _scheme(spec) is None:
        return None
    why = refusal(spec, wanted)
    if why is not None:  # past check: --allow-unmodelled
        return (f"vLLM {release} refuses {key} at start-up ({why}; validate_kv_cache_scheme): planned anyway "
                f"(--allow-unmodelled) as its Attention would read it: KV cache in {kv_name}")
    if any(layer.latent_cache for layer in spec.layers):
        return (f"{key}: vLLM's MLA layers take no dtype from it (the rule is Attention's): KV cache in {kv_name}")
    if wanted[:2] < FORCED_FROM:
        return f"{key}: vLLM {release} takes no dtype from it (from 0.15.0 it serves fp8): KV cache in {kv_name}"
    if dep.kv_cache_dtype == "auto":
        return f"KV cache in fp8: vLLM {release}'s Attention serves kv_cache_dtype auto in fp8 for {key}"
    if wanted[:2] < AUTO_ONLY_FROM:
        return (f"KV cache in fp8: vLLM {release}'s Attention serves fp8 for {key} whatever --kv-cache-dtype says "
                f"(not the {dep.kv_cache_dtype} given; 0.22.0 honours an explicit one)")
    return f"{key}: --kv-cache-dtype {dep.kv_cache_dtype} wins over it (vLLM {release} applies it under auto only)"


def modelopt_note(key: str, kv_name: str, dep: Deployment) -> str:
    """An inline ModelOpt config's kv_cache_scheme that is neither 8-bit nor 4-bit float (models/modelopt.py
    unread_kv_scheme), as vLLM 0.33.0 reads it: ModelOptQuantConfigBase.from_config (modelopt.py, the same flat
    branch from 0.19.0) takes it as no KV cache quantization, and kv_cache_dtype auto (utils/torch_utils.py
    get_kv_cache_quant_algo_string) warns and falls back to auto."""
    return (f"ModelOpt {key}: vLLM 0.33.0 from_config takes it as no KV cache quantization (neither 8-bit nor 4-bit "
            f"float) and kv_cache_dtype auto falls back to auto, with a warning: KV cache in {kv_name} "
            f"(kv_cache_dtype {dep.kv_cache_dtype})")
