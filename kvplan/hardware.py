"""The GPU catalogue (data/gpus.json beside this package) and lookup by id, alias or name. JSON rather than YAML:
the estimate path reads it on every run, and importing a YAML parser costs more than the lookup itself."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from kvplan.errors import KvplanError

CATALOGUE = Path(__file__).parent / "data" / "gpus.json"


@dataclass(eq=False)
class Gpu:
    """One catalogue GPU, with the memory the CUDA runtime reports and its sources."""

    id: str
    name: str
    aliases: tuple[str, ...]
    vendor: str
    memory_bytes: int  # what the CUDA runtime reports as total; vLLM's budget base
    memory_precision: str
    memory_source: str
    nvml_total_mib: int | None
    bandwidth_gbps: float | None
    bf16_tflops_dense: float | None
    fp8: bool
    compute_capability: str | None = None
    sm_count: int | None = None  # multi_processor_count (AMD: compute units), as sm_source cites; None: not cited
    unified_memory: bool = False  # the GPU's memory is the host's (DGX Spark's GB10): the total is shared with the CPU
    nvlink: str | None = None  # how its GPUs reach each other: nvswitch, nvlink, bridge (optional), none; None: unknown
    parent: str | None = None  # a MIG slice: the catalogue id of the GPU it is cut from
    slices: tuple[MigSlice, ...] = ()  # the MIG profiles the catalogue has a sourced in-slice memory for

    @property
    def group(self) -> str:
        """The heading kvplan gpus lists it under."""
        if self.parent:
            return "MIG slices"
        if self.unified_memory:
            return "unified memory"
        return {"nvidia": "NVIDIA", "amd": "AMD Instinct", "intel": "Intel Gaudi"}.get(self.vendor, self.vendor)


@dataclass(frozen=True)
class MigSlice:
    """One MIG profile of a GPU: the memory the runtime reports inside the slice, and its source."""

    profile: str
    memory_bytes: int
    memory_precision: str
    memory_source: str


def _normalize(name: str) -> str:
    key = re.sub(r"[^a-z0-9]", "", name.lower())
    for prefix in ("nvidia", "geforce", "tesla", "amd", "instinct"):
        key = key.removeprefix(prefix)
    return key


@lru_cache(maxsize=1)
def catalogue() -> tuple[Gpu, ...]:
    entries = json.loads(CATALOGUE.read_text(encoding="utf-8"))["gpus"]
    return tuple(
        Gpu(id=e["id"], name=e["name"], aliases=tuple(e.get("aliases") or ()), vendor=e["vendor"],
            memory_bytes=int(e["memory_bytes"]), memory_precision=e["memory_precision"],
            memory_source=e["memory_source"], nvml_total_mib=e.get("nvml_total_mib"),
            bandwidth_gbps=e.get("bandwidth_gbps"), bf16_tflops_dense=e.get("bf16_tflops_dense"),
            fp8=bool(e.get("fp8")), compute_capability=e.get("compute_capability"),
            sm_count=e.get("sm_count"), unified_memory=bool(e.get("unified_memory")), nvlink=e.get("nvlink"),
            slices=tuple(MigSlice(m["profile"], int(m["memory_bytes"]), m["memory_precision"], m["memory_source"])
                         for m in e.get("mig") or ()))
        for e in entries
    )


@lru_cache(maxsize=1)
def _index() -> dict[str, Gpu]:
    index: dict[str, Gpu] = {}
    for gpu in catalogue():
        for name in (gpu.id, gpu.name, *gpu.aliases):
            index.setdefault(_normalize(name), gpu)
    return index


def _prefixed(key: str) -> list[Gpu]:
    """Catalogue entries with an id, name or alias that starts with `key` (normalized), in catalogue order."""
    return [gpu for gpu in catalogue()
            if key and any(_normalize(n).startswith(key) for n in (gpu.id, gpu.name, *gpu.aliases))]


def derived_memory_note(gpu: Gpu) -> str | None:
    """A plan note for a catalogue total that no runtime printed (memory_precision "derived")."""
    if gpu.memory_precision != "derived":
        return None
    return (f"{gpu.name}: its {gpu.memory_bytes / 2**30:.2f} GiB total is derived from another figure, not observed "
            "(kvplan gpus --json gives how)")


def mig_slice(gpu: Gpu, piece: MigSlice) -> Gpu:
    """A MIG slice as a GPU of its own: the parent's compute capability and FP8, the slice's memory. Bandwidth and
    TFLOPS are left out: the slice has a share of them that no cited figure gives."""
    return Gpu(id=f"{gpu.id}:{piece.profile}", name=f"{gpu.name} MIG {piece.profile}", aliases=(), vendor=gpu.vendor,
               memory_bytes=piece.memory_bytes, memory_precision=piece.memory_precision,
               memory_source=piece.memory_source, nvml_total_mib=None, bandwidth_gbps=None, bf16_tflops_dense=None,
               fp8=gpu.fp8, compute_capability=gpu.compute_capability, parent=gpu.id)


def links_of(gpu_id: str) -> str | None:
    """The catalogue's nvlink flag for a GPU id (a MIG slice: its parent's); None for a GPU outside the catalogue."""
    gpu = _index().get(_normalize(gpu_id.partition(":")[0]))
    return gpu.nvlink if gpu is not None else None


def mig_slices() -> tuple[Gpu, ...]:
    """Every MIG slice the catalogue has, in catalogue order."""
    return tuple(mig_slice(gpu, piece) for gpu in catalogue() for piece in gpu.slices)


def _find_slice(name: str, otherwise: str) -> Gpu:
    whole, _, profile = name.rpartition(":")
    gpu = find_gpu(whole, otherwise)
    wanted = profile.strip().lower().removeprefix("mig-").removeprefix("mig ")
    for piece in gpu.slices:
        if piece.profile == wanted:
            return mig_slice(gpu, piece)
    if not gpu.slices:
        raise KvplanError(f"{gpu.id} has no MIG slice in the catalogue (no sourced in-slice memory)", "--gpu")
    known = ", ".join(piece.profile for piece in gpu.slices)
    raise KvplanError(f"{gpu.id} has no MIG profile {profile!r} in the catalogue; it has {known}", "--gpu")


def find_gpu(name: str, otherwise: str = "") -> Gpu:
    """An exact id, name or alias; a name that only starts several entries ('a100') is refused, not guessed.
    ID:PROFILE is a MIG slice of that GPU ('a100-80gb-sxm:1g.10gb').
    otherwise: what else the caller's command takes, for the message about an unknown name."""
    if ":" in name:
        return _find_slice(name, otherwise)
    key = _normalize(name)
    gpu = _index().get(key)
    if gpu is not None:
        return gpu
    prefixed = _prefixed(key)
    if len(prefixed) > 1:
        raise KvplanError(f"{name!r} matches several GPUs: {', '.join(g.id for g in prefixed)}; pick one", "--gpu")
    import difflib  # only for the error message

    ids = [g.id for g in catalogue()]
    close = [g.id for g in prefixed] + difflib.get_close_matches(name.lower(), ids, n=3, cutoff=0.4)
    close += [_index()[g].id for g in difflib.get_close_matches(key, list(_index()), n=3, cutoff=0.6)]
    names = list(dict.fromkeys(close))[:3]
    hint = f"; did you mean {', '.join(names)}?" if names else ""
    alternative = f"; {otherwise}" if otherwise else ""
    raise KvplanError(f"unknown GPU {name!r}{hint} (kvplan gpus lists them{alternative})", "--gpu")
