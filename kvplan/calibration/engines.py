"""Replays real SGLang, TensorRT-LLM and vLLM hybrid-model startup logs (each engine's data/ folder) through
kvplan's engine rules: from the memory each log says the engine measured (its token count must follow, within the
print rounding), and from scratch (GPU, model and flags only) where the log's GPU, model and flags are all known."""

from __future__ import annotations

from dataclasses import dataclass, replace
from itertools import product
from pathlib import Path
from typing import Any

from kvplan.deployment import Deployment
from kvplan.engines import plan_deployment
from kvplan.engines.sglang import budget as sglang
from kvplan.engines.trtllm import budget as trtllm
from kvplan.hardware import find_gpu
from kvplan.models.model import ModelSpec
from kvplan.models.sources import resolve
from kvplan.plan import GpuChoice, Plan
from kvplan.units import GiB, MiB, cdiv

ENGINES = Path(__file__).parent.parent / "engines"
DATA = (ENGINES / "sglang" / "data" / "calibration.yaml", ENGINES / "trtllm" / "data" / "calibration.yaml",
        ENGINES / "vllm" / "data" / "hybrid_calibration.yaml")
MODELS = ENGINES / "vllm" / "data" / "calibration_models"  # configs the hybrid replays assume (SOURCES.md)
PRINT_HALF_STEP = 0.005  # GiB: both engines print memory with two decimals


def entries() -> list[dict[str, Any]]:
    import yaml

    return [entry for path in DATA for entry in yaml.safe_load(path.read_text(encoding="utf-8"))]


def _deployment(entry: dict[str, Any], kv_cache_memory: int | None = None, gpu: str | None = None,
                block_size: int | None = None) -> Deployment:
    return Deployment(
        engine=entry["engine"], gpu=gpu, dtype=entry.get("dtype", "auto"),
        kv_cache_dtype=entry.get("kv_cache_dtype", "auto"), tensor_parallel_size=entry.get("tp", 1),
        block_size=block_size, gpu_memory_utilization=entry.get("mem_fraction_static", entry.get("fraction")),
        max_num_seqs=entry.get("max_batch_size"), kv_cache_memory_bytes=kv_cache_memory,
        backend=entry.get("backend"))


def pool_plan(entry: dict[str, Any], kv_cache_memory: int) -> Plan:
    """kvplan's plan for the entry's bundled model with the KV memory given: no GPU, the pool alone."""
    block = entry.get("page_size", entry.get("tokens_per_block"))
    dep = _deployment(entry, kv_cache_memory, block_size=block)
    return plan_deployment(resolve(entry["model"]), dep, GpuChoice("custom", "log replay", 0, dep.tensor_parallel_size))


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


def _padding_budgeted(entry: dict[str, Any]) -> bool:
    """Whether the entry's release takes the Mamba pool's padding slot out of the rest (the newest rules where the
    entry names no release)."""
    return sglang.release_of(entry.get("release")) >= sglang.MAMBA_PADDING_SLOT_BUDGETED_FROM


def _sglang_tokens(entry: dict[str, Any], before: float, after: float) -> int:
    rest = _sglang_rest(entry, before, after)
    if state_bytes_per_request(entry):  # the state slots as the log prints them (see mamba_slots for the rule)
        rest -= sglang.mamba_pool(rest, state_bytes_per_request(entry), given=entry["max_mamba_cache_size"],
                                  padding_budgeted=_padding_budgeted(entry))[1]
    if "cell_bytes" in entry:
        return sglang.pool_tokens(rest, int(entry["cell_bytes"]), entry.get("page_size", 1))
    return pool_plan(entry, rest).capacity.tokens


def _trtllm_tokens(entry: dict[str, Any], available: int) -> int:
    """The logs' releases (1.1.0rc3 and the C++ executor) round the max tokens up to blocks (trtllm.pool_blocks), not
    down as the 2026 PyTorch backend does."""
    tpb = entry["tokens_per_block"]
    return trtllm.pool_blocks(trtllm.max_tokens(available, cell_bytes(entry)), tpb) * tpb


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
    return {sglang.mamba_pool(_sglang_rest(entry, *_sglang_before_after(entry, values)), state_bytes_per_request(entry),
                              padding_budgeted=_padding_budgeted(entry))[0] for values in _band(*_printed(entry))}


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
    choice = GpuChoice.of(gpu, dep.tensor_parallel_size)
    return plan_deployment(resolve(entry["model"]), dep, choice)


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
    data = [e for e in entries() if e["engine"] != "vllm"]
    eligible = [e for e in data if exclusion(e) is None]
    excluded = [(e["id"], reason) for e in data if (reason := exclusion(e)) is not None]
    return (replay_table([replay(e) for e in data if e["kind"] in TOKEN_KINDS]),
            residual_table([from_scratch(e) for e in eligible], excluded))


# --- vLLM hybrid logs (Mamba / linear attention): the logged available memory through the vLLM engine -----------


def vllm_model(entry: dict[str, Any]) -> ModelSpec:
    """The entry's bundled model, or the config in data/calibration_models whose geometry the entry assumes."""
    source = str(MODELS / entry["config"]) if entry.get("config") else entry["model"]
    return resolve(source, overrides=entry.get("hf_overrides"))


def vllm_plan(entry: dict[str, Any], kv_cache_memory: int | None = None) -> Plan:
    """kvplan's vLLM plan with the log's flags: from scratch, or with the KV memory given (--kv-cache-memory)."""
    tp = entry.get("tp", 1)
    gpu = find_gpu(entry["gpu"]) if entry.get("gpu") else None
    dep = Deployment(
        engine="vllm", engine_version=entry["version"], gpu=gpu.id if gpu else None, dtype=entry.get("dtype", "auto"),
        kv_cache_dtype=entry.get("kv_cache_dtype", "auto"), quantization=entry.get("quantization"),
        tensor_parallel_size=tp, gpu_memory_utilization=entry.get("utilization"),
        max_model_len=entry.get("max_model_len"), max_num_seqs=entry.get("max_num_seqs"),
        max_num_batched_tokens=entry.get("max_num_batched_tokens"), speculative_config=entry.get("speculative_config"),
        enforce_eager=entry.get("enforce_eager", False), limit_mm_per_prompt=entry.get("limit_mm_per_prompt"),
        mamba_ssm_cache_dtype=entry.get("mamba_ssm_cache_dtype", "auto"), kv_cache_memory_bytes=kv_cache_memory,
        enable_prefix_caching=entry.get("enable_prefix_caching"))
    choice = GpuChoice.of(gpu, tp) if gpu else GpuChoice("custom", "log replay", 0, tp)
    return plan_deployment(vllm_model(entry), dep, choice)


@dataclass(frozen=True)
class PoolFigures:
    """What a vLLM log prints about its pool (None where it prints nothing), or what kvplan gives for it."""

    block_size: int | None = None
    padding_percent: float | None = None  # "Padding mamba page size by X%"
    tokens: int | None = None  # "GPU KV cache size: N tokens"
    concurrency: float | None = None  # "Maximum concurrency for L tokens per request: Xx", 2 decimals

    @classmethod
    def of(cls, plan: Plan) -> PoolFigures:
        return cls(plan.engine.block_size, state_padding_percent(plan), plan.capacity.tokens,
                   round(plan.capacity.max_concurrency, 2))


def state_padding_percent(plan: Plan) -> float | None:
    """How much the state page was padded to the attention page, as vLLM logs it (None without states)."""
    layout = plan.layout
    state = next((g.layer for g in layout.groups if g.layer.paged_state), None)
    if state is None:
        return None
    real = state.state_page_bytes(layout.tp)
    return round(100 * (state.page_bytes(layout.block_size, layout.kv_bytes, layout.tp) - real) / real, 2)


@dataclass(frozen=True)
class PoolReplay:
    """A vLLM hybrid log's printed pool figures against kvplan's, at the two ends of the logged memory's print
    rounding (or, for a log without a memory line, at the block count that gives its tokens)."""

    id: str
    model: str
    logged_gib: float | None
    logged: PoolFigures
    low: PoolFigures | None  # None: nothing replayed
    high: PoolFigures | None
    excluded: str | None = None
    implied_blocks: int | None = None  # a log without a memory line: the block count its tokens need
    implied_gib: tuple[float, float] | None = None  # and the memory that holds that many blocks, not one more

    @property
    def closes(self) -> bool:
        low, high, logged = self.low, self.high, self.logged
        if low is None or high is None:
            return False
        checks = []
        if logged.block_size is not None:
            checks.append(low.block_size == high.block_size == logged.block_size)
        if logged.padding_percent is not None:
            checks.append(low.padding_percent == high.padding_percent == logged.padding_percent)
        if logged.tokens is not None:
            checks.append(low.tokens is not None and high.tokens is not None
                          and low.tokens <= logged.tokens <= high.tokens)
        if logged.concurrency is not None:
            checks.append(low.concurrency is not None and high.concurrency is not None
                          and low.concurrency <= logged.concurrency <= high.concurrency)
        return bool(checks) and all(checks)


def _logged_figures(entry: dict[str, Any]) -> PoolFigures:
    return PoolFigures(entry.get("block_size"), entry.get("padding_percent"), entry.get("tokens"),
                       entry.get("concurrency"))


def _at_print_rounding(entry: dict[str, Any], row: PoolReplay) -> PoolReplay:
    ends = [PoolFigures.of(vllm_plan(entry, int((entry["available_gib"] + half) * GiB)))
            for half in (-PRINT_HALF_STEP, PRINT_HALF_STEP)]
    return replace(row, low=ends[0], high=ends[1])


def _alignment_only(entry: dict[str, Any], row: PoolReplay) -> PoolReplay:
    figures = PoolFigures.of(vllm_plan(entry, GiB))  # the block size does not depend on the memory
    figures = replace(figures, tokens=None, concurrency=None)
    return replace(row, low=figures, high=figures)


def _at_implied_blocks(entry: dict[str, Any], row: PoolReplay) -> PoolReplay:
    """tokens = blocks x max_model_len // blocks per request: kvplan's figures at the fewest blocks that reach the
    logged tokens."""
    probe = vllm_plan(entry, GiB)
    blocks = cdiv(int(entry["tokens"]) * probe.capacity.blocks_per_request, probe.engine.max_model_len)
    block = probe.layout.block_bytes
    figures = PoolFigures.of(vllm_plan(entry, blocks * block))
    return replace(row, low=figures, high=figures, implied_blocks=blocks,
                   implied_gib=(blocks * block / GiB, (blocks + 1) * block / GiB))


def _nothing(entry: dict[str, Any], row: PoolReplay) -> PoolReplay:
    return row


# Each kind of vLLM entry (the data file's header describes them) and how it is replayed.
POOL_REPLAYS = {"vllm_pool": _at_print_rounding, "vllm_tokens_only": _at_implied_blocks,
                "vllm_block_size": _alignment_only, "vllm_no_replay": _nothing}
VLLM_KINDS = tuple(POOL_REPLAYS)


def pool_replay(entry: dict[str, Any]) -> PoolReplay:
    row = PoolReplay(entry["id"], entry["model"], entry.get("available_gib"), _logged_figures(entry), None, None,
                     entry.get("replay_excluded"))
    if entry["kind"] not in POOL_REPLAYS:
        raise ValueError(f"{entry['id']}: unknown kind {entry['kind']!r}")
    return POOL_REPLAYS[entry["kind"]](entry, row)


def vllm_from_scratch(entry: dict[str, Any]) -> Residual:
    plan = vllm_plan(entry)
    return Residual(entry["id"], entry["engine"], entry["model"], entry["gpu"], entry["tokens"], plan.capacity.tokens,
                    entry["available_gib"], plan.memory.kv_cache_bytes / GiB, plan.memory.weights_bytes / GiB)


def _pair(logged: Any, low: Any, high: Any, fmt: str = "{}") -> str:
    def shown(value: Any) -> str:
        return "-" if value is None else fmt.format(value)

    ours = shown(low) if low == high else f"{shown(low)}-{shown(high)}"
    return f"{shown(logged)} / {ours}"


def pool_replay_table(rows: list[PoolReplay], data: list[dict[str, Any]]) -> str:
    lines = ["| id | model | logged GiB | block size, log / kvplan | state padding %, log / kvplan | logged tokens | "
             "kvplan, low end | kvplan, high end | concurrency, log / kvplan | closes |", "|" + "---|" * 10]
    for r in rows:
        if r.low is None or r.high is None:
            continue
        memory = "-" if r.logged_gib is None else f"{r.logged_gib:.2f}"
        tokens = ["-" if t is None else f"{t:,}" for t in (r.logged.tokens, r.low.tokens, r.high.tokens)]
        verdict = "yes" if r.closes else "excluded (below)" if r.excluded else "no"
        lines.append(
            f"| {r.id} | {r.model} | {memory} | {_pair(r.logged.block_size, r.low.block_size, r.high.block_size)} | "
            f"{_pair(r.logged.padding_percent, r.low.padding_percent, r.high.padding_percent, '{:.2f}')} | "
            f"{' | '.join(tokens)} | "
            f"{_pair(r.logged.concurrency, r.low.concurrency, r.high.concurrency, '{:.2f}')} | {verdict} |")
    lines.append("")
    for r in rows:
        if r.implied_gib is not None:
            low, high = r.implied_gib
            lines.append(f"- {r.id} prints no memory line: {r.implied_blocks:,} blocks give its tokens and "
                         f"concurrency, a pool of {low:.3f} GiB up to {high:.3f} GiB")
    lines.extend(f"- {r.id} excluded from the exact replay: {r.excluded}" for r in rows
                 if r.excluded and not r.closes and r.low is not None)
    lines.extend(f"- {r.id} not replayed: {r.excluded}" for r in rows if r.low is None)
    lines.extend(f"- {e['id']} assumes {e['assumed']}" for e in data if e.get("assumed"))
    return "\n".join(lines)


def hybrid_tables() -> tuple[str, str]:
    """The two tables docs/calibration.md carries for the vLLM hybrid logs: replays, and from scratch."""
    data = [e for e in entries() if e["engine"] == "vllm"]
    eligible = [e for e in data if exclusion(e) is None]
    excluded = [(e["id"], reason) for e in data if (reason := exclusion(e)) is not None]
    return (pool_replay_table([pool_replay(e) for e in data], data),
            residual_table([vllm_from_scratch(e) for e in eligible], excluded))


def overall() -> tuple[int, int]:
    """Every eligible from-scratch prediction in docs/calibration.md, vLLM's dense and MoE set included: how many
    land within 3% of their log, of how many."""
    from kvplan.calibration import vllm as calibration

    errors = [calibration.from_scratch(e).error_percent for e in calibration.entries()]
    data = [e for e in entries() if exclusion(e) is None]
    errors += [(vllm_from_scratch(e) if e["engine"] == "vllm" else from_scratch(e)).error_percent for e in data]
    return sum(abs(error) <= 3 for error in errors), len(errors)


def overall_line() -> str:
    within, total = overall()
    return f"All engines: {within} of {total} eligible logs within 3% from scratch ({100 * within / total:.1f}%)."
