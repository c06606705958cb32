"""Continuous batching as vLLM schedules it, played at block-event granularity. Each step serves the running
requests first (one token per decoding sequence; a paged one that cannot take its next block preempts the newest
running request, which is recomputed later), then continues chunked prefills and admits waiting requests first
come, first served, while max_num_seqs, max_num_batched_tokens and the allocator allow. A prefill's last chunk
samples the first output token.

Between events (a completion, an arrival, a step in which memory runs out) every step is alike: decoding only.
Those stretches are handed to the allocator whole, which counts their blocks arithmetically, so the cost grows
with events, not with tokens times requests."""

from __future__ import annotations

import gc
import heapq
import math
from collections import deque
from dataclasses import dataclass
from typing import Any

from kvplan.simulate.allocators.base import Allocator
from kvplan.simulate.meter import Meter
from kvplan.simulate.pool import Pool, StepTime
from kvplan.simulate.sequence import Seq
from kvplan.simulate.workload import Request, Workload


@dataclass
class Outcome:
    name: str
    completed: int
    rejected: int
    preemptions: int
    meter: Meter
    finished_at: dict[int, int]  # request id -> the step it finished in

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "completed": self.completed, "rejected": self.rejected,
                "preemptions": self.preemptions, **self.meter.summary()}


def simulate(workload: Workload, pool: Pool, allocator: Allocator, step_time: StepTime | None = None) -> Outcome:
    """Plays every request of the workload through the allocator. Arrival times need a step time to map them
    onto steps; without one every request arrives at step 0."""
    # The run allocates many short-lived tuples and makes no reference cycles: the cyclic collector, which would
    # walk every live request again and again, is paused while it plays.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _Run(workload, pool, allocator, step_time).play()
    finally:
        if collecting:
            gc.enable()


class _Run:
    def __init__(self, workload: Workload, pool: Pool, allocator: Allocator, step_time: StepTime | None) -> None:
        self.pool = pool
        self.max_num_seqs = pool.max_num_seqs
        self.max_num_batched_tokens = pool.max_num_batched_tokens
        self.allocator = allocator
        self.step_time = step_time
        timed = step_time is not None
        self.arrivals = deque(sorted(workload.requests, key=lambda r: r.arrival) if timed else workload.requests)
        self.waiting: deque[Seq] = deque()
        self.running: dict[int, Seq] = {}  # by admission order: the newest is the last
        self.prefilling: list[Seq] = []
        self.ends: list[tuple[int, int, Seq]] = []
        self.meter = Meter(pool.slots, pool.slot_bytes, allocator.split)
        self.step = 0
        self.clock = 0.0
        self.seats = 0  # sequences running, against max_num_seqs
        self.decode_tokens = 0
        self.admitted = 0
        self.completed = 0
        self.rejected = 0
        self.preemptions = 0
        self.finished_at: dict[int, int] = {}
        self.refused: Seq | None = None  # the head that did not fit,
        self.refused_at = -1  # and the allocator's releases count then

    def play(self) -> Outcome:
        while self.arrivals or self.waiting or self.running:
            if self.arrivals:
                self._arrive()
            self._event_step()
            if self.running and not self.prefilling:
                self._decode_stretch()

        return Outcome(self.allocator.name, self.completed, self.rejected, self.preemptions, self.meter,
                       self.finished_at)

    def _arrive(self) -> None:
        arrivals = self.arrivals
        if not arrivals:
            return
        if not self.running and not self.waiting:
            self.clock = max(self.clock, arrivals[0].arrival)  # idle until the next request: no steps run
        fits, seats, waiting = self.allocator.fits_ever, self.pool.max_num_seqs, self.waiting
        arrived: list[Request] | deque[Request] = arrivals
        if self.step_time is not None:
            clock, arrived = self.clock, []
            while arrivals and arrivals[0].arrival <= clock:
                arrived.append(arrivals.popleft())
        for request in arrived:
            if request.sharing.width > seats or not fits(request):
                self.rejected += 1
            else:
                waiting.append(Seq(request))
        if arrived is arrivals:
            arrivals.clear()  # untimed: every request arrives at step 0

    def _event_step(self) -> None:
        step, allocator, running = self.step, self.allocator, self.running
        while not allocator.grow(step):
            self._preempt_newest()
        budget = self.max_num_batched_tokens - self.decode_tokens
        processed = self.decode_tokens
        finished: list[Seq] = []
        prefilling = self.prefilling
        if prefilling:
            for seq in prefilling:
                if budget <= 0:
                    break
                chunk = seq.prefill_left if seq.prefill_left < budget else budget
                budget -= chunk
                processed += chunk
                allocator.prefill(seq, chunk)
                seq.prefill_left -= chunk
                if not seq.prefill_left:
                    finished.append(seq)
            # Only the last prefill served can be left unfinished (it took what budget remained): those finished
            # lead the list.
            del prefilling[:len(finished)]
        waits_for_memory = False
        waiting = self.waiting
        if waiting and budget > 0:
            head = waiting[0]
            if self.refused is head and self.refused_at == allocator.releases and running:
                waits_for_memory = self.seats + head.width <= self.max_num_seqs  # nothing freed: it still waits
            else:
                budget, processed, waits_for_memory = self._admit(budget, processed, finished)
        ends = self.ends
        ending: list[Seq] = []  # those that finish in this step: any with one output token first
        if finished:
            decode_tokens = self.decode_tokens
            for seq in finished:
                seq.start, seq.decoding = step, True
                allocator.start_decode(seq, step)
                decode_tokens += seq.width
                end = step + seq.total - seq.prompt - 1
                if end == step:
                    ending.append(seq)
                else:
                    heapq.heappush(ends, (end, seq.order, seq))
            self.decode_tokens = decode_tokens
        self.meter.add_step(step, allocator.state(), len(running), processed, waits_for_memory)
        while ends and ends[0][0] <= step:
            ending.append(heapq.heappop(ends)[2])
        if ending:
            finished_at = self.finished_at
            for seq in ending:
                if seq.live:
                    self._finish(seq, seq.total)
                    self.completed += 1
                    finished_at[seq.request.id] = step
        if self.step_time is not None:
            self.clock += self.step_time.seconds(processed)
        self.step = step + 1

    def _admit(self, budget: int, processed: int, finished: list[Seq]) -> tuple[int, int, bool]:
        """Admits waiting requests first come, first served while seats, the token budget and memory allow, and
        prefills their first chunks. Returns the budget left, the tokens processed, and whether the head waits for
        memory."""
        allocator, waiting, running = self.allocator, self.waiting, self.running
        seats, max_num_seqs = self.seats, self.max_num_seqs
        waits_for_memory = False
        while waiting and budget > 0:
            seq = waiting[0]
            if seats + seq.width > max_num_seqs:
                break
            if (self.refused is seq and self.refused_at == allocator.releases) or \
                    not allocator.admit(seq):
                if not running:  # an empty pool cannot place it: it never will
                    waiting.popleft()
                    self.rejected += 1
                    continue
                self.refused, self.refused_at = seq, allocator.releases
                waits_for_memory = True
                break
            waiting.popleft()
            order = seq.order = self.admitted = self.admitted + 1
            running[order] = seq
            seats += seq.width
            left = seq.prefill_left
            chunk = left if left < budget else budget
            budget -= chunk
            processed += chunk
            allocator.prefill(seq, chunk)
            seq.prefill_left = left - chunk
            if left > chunk:
                self.prefilling.append(seq)
            else:
                finished.append(seq)
        self.seats = seats
        return budget, processed, waits_for_memory

    def _finish(self, seq: Seq, length: int) -> None:
        self.allocator.release(seq, length)
        seq.live = False
        del self.running[seq.order]
        self.seats -= seq.width
        if seq.decoding:
            self.decode_tokens -= seq.width

    def _preempt_newest(self) -> None:
        seq = next(reversed(self.running.values()))
        if seq.decoding:
            length = seq.length(self.step - 1)
        else:
            length = seq.prompt
            self.prefilling.remove(seq)
        self._finish(seq, length)
        self.preemptions += 1
        # Recompute: a single sequence resumes with what it had generated as part of its prompt; the samples or
        # beams of a wider request diverged, so it starts over.
        resumed = Seq(seq.request, length if seq.decoding and seq.width == 1 else None)
        self.waiting.appendleft(resumed)

    def _decode_stretch(self) -> None:
        """Runs the decode-only steps up to the next event at once, and on while the events are quiet endings."""
        while self._stretch() and self.running:
            pass

    def _stretch(self) -> bool:
        """One stretch; True when it ended in a quiet ending step, after which another stretch may follow."""
        if self.step_time is not None and self.arrivals and self.arrivals[0].arrival <= self.clock:
            return False
        waits_for_memory = False
        waiting, allocator, step = self.waiting, self.allocator, self.step
        if waiting:
            head = waiting[0]
            if self.seats + head.width <= self.max_num_seqs and self.decode_tokens < self.max_num_batched_tokens:
                still_refused = self.refused is head and self.refused_at == allocator.releases
                if not still_refused and allocator.can_admit(head):
                    return False
                if allocator.frees_while_decoding():
                    return False  # step by step: the next freed block may admit it
                waits_for_memory = True
        ends = self.ends
        while ends and not ends[0][2].live:
            heapq.heappop(ends)
        steps = ends[0][0] - step if ends else 0
        change = allocator.next_change()
        if change is not None:
            steps = min(steps, change - step)
        seconds = 0.0
        if self.step_time is not None:
            seconds = self.step_time.seconds(self.decode_tokens)
            if self.arrivals:
                steps = min(steps, math.ceil((self.arrivals[0].arrival - self.clock) / seconds))
        end = step + steps
        if ends and ends[0][0] == end and (change is None or change > end) and not (
                self.step_time is not None and self._arrives_after(steps, seconds)):
            if self._ending_step(waits_for_memory, seconds):
                return True
            if self.step != step:
                return False  # it ran out of memory on the way: the event step preempts
        if steps > 0:
            self._decode(steps, waits_for_memory, seconds)
        return False

    def _arrives_after(self, steps: int, seconds: float) -> bool:
        """Whether a request has arrived once `steps` decode steps of `seconds` each have run."""
        if not self.arrivals:
            return False
        clock = self.clock + steps * seconds if steps > 0 else self.clock  # as _decode will add it
        return self.arrivals[0].arrival <= clock

    def _decode(self, steps: int, waits_for_memory: bool, seconds: float) -> int:
        """Runs up to `steps` decode-only steps and meters them; returns how many ran before memory ran out."""
        ran, total, last = self.allocator.decode_steps(self.step, steps)
        if ran:
            self.meter.add(self.step, total, last, ran, len(self.running), ran * self.decode_tokens,
                           waits_for_memory)
            self.step += ran
            self.clock += ran * seconds
        return ran

    def _ending_step(self, waits_for_memory: bool, seconds: float) -> bool:
        """The decode steps up to the step in which the stretch's first request ends, and that step, when nothing
        else happens in it: no arrival, no admission (the stretch found the head refused, and memory only shrank
        since), no prefill, no window block freed. It is the event step without the parts that would do nothing.
        True when it played them all; False when it played nothing, or ran out of memory on the way."""
        step = self.step
        steps = self.ends[0][0] - step
        if self.allocator.frees_while_decoding() or (steps and step + steps > self.meter.next_point):
            return self._ending_after_stretch(steps, waits_for_memory, seconds)
        # The ending step decodes as every step before it does (releases come after it is metered), so it is
        # metered with them: the same sums, and the same series point, since none falls before it.
        ran, total, last = self.allocator.decode_steps(step, steps + 1)
        if not ran:
            return False
        self.meter.add(step, total, last, ran, len(self.running), ran * self.decode_tokens, waits_for_memory)
        self.step = step + ran
        if ran <= steps:
            self.clock += ran * seconds
            return False
        if steps:
            self.clock += steps * seconds
        self._end_quietly(waits_for_memory, seconds)
        return True

    def _ending_after_stretch(self, steps: int, waits_for_memory: bool, seconds: float) -> bool:
        """_ending_step with the stretch metered apart from the ending step: a series point falls in the stretch,
        or window groups free blocks in it (their peak may lie before the ending step)."""
        if steps and self._decode(steps, waits_for_memory, seconds) < steps:
            return False
        step, allocator = self.step, self.allocator
        if not allocator.grow(step):
            return False  # a preemption: the event step handles it
        self.meter.add_step(step, allocator.state(), len(self.running), self.decode_tokens, waits_for_memory)
        self.step = step + 1
        self._end_quietly(waits_for_memory, seconds)
        return True

    def _end_quietly(self, waits_for_memory: bool, seconds: float) -> None:
        """Finishes the requests that ended in the step just metered."""
        step, allocator = self.step - 1, self.allocator
        if waits_for_memory:
            self.refused, self.refused_at = self.waiting[0], allocator.releases  # as a failed admission records
        ends, finished_at = self.ends, self.finished_at
        while ends and ends[0][0] <= step:
            seq = heapq.heappop(ends)[2]
            if seq.live:
                self._finish(seq, seq.total)
                self.completed += 1
                finished_at[seq.request.id] = step
        if self.step_time is not None:
            self.clock += seconds
