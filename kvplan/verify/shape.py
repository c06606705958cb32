"""The pool's shape, in pure arithmetic: which buffers one rank allocates and which layer kinds read each. vLLM
allocates one buffer per layer slot; the layers of different KV-cache groups that sit in the same slot share it
(they have equal pages and draw block ids from one pool). A group whose layers differ in page size has one buffer
per layer instead; vLLM's packed groups (block-outermost) share one buffer, each group a PackedGroup view."""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.capacity import PoolLayout
from kvplan.models.compressed_attention import PackedGroup
from kvplan.models.layers import Layer, PageTensor, page_tensors_bytes


@dataclass(frozen=True)
class Buffer:
    """One raw buffer of num_blocks pages; each KV-cache group reads it through its own layer kind."""

    views: tuple[Layer, ...]  # one per KV-cache group, in group order
    block_size: int
    kv_bytes: int
    tp: int
    # each view's tokens per block where its page was equalised through the block size (capacity's KvGroup)
    view_block_sizes: tuple[int, ...] = ()

    def tensors(self, group: int) -> tuple[PageTensor, ...]:
        own = self.view_block_sizes[group] if group < len(self.view_block_sizes) else 0
        return self.views[group].page_tensors(own or self.block_size, self.kv_bytes, self.tp)

    @property
    def page_bytes(self) -> int:
        """One block's bytes, from the page tensors (what is allocated), not from page_bytes (what is planned)."""
        sizes = {page_tensors_bytes(self.tensors(group)) for group in range(len(self.views))}
        if len(sizes) != 1:
            raise ValueError(f"layers sharing a buffer have different pages: {sorted(sizes)}")
        return sizes.pop()


@dataclass(frozen=True)
class PoolShape:
    """One rank's pool: its buffers and how many KV-cache groups share the block ids."""

    buffers: tuple[Buffer, ...]
    groups: int
    block_size: int

    @property
    def block_bytes(self) -> int:
        return sum(buffer.page_bytes for buffer in self.buffers)

    def pool_bytes(self, num_blocks: int) -> int:
        return num_blocks * self.block_bytes


def pool_shape(layout: PoolLayout, stage_layers: list[Layer]) -> PoolShape:
    """The buffers of the pool `layout` plans, for a rank holding `stage_layers` (pool_layout's input)."""
    def buffer(views: tuple[Layer, ...]) -> Buffer:
        return Buffer(views, layout.block_size, layout.kv_bytes, layout.tp)

    if not layout.groups:
        return PoolShape((), 0, layout.block_size)
    if layout.groups[0].members:  # vLLM's packed groups alias one buffer of the widest group's bytes a block
        packed = tuple(PackedGroup(group.members, layout.block_bytes) for group in layout.groups)
        sizes = tuple(group.tokens_per_block for group in layout.groups)
        return PoolShape((Buffer(packed, layout.block_size, layout.kv_bytes, layout.tp, sizes),), len(packed),
                         layout.block_size)
    if len(layout.groups) == 1 and not layout.single_spec:
        paged = [layer for layer in stage_layers
                 if layer.page_bytes(layout.block_size, layout.kv_bytes, layout.tp) > 0]
        return PoolShape(tuple(buffer((layer,)) for layer in paged), 1, layout.block_size)
    slots = layout.block_bytes // layout.page_bytes
    views = tuple(group.layer for group in layout.groups)
    sizes = tuple(group.tokens_per_block for group in layout.groups)
    return PoolShape(tuple(Buffer(views, layout.block_size, layout.kv_bytes, layout.tp, sizes) for _ in range(slots)),
                     len(views), layout.block_size)
