"""Several ranks, one process each, joined by torch.distributed (NCCL on GPUs, gloo on the CPU): each verifies
its own rank's pool and decode share, and rank 0 gathers every rank's document. Either verify starts the
processes itself (--nproc, torch.multiprocessing spawn on a free local port) or torchrun did (RANK/WORLD_SIZE)."""

from __future__ import annotations

import json
import os
import socket
from dataclasses import replace
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from kvplan.errors import KvplanError
from kvplan.verify.report import combine
from kvplan.verify.run import VerifyOptions, verify_rank


def launched_by_torchrun() -> bool:
    return int(os.environ.get("WORLD_SIZE", "1")) > 1 and "RANK" in os.environ


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _backend(options: VerifyOptions) -> str:
    cpu = options.device is not None and options.device.startswith("cpu")
    return "gloo" if cpu or not torch.cuda.is_available() else "nccl"


def _rank_run(options: VerifyOptions, rank: int, world: int, local_rank: int) -> dict[str, Any]:
    """This rank's document, or its error, so that every rank reaches the gather."""
    try:
        return verify_rank(options, rank, world, local_rank)
    except KvplanError as exc:
        return {"rank": rank, "error": str(exc)}


def _gathered(document: dict[str, Any], rank: int, world: int, device: torch.device) -> list[dict[str, Any]] | None:
    """Every rank's document on rank 0. As JSON bytes in tensors through all_gather: gather_object would need
    numpy to decode them, which verify does not otherwise require."""
    payload = torch.tensor(list(json.dumps(document).encode()), dtype=torch.uint8, device=device)
    size = torch.tensor([payload.numel()], dtype=torch.int64, device=device)
    sizes = [torch.zeros_like(size) for _ in range(world)]
    dist.all_gather(sizes, size)
    longest = int(max(int(s.item()) for s in sizes))
    padded = torch.zeros(longest, dtype=torch.uint8, device=device)
    padded[:payload.numel()] = payload
    received = [torch.zeros_like(padded) for _ in range(world)]
    dist.all_gather(received, padded)
    if rank != 0:
        return None
    return [json.loads(bytes(r[:int(s.item())].tolist())) for r, s in zip(received, sizes, strict=True)]


def _collective_device(backend: str, local_rank: int) -> torch.device:
    return torch.device("cuda", local_rank) if backend == "nccl" else torch.device("cpu")


def _result(documents: list[dict[str, Any]]) -> dict[str, Any]:
    failed = [document for document in documents if "error" in document]
    if failed:
        raise KvplanError(f"rank {failed[0]['rank']}: {failed[0]['error']}")
    return combine(documents)


def _worker(local_rank: int, world: int, port: int, options: VerifyOptions, results: Any) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    backend = _backend(options)
    if backend == "nccl":
        torch.cuda.set_device(local_rank)
    dist.init_process_group(backend, rank=local_rank, world_size=world)
    try:
        document = _rank_run(replace(options, show_progress=False), local_rank, world, local_rank)
        documents = _gathered(document, local_rank, world, _collective_device(backend, local_rank))
        if documents is not None:
            results.put(documents)
    finally:
        dist.destroy_process_group()


def spawn_ranks(options: VerifyOptions, nproc: int) -> dict[str, Any]:
    """--nproc N: N local processes, joined before returning (and terminated on Ctrl-C or a failed rank)."""
    context = mp.get_context("spawn")
    results = context.SimpleQueue()
    processes = mp.start_processes(_worker, args=(nproc, _free_port(), options, results), nprocs=nproc,
                                   join=False, start_method="spawn")
    try:
        while not processes.join():
            pass
    except mp.ProcessRaisedException as exc:
        raise KvplanError(f"a rank failed: {str(exc).strip().splitlines()[-1]}") from None
    finally:
        for process in processes.processes:
            if process.is_alive():
                process.terminate()
            process.join()
    return _result(results.get())


def torchrun_rank(options: VerifyOptions) -> dict[str, Any] | None:
    """Under torchrun: this process's rank; rank 0 returns the combined document, the others None."""
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    backend = _backend(options)
    if backend == "nccl":
        torch.cuda.set_device(local_rank)
    dist.init_process_group(backend)
    try:
        documents = _gathered(_rank_run(options, rank, world, local_rank), rank, world,
                              _collective_device(backend, local_rank))
    finally:
        dist.destroy_process_group()
    return _result(documents) if documents is not None else None
