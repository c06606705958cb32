"""Requests per second that `kvplan simulate` plays, per allocator, on 100,000 synthetic chat requests.
Target: each allocator under 2 s on a 2-core machine, all four under 10 s. Prints figures; asserts nothing. Wall
time and the process's CPU time are both shown: on a shared machine the CPU time is the steadier figure.

The workload: prompts lognormal with mean 1,155 tokens, outputs lognormal with mean 211 (the Azure conversation
trace's means, examples/traces/), all arriving at once, Qwen2.5-7B on one RTX 3090 at max_model_len 4,096 (a pool
that keeps every allocator memory-bound) and on one H100 at 8,192."""

from __future__ import annotations

import argparse
import time

from kvplan.api import estimate
from kvplan.simulate.allocators import ALLOCATORS, make_allocator
from kvplan.simulate.distributions import parse_distribution
from kvplan.simulate.pool import pool_from_plan
from kvplan.simulate.scheduler import simulate
from kvplan.simulate.workload import synthetic

DEPLOYMENTS = {"rtx3090, max_model_len 4096": ("rtx3090", 4096), "h100, max_model_len 8192": ("h100", 8192)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=100_000)
    args = parser.parse_args()
    for label, (gpu, max_model_len) in DEPLOYMENTS.items():
        pool = pool_from_plan(estimate("Qwen/Qwen2.5-7B", gpu=gpu, max_model_len=max_model_len))
        workload = synthetic(args.requests, parse_distribution("lognormal:1155,0.5", "prompt"),
                             parse_distribution("lognormal:211,1.0", "output"), seed=1).clipped(pool.max_model_len)
        print(f"{label}: {pool.num_blocks:,} blocks of {pool.block_size}, {args.requests:,} requests")
        total = cpu_total = 0.0
        for name in ALLOCATORS:
            start, cpu = time.perf_counter(), time.process_time()
            outcome = simulate(workload, pool, make_allocator(name, pool))
            seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu
            total += seconds
            cpu_total += cpu_seconds
            print(f"  {name:18} {seconds:6.2f} s wall {cpu_seconds:6.2f} s CPU  "
                  f"{args.requests / seconds:9,.0f} requests/s  {outcome.meter.steps:>9,} steps  "
                  f"{outcome.preemptions:>6,} preemptions")
        print(f"  {'all four':18} {total:6.2f} s wall {cpu_total:6.2f} s CPU")


if __name__ == "__main__":
    main()
