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
kv_cache_dtype's dtype. kvplan reads the scheme as vLLM does for the FP8 scheme it validates
(CompressedTensorsKVCacheMethod.validate_kv_cache_scheme: num_bits 8, type float); any other scheme is noted as
not read (the validators differ by release: 0.14 and 0.19 test `type != float and num_bits != 8`, 0.33 `or`)."""

from __future__ import annotations

import json

from kvplan.deployment.declaration import Deployment
from kvplan.engines.vllm.releases import parse_version
from kvplan.models.model import ModelSpec

FORCED_FROM = (0, 15)  # the first release whose Attention turns a scheme into fp8
AUTO_ONLY_FROM = (0, 22)  # from here only under kv_cache_dtype auto
SCHEME_DTYPE = "fp8"  # what Attention.__init__ sets (cache_config.cache_dtype = "fp8")


def fp8_scheme(spec: ModelSpec) -> dict[str, object] | None:
    """The checkpoint's kv_cache_scheme where it is the 8-bit float one vLLM serves; None otherwise."""
    text = spec.quantization.kv_cache_scheme if spec.quantization else None
    scheme = json.loads(text) if text else None
    if not isinstance(scheme, dict) or scheme.get("num_bits") != 8 or scheme.get("type") != "float":
        return None
    return scheme


def _applies(spec: ModelSpec, wanted: tuple[int, ...]) -> bool:
    return (wanted[:2] >= FORCED_FROM and fp8_scheme(spec) is not None
            and not any(layer.latent_cache for layer in spec.layers))


def auto_kv_cache_dtype(spec: ModelSpec, dep: Deployment, wanted: tuple[int, ...]) -> str | None:
    """What vLLM makes of kv_cache_dtype auto for this checkpoint's scheme: fp8 from 0.15.0; None where no rule."""
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
    if fp8_scheme(spec) is None:
        return (f"{key} is not read (vLLM loads only num_bits 8, type float): kvplan plans the KV cache in "
                f"{kv_name} (kv_cache_dtype {dep.kv_cache_dtype})")
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
