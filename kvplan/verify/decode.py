"""One paged decode step over a real pool: sequences of different lengths get scattered, shuffled blocks (each
KV-cache group its own, all from the one pool); their K/V are written through a slot mapping; every layer's
attention runs through the block tables and is compared with plain attention over the same data, held apart
from the pool. K/V and queries come from seeded generators, so the reference regenerates them instead of
keeping a second copy of the KV in memory."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from kvplan.units import cdiv
from kvplan.verify.attention import Attention, attention_for, query_heads
from kvplan.verify.dtypes import TOLERANCE, compute_dtype
from kvplan.verify.kernels import Batch, Kernel, reference
from kvplan.verify.pool import Pool


@dataclass(eq=False)
class DecodeResult:
    batch: int
    lengths: list[int]
    max_abs_err: float
    tolerance: float
    seconds: float
    kv_bytes_read: int
    layers: int  # layer views attended
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.layers > 0 and math.isfinite(self.max_abs_err) and self.max_abs_err <= self.tolerance

    @property
    def bandwidth_gbps(self) -> float | None:
        return round(self.kv_bytes_read / self.seconds / 1e9, 2) if self.seconds > 0 else None


def decode_lengths(batch: int, context: int) -> list[int]:
    """`batch` different lengths spread over the upper half of `context`, the longest exactly `context`."""
    step = max(1, context // (2 * batch))
    return [max(1, context - i * step) for i in range(batch)]


def fit_lengths(lengths: list[int], block_size: int, groups: int, num_blocks: int) -> list[int]:
    """The longest prefix of the batch whose blocks (each group its own) the pool holds; a lone sequence too long
    for the pool is cut to what it holds."""
    fitted: list[int] = []
    used = 0
    for length in lengths:
        need = groups * cdiv(length, block_size)
        if used + need > num_blocks:
            break
        fitted.append(length)
        used += need
    if not fitted and num_blocks >= groups:
        fitted = [min(lengths[0], num_blocks // groups * block_size)]
    return fitted


def block_tables(lengths: list[int], block_size: int, groups: int, num_blocks: int,
                 generator: torch.Generator) -> list[torch.Tensor]:
    """Per group a (B, max_blocks) table of distinct blocks drawn from a shuffle of the whole pool."""
    order = torch.randperm(num_blocks, generator=generator)
    widest = max(cdiv(length, block_size) for length in lengths)
    tables, taken = [], 0
    for _ in range(groups):
        table = torch.zeros(len(lengths), widest, dtype=torch.int64)
        for row, length in enumerate(lengths):
            need = cdiv(length, block_size)
            table[row, :need] = order[taken:taken + need]
            taken += need
        tables.append(table)
    return tables


def slot_mapping(table_row: torch.Tensor, length: int, block_size: int) -> torch.Tensor:
    """Token i of the sequence goes to slot block_table[i // block_size] * block_size + i % block_size."""
    positions = torch.arange(length, device=table_row.device)
    return table_row[positions // block_size] * block_size + positions % block_size


def _seeded(seed: int, device: torch.device) -> torch.Generator:
    generator = torch.Generator(device=device)
    generator.manual_seed(seed)
    return generator


@dataclass(eq=False)
class _Layer:
    """One layer view to attend: the buffer it reads, its group (block table) and its kind's attention."""

    index: int
    keys: torch.Tensor
    values: torch.Tensor
    group: int
    attention: Attention
    heads: int


def _sequence_kv(layer: _Layer, row: int, length: int, seed: int, dtype: torch.dtype,
                 device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    generator = _seeded(seed * 1_000_003 + layer.index * 1009 + row, device)
    k = torch.randn((length, *layer.keys.shape[2:]), generator=generator, device=device).to(dtype)
    if layer.attention.shared:
        return k, k
    v = torch.randn((length, *layer.values.shape[2:]), generator=generator, device=device).to(dtype)
    return k, v


def run_decode(pool: Pool, lengths: list[int], attention_heads: int, tp: int, kernel: Kernel,
               seed: int = 0) -> DecodeResult:
    device = pool.buffers[0].device if pool.buffers else torch.device("cpu")
    shape, notes = pool.shape, []
    compute = compute_dtype(pool.dtype, device)
    lengths = fit_lengths(lengths, shape.block_size, shape.groups, pool.num_blocks)
    layers: list[_Layer] = []
    for b, buffer in enumerate(shape.buffers):
        for g, view in enumerate(buffer.views):
            attention = attention_for(view, tp)
            if attention is None:
                notes.append(f"{view.kind} layers have no attention to check: skipped")
                continue
            keys, values = attention.key_value(pool.views[b][g])
            layers.append(_Layer(len(layers), keys, values, g, attention,
                                 query_heads(attention_heads, tp, attention)))
    if not lengths or not layers:
        return DecodeResult(len(lengths), lengths, float("inf"), TOLERANCE[compute], 0.0, 0, 0,
                            notes + ["the pool holds no decode batch"])

    tables = [t.to(device) for t in block_tables(lengths, shape.block_size, shape.groups, pool.num_blocks,
                                                 _seeded(seed, torch.device("cpu")))]
    length_tensor = torch.tensor(lengths, dtype=torch.int64, device=device)
    queries = []
    for layer in layers:  # write each sequence's K/V into its blocks
        flat_k = layer.keys.view(-1, *layer.keys.shape[2:])
        flat_v = layer.values.view(-1, *layer.values.shape[2:])
        for row, length in enumerate(lengths):
            k, v = _sequence_kv(layer, row, length, seed, pool.dtype, device)
            slots = slot_mapping(tables[layer.group][row], length, shape.block_size)
            flat_k[slots] = k
            flat_v[slots] = v
        generator = _seeded(seed * 7 + layer.index, device)
        queries.append(torch.randn((len(lengths), layer.heads, layer.attention.query_dim), generator=generator,
                                   device=device).to(pool.dtype).to(compute))

    outputs, seconds = _timed(lambda: [
        kernel(queries[i], layer.keys, layer.values, Batch(length_tensor, tables[layer.group], shape.block_size),
               layer.attention.visibility, compute) for i, layer in enumerate(layers)], device)

    worst = 0.0
    kv_read = 0
    for i, layer in enumerate(layers):
        for row, length in enumerate(lengths):
            k, v = _sequence_kv(layer, row, length, seed, pool.dtype, device)
            expected = reference(queries[i][row], k.to(compute), v.to(compute), length, layer.attention.visibility)
            worst = _worse(worst, float((outputs[i][row].double() - expected).abs().max()))
            seen = int(layer.attention.visibility.visible(torch.arange(length), torch.tensor(length)).sum())
            distinct = 1 if layer.attention.shared else 2
            kv_read += seen * distinct * layer.keys[0, 0].numel() * layer.keys.element_size()
    if not math.isfinite(worst):
        notes.append("the paged decode's output holds NaN or infinite values: a failure, whatever the tolerance")
    return DecodeResult(len(lengths), lengths, worst, TOLERANCE[compute], seconds, kv_read, len(layers), notes)


def _worse(worst: float, error: float) -> float:
    """The larger error, NaN counting as the worst of all: max() would keep the first argument over a NaN."""
    return error if math.isnan(error) or error > worst else worst


def _timed(step: Callable[[], list[torch.Tensor]], device: torch.device) -> tuple[list[torch.Tensor], float]:
    """Run step once to warm up, then time it: CUDA events on a GPU, the wall clock elsewhere."""
    step()
    if device.type == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize(device)
        start.record()
        result = step()
        end.record()
        torch.cuda.synchronize(device)
        return result, start.elapsed_time(end) / 1000
    began = time.perf_counter()
    result = step()
    return result, time.perf_counter() - began
