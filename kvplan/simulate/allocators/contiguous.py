"""Contiguous reservation, as serving systems before paging did: a request's sequences each reserve one
contiguous region when it is admitted, placed first-fit in a single address space, and hold it until the request
finishes. The three kinds differ only in how much they reserve; there is no sharing and no preemption (the
reservation already covers every token)."""

from __future__ import annotations

from collections.abc import Sequence

from kvplan.simulate.allocators.address_space import AddressSpace
from kvplan.simulate.allocators.base import State, Usage, make_usage
from kvplan.simulate.pool import Pool
from kvplan.simulate.sequence import Seq
from kvplan.simulate.workload import Request


class Contiguous:
    name = "contiguous"

    def __init__(self, pool: Pool, prefix_caching: bool = True) -> None:
        self.pool = pool
        self.slots = pool.slots
        self.space = AddressSpace(pool.slots)
        self.state_slots = pool.state_slots()
        self.token_groups = pool.token_groups  # a token takes a slot in each group's part of the region
        self.reserved_slots = 0  # every live reservation
        self.final_slots = 0  # what those requests will have written when they finish
        self.tokens = 0
        self.decoding_width = 0
        self.releases = 0

    def reservation(self, request: Request) -> int:
        """Slots one sequence of the request reserves."""
        raise NotImplementedError

    def _footprint(self, request: Request) -> int:
        return request.sharing.width * (self.token_groups * self.reservation(request) + self.state_slots)

    def fits_ever(self, request: Request) -> bool:
        return self._footprint(request) <= self.slots

    def can_admit(self, seq: Seq) -> bool:
        return self.space.first_fit(seq.footprint or self._measure(seq)) is not None

    def _measure(self, seq: Seq) -> int:
        seq.footprint = self._footprint(seq.request)
        return seq.footprint

    def admit(self, seq: Seq) -> bool:
        size = seq.footprint or self._measure(seq)
        start = self.space.allocate(size)
        if start is None:
            return False
        seq.extent = (start, size)
        self.reserved_slots += size
        self.final_slots += seq.width * (self.token_groups * seq.total + self.state_slots)
        self.tokens += seq.width * self.state_slots
        return True

    def prefill(self, seq: Seq, tokens: int) -> None:
        self.tokens += seq.width * self.token_groups * tokens  # no sharing: each sequence its own prompt copy

    def start_decode(self, seq: Seq, step: int) -> None:
        self.tokens += seq.width * self.token_groups  # the token the prefill sampled
        self.decoding_width += seq.width * self.token_groups

    def release(self, seq: Seq, length: int) -> None:
        assert seq.extent is not None
        self.releases += 1
        start, size = seq.extent
        self.space.free(start, size)
        self.reserved_slots -= size
        width, groups, state = seq.width, self.token_groups, self.state_slots
        self.final_slots -= width * (groups * seq.total + state)
        if seq.decoding:
            self.tokens -= width * (groups * length + state)
            self.decoding_width -= width * groups
        else:
            self.tokens -= width * (groups * (seq.prompt - seq.prefill_left) + state)

    def available(self) -> int:
        return self.slots - self.reserved_slots

    def next_change(self) -> int | None:
        return None

    def frees_while_decoding(self) -> bool:
        return False

    def grow(self, step: int) -> bool:
        self.tokens += self.decoding_width
        return True

    def decode_steps(self, step: int, steps: int) -> tuple[int, State, State]:
        first = self.tokens + self.decoding_width
        self.tokens += self.decoding_width * steps
        token_sum = (first + self.tokens) * steps // 2  # an arithmetic series: its steps' token counts
        return steps, (self.reserved_slots * steps, self.final_slots * steps, token_sum, 0), self.state()

    def state(self) -> State:
        """Reserved slots (all allocated), what those requests will have written when they finish, tokens."""
        return self.reserved_slots, self.final_slots, self.tokens, 0

    def split(self, sums: Sequence[int], steps: int) -> Usage:
        reserved, final, tokens, _ = sums
        return make_usage(tokens, final - tokens, reserved - final, self.slots * steps - reserved, 0, 0)

    def usage(self) -> Usage:
        return self.split(self.state(), 1)


class ContiguousMax(Contiguous):
    """Reserves max_model_len tokens per sequence: the length the request might reach."""

    name = "contiguous-max"

    def reservation(self, request: Request) -> int:
        return self.pool.max_model_len


class ContiguousPow2(Contiguous):
    """Reserves the request's length rounded up to a power of two (at most max_model_len)."""

    name = "contiguous-pow2"

    def reservation(self, request: Request) -> int:
        return min(1 << (request.total - 1).bit_length(), self.pool.max_model_len)


class ContiguousOracle(Contiguous):
    """Reserves exactly prompt + true output: an allocator that knows the future, still contiguous."""

    name = "contiguous-oracle"

    def reservation(self, request: Request) -> int:
        return request.total
