"""What every allocator does for the scheduler. Quantities are token slots of the pool (a block is block_size
slots) so contiguous and paged allocators are compared in one unit.

Usage, one step's split of the pool: tokens (slots holding KV of real tokens, and per-sequence state), reserved
(slots set aside for tokens not written yet), internal (slots allocated that will never hold a token: a
reservation's excess, or the unused tail of a block), free, saved (slots that sharing spares) and unshared (slots
the same sequences would hold without sharing)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple, Protocol

from kvplan.simulate.sequence import Seq
from kvplan.simulate.workload import Request


class Usage(NamedTuple):
    tokens: int
    reserved: int
    internal: int
    free: int
    saved: int
    unshared: int


def make_usage(tokens: int, reserved: int, internal: int, free: int, saved: int, unshared: int) -> Usage:
    """A Usage built without NamedTuple's Python-level constructor (a microsecond, on every stretch)."""
    return tuple.__new__(Usage, (tokens, reserved, internal, free, saved, unshared))


# What the meter sums each step instead of a Usage: four figures, the first the slots allocated (tokens + reserved
# + internal), from which the allocator's split() gives the Usage. The split is linear in them, so the meter sums
# four figures a step, not six, and splits the sums once.
State = tuple[int, int, int, int]


class Allocator(Protocol):
    name: str
    releases: int  # how many releases so far: only a release can make room for a request that did not fit

    def fits_ever(self, request: Request) -> bool:
        """Whether the request can be served by an otherwise empty pool."""
        ...

    def can_admit(self, seq: Seq) -> bool: ...

    def admit(self, seq: Seq) -> bool:
        """Places the prompt (and whatever the allocator reserves with it); sets seq.prefill_left to what is not
        already cached. False, changing nothing, when it does not fit."""
        ...

    def prefill(self, seq: Seq, tokens: int) -> None: ...

    def start_decode(self, seq: Seq, step: int) -> None:
        """The prefill finished in `step`; the sequences grow one token a step from the next."""
        ...

    def release(self, seq: Seq, length: int) -> None:
        """Frees what seq holds, each of its sequences `length` tokens long (ignored while it prefills)."""
        ...

    def available(self) -> int: ...

    def next_change(self) -> int | None:
        """The next step at which the allocator's per-step growth or freeing changes (a stretch stops there)."""
        ...

    def frees_while_decoding(self) -> bool:
        """Whether blocks come free during decode-only steps (window groups), which may admit a waiting request."""
        ...

    def grow(self, step: int) -> bool:
        """Every decoding sequence adds its token of `step`; False, changing nothing, when the blocks that takes
        are not available."""
        ...

    def decode_steps(self, step: int, steps: int) -> tuple[int, State, State]:
        """Runs up to `steps` steps in which only decoding happens, from `step`, stopping before a step whose
        growth does not fit. Returns the steps run, the sum of their states, and the last one's state."""
        ...

    def state(self) -> State: ...

    def split(self, sums: Sequence[int], steps: int) -> Usage:
        """The Usage summed over `steps` steps whose states summed to `sums`."""
        ...

    def usage(self) -> Usage: ...
