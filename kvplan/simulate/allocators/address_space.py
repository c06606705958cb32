"""One linear address space of token slots with first-fit placement: holes sorted by start, neighbours merged
on free. External fragmentation is real here: free slots split into holes too small for the next request."""

from __future__ import annotations

from bisect import bisect_left
from itertools import compress, count


class AddressSpace:
    def __init__(self, size: int) -> None:
        self.starts = [0] if size else []
        self.sizes = [size] if size else []

    def first_fit(self, size: int) -> int | None:
        """Index of the first hole that holds `size` slots (the scan runs in C: holes can number thousands)."""
        return next(compress(count(), map(size.__le__, self.sizes)), None)

    def allocate(self, size: int) -> int | None:
        index = self.first_fit(size)
        if index is None:
            return None
        start = self.starts[index]
        if self.sizes[index] == size:
            del self.starts[index], self.sizes[index]
        else:
            self.starts[index] += size
            self.sizes[index] -= size
        return start

    def free(self, start: int, size: int) -> None:
        index = bisect_left(self.starts, start)
        starts, sizes = self.starts, self.sizes
        if index and starts[index - 1] + sizes[index - 1] == start:
            index -= 1
            sizes[index] += size
        else:
            starts.insert(index, start)
            sizes.insert(index, size)
        following = index + 1
        if following < len(starts) and starts[index] + sizes[index] == starts[following]:
            sizes[index] += sizes[following]
            del starts[following], sizes[following]
