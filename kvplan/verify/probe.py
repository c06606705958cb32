"""The largest pool that really fits: a binary search over block counts, each step a real allocation that is
freed before the next."""

from __future__ import annotations

from collections.abc import Callable

from kvplan.verify.pool import PoolDoesNotFit


def largest_fitting(fits: Callable[[int], bool], upper: int) -> int:
    """The largest n in [0, upper] with fits(n), fits being monotone (fits(0) is taken as true)."""
    low, high = 0, max(0, upper)
    while low < high:
        middle = (low + high + 1) // 2
        if fits(middle):
            low = middle
        else:
            high = middle - 1
    return low


def allocation_fits(allocate: Callable[[int], object], free: Callable[[object], None]) -> Callable[[int], bool]:
    def fits(num_blocks: int) -> bool:
        try:
            pool = allocate(num_blocks)
        except PoolDoesNotFit:
            return False
        free(pool)
        return True

    return fits


def plan_error_pct(planned: int, largest: int) -> float | None:
    """How far the plan is from the largest pool that fits, in percent of the latter; positive: the plan promised
    more blocks than the device holds."""
    if largest <= 0:
        return None
    return round((planned - largest) / largest * 100, 2)
