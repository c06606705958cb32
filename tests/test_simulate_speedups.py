"""The structures that make `kvplan simulate` fast keep the simple rules they stand for."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.simulate.allocators import address_space
from kvplan.simulate.allocators.address_space import AddressSpace


class NaiveSpace:
    """First fit in address order, written the slow way: one flag per slot."""

    def __init__(self, size: int) -> None:
        self.free_slots = [True] * size

    def allocate(self, size: int) -> int | None:
        run = 0
        for slot, free in enumerate(self.free_slots):
            run = run + 1 if free else 0
            if run == size:
                start = slot - size + 1
                self.free_slots[start:slot + 1] = [False] * size
                return start
        return None

    def free(self, start: int, size: int) -> None:
        self.free_slots[start:start + size] = [True] * size

    def holes(self) -> list[tuple[int, int]]:
        holes: list[tuple[int, int]] = []
        for slot, free in enumerate(self.free_slots):
            if free and holes and holes[-1][0] + holes[-1][1] == slot:
                holes[-1] = (holes[-1][0], holes[-1][1] + 1)
            elif free:
                holes.append((slot, 1))
        return holes


# Each operation: allocate a size, or free the allocation at some position of the live ones. A few sizes recur
# often, as a workload's footprints do, so that an answer remembered from before the holes changed would show.
operations = st.lists(st.tuples(st.booleans(), st.one_of(st.sampled_from([4, 9, 24]), st.integers(1, 24))),
                      min_size=40, max_size=300)


@settings(max_examples=150, deadline=None)
@given(operations)
def test_address_space_is_first_fit_in_address_order(ops):
    # Runs of 3 holes, so that a few dozen holes span many runs and holes move between them.
    saved, address_space.RUN = address_space.RUN, 3
    try:
        check_against_naive(ops, 3)
    finally:
        address_space.RUN = saved


def check_against_naive(ops: list[tuple[bool, int]], runs: int) -> None:
    size = 60  # small enough that requests often find no hole
    space, naive = AddressSpace(size), NaiveSpace(size)
    live: list[tuple[int, int]] = []
    for allocating, amount in ops:
        if allocating or not live:
            start = space.allocate(amount)
            assert start == naive.allocate(amount)
            if start is not None:
                live.append((start, amount))
        else:
            start, length = live.pop(amount % len(live))
            space.free(start, length)
            naive.free(start, length)
        assert list(zip(space.starts, space.sizes, strict=True)) == naive.holes()
        assert space.largest == [max(space.sizes[base:base + runs]) for base in range(0, len(space.sizes), runs)]
