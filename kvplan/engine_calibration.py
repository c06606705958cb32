"""Replays real SGLang and TensorRT-LLM startup logs (data/engine_calibration.yaml) through kvplan's engine rules:
from the memory each log says the engine measured (its token count must follow, within the print rounding), and
from scratch (GPU, model and flags only) where the log's GPU, model and flags are all known."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import product
from pathlib import Path
from typing import Any

from kvplan.deployment import Deployment
from kvplan.engines import estimate, sglang, trtllm
from kvplan.hardware import find_gpu
from kvplan.models.sources import resolve
from kvplan.plan import GpuChoice, Plan
from kvplan.units import GiB, MiB

DATA = Path(__file__).parent / "data" / "engine_calibration.yaml"
PRINT_HALF_STEP = 0.005  # GiB: both engines print memory with two decimals


def entries() -> list[dict[str, Any]]:
    import yaml

    return list(yaml.safe_load(DATA.read_text(encoding="utf-8")))


def _deployment(entry: dict[str, Any], kv_cache_memory: int | None = None, gpu: str | None = None,
                block_size: int | None = None) -> Deployment:
    return Deployment(
        engine=entry["engine"], gpu=gpu, dtype=entry.get("dtype", "auto"),
        kv_cache_dtype=entry.get("kv_cache_dtype", "auto"), tensor_parallel_size=entry.get("tp", 1),
        block_size=block_size, gpu_memory_utilization=entry.get("mem_fraction_static", entry.get("fraction")),
        max_num_seqs=entry.get("max_batch_size"), kv_cache_memory_bytes=kv_cache_memory)


def pool_plan(entry: dict[str, Any], kv_cache_memory: int) -> Plan:
    """kvplan's plan for the entry's bundled model with the KV memory given: no GPU, the pool alone."""
    block = entry.get("page_size", entry.get("tokens_per_block"))
    dep = _deployment(entry, kv_cache_memory, block_size=block)
    return estimate(resolve(entry["model"]), dep, GpuChoice("custom", "log replay", 0, dep.tensor_parallel_size))


def cell_bytes(entry: dict[str, Any]) -> int:
    """One token's KV on one rank: kvplan's, from the bundled config, or the entry's own where none is bundled."""
    if "cell_bytes" in entry:
        return int(entry["cell_bytes"])
    return pool_plan(entry, GiB).layout.bytes_per_token


def _band(*printed: float) -> list[tuple[float, ...]]:
    """Every combination of the two ends of each printed figure's rounding, in bytes."""
    return list(product(*[((value - PRINT_HALF_STEP) * GiB, (value + PRINT_HALF_STEP) * GiB) for value in printed]))


def state_bytes_per_request(entry: dict[str, Any]) -> int:
    return int(entry.get("conv_bytes_per_request", 0)) + int(entry.get("ssm_bytes_per_request", 0))


def _sglang_rest(entry: dict[str, Any], before: float, after: float) -> int:
    return sglang.rest_bytes(before, after, entry["mem_fraction_static"], bool(entry.get("multimodal_reservation")))


def _sglang_tokens(entry: dict[str, Any], before: float, after: float) -> int:
    rest = _sglang_rest(entry, before, after)
    if state_bytes_per_request(entry):  # the state slots as the log prints them (see mamba_slots for the rule)
        rest -= sglang.mamba_pool(rest, state_bytes_per_request(entry), given=entry["max_mamba_cache_size"])[1]
    if "cell_bytes" in entry:
        return sglang.pool_tokens(rest, int(entry["cell_bytes"]), entry.get("page_size", 1))
    return pool_plan(entry, rest).capacity.tokens


def _trtllm_tokens(entry: dict[str, Any], available: int) -> int:
    tpb = entry["tokens_per_block"]
    if "cell_bytes" in entry:
        return trtllm.pool_blocks(trtllm.max_tokens(available, int(entry["cell_bytes"])), tpb) * tpb
    return pool_plan(entry, available).capacity.tokens


def _tokens_at(entry: dict[str, Any], values: tuple[float, ...]) -> int:
    kind = entry["kind"]
    if kind == "sglang_budget":
        return _sglang_tokens(entry, *_sglang_before_after(entry, values))
    if kind == "trtllm_pytorch":
        total, peak = values
        per_token = cell_bytes(entry)
        available = trtllm.pytorch_available_bytes(total, peak, entry["estimation_tokens"] * per_token,
                                                   trtllm.as_float32(entry["fraction"]))
        return _trtllm_tokens(entry, available)
    if kind == "trtllm_engine":
        return _trtllm_tokens(entry, trtllm.engine_available_bytes(values[0], trtllm.as_float32(entry["fraction"])))
    raise ValueError(f"{entry['id']}: unknown kind {kind!r}")


def _sglang_before_after(entry: dict[str, Any], values: tuple[float, ...]) -> tuple[float, float]:
    if "load_usage_gib" in entry:  # free before load = free after + the printed usage
        after, usage = values
        return after + usage, after
    before, after = values
    return before, after


def mamba_slots(entry: dict[str, Any]) -> set[int]:
    """The Mamba slot counts SGLang's rule gives at the corners of the printed memory's rounding."""
    return {sglang.mamba_pool(_sglang_rest(entry, *_sglang_before_after(entry, values)),
                              state_bytes_per_request(entry))[0] for values in _band(*_printed(entry))}


def _printed(entry: dict[str, Any]) -> tuple[float, ...]:
    kind = entry["kind"]
    if kind == "sglang_budget":
        if "load_usage_gib" in entry:
            return entry["free_after_load_gib"], entry["load_usage_gib"]
        return entry["free_before_load_gib"], entry["free_after_load_gib"]
    if kind == "trtllm_pytorch":
        return entry["device_total_gib"], entry["peak_gib"]
    return (entry["available_gib"],)


@dataclass(frozen=True)
class Replay:
    """The logged token count against kvplan's, at the two ends of the logged memory's print rounding."""

    id: str
    engine: str
    logged: int
    low: int
    high: int
    cell_bytes: int
    excluded: str | None = None  # why the log cannot be replayed to the token (the entry's replay_excluded)

    @property
    def closes(self) -> bool:
        return self.low <= self.logged <= self.high

    @property
    def bounded(self) -> bool:
        """The logged count is at most kvplan's from the printed figures: what an engine that measures after the
        printed lines, with more allocated by then, gives."""
        return self.logged <= self.high

    @property
    def gap_mib(self) -> tuple[float, float]:
        """How much memory the logged count is short of kvplan's band, at its two ends (0 when it closes)."""
        if self.closes:
            return 0.0, 0.0
        return ((self.low - self.logged) * self.cell_bytes / MiB, (self.high - self.logged) * self.cell_bytes / MiB)


TOKEN_KINDS = ("sglang_budget", "sglang_swa_split", "trtllm_pytorch", "trtllm_engine")


def state_pool_gib(entry: dict[str, Any]) -> tuple[float, float]:
    """SGLang's Mamba pool as its log prints it (conv, SSM state in GiB): the logged slots plus the padding slot."""
    slots = entry["max_mamba_cache_size"]
    conv = sglang.mamba_pool(0, entry["conv_bytes_per_request"], given=slots)[1]
    ssm = sglang.mamba_pool(0, entry["ssm_bytes_per_request"], given=slots)[1]
    return conv / GiB, ssm / GiB


def replay(entry: dict[str, Any]) -> Replay:
    if entry["kind"] == "sglang_swa_split":
        full, page = entry["full_layer_tokens"], entry["page_size"]
        swa = sglang.swa_tokens(full, entry["swa_full_tokens_ratio"], page)
        return Replay(entry["id"], entry["engine"], entry["swa_layer_tokens"], swa, swa, 0)
    counts = [_tokens_at(entry, values) for values in _band(*_printed(entry))]
    return Replay(entry["id"], entry["engine"], entry["tokens"], min(counts), max(counts), cell_bytes(entry),
                  entry.get("replay_excluded"))


# --- from scratch ------------------------------------------------------------------------------------------------

def exclusion(entry: dict[str, Any]) -> str | None:
    """Why an entry cannot be predicted from scratch, or None."""
    if entry.get("excluded"):
        return str(entry["excluded"])
    if entry.get("model") is None:
        return "model not named"
    if "cell_bytes" in entry:
        return "model config not available"
    if entry.get("gpu") is None:
        return "GPU not printed"
    return None


@dataclass(frozen=True)
class Residual:
    id: str
    engine: str
    model: str
    gpu: str
    logged_tokens: int
    predicted_tokens: int
    logged_pool_gib: float
    predicted_pool_gib: float
    weights_gib: float

    @property
    def error_percent(self) -> float:
        return 100 * (self.predicted_tokens - self.logged_tokens) / self.logged_tokens


def plan_from_scratch(entry: dict[str, Any]) -> Plan:
    gpu = find_gpu(entry["gpu"])
    dep = _deployment(entry, gpu=gpu.id, block_size=entry.get("page_size", entry.get("tokens_per_block")))
    choice = GpuChoice(gpu.id, gpu.name, gpu.memory_bytes, dep.tensor_parallel_size, gpu.compute_capability, gpu.fp8)
    return estimate(resolve(entry["model"]), dep, choice)


def from_scratch(entry: dict[str, Any]) -> Residual:
    plan = plan_from_scratch(entry)
    logged_pool = entry.get("kv_allocated_gib", entry.get("kv_size_gib", 0.0))
    return Residual(entry["id"], entry["engine"], entry["model"], entry["gpu"], entry["tokens"], plan.capacity.tokens,
                    logged_pool, plan.capacity.num_blocks * plan.layout.block_bytes / GiB,
                    plan.memory.weights_bytes / GiB)


def replay_table(rows: list[Replay]) -> str:
    lines = ["| id | engine | logged tokens | kvplan, low end | kvplan, high end | closes | logged short by, MiB |",
             "|" + "---|" * 7]
    for r in rows:
        low, high = r.gap_mib
        gap = "-" if r.closes else f"{low:.0f} to {high:.0f}" if low > 0 else f"over by {-high:.0f} to {-low:.0f}"
        verdict = "yes" if r.closes else "excluded (below)" if r.excluded else "no"
        lines.append(f"| {r.id} | {r.engine} | {r.logged:,} | {r.low:,} | {r.high:,} | {verdict} | {gap} |")
    excluded = [r for r in rows if r.excluded and not r.closes]
    if excluded:
        lines.append("")
        lines.extend(f"- {r.id} excluded from the exact replay: {r.excluded}" for r in excluded)
    return "\n".join(lines)


def residual_table(rows: list[Residual], excluded: list[tuple[str, str]]) -> str:
    lines = ["| id | engine | model | GPU | logged tokens | kvplan tokens | error % | logged pool GiB | "
             "kvplan pool GiB | weights GiB |", "|" + "---|" * 10]
    for r in rows:
        lines.append(f"| {r.id} | {r.engine} | {r.model} | {r.gpu} | {r.logged_tokens:,} | {r.predicted_tokens:,} | "
                     f"{r.error_percent:+.1f} | {r.logged_pool_gib:.2f} | {r.predicted_pool_gib:.2f} | "
                     f"{r.weights_gib:.2f} |")
    for entry_id, reason in excluded:
        lines.append(f"| {entry_id} | | | | | excluded: {reason} | | | | |")
    within = sum(abs(r.error_percent) <= 3 for r in rows)
    lines.append("")
    lines.append(f"{within} of {len(rows)} eligible entries within 3%; {len(excluded)} excluded.")
    return "\n".join(lines)


def tables() -> tuple[str, str]:
    """The two tables docs/calibration.md carries for SGLang and TensorRT-LLM: replays, and from scratch."""
    data = entries()
    eligible = [e for e in data if exclusion(e) is None]
    excluded = [(e["id"], reason) for e in data if (reason := exclusion(e)) is not None]
    return (replay_table([replay(e) for e in data if e["kind"] in TOKEN_KINDS]),
            residual_table([from_scratch(e) for e in eligible], excluded))
