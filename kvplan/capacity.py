"""Paging math shared by every engine: how a rank's KV layers are grouped into one block pool, how many
blocks fit, and how many blocks one request holds (vLLM v1 kv_cache_utils rules)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from kvplan.models.layers import Layer


@dataclass(eq=False)
class KvGroup:
    """Layers of one spec that share block ids: a KV-cache group."""

    layer: Layer  # the spec every layer of the group shares
    slots: int  # layers per group, padding included
    real_layers: int


@dataclass(eq=False)
class PoolLayout:
    """One rank's block pool: its groups and what a block costs."""

    block_size: int
    groups: tuple[KvGroup, ...]
    page_bytes: int  # one layer's bytes for one block
    block_bytes: int  # one block id across every slot of a group: what one more block costs
    padding_layers: int
    kv_bytes: int
    tp: int

    @property
    def num_groups(self) -> int:
        return len(self.groups)

    @property
    def single_spec(self) -> bool:
        """One group of one spec: a block is that spec's page times its layers (no mixed sizes averaged)."""
        if len(self.groups) != 1:
            return False
        group = self.groups[0]
        return self.block_bytes == group.layer.page_bytes(self.block_size, self.kv_bytes, self.tp) * group.slots

    @property
    def bytes_per_token(self) -> int:
        """One token's KV summed over the real KV layers of this rank."""
        if len(self.groups) == 1 and not self.single_spec:
            return self.block_bytes // self.block_size  # one block spans layers of different sizes
        return sum(g.layer.bytes_per_token(self.kv_bytes, self.tp) * g.real_layers for g in self.groups)

    def num_blocks(self, available_bytes: int) -> int:
        if not self.groups or available_bytes <= 0:
            return 0
        return available_bytes // self.block_bytes

    def blocks_per_request(self, context: int, max_num_batched_tokens: int) -> int:
        return sum(g.layer.blocks_per_request(context, self.block_size, max_num_batched_tokens)
                   for g in self.groups)

    def request_bytes(self, context: int, max_num_batched_tokens: int) -> int:
        return self.blocks_per_request(context, max_num_batched_tokens) * self.block_bytes

    def reported_tokens(self, num_blocks: int) -> int:
        """vLLM's "GPU KV cache size: N tokens": blocks shared among the groups, in tokens."""
        return num_blocks // self.num_groups * self.block_size if self.groups else 0

    def longest_context(self, available_bytes: int, max_num_batched_tokens: int, upper: int) -> int:
        """The largest context one request can have within available_bytes (vLLM's binary search)."""
        if not self.groups or self.request_bytes(1, max_num_batched_tokens) > available_bytes:
            return 0
        low, high = 1, max(1, upper)
        if self.request_bytes(high, max_num_batched_tokens) <= available_bytes:
            return high
        while low < high:
            mid = (low + high + 1) // 2
            if self.request_bytes(mid, max_num_batched_tokens) <= available_bytes:
                low = mid
            else:
                high = mid - 1
        return low


def pool_layout(layers: list[Layer], block_size: int, kv_bytes: int, tp: int) -> PoolLayout:
    kv_layers = [layer for layer in layers if layer.holds_kv]
    if not kv_layers:
        return PoolLayout(block_size, (), 0, 0, 0, kv_bytes, tp)
    counts = Counter(kv_layers)
    pages = {layer: layer.page_bytes(block_size, kv_bytes, tp) for layer in counts}
    if len(counts) == 1:
        (layer, n), = counts.items()
        return PoolLayout(block_size, (KvGroup(layer, n, n),), pages[layer], pages[layer] * n, 0, kv_bytes, tp)
    kinds = {layer.kind for layer in counts}
    if len(kinds) == 1 or len(set(pages.values())) > 1:
        # One kind with differing sizes: a single group whose block spans every layer's page.
        # (Mixed kinds with unequal pages are approximated the same way.)
        first = kv_layers[0]
        total = sum(pages[layer] * n for layer, n in counts.items())
        return PoolLayout(block_size, (KvGroup(first, len(kv_layers), len(kv_layers)),), total // len(kv_layers),
                          total, 0, kv_bytes, tp)
    # Genuinely hybrid: equal pages, layers of each spec split into groups of group_size.
    smallest, largest = min(counts.values()), max(counts.values())
    group_size = largest if largest < 1.5 * smallest else smallest
    groups: list[KvGroup] = []
    padding = 0
    for layer, n in counts.items():
        for start in range(0, n, group_size):
            real = min(group_size, n - start)
            groups.append(KvGroup(layer, group_size, real))
            padding += group_size - real
    page = next(iter(pages.values()))
    return PoolLayout(block_size, tuple(groups), page, page * group_size, padding, kv_bytes, tp)


def pipeline_stages(num_layers: int, pp: int) -> list[range]:
    """Layer ranges per pipeline stage as vLLM's get_pp_indices splits them: the remainder goes to the
    stages before the last, from the second-to-last backwards."""
    sizes = [num_layers // pp] * pp
    for i in range(2, num_layers % pp + 2):
        sizes[-i] += 1
    stages, start = [], 0
    for size in sizes:
        stages.append(range(start, start + size))
        start += size
    return stages


def concurrency(num_blocks: int, blocks_per_request: int) -> float:
    return num_blocks / blocks_per_request if blocks_per_request else 0.0


def context_ladder(max_context: int, explicit: list[int] | None = None) -> list[int]:
    if explicit:
        return sorted(set(explicit))
    rungs, context = [], 2048
    while context < max_context:
        rungs.append(context)
        context *= 2
    rungs.append(max_context)
    return rungs

