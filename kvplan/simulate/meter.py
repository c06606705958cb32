"""What a simulation measures, summed over engine steps: running requests, tokens processed, and the pool's split
(allocators.base.Usage). The split is averaged over the steps in which a request waited for memory (those are the
steps where waste costs throughput), or over every step when no request ever waited for memory. A thinned series
of the pool's use over time feeds the charts."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kvplan.simulate.allocators.base import Usage

MAX_POINTS = 1024


@dataclass
class Meter:
    slots: int
    slot_bytes: int
    steps: int = 0
    memory_steps: int = 0
    running_sum: int = 0
    peak_running: int = 0
    processed: int = 0
    peak_allocated: int = 0
    everywhere: list[int] = field(default_factory=lambda: [0] * 6)  # Usage sums over every step
    memory_bound: list[int] = field(default_factory=lambda: [0] * 6)  # over the memory-bound steps
    series: list[tuple[int, float, float]] = field(default_factory=list)  # (step, tokens share, allocated share)
    _stride: int = 1
    _next_point: int = 0

    def add(self, step: int, total: Usage, last: Usage, steps: int, running: int, processed: int,
            waits_for_memory: bool) -> None:
        """`steps` steps from `step` on, `total` the sum of their usages, `last` the usage of the last one."""
        self.steps += steps
        self.running_sum += running * steps
        if running > self.peak_running:
            self.peak_running = running
        self.processed += processed
        tokens, reserved, internal, free, saved, unshared = total
        sums = self.everywhere
        sums[0] += tokens
        sums[1] += reserved
        sums[2] += internal
        sums[3] += free
        sums[4] += saved
        sums[5] += unshared
        if waits_for_memory:
            self.memory_steps += steps
            bound = self.memory_bound
            bound[0] += tokens
            bound[1] += reserved
            bound[2] += internal
            bound[3] += free
        allocated = last[0] + last[1] + last[2]  # growth only, so the last step holds the most
        if allocated > self.peak_allocated:
            self.peak_allocated = allocated
        end = step + steps - 1
        if end >= self._next_point:
            self._point(end, last[0], allocated)

    def add_step(self, step: int, usage: Usage, running: int, processed: int, waits_for_memory: bool) -> None:
        """One step (add's fast path: most steps are events)."""
        self.steps += 1
        self.running_sum += running
        if running > self.peak_running:
            self.peak_running = running
        self.processed += processed
        tokens, reserved, internal, free, saved, unshared = usage
        sums = self.everywhere
        sums[0] += tokens
        sums[1] += reserved
        sums[2] += internal
        sums[3] += free
        if saved or unshared:
            sums[4] += saved
            sums[5] += unshared
        if waits_for_memory:
            self.memory_steps += 1
            bound = self.memory_bound
            bound[0] += tokens
            bound[1] += reserved
            bound[2] += internal
            bound[3] += free
        allocated = tokens + reserved + internal
        if allocated > self.peak_allocated:
            self.peak_allocated = allocated
        if step >= self._next_point:
            self._point(step, tokens, allocated)

    def _point(self, step: int, tokens: int, allocated: int) -> None:
        self.series.append((step, tokens / self.slots, allocated / self.slots))
        self._next_point = step + self._stride
        if len(self.series) > MAX_POINTS:
            self.series = self.series[::2]
            self._stride *= 2

    def summary(self) -> dict[str, Any]:
        basis = self.memory_bound if self.memory_steps else self.everywhere
        basis_steps = self.memory_steps or self.steps
        pool = self.slots * max(1, basis_steps)

        def share(value: int, of: int) -> float:
            return round(100 * value / of, 2) if of else 0.0

        tokens, reserved, internal, free, _, _ = basis
        saved, unshared = self.everywhere[4], self.everywhere[5]
        return {
            "steps": self.steps,
            "peak_running": self.peak_running,
            "mean_running": round(self.running_sum / self.steps, 2) if self.steps else 0.0,
            "tokens_per_step": round(self.processed / self.steps, 2) if self.steps else 0.0,
            "memory_bound_steps_pct": share(self.memory_steps, self.steps),
            "split_over": "memory-bound steps" if self.memory_steps else "all steps",
            "token_states_pct": share(tokens, pool),
            "reserved_pct": share(reserved, pool),
            "internal_fragmentation_pct": share(internal, pool),
            "external_fragmentation_pct": share(free, pool) if self.memory_steps else 0.0,
            "free_pct": share(free, pool),
            "shared_saved_pct": share(saved, unshared),
            "utilization_pct": share(self.everywhere[0], self.slots * max(1, self.steps)),
            "peak_allocated_bytes": self.peak_allocated * self.slot_bytes,
        }
