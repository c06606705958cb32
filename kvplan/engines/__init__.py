"""The engines: the Engine protocol and the planning loop they share (base.py, common.py), and one folder per
engine (vllm/, sglang/, trtllm/, simple/) that kvplan.registry names."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kvplan.deployment import Deployment
    from kvplan.models.model import ModelSpec
    from kvplan.plan import GpuChoice, Plan


def plan_deployment(spec: ModelSpec, dep: Deployment, gpu: GpuChoice, ladder: list[int] | tuple[int, ...] = (),
             draft: ModelSpec | None = None) -> Plan:
    """The plan of a deployment of the model on the GPU, by the rules of the engine it names."""
    from kvplan import registry
    from kvplan.engines.base import PlanInput, plan

    return plan(registry.engine(dep.engine), PlanInput(spec, dep, gpu, tuple(ladder), draft))
