"""The allocators a simulation compares, one type each behind one interface (base.Allocator), all handed the
same pool bytes."""

from __future__ import annotations

from kvplan.errors import KvplanError
from kvplan.simulate.allocators.base import Allocator
from kvplan.simulate.allocators.contiguous import ContiguousMax, ContiguousOracle, ContiguousPow2
from kvplan.simulate.allocators.paged import Paged
from kvplan.simulate.pool import Pool

ALLOCATORS: dict[str, type] = {
    "contiguous-max": ContiguousMax, "contiguous-pow2": ContiguousPow2, "contiguous-oracle": ContiguousOracle,
    "paged": Paged,
}


def make_allocator(name: str, pool: Pool, prefix_caching: bool = True) -> Allocator:
    if name not in ALLOCATORS:
        raise KvplanError(f"unknown allocator {name!r}; choose from {', '.join(ALLOCATORS)}", "--allocators")
    allocator: Allocator = ALLOCATORS[name](pool, prefix_caching)
    return allocator
