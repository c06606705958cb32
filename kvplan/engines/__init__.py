"""The engine registry: the one list of engines, each module holding one Engine (its budget rule)."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kvplan.deployment import Deployment
    from kvplan.engines.base import Engine
    from kvplan.models.model import ModelSpec
    from kvplan.plan import GpuChoice, Plan

NAMES = ("vllm", "sglang", "trtllm", "simple")


def engine(name: str) -> Engine:
    if name not in NAMES:
        raise ValueError(f"unknown engine {name!r}")
    module: Any = import_module(f"kvplan.engines.{name}")
    return module.ENGINE


def estimate(spec: ModelSpec, dep: Deployment, gpu: GpuChoice, ladder: list[int] | tuple[int, ...] = (),
             draft: ModelSpec | None = None) -> Plan:
    from kvplan.engines.base import Target, plan

    return plan(engine(dep.engine), Target(spec, dep, gpu, tuple(ladder), draft))
