"""The model architectures each vLLM release registers: the keys of vllm/model_executor/models/registry.py
_VLLM_MODELS (models/__init__.py _MODELS before registry.py), per covered release in data/architectures.json
(benchmarks/architecture_registries.py regenerates it from the wheels). A name its release does not register
fails ModelRegistry.inspect_model_cls ("Model architectures [...] are not supported for now", or for
_PREVIOUSLY_SUPPORTED_MODELS "was supported in vLLM until v...") unless _try_resolve_transformers serves it with the
Transformers backend, which needs transformers' own class for it to support vLLM's attention interface (0.33.0)."""

from __future__ import annotations

from pathlib import Path

from kvplan.engines.registered import Registries

REGISTRIES = Registries(
    "vLLM", Path(__file__).parent / "data" / "architectures.json",
    "vLLM refuses it at start-up, or where transformers' own class supports vLLM's attention interface runs it "
    "on its Transformers backend, which kvplan does not model")
