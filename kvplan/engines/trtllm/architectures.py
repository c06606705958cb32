"""The model architectures TensorRT-LLM's PyTorch backend registers: the @register_auto_model("<arch>") names of
tensorrt_llm/_torch/models/modeling_*.py as the backend's static index of them, _torch/models/_arch_index.py
MODEL_ARCH_TO_MODULE, lists them, read from the stored NVIDIA/TensorRT-LLM sources at one commit (065ff9e9), and
the few names decorated in stored modeling files of other commits that index lacks (Qwen4Exp*, Glm5Next,
DeepseekV41*), each with its commit, into data/architectures.json (benchmarks/architecture_registries.py). The
wheel is not on PyPI, so no release was read: the data covers the stored sources, which kvplan applies to its
releases (releases.py) as it does the budget.

For a name not registered, AutoModelForCausalLM.from_config (_torch/models/modeling_auto.py) raises "Unknown
architecture for AutoModelForCausalLM"; the PyTorch backend has no Transformers fallback. The TensorRT engine
backend (--backend tensorrt) builds from tensorrt_llm/models/__init__.py MODEL_MAP instead, which is not read
here, so its plans are not checked."""

from __future__ import annotations

from pathlib import Path

from kvplan.deployment.declaration import Deployment
from kvplan.engines.registered import Registries
from kvplan.models.model import ModelSpec


class StoredSources(Registries):
    """One reading of the stored sources, not a range of releases: the refusal names the commit read."""

    def unregistered(self, architecture: str, version: str) -> str | None:
        data = self.data()
        if architecture in data["architectures"]:
            return None
        return (f"{self.label}'s PyTorch backend does not register {architecture} (its "
                f"tensorrt_llm/_torch/models/_arch_index.py at {data['commit'][:8]}, applied to {version})")

    def check(self, spec: ModelSpec, dep: Deployment, version: str) -> str | None:
        if dep.backend not in (None, "pytorch"):
            return None
        return super().check(spec, dep, version)


REGISTRIES = StoredSources(
    "TensorRT-LLM", Path(__file__).parent / "data" / "architectures.json",
    "AutoModelForCausalLM raises 'Unknown architecture' at start-up (_torch/models/modeling_auto.py)")
