"""One rank's verification, start to end: open the device, plan, stand in for the non-KV memory, allocate the
planned pool (or, when it does not fit, search the largest that does), run the paged decode step, and free
everything, on errors and Ctrl-C too."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from kvplan.deployment import Deployment
from kvplan.verify.decode import DecodeResult, decode_lengths, run_decode
from kvplan.verify.device import Device, open_device
from kvplan.verify.kernels import kernel
from kvplan.verify.pool import Pool, PoolDoesNotFit, allocate, empty_bytes, out_of_memory, release
from kvplan.verify.probe import allocation_fits, largest_fitting, plan_error_pct
from kvplan.verify.progress import Progress
from kvplan.verify.target import RankTarget, rank_target

DEFAULT_CAP = 256 * 2**20


@dataclass(frozen=True)
class VerifyOptions:
    deployment: Deployment
    device: str | None = None
    max_pool_bytes: int = DEFAULT_CAP
    no_weights: bool = False
    probe: bool = False
    kernel: str = "gather"
    batch: int = 8
    context: int = 1024
    seed: int = 0
    token: str | None = None
    show_progress: bool = False


def _standin(nbytes: int, device: Device) -> torch.Tensor | None:
    """Real memory where the plan counts weights or working memory; the CPU dry run holds only the pool."""
    if nbytes <= 0 or device.is_cpu:
        return None
    try:
        return empty_bytes(nbytes, device.where)
    except PoolDoesNotFit:
        raise PoolDoesNotFit(f"the plan's {nbytes:,} B beside the pool do not fit") from None


def verify_rank(options: VerifyOptions, rank: int = 0, world: int = 1, local_rank: int = 0) -> dict[str, Any]:
    progress = Progress(options.show_progress and rank == 0)
    device = open_device(options.device, options.max_pool_bytes, local_rank)
    held: dict[str, torch.Tensor | None] = {}
    threads = torch.get_num_threads()
    if device.is_cpu:
        torch.set_num_threads(1)  # a dry run's small shapes: a thread pool costs more than it gains
    try:
        progress.step("planning")
        target = rank_target(options.deployment, device, rank, world, options.token)
        notes = [note for note in (device.catalogue_note(), device.cap_note) if note]
        ranks = target.plan.tensor_parallel * target.plan.pipeline_parallel
        if world == 1 and ranks > 1:
            notes.append(f"rank 0 of {ranks} verified; --nproc {ranks} runs every rank")
        return _verify(_Rank(options, device, target, notes, progress), held)
    finally:
        held.clear()
        release(device.where)
        torch.set_num_threads(threads)
        progress.done()


@dataclass(eq=False)
class _Rank:
    """One rank's run: what it was asked, where, for which target; the notes it gathers."""

    options: VerifyOptions
    device: Device
    target: RankTarget
    notes: list[str]
    progress: Progress

    def take(self, blocks: int) -> Pool:
        return allocate(self.target.shape, blocks, self.target.plan.kv_dtype, self.device.where,
                        self.device.cap_bytes)

    def give(self, pool: object) -> None:
        assert isinstance(pool, Pool)
        pool.free()
        release(self.device.where)


def _verify(run: _Rank, held: dict[str, torch.Tensor | None]) -> dict[str, Any]:
    target, notes = run.target, run.notes
    fits_alone = _hold_beside_the_pool(run, held)
    planned = target.num_blocks
    if planned == 0:
        notes.append(target.plan.error or "the plan has no KV blocks")
    run.progress.step(f"allocating {planned:,} blocks")
    fits = fits_alone and planned > 0 and allocation_fits(run.take, run.give)(planned)
    probe = _largest_pool(run) if not fits or run.options.probe else None
    held.pop("working", None)  # the decode step's room
    release(run.device.where)
    blocks = planned if fits else probe["max_blocks"] if probe else 0
    if not fits and blocks and planned:
        notes.append(f"the planned {planned:,} blocks do not fit ({run.device.pool_limit}); scaled to the "
                     f"{blocks:,} that do")
    decode, allocated_bytes = _decode(run, blocks)
    return rank_document(run.device, target, blocks, allocated_bytes, decode, probe, fits, notes)


def _hold_beside_the_pool(run: _Rank, held: dict[str, torch.Tensor | None]) -> bool:
    """Stand in for the weights and working memory the plan counts beside the pool; False when they do not fit."""
    if run.options.no_weights:
        run.notes.append("--no-weights: the pool is measured against free memory alone")
    elif run.device.is_cpu:
        run.notes.append("CPU dry run: only the pool is allocated, within --max-pool-bytes")
    else:
        run.progress.step("standing in for weights and working memory")
        try:
            held["weights"] = _standin(run.target.weights_bytes, run.device)
            held["working"] = _standin(run.target.working_bytes, run.device)
        except PoolDoesNotFit as exc:
            run.notes.append(f"{exc}: measured against free memory alone")
            held.clear()
            return False
    return True


def _largest_pool(run: _Rank) -> dict[str, Any]:
    run.progress.step("searching the largest pool that fits")
    cap = run.device.cap_bytes
    free = run.device.free_now() if cap is None else cap
    block_bytes = run.target.shape.block_bytes
    upper = free // block_bytes if block_bytes else 0
    fits = allocation_fits(run.take, run.give)
    # the top first: a CPU dry run's cap (and a GPU's free memory in one piece) holds it, in one allocation
    largest = upper if upper and fits(upper) else largest_fitting(fits, upper - 1)
    return {"max_blocks": largest, "plan_error_pct": plan_error_pct(run.target.num_blocks, largest)}


def _decode(run: _Rank, blocks: int) -> tuple[DecodeResult | None, int]:
    """The paged decode step over a pool of `blocks`, and the bytes that pool took (0 when none was held)."""
    if not blocks:
        return None, 0
    run.progress.step(f"allocating {blocks:,} blocks")
    try:
        pool = run.take(blocks)
    except PoolDoesNotFit as exc:  # the device's free memory moved since it was measured
        run.notes.append(f"the {blocks:,} blocks no longer fit: {exc}")
        return None, 0
    try:
        chosen, note = kernel(run.options.kernel)
        run.notes.extend([note] if note else [])
        target = run.target
        context = min(run.options.context, target.plan.engine.max_model_len)
        run.progress.step("paged decode")
        decode = run_decode(pool, decode_lengths(run.options.batch, context), target.plan.model.num_attention_heads,
                            target.attention_tp, chosen, run.options.seed + target.rank)
        run.notes.extend(decode.notes)
        return decode, pool.nbytes
    except (RuntimeError, MemoryError) as exc:
        if not out_of_memory(exc):
            raise
        run.notes.append("the decode step's working tensors did not fit beside the pool; lower --batch or --context")
        return None, pool.nbytes
    finally:
        pool.free()
        release(run.device.where)


def _finite_or_none(error: float) -> float | None:
    """JSON has no NaN or infinity: a non-finite error is null, and a note says what it was."""
    return error if math.isfinite(error) else None


def rank_document(device: Device, target: RankTarget, blocks: int, allocated_bytes: int,
                  decode: DecodeResult | None, probe: dict[str, Any] | None, fits: bool,
                  notes: list[str]) -> dict[str, Any]:
    peak = device.catalogue.bandwidth_gbps if device.catalogue else None
    planned = target.num_blocks
    return {
        "rank": target.rank, "tp_rank": target.tp_rank, "pp_rank": target.pp_rank,
        "device": {"name": device.name, "total_bytes": device.total_bytes, "free_bytes": device.free_bytes,
                   "catalogue_id": device.catalogue.id if device.catalogue else None},
        "plan": {"num_blocks": planned, "pool_bytes": target.planned_bytes(planned),
                 "block_bytes": target.layout.block_bytes, "block_size": target.layout.block_size,
                 "kv_dtype": target.plan.kv_dtype},
        "allocated": {"num_blocks": blocks, "pool_bytes": allocated_bytes, "fits": fits,
                      "ok": blocks > 0 and allocated_bytes == target.planned_bytes(blocks)},
        "decode": None if decode is None else {
            "batch": decode.batch, "max_abs_err": _finite_or_none(decode.max_abs_err) if decode.layers else None,
            "tolerance": decode.tolerance, "ok": decode.ok, "seconds": decode.seconds, "kv_bytes_read": decode.kv_bytes_read,
            "bandwidth_gbps": decode.bandwidth_gbps, "peak_bandwidth_gbps": peak},
        "probe": probe,
        "cpu_dry_run": device.is_cpu,
        "notes": list(dict.fromkeys(notes)),
    }


def verified(document: dict[str, Any]) -> bool:
    """The plan held: the pool was allocated with the planned bytes and fit (a CPU dry run is allowed to scale it
    to its cap), and the paged decode matched the reference."""
    allocated, decode = document["allocated"], document["decode"]
    fit = allocated["fits"] or document["cpu_dry_run"]
    return bool(document["plan"]["num_blocks"] > 0 and allocated["ok"] and fit and decode is not None and decode["ok"])
