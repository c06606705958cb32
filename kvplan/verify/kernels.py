"""Paged decode attention: one query token per sequence attends to its cached tokens, which lie in the blocks
its block table names. Two kernels: gather (index the pool by the block tables, then attend) and flex (torch's
FlexAttention over the physical pool, with a block mask built from the block tables)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch

from kvplan.verify.attention import Visibility


@dataclass(eq=False)
class Batch:
    """The decode batch: per sequence its length and block table (rows padded with block 0 past their end)."""

    lengths: torch.Tensor  # (B,) int64
    block_tables: torch.Tensor  # (B, max_blocks) int64
    block_size: int


class Kernel(Protocol):
    name: str

    def __call__(self, query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, batch: Batch,
                 visibility: Visibility, compute: torch.dtype) -> torch.Tensor:
        """query (B, Hq, D); keys/values (num_blocks, block_size, Hkv, D) -> (B, Hq, Dv) in `compute`."""
        ...


class Gather:
    name = "gather"

    def __call__(self, query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, batch: Batch,
                 visibility: Visibility, compute: torch.dtype) -> torch.Tensor:
        count, max_blocks = batch.block_tables.shape
        kv_heads = keys.shape[-2]
        tokens = max_blocks * batch.block_size
        k = keys[batch.block_tables].reshape(count, tokens, kv_heads, keys.shape[-1]).to(compute)
        v = values[batch.block_tables].reshape(count, tokens, kv_heads, values.shape[-1]).to(compute)
        positions = torch.arange(tokens, device=query.device)
        seen = visibility.visible(positions[None, :], batch.lengths[:, None])  # (B, T)
        q = query.to(compute).reshape(count, kv_heads, -1, query.shape[-1])  # (B, Hkv, group, D)
        scores = torch.einsum("bkgd,btkd->bkgt", q, k) * query.shape[-1] ** -0.5
        scores = scores.masked_fill(~seen[:, None, None, :], float("-inf"))
        weights = torch.softmax(scores.float(), dim=-1).to(compute)
        out = torch.einsum("bkgt,btkd->bkgd", weights, v)
        return out.reshape(count, -1, values.shape[-1])


class Flex:
    """FlexAttention sees the whole pool as one long KV sequence; the mask lets each query (one per sequence)
    see only the slots its block table owns, at their logical positions."""

    name = "flex"

    def __call__(self, query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, batch: Batch,
                 visibility: Visibility, compute: torch.dtype) -> torch.Tensor:
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention

        device = query.device
        num_blocks, block_size, kv_heads, _ = keys.shape
        slots = num_blocks * block_size
        owner = torch.full((slots,), -1, dtype=torch.int64, device=device)
        logical = torch.zeros(slots, dtype=torch.int64, device=device)
        count, max_blocks = batch.block_tables.shape
        offsets = torch.arange(block_size, device=device)
        for row in range(count):
            used = -(-int(batch.lengths[row]) // block_size)
            physical = (batch.block_tables[row, :used, None] * block_size + offsets).reshape(-1)
            owner[physical] = row
            logical[physical] = torch.arange(used * block_size, device=device)
        lengths = batch.lengths

        def mask(b: torch.Tensor, h: torch.Tensor, q_idx: torch.Tensor, kv_idx: torch.Tensor) -> torch.Tensor:
            return (owner[kv_idx] == q_idx) & visibility.visible(logical[kv_idx], lengths[q_idx])

        block_mask = create_block_mask(mask, None, None, count, slots, device=str(device))
        q = query.to(compute).transpose(0, 1).unsqueeze(0)  # (1, Hq, B, D)
        k = keys.reshape(slots, kv_heads, -1).to(compute).transpose(0, 1).unsqueeze(0)  # (1, Hkv, slots, D)
        v = values.reshape(slots, kv_heads, -1).to(compute).transpose(0, 1).unsqueeze(0)
        attend = torch.compile(flex_attention) if device.type == "cuda" else flex_attention
        out = attend(q, k, v, block_mask=block_mask, scale=query.shape[-1] ** -0.5, enable_gqa=True)
        assert isinstance(out, torch.Tensor)
        return out.squeeze(0).transpose(0, 1)  # (B, Hq, Dv)


KERNELS: dict[str, Kernel] = {"gather": Gather(), "flex": Flex()}


def flex_available() -> bool:
    try:
        from torch.nn.attention.flex_attention import flex_attention  # noqa: F401
    except ImportError:
        return False
    return True


def kernel(name: str) -> tuple[Kernel, str | None]:
    """The kernel asked for, or gather with a note when this torch has no FlexAttention."""
    if name == "flex" and not flex_available():
        return KERNELS["gather"], f"this torch ({torch.__version__}) has no FlexAttention: the gather kernel ran"
    return KERNELS[name], None


def reference(query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, length: int,
              visibility: Visibility) -> torch.Tensor:
    """Plain attention of one sequence over its contiguous K/V (length, Hkv, D), in float64: the yardstick."""
    positions = torch.arange(length, device=keys.device)
    seen = visibility.visible(positions, torch.tensor(length, device=keys.device))
    k, v = keys[seen].double(), values[seen].double()
    group = query.shape[0] // keys.shape[1]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)  # (T, Hq, D)
    scores = torch.einsum("hd,thd->ht", query.double(), k) * query.shape[-1] ** -0.5
    return torch.einsum("ht,thd->hd", torch.softmax(scores, dim=-1), v)
