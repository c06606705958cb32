"""The device verify runs on: a CUDA GPU as vLLM's startup snapshot reads it (torch.cuda.mem_get_info), matched
to the catalogue; or the CPU for a dry run, whose size is the pool cap."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from kvplan.errors import KvplanError
from kvplan.hardware import Gpu, find_gpu


@dataclass(eq=False)
class Device:
    where: torch.device
    name: str
    total_bytes: int
    free_bytes: int
    catalogue: Gpu | None
    cap_bytes: int | None  # the CPU dry run: the most the pool may take

    @property
    def is_cpu(self) -> bool:
        return self.where.type == "cpu"

    @property
    def compute_capability(self) -> str | None:
        if self.is_cpu:
            return None
        major, minor = torch.cuda.get_device_capability(self.where)
        return f"{major}.{minor}"

    def free_now(self) -> int:
        if self.is_cpu:
            return self.cap_bytes or 0
        return int(torch.cuda.mem_get_info(self.where)[0])

    def catalogue_note(self) -> str | None:
        if self.catalogue is None:
            return None if self.is_cpu else f"{self.name} is not in the GPU catalogue"
        if self.catalogue.memory_bytes != self.total_bytes:
            return (f"the catalogue's {self.catalogue.id} total is {self.catalogue.memory_bytes:,} B; this device "
                    f"reports {self.total_bytes:,} B ({self.total_bytes - self.catalogue.memory_bytes:+,} B)")
        return None


def parse_device(text: str | None, local_rank: int = 0) -> torch.device:
    """None: the first GPU (this rank's own under several ranks); 'cuda', 'cuda:N' or 'cpu'."""
    if text is None:
        if not torch.cuda.is_available():
            raise KvplanError("no CUDA device found; pass --device cpu for a dry run", "--device")
        return torch.device("cuda", local_rank)
    try:
        device = torch.device(text)
    except RuntimeError:
        raise KvplanError(f"cannot read {text!r} as a device; write cuda, cuda:N or cpu", "--device") from None
    if device.type == "cpu":
        return device
    if device.type != "cuda":
        raise KvplanError(f"verify runs on cuda or cpu, not {device.type}", "--device")
    if not torch.cuda.is_available():
        raise KvplanError("no CUDA device found; pass --device cpu for a dry run", "--device")
    index = (device.index or 0) + local_rank
    if index >= torch.cuda.device_count():
        raise KvplanError(f"no cuda:{index}: this machine has {torch.cuda.device_count()} GPU(s)", "--device")
    return torch.device("cuda", index)


def open_device(text: str | None, cap_bytes: int, local_rank: int = 0) -> Device:
    where = parse_device(text, local_rank)
    if where.type == "cpu":
        return Device(where, "cpu", cap_bytes, cap_bytes, None, cap_bytes)
    torch.cuda.set_device(where)
    free, total = torch.cuda.mem_get_info(where)
    name = torch.cuda.get_device_name(where)
    try:
        found: Gpu | None = find_gpu(name)
    except KvplanError:
        found = None
    return Device(where, name, int(total), int(free), found, None)
