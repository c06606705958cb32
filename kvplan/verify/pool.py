"""The KV block pool, allocated for real: one raw byte buffer per slot of the PoolShape, and per KV-cache group a
typed view of each page tensor over it, laid out as vLLM's FlashAttention backend does (all blocks' keys, then all
blocks' values: (2, num_blocks, block_size, heads, head_dim))."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from kvplan.errors import KvplanError
from kvplan.verify.dtypes import torch_dtype
from kvplan.verify.shape import Buffer, PoolShape

# torch.OutOfMemoryError since torch 2.5; torch.cuda's before
OutOfMemory = getattr(torch, "OutOfMemoryError", None) or torch.cuda.OutOfMemoryError
# Every byte of a new pool is written with this: memory the OS only promised is then really held, and a decode
# that read a slot it never wrote sees a huge value (0x7B7B7B7B is 1.3e36 as float32, 0x7B7B 1.3e36 as bfloat16
# and 61,280 as float16, 0x7B 352 as fp8 e4m3 and 57,344 as e5m2), not the zeros or stale keys left before it.
UNWRITTEN = 0x7B


def out_of_memory(exc: BaseException) -> bool:
    """An allocator's refusal: CUDA's OutOfMemoryError, or the CPU allocator's RuntimeError ('DefaultCPUAllocator:
    can't allocate memory')."""
    text = str(exc).lower()
    return isinstance(exc, (OutOfMemory, MemoryError)) or (
        isinstance(exc, RuntimeError) and ("can't allocate memory" in text or "out of memory" in text))


def empty_bytes(nbytes: int, device: torch.device) -> torch.Tensor:
    """nbytes of real memory, each written once; PoolDoesNotFit (having handed back what it took) when the device
    refuses them."""
    try:
        return torch.empty(nbytes, dtype=torch.uint8, device=device).fill_(UNWRITTEN)
    except (RuntimeError, MemoryError) as exc:
        if not out_of_memory(exc):
            raise
        release(device)
        raise PoolDoesNotFit(str(exc).split("\n")[0]) from None


class PoolDoesNotFit(Exception):
    """The device (or the CPU cap) cannot hold the pool; everything allocated so far has been freed."""


@dataclass(eq=False)
class Pool:
    shape: PoolShape
    num_blocks: int
    buffers: list[torch.Tensor]
    dtype: torch.dtype
    views: list[list[dict[str, torch.Tensor]]] = field(default_factory=list)  # [buffer][group] -> name -> tensor

    @property
    def nbytes(self) -> int:
        return sum(buffer.numel() * buffer.element_size() for buffer in self.buffers)

    def free(self) -> None:
        self.views.clear()
        self.buffers.clear()


# Tensors whose element size is not the KV dtype's (a recurrent state in the model dtype, a page's padding bytes)
# are held in a dtype of their size; verify reads only the KV tensors.
_BY_SIZE = {1: torch.uint8, 2: torch.bfloat16, 4: torch.float32, 8: torch.float64}


def _views(raw: torch.Tensor, buffer: Buffer, num_blocks: int, dtype: torch.dtype) -> list[dict[str, torch.Tensor]]:
    per_group = []
    for group in range(len(buffer.views)):
        named, offset = {}, 0
        for tensor in buffer.tensors(group):
            size = num_blocks * tensor.nbytes
            held = dtype if dtype.itemsize == tensor.element_bytes else _BY_SIZE[tensor.element_bytes]
            named[tensor.name] = raw[offset:offset + size].view(held).view(num_blocks, *tensor.shape)
            offset += size
        per_group.append(named)
    return per_group


def allocate(shape: PoolShape, num_blocks: int, kv_dtype: str, device: torch.device,
             cap_bytes: int | None = None) -> Pool:
    """num_blocks pages in every buffer. cap_bytes: the most the pool may take (the CPU dry run's device size).
    Every byte is written (UNWRITTEN). Raises PoolDoesNotFit, having freed what it took, when the device runs out."""
    if cap_bytes is not None and shape.pool_bytes(num_blocks) > cap_bytes:
        raise PoolDoesNotFit(f"{shape.pool_bytes(num_blocks):,} B over the cap of {cap_bytes:,} B")
    dtype = torch_dtype(kv_dtype)
    if dtype is None:
        raise KvplanError(f"this torch ({torch.__version__}) has no dtype for a {kv_dtype} KV cache; upgrade torch",
                          "--kv-cache-dtype")
    pool = Pool(shape, num_blocks, [], dtype)
    try:
        for buffer in shape.buffers:
            raw = empty_bytes(num_blocks * buffer.page_bytes, device)
            pool.buffers.append(raw)
            pool.views.append(_views(raw, buffer, num_blocks, dtype))
    except PoolDoesNotFit:
        pool.free()
        release(device)
        raise
    return pool


def release(device: torch.device) -> None:
    """Hand cached blocks back to the driver, so the next measurement sees the memory as free."""
    if device.type == "cuda":
        torch.cuda.empty_cache()
