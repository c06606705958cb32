"""From a plan and a workload to a report: the pool, each allocator's run, the step time that maps arrival times
onto steps."""

from __future__ import annotations

from kvplan.errors import KvplanError
from kvplan.plan import Plan
from kvplan.simulate.allocators import ALLOCATORS, make_allocator
from kvplan.simulate.pool import StepTime, pool_from_plan, roofline_step_time
from kvplan.simulate.report import SimulationReport
from kvplan.simulate.scheduler import simulate
from kvplan.simulate.workload import Workload


def simulate_plan(plan: Plan, workload: Workload, allocators: tuple[str, ...] = tuple(ALLOCATORS), *,
                  kv_cache_bytes: int | None = None, prefix_caching: bool = True,
                  step_time: StepTime | None = None) -> SimulationReport:
    pool = pool_from_plan(plan, kv_cache_bytes)
    workload = workload.clipped(pool.max_model_len)
    timed = any(request.arrival > 0 for request in workload.requests)
    if timed and step_time is None:
        step_time = roofline_step_time(plan)
        if step_time is None:
            raise KvplanError("arrival times need a step time to map them onto engine steps, and this GPU's "
                              "bandwidth and FLOPS are unknown: give --step-time A_MS,B_MS_PER_1K_TOKENS",
                              "--step-time")
    outcomes = [simulate(workload, pool, make_allocator(name, pool, prefix_caching), step_time if timed else None)
                for name in allocators]
    context = {"model": plan.model.id, "gpu": plan.gpu.name, "engine": plan.engine.label,
               "prefix_caching": prefix_caching}
    return SimulationReport(pool, workload, outcomes, step_time if timed else None, context)
