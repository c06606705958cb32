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


def _prefixed(key: str) -> list[Gpu]:
    """Catalogue entries with an id, name or alias that starts with `key` (normalized), in catalogue order."""
    return [gpu for gpu in catalogue()
            if key and any(_normalize(n).startswith(key) for n in (gpu.id, gpu.name, *gpu.aliases))]


def find_gpu(name: str, otherwise: str = "") -> Gpu:
    """An exact id, name or alias; a name that only starts several entries ('a100') is refused, not guessed.
    otherwise: what else the caller's command takes, for the message about an unknown name."""
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
