"""The model architectures each SGLang release registers: the class names of each srt/models/*.py module's
EntryClass (srt/models/registry.py import_model_classes), per covered release in data/architectures.json
(benchmarks/architecture_registries.py regenerates it from the wheels). For a name its release does not register,
_ModelRegistry._normalize_archs appends TransformersForCausalLM from 0.4.7 (0.4.6 refuses it): the model is served by the
Transformers backend (srt/models/transformers.py), whose caches are not those of SGLang's own class."""

from __future__ import annotations

from pathlib import Path

from kvplan.engines.registered import Registries

REGISTRIES = Registries(
    "SGLang", Path(__file__).parent / "data" / "architectures.json",
    "SGLang falls back to its Transformers backend (TransformersForCausalLM; 0.4.6 refuses it), which kvplan does "
    "not model")
