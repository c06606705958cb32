"""The device verify runs on: a CUDA GPU as vLLM's startup snapshot reads it (torch.cuda.mem_get_info), matched
to the catalogue; or the CPU for a dry run, whose size is the pool cap, never more than half the memory the OS
says is available (the pool is written to, so every byte it claims is really held)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

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
    cap_note: str | None = None  # why the CPU dry run's cap is below --max-pool-bytes

    @property
    def is_cpu(self) -> bool:
        return self.where.type == "cpu"

    @property
    def compute_capability(self) -> str | None:
        if self.is_cpu:
            return None
        major, minor = torch.cuda.get_device_capability(self.where)
        return f"{major}.{minor}"

    @property
    def pool_limit(self) -> str:
        """What bounds the pool, in words."""
        if self.cap_note:
            return "the memory available"
        return "--max-pool-bytes" if self.cap_bytes is not None else "free memory"

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


def _meminfo_available() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024  # the kernel prints kB (KiB)
    except (OSError, ValueError, IndexError):
        return None
    return None


def _cgroup_room() -> int | None:
    """What the container's memory limit leaves (cgroup v2, else v1); None without a limit."""
    for limit, usage in (("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
                         ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes")):
        try:
            maximum, current = Path(limit).read_text().strip(), Path(usage).read_text().strip()
            if maximum.isdigit() and int(maximum) < 2**60:  # v1 writes an unlimited cgroup as ~2^63
                return max(0, int(maximum) - int(current))
        except (OSError, ValueError):
            continue
    return None


def _sysconf_available() -> int | None:
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def available_memory() -> int | None:
    """The memory this process can still be given, as the OS reports it: MemAvailable (free pages where the
    kernel has no such figure), under the container's limit. None where nothing says."""
    figures = [figure for figure in (_meminfo_available() or _sysconf_available(), _cgroup_room()) if figure is not None]
    return min(figures) if figures else None


def cpu_cap(asked: int) -> tuple[int, str | None]:
    """The CPU dry run's pool cap: --max-pool-bytes, but at most half the available memory, so that writing every
    page leaves room for the decode step and the rest of the machine."""
    available = available_memory()
    if available is None or asked <= available // 2:
        return asked, None
    cap = available // 2
    return cap, (f"--max-pool-bytes {asked:,} B is more than this machine can hold: the pool is capped at {cap:,} B, "
                 f"half of the {available:,} B of memory available")


def open_device(text: str | None, cap_bytes: int, local_rank: int = 0) -> Device:
    where = parse_device(text, local_rank)
    if where.type == "cpu":
        cap, note = cpu_cap(cap_bytes)
        return Device(where, "cpu", cap, cap, None, cap, note)
    torch.cuda.set_device(where)
    free, total = torch.cuda.mem_get_info(where)
    name = torch.cuda.get_device_name(where)
    try:
        found: Gpu | None = find_gpu(name)
    except KvplanError:
        found = None
    return Device(where, name, int(total), int(free), found, None)
