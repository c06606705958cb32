"""What a simulation measures, summed over engine steps: running requests, tokens processed, and the pool's split
(allocators.base.Usage). The split is averaged over the steps in which a request waited for memory (those are the
steps where waste costs throughput), or over every step when no request ever waited for memory. A thinned series
of the pool's use over time feeds the charts."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kvplan.simulate.allocators.base import State, Usage

MAX_POINTS = 1024


@dataclass
class Meter:
    slots: int
    slot_bytes: int
    split: Callable[[Sequence[int], int], Usage]  # the allocator's: summed states (base.State) to a summed Usage
    steps: int = 0
    memory_steps: int = 0
    running_sum: int = 0
    peak_running: int = 0
    processed: int = 0
    peak_allocated: int = 0
    # The states summed over the memory-bound steps and over the others, kept apart so that a step adds to one.
    bound: list[int] = field(default_factory=lambda: [0] * 4)
    unbound: list[int] = field(default_factory=lambda: [0] * 4)
    series: list[tuple[int, float, float]] = field(default_factory=list)  # (step, tokens share, allocated share)
    _stride: int = 1
    next_point: int = 0  # a stretch that ends in this step or later adds a point to the series

    def add(self, step: int, total: State, last: State, steps: int, running: int, processed: int,
            waits_for_memory: bool) -> None:
        """`steps` steps from `step` on, `total` the sum of their states, `last` the state of the last one."""
        self.steps += steps
        self.running_sum += running * steps
        if running > self.peak_running:
            self.peak_running = running
        self.processed += processed
        if waits_for_memory:
            self.memory_steps += steps
            sums = self.bound
        else:
            sums = self.unbound
        allocated, second, third, fourth = total
        sums[0] += allocated
        sums[1] += second
        sums[2] += third
        sums[3] += fourth
        allocated = last[0]  # growth only, so the last step holds the most
        if allocated > self.peak_allocated:
            self.peak_allocated = allocated
        end = step + steps - 1
        if end >= self.next_point:
            self._point(end, last)

    def add_step(self, step: int, state: State, running: int, processed: int, waits_for_memory: bool) -> None:
        """One step (add's fast path: most steps are events)."""
        self.steps += 1
        self.running_sum += running
        if running > self.peak_running:
            self.peak_running = running
        self.processed += processed
        if waits_for_memory:
            self.memory_steps += 1
            sums = self.bound
        else:
            sums = self.unbound
        allocated, second, third, fourth = state
        sums[0] += allocated
        sums[1] += second
        sums[2] += third
        sums[3] += fourth
        if allocated > self.peak_allocated:
            self.peak_allocated = allocated
        if step >= self.next_point:
            self._point(step, state)

    @property
    def everywhere(self) -> list[int]:
        """Usage sums over every step."""
        return list(self.split([bound + unbound for bound, unbound in zip(self.bound, self.unbound, strict=True)],
                               self.steps))

    @property
    def memory_bound(self) -> list[int]:
        """Usage sums over the memory-bound steps (saved and unshared are not summed there)."""
        return list(self.split(self.bound, self.memory_steps)[:4]) + [0, 0]

    def _point(self, step: int, state: State) -> None:
        tokens, allocated = self.split(state, 1).tokens, state[0]
        self.series.append((step, tokens / self.slots, allocated / self.slots))
        self.next_point = step + self._stride
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
