"""One rank's verification, start to end: open the device, plan, stand in for the non-KV memory, allocate the
planned pool (or, when it does not fit, search the largest that does), run the paged decode step, and free
everything, on errors and Ctrl-C too."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from kvplan.deployment import Deployment
from kvplan.verify.decode import DecodeResult, decode_lengths, run_decode
from kvplan.verify.device import Device, open_device
from kvplan.verify.kernels import kernel
from kvplan.verify.pool import OutOfMemory, Pool, PoolDoesNotFit, allocate, release
from kvplan.verify.probe import allocation_fits, largest_fitting, plan_error_pct
from kvplan.verify.progress import Progress
from kvplan.verify.target import RankTarget, rank_target

DEFAULT_CAP = 256 * 2**20


@dataclass(frozen=True)
class Options:
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
        return torch.empty(nbytes, dtype=torch.uint8, device=device.where)
    except OutOfMemory:
        release(device.where)
        raise PoolDoesNotFit(f"the plan's {nbytes:,} B beside the pool do not fit") from None


def verify_rank(options: Options, rank: int = 0, world: int = 1, local_rank: int = 0) -> dict[str, Any]:
    progress = Progress(options.show_progress and rank == 0)
    device = open_device(options.device, options.max_pool_bytes, local_rank)
    held: dict[str, torch.Tensor | None] = {}
    threads = torch.get_num_threads()
    if device.is_cpu:
        torch.set_num_threads(1)  # a dry run's small shapes: a thread pool costs more than it gains
    try:
        progress.step("planning")
        target = rank_target(options.deployment, device, rank, world, options.token)
        notes = [note for note in (device.catalogue_note(),) if note]
        ranks = target.plan.tensor_parallel * target.plan.pipeline_parallel
        if world == 1 and ranks > 1:
            notes.append(f"rank 0 of {ranks} verified; --nproc {ranks} runs every rank")
        return _verify(options, device, target, notes, held, progress)
    finally:
        held.clear()
        release(device.where)
        torch.set_num_threads(threads)
        progress.done()


def _verify(options: Options, device: Device, target: RankTarget, notes: list[str],
            held: dict[str, torch.Tensor | None], progress: Progress) -> dict[str, Any]:
    plan, kv_dtype = target.plan, target.plan.kv_dtype
    cap = device.cap_bytes

    def take(blocks: int) -> Pool:
        return allocate(target.shape, blocks, kv_dtype, device.where, cap)

    def give(pool: object) -> None:
        assert isinstance(pool, Pool)
        pool.free()
        release(device.where)

    fits_alone = True
    if options.no_weights:
        notes.append("--no-weights: the pool is measured against free memory alone")
    elif device.is_cpu:
        notes.append("CPU dry run: only the pool is allocated, within --max-pool-bytes")
    else:
        progress.step("standing in for weights and working memory")
        try:
            held["weights"] = _standin(target.weights_bytes, device)
            held["working"] = _standin(target.working_bytes, device)
        except PoolDoesNotFit as exc:
            fits_alone = False
            notes.append(f"{exc}: measured against free memory alone")
            held.clear()

    planned = target.num_blocks
    if planned == 0:
        notes.append(plan.error or "the plan has no KV blocks")
    progress.step(f"allocating {planned:,} blocks")
    fits = fits_alone and planned > 0 and allocation_fits(take, give)(planned)
    probe: dict[str, Any] | None = None
    probed: int | None = None
    if not fits or options.probe:
        progress.step("searching the largest pool that fits")
        free = device.free_now() if cap is None else cap
        upper = free // target.shape.block_bytes if target.shape.block_bytes else 0
        largest = largest_fitting(allocation_fits(take, give), upper)
        probe = {"max_blocks": largest, "plan_error_pct": plan_error_pct(planned, largest)}
        probed = largest
    held.pop("working", None)  # the decode step's room
    release(device.where)
    blocks = planned if fits else probed or 0
    if not fits and blocks and planned:
        where = "--max-pool-bytes" if cap is not None else "free memory"
        notes.append(f"the planned {planned:,} blocks do not fit ({where}); scaled to the {blocks:,} that do")

    decode: DecodeResult | None = None
    allocated_bytes = 0
    pool: Pool | None = None
    if blocks:
        progress.step(f"allocating {blocks:,} blocks")
        try:
            pool = take(blocks)
        except PoolDoesNotFit as exc:  # the device's free memory moved since it was measured
            notes.append(f"the {blocks:,} blocks no longer fit: {exc}")
    if pool is not None:
        try:
            allocated_bytes = pool.nbytes
            chosen, note = kernel(options.kernel)
            notes.extend([note] if note else [])
            context = min(options.context, plan.engine.max_model_len)
            progress.step("paged decode")
            decode = run_decode(pool, decode_lengths(options.batch, context), plan.model.num_attention_heads,
                                target.attention_tp, chosen, options.seed + target.rank)
            notes.extend(decode.notes)
        except OutOfMemory:
            notes.append("the decode step's working tensors did not fit beside the pool; lower --batch or --context")
        finally:
            pool.free()
            release(device.where)
    return rank_document(device, target, blocks, allocated_bytes, decode, probe, fits, notes)


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
            "batch": decode.batch, "max_abs_err": decode.max_abs_err if decode.layers else None,
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
