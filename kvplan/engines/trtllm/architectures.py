"""The model architectures TensorRT-LLM's PyTorch backend registers: the @register_auto_model("<arch>") names of
tensorrt_llm/_torch/models/modeling_*.py as the backend's static index of them, _torch/models/_arch_index.py
MODEL_ARCH_TO_MODULE, lists them, read from the stored NVIDIA/TensorRT-LLM sources at one commit (065ff9e9), and
the few names decorated in stored modeling files of other commits that index lacks (Qwen4Exp*, Glm5Next,
DeepseekV41*), each with its commit, into data/architectures.json (benchmarks/architecture_registries.py). The
wheel is not on PyPI, so no release was read: the data covers the stored sources, which kvplan applies to its
releases (releases.py) as it does the budget.

For a name not registered, AutoModelForCausalLM.from_config (_torch/models/modeling_auto.py) raises "Unknown
architecture for AutoModelForCausalLM"; the PyTorch backend has no Transformers fallback. The TensorRT engine
backend (--backend tensorrt / trt) builds from tensorrt_llm/models/__init__.py MODEL_MAP instead: its keys, read
from a stored copy at its own commit, are the data's engine_backend."""

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

    def refusal(self, spec: ModelSpec, dep: Deployment, version: str) -> str | None:
        if dep.backend in (None, "pytorch"):
            return self.unregistered(spec.architecture, version)
        engine = self.data()["engine_backend"]
        if spec.architecture in engine["architectures"]:
            return None
        return (f"{self.label}'s TensorRT engine backend does not register {spec.architecture} (its "
                f"tensorrt_llm/models/__init__.py MODEL_MAP at {engine['commit'][:8]}, applied to {version}; "
                f"the PyTorch backend's is the default)")

    def consequence(self, dep: Deployment) -> str:
        if dep.backend in (None, "pytorch"):
            return self.fallback
        return "the engine backend has no model class to convert and build it with (no MODEL_MAP key)"


REGISTRIES = StoredSources(
    "TensorRT-LLM", Path(__file__).parent / "data" / "architectures.json",
    "TensorRT-LLM has no model class for it and fails at start-up (the PyTorch backend's AutoModelForCausalLM "
    "raises 'Unknown architecture', _torch/models/modeling_auto.py)")
