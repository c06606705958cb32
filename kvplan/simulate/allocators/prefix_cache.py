"""Prefix caching of full blocks across requests, as vLLM's automatic prefix caching does it: a full block is
found again by the hash of its tokens and those before it. In a simulated workload two requests' blocks have the
same contents exactly when both lie wholly inside the same shared prefix, so a chain of cached blocks per prefix
stands for the hash table. Blocks nobody references stay cached but count as free; when the free list runs dry
the least recently released chain gives up its blocks, from its end."""

from __future__ import annotations

from collections import OrderedDict


class CachedPrefix:
    __slots__ = ("blocks", "references")

    def __init__(self) -> None:
        self.blocks = 0  # leading full blocks of the prefix that are cached
        self.references = 0  # running requests that use them


class PrefixCache:
    def __init__(self) -> None:
        self.prefixes: dict[int, CachedPrefix] = {}
        self.unreferenced: OrderedDict[int, CachedPrefix] = OrderedDict()  # least recently released first
        self.evictable = 0  # cached blocks nobody references

    def get(self, prefix_id: int) -> CachedPrefix:
        found = self.prefixes.get(prefix_id)
        if found is None:
            found = self.prefixes[prefix_id] = CachedPrefix()
        return found

    def reclaimable(self, prefix: CachedPrefix) -> int:
        """Blocks that referencing this prefix takes out of the free count."""
        return prefix.blocks if prefix.references == 0 else 0

    def reference(self, prefix_id: int, prefix: CachedPrefix) -> None:
        if prefix.references == 0 and self.unreferenced.pop(prefix_id, None) is not None:
            self.evictable -= prefix.blocks
        prefix.references += 1

    def release(self, prefix_id: int, prefix: CachedPrefix) -> None:
        prefix.references -= 1
        if prefix.references == 0 and prefix.blocks:
            self.unreferenced[prefix_id] = prefix
            self.evictable += prefix.blocks

    def evict(self, blocks: int) -> None:
        """Takes `blocks` cached, unreferenced blocks (the caller has checked there are that many)."""
        while blocks:
            prefix_id, prefix = next(iter(self.unreferenced.items()))
            taken = min(blocks, prefix.blocks)
            prefix.blocks -= taken
            self.evictable -= taken
            blocks -= taken
            if not prefix.blocks:
                del self.unreferenced[prefix_id]
