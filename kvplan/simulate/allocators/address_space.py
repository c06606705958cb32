"""One linear address space of token slots with first-fit placement: holes sorted by start, neighbours merged
on free. External fragmentation is real here: free slots split into holes too small for the next request.

Holes can number hundreds, and a request that fits nowhere would scan them all, so the hole list is cut into
runs of RUN consecutive holes (by index) and each run's largest hole is kept: first fit scans the runs' largest
holes for the first run that holds the request, then only that run. An insertion or deletion shifts the holes
after it, so the runs from there on are measured again."""

from __future__ import annotations

from bisect import bisect_left
from itertools import compress, count

RUN = 64


class AddressSpace:
    __slots__ = ("starts", "sizes", "largest", "_asked", "_found")

    def __init__(self, size: int) -> None:
        self.starts = [0] if size else []
        self.sizes = [size] if size else []
        self.largest = [size] if size else []  # largest[r]: the largest of sizes[r * RUN:(r + 1) * RUN]
        self._asked = -1  # the last size first_fit answered, and its answer, until the holes change
        self._found: int | None = None

    def first_fit(self, size: int) -> int | None:
        """Index of the first hole that holds `size` slots (the scans run in C)."""
        if size == self._asked:
            return self._found
        fits = size.__le__
        largest = self.largest
        if len(largest) == 1:
            found = next(compress(count(), map(fits, self.sizes))) if largest[0] >= size else None
        else:
            run = next(compress(count(), map(fits, largest)), None)
            found = None
            if run is not None:
                base = run * RUN
                found = base + next(compress(count(), map(fits, self.sizes[base:base + RUN])))
        self._asked, self._found = size, found
        return found

    def allocate(self, size: int) -> int | None:
        index = self.first_fit(size)
        if index is None:
            return None
        self._asked = -1
        starts, sizes = self.starts, self.sizes
        start = starts[index]
        if sizes[index] == size:
            del starts[index], sizes[index]
            self._measure_from(index)
        else:
            starts[index] += size
            sizes[index] -= size
            run = index // RUN
            if self.largest[run] == size + sizes[index]:
                base = run * RUN
                self.largest[run] = max(sizes[base:base + RUN])
        return start

    def free(self, start: int, size: int) -> None:
        self._asked = -1
        starts, sizes = self.starts, self.sizes
        index = bisect_left(starts, start)
        if index and starts[index - 1] + sizes[index - 1] == start:
            index -= 1
            sizes[index] += size
            shifted = False
        else:
            starts.insert(index, start)
            sizes.insert(index, size)
            shifted = True
        following = index + 1
        if following < len(starts) and starts[index] + sizes[index] == starts[following]:
            sizes[index] += sizes[following]
            del starts[following], sizes[following]
            shifted = not shifted  # a merge on both sides deletes a hole; an insertion merged forward keeps the count
        if shifted:
            self._measure_from(index)
        else:
            run = index // RUN
            if sizes[index] > self.largest[run]:
                self.largest[run] = sizes[index]

    def _measure_from(self, index: int) -> None:
        """Measures again every run from the one holding `index` (the holes after it moved by one)."""
        sizes, first = self.sizes, index // RUN
        if len(sizes) <= RUN:
            self.largest = [max(sizes)] if sizes else []
            return
        del self.largest[first:]
        self.largest += [max(sizes[base:base + RUN]) for base in range(first * RUN, len(sizes), RUN)]
