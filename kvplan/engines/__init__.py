"""One module per engine budget rule; each exposes plan(spec, deployment, gpu, gpu_cc, ladder) -> Plan."""

from __future__ import annotations

from kvplan.deployment import Deployment
from kvplan.models.model import ModelSpec
from kvplan.plan import GpuChoice, Plan


def estimate(spec: ModelSpec, dep: Deployment, gpu: GpuChoice, gpu_cc: str | None = None,
             ladder: list[int] | None = None) -> Plan:
    dep.validate(spec.num_attention_heads, spec.num_layers)
    if dep.engine == "vllm":
        from kvplan.engines import vllm as engine
    elif dep.engine == "sglang":
        from kvplan.engines import sglang as engine  # type: ignore[no-redef]
    elif dep.engine == "trtllm":
        from kvplan.engines import trtllm as engine  # type: ignore[no-redef]
    else:
        from kvplan.engines import simple as engine  # type: ignore[no-redef]
    return engine.plan(spec, dep, gpu, gpu_cc, ladder)
