"""The GPU catalogue (data/gpus.yaml beside this package) and lookup by id, alias or name."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from kvplan.errors import KvplanError

CATALOGUE = Path(__file__).parent / "data" / "gpus.yaml"


@dataclass(frozen=True)
class Gpu:
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


def _normalize(name: str) -> str:
    key = re.sub(r"[^a-z0-9]", "", name.lower())
    for prefix in ("nvidia", "geforce", "tesla", "amd", "instinct"):
        key = key.removeprefix(prefix)
    return key


@lru_cache(maxsize=1)
def catalogue() -> tuple[Gpu, ...]:
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    entries = yaml.load(CATALOGUE.read_text(encoding="utf-8"), Loader=loader)
    return tuple(
        Gpu(id=e["id"], name=e["name"], aliases=tuple(e.get("aliases") or ()), vendor=e["vendor"],
            memory_bytes=int(e["memory_bytes"]), memory_precision=e["memory_precision"],
            memory_source=e["memory_source"], nvml_total_mib=e.get("nvml_total_mib"),
            bandwidth_gbps=e.get("bandwidth_gbps"), bf16_tflops_dense=e.get("bf16_tflops_dense"),
            fp8=bool(e.get("fp8")), compute_capability=e.get("compute_capability"))
        for e in entries
    )


@lru_cache(maxsize=1)
def _index() -> dict[str, Gpu]:
    index: dict[str, Gpu] = {}
    for gpu in catalogue():
        for name in (gpu.id, gpu.name, *gpu.aliases):
            index.setdefault(_normalize(name), gpu)
    return index


def find_gpu(name: str) -> Gpu:
    gpu = _index().get(_normalize(name))
    if gpu is not None:
        return gpu
    ids = [g.id for g in catalogue()]
    close = difflib.get_close_matches(name.lower(), ids, n=3, cutoff=0.4)
    close += [g for g in difflib.get_close_matches(_normalize(name), list(_index()), n=3, cutoff=0.6)
              if _index()[g].id not in close]
    names = list(dict.fromkeys(_index()[c].id if c in _index() else c for c in close))[:3]
    hint = f"; did you mean {', '.join(names)}?" if names else ""
    raise KvplanError(f"unknown GPU {name!r}{hint} (kvplan gpus lists them; --gpu-memory SIZE works for any "
                      "device)", "--gpu")
