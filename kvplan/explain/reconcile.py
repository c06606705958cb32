"""A vLLM startup log against kvplan, twice: replayed (the logged KV memory given, so every block and token count
must come out as vLLM printed it, within the two-decimal GiB rounding of that figure, as kvplan.calibration.vllm
checks its log set) and from scratch (the GPU, model, flags and version only), term by term."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from kvplan import registry
from kvplan.deployment import Deployment
from kvplan.engines.vllm.log_lines import PRINT_HALF_STEP
from kvplan.errors import KvplanError
from kvplan.explain.device import DRIVER_BAND, DeviceMatch, match_total
from kvplan.explain.lines import reconciling_engine
from kvplan.explain.record import LoggedRun
from kvplan.models.model import ModelSpec
from kvplan.plan import GpuChoice, Plan
from kvplan.units import GiB

HALF_STEP = PRINT_HALF_STEP
CONCURRENCY_HALF_STEP = 0.005  # "1.83x": two decimals
INT64_LIMIT = 2**63  # a flag the log prints beyond this was not one the engine ran with
# The memory terms of vLLM's budget, in the order the budget is spent; each with its sign in the KV cache.
TERMS = (("total", "total_bytes", 0), ("budget", "budget_bytes", 1), ("weights", "weights_bytes", -1),
         ("activation", "activation_bytes", -1), ("non_torch", "non_torch_bytes", -1),
         ("cuda_graphs", "cuda_graph_bytes", -1), ("kv_cache", "kv_cache_bytes", 0))


@dataclass(frozen=True)
class Term:
    """One memory term: as logged, as kvplan predicts it from scratch. in_budget False: the log prints it, but
    this vLLM does not take it out of the KV budget."""

    term: str
    logged_bytes: int | None
    kvplan_bytes: int | None
    sign: int  # +1 adds to the KV cache, -1 takes from it, 0 not a budget step
    in_budget: bool = True

    @property
    def diff_bytes(self) -> int | None:
        if self.logged_bytes is None or self.kvplan_bytes is None:
            return None
        return self.kvplan_bytes - self.logged_bytes

    def to_dict(self) -> dict[str, Any]:
        return {"term": self.term, "logged_bytes": self.logged_bytes, "kvplan_bytes": self.kvplan_bytes,
                "diff_bytes": self.diff_bytes, "in_budget": self.in_budget}


@dataclass(frozen=True)
class Check:
    """One capacity figure the log prints, against the replay at both ends of the KV figure's rounding."""

    figure: str
    logged: float
    low: float
    high: float
    scratch: float | None
    tolerance: float = 0

    @property
    def matches(self) -> bool:
        return min(self.low, self.high) - self.tolerance <= self.logged <= max(self.low, self.high) + self.tolerance

    def to_dict(self) -> dict[str, Any]:
        return {"figure": self.figure, "logged": self.logged, "replay_low": self.low, "replay_high": self.high,
                "scratch": self.scratch, "matches": self.matches}


# What a plan says for each capacity figure a log prints, and the rounding of the printed figure.
def _num_blocks(plan: Plan) -> float:
    return plan.capacity.num_blocks


def _tokens(plan: Plan) -> float:
    return plan.capacity.tokens


def _concurrency(plan: Plan) -> float | None:
    """None where a request holds no KV blocks (vLLM's blocks / blocks per request has no value)."""
    return plan.capacity.max_concurrency if plan.capacity.blocks_per_request else None


def _block_size(plan: Plan) -> float:
    return plan.engine.block_size


def _padding(plan: Plan) -> float:
    return plan.layout.padding_layers


def _offload_tokens(plan: Plan) -> float:
    return plan.capacity.offload_tokens


def _offload_host(plan: Plan) -> float:
    return plan.capacity.offload_host_bytes


GB_HALF_STEP = 0.005e9  # "(68.72 GB)": 10^9 B with two decimals

def _encoder_budget(plan: Plan) -> float:
    """vLLM's multimodal encoder cache budget (engines/vllm/multimodal.py); 0 where kvplan plans no encoder."""
    return plan.engine.encoder_cache_tokens or 0


FIGURES = (("num_blocks", _num_blocks, 0.0), ("tokens", _tokens, 0.0),
           ("max_concurrency", _concurrency, CONCURRENCY_HALF_STEP), ("block_size", _block_size, 0.0),
           ("padding_layers", _padding, 0.0), ("offload_tokens", _offload_tokens, 0.0),
           ("offload_host_bytes", _offload_host, GB_HALF_STEP), ("encoder_cache_tokens", _encoder_budget, 0.0))


@dataclass(eq=False)
class Explanation:
    run: LoggedRun
    source: str
    gpu: GpuChoice | None = None
    device: DeviceMatch | None = None
    model: str | None = None
    model_error: str | None = None
    replay: Plan | None = None
    scratch: Plan | None = None
    checks: list[Check] = field(default_factory=list)
    terms: list[Term] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def reconciled(self) -> bool:
        return self.run.engine is not None and self.run.engine == reconciling_engine()

    @property
    def replay_matches(self) -> bool | None:
        """True: every capacity figure the log prints is what kvplan gives for the logged KV memory."""
        if self.replay is None or not self.checks:
            return None
        return all(check.matches for check in self.checks)

    @property
    def kv_gap(self) -> int | None:
        return next((t.diff_bytes for t in self.terms if t.term == "kv_cache"), None)

    @property
    def explained_by(self) -> str | None:
        """The budget term that moves kvplan's KV cache most in the direction of its gap from the log."""
        gap = self.kv_gap
        if gap is None or abs(gap) <= 2 * HALF_STEP:
            return None
        effects = [(t.sign * (t.diff_bytes or 0), t.term) for t in self.terms
                   if t.sign and t.in_budget and t.diff_bytes is not None]
        # a term that prints as 0.00 GiB explains nothing the reader can see
        same_way = [(abs(effect), term) for effect, term in effects if effect * gap > 0 and
                    f"{abs(effect) / GiB:.2f}" != "0.00"]
        return max(same_way)[1] if same_way else None

    @property
    def exit_code(self) -> int:
        return 0 if self.replay_matches else 1

    def to_dict(self) -> dict[str, Any]:
        from kvplan.explain.jsonsafe import json_safe

        gpu = None
        if self.gpu is not None:
            from dataclasses import asdict

            gpu = {**asdict(self.gpu), "candidates": [g.id for g in self.device.candidates] if self.device else []}
        return json_safe({
            "source": self.source,
            "log": self.run.to_dict(),
            "gpu": gpu,
            "model": {"id": self.model, "error": self.model_error},
            "replay": self.replay.to_dict() if self.replay else None,
            "scratch": self.scratch.to_dict() if self.scratch else None,
            "terms": [term.to_dict() for term in self.terms],
            "checks": [check.to_dict() for check in self.checks],
            "verdict": {"reconciled": self.reconciled, "replay_matches": self.replay_matches,
                        "kv_gap_bytes": self.kv_gap, "explained_by": self.explained_by},
            "notes": self.notes,
        })


def reconcile(run: LoggedRun, source: str, model: str | None = None, gpu: str | None = None,
              token: str | None = None) -> Explanation:
    result = Explanation(run, source)
    engine = reconciling_engine()
    if run.engine != engine:
        result.notes.append(f"this is a {run.engine_label} log; only {registry.label(engine or '')} logs are "
                            "reconciled")
        return result
    dep = deployment(run, source, result.notes)
    result.gpu, result.device = choose_gpu(run, dep, gpu, result.notes)
    spec, draft = load(run, model, dep, token, result)
    if spec is None:
        return result
    dep = replace(dep, model=result.model)
    if result.gpu is None:
        result.notes.append("the log prints no total GPU memory and no --gpu was given: no prediction from scratch")
    else:
        result.scratch = _plan(spec, dep, result.gpu, draft, result.notes, "from scratch")
    replay(result, spec, dep, draft)
    result.terms = terms(run, result.scratch, dep)
    return result


def replay(result: Explanation, spec: ModelSpec, dep: Deployment, draft: ModelSpec | None) -> None:
    """Plans for the logged KV memory at both ends of its print rounding, and the checks against them. vLLM sizes
    every rank's pool by the smallest rank, so the smallest logged figure is the one replayed."""
    readings = result.run.memory.get("kv_cache_bytes", [])
    if not readings:
        result.notes.append("the log does not print the available KV cache memory: nothing to replay")
        return
    kv = min(reading.value for reading in readings)
    if kv != readings[0].value:
        result.notes.append(f"replayed with the smallest KV cache memory a rank printed, {kv / GiB:.2f} GiB: vLLM "
                            "gives every rank the block count of the smallest")
    if kv <= 0:
        result.notes.append(f"the log leaves {kv / GiB:.2f} GiB for the KV cache: vLLM refuses to start")
        return
    gpu = result.gpu or GpuChoice("custom", "unspecified GPU", 0, dep.gpu_count)
    low, mid, high = (_plan(spec, replace(dep, kv_cache_memory_bytes=max(0, kv + step)), gpu, draft,
                            result.notes, "replayed") for step in (-HALF_STEP, 0, HALF_STEP))
    result.replay = mid
    if mid is not None and mid.error and gpu.memory_bytes > 0:  # with no GPU there is nothing to run out of
        result.notes.append(f"replayed: {mid.error}")
    if low is not None and high is not None:
        result.checks = checks(result.run, low, high, result.scratch, result.notes)
        if not result.checks:
            result.notes.append("the log prints no block, token or concurrency figure to compare")


def deployment(run: LoggedRun, source: str, notes: list[str]) -> Deployment:
    """The Deployment the log's flags describe; a value kvplan cannot take is noted and left at its default."""
    from kvplan.deployment.launch import version_tuple
    from kvplan.deployment.values import coerce, field_for

    kwargs: dict[str, Any] = {}
    origins: dict[str, str] = {}
    for name, reading in run.flags.items():
        knob = field_for(name)
        # an engine flag, or a variable of the engine's environment that its log shows (LMCache's settings)
        own = not knob.engine_flag and knob.env is None if knob else True
        if knob is None or own or knob.name in ("model", "revision") or knob.name in kwargs:
            continue
        where = f"{source}:{reading.line}: {name}"
        if isinstance(reading.value, int) and abs(reading.value) >= INT64_LIMIT:
            notes.append(f"{where}: {str(reading.value)[:20]}... is beyond any engine's 64-bit integers; kvplan uses "
                         "its default instead")
            continue
        try:
            value = coerce(knob, reading.value, where)
        except KvplanError as exc:
            notes.append(f"{where}: {exc.message}; kvplan uses its default instead")
            continue
        if value is not None:
            kwargs[knob.name] = value
            origins[knob.name] = where
    context = run.first("capacity", "concurrency_context")
    if "max_model_len" not in kwargs and isinstance(context, int) and context > 0:
        kwargs["max_model_len"] = context
        origins["max_model_len"] = f"{source}: Maximum concurrency for {context:,} tokens"
        notes.append(f"max_model_len {context:,} read from the concurrency line")
    elif context == 0:
        notes.append("the concurrency line's 0 tokens per request is no request length: it is not used")
    version = run.version
    if version is None and run.version_hint is not None:
        version, why = run.version_hint
        notes.append(f"the log does not print vLLM's version; {why}, so kvplan uses {version}")
    elif version is not None and version_tuple(version) is None:
        notes.append(f"vLLM version {version!r} is not one kvplan can read; it assumes the newest it models")
        version = None
    elif version is None:
        notes.append("the log does not print vLLM's version; kvplan assumes the newest it models")
    try:
        return Deployment(engine=run.engine or registry.DEFAULT, engine_version=version, **kwargs, origins=origins)
    except KvplanError as exc:
        notes.append(f"{exc}; the log's flags are not replayed")
        return Deployment(engine=run.engine or registry.DEFAULT, engine_version=version)


def choose_gpu(run: LoggedRun, dep: Deployment, gpu: str | None,
               notes: list[str]) -> tuple[GpuChoice | None, DeviceMatch | None]:
    from kvplan.hardware import find_gpu

    total = run.first("memory", "total_bytes")
    count = dep.gpu_count
    if gpu is not None:
        found = find_gpu(gpu)
        if total is not None and abs(found.memory_bytes - total) > DRIVER_BAND:
            notes.append(f"the log's total {total / GiB:.2f} GiB is not {found.id}'s {found.memory_bytes / GiB:.2f} "
                         "GiB; --gpu is used")
        return GpuChoice.of(found, count), None
    if total is None:
        return None, None
    device = match_total(total)
    best = device.best
    if best is None:
        notes.append(f"no catalogue GPU has {total / GiB:.2f} GiB: kvplan uses that total (--gpu names one)")
        return GpuChoice("custom", f"GPU with {total / GiB:.2f} GiB (from the log)", total, count), device
    if device.ambiguous:
        others = ", ".join(g.id for g in device.candidates[1:])
        notes.append(f"the log's {total / GiB:.2f} GiB fits several catalogue GPUs: {best.id} is nearest, then "
                     f"{others}; --gpu chooses")
    return GpuChoice.of(best, count), device


def load(run: LoggedRun, model: str | None, dep: Deployment, token: str | None,
         result: Explanation) -> tuple[ModelSpec | None, ModelSpec | None]:
    from kvplan.api import draft_model, load_model

    if model is not None and run.model is not None and model != run.model:
        result.notes.append(f"--model {model} replaces the log's {run.model}")
    name = model or run.model
    result.model = name
    if name is None:
        result.model_error = "the log does not name the model; --model gives it"
        return None, None
    try:
        spec = load_model(name, None, token, dep.hf_overrides)
    except KvplanError as exc:
        if model is not None:  # the user's own --model is wrong: their mistake, not the log's
            raise exc.at(f"--model {exc.where}" if exc.where else "--model") from None
        result.model_error = f"{exc}; --model gives a local config.json, a bundled id or a Hub id"
        return None, None
    try:
        return spec, draft_model(dep, token)
    except KvplanError as exc:
        result.notes.append(f"{exc}; the draft model is left out")
        return spec, None


def _plan(spec: ModelSpec, dep: Deployment, gpu: GpuChoice, draft: ModelSpec | None, notes: list[str],
          what: str) -> Plan | None:
    from kvplan.engines import plan_deployment

    try:
        return plan_deployment(spec, dep, gpu, (), draft)
    except KvplanError as exc:
        message = f"kvplan cannot plan this deployment ({what}): {exc}"
        if message not in notes:
            notes.append(message)
        return None


def checks(run: LoggedRun, low: Plan, high: Plan, scratch: Plan | None, notes: list[str]) -> list[Check]:
    found = []
    for name, of, tolerance in FIGURES:
        logged = run.first("capacity", name)
        if logged is None:
            continue
        at_low, at_high = of(low), of(high)
        if at_low is None or at_high is None:
            notes.append(f"kvplan's model of this deployment holds no KV blocks per request, so it has no "
                         f"{name.replace('_', ' ')} to set against the log's {logged:g}")
            continue
        found.append(Check(name, logged, at_low, at_high, of(scratch) if scratch else None, tolerance))
    return found


def terms(run: LoggedRun, scratch: Plan | None, dep: Deployment) -> list[Term]:
    graphs_counted = _graphs_in_budget(run, dep)
    memory = scratch.rank_zero_memory if scratch else None  # the log's figures are rank 0's
    rows = []
    for term, name, sign in TERMS:
        predicted = getattr(memory, name) if memory else None
        rows.append(Term(term, run.first("memory", name), predicted, sign,
                         in_budget=graphs_counted if term == "cuda_graphs" else True))
    return rows


def _graphs_in_budget(run: LoggedRun, dep: Deployment) -> bool:
    """Whether this vLLM took the CUDA-graph estimate out of the KV budget: the log's own figures say so when
    they are all printed (the rest after weights, activation and non-torch is the graphs, or nothing); else the
    version's accounting era does."""
    names = ("budget_bytes", "weights_bytes", "activation_bytes", "non_torch_bytes", "kv_cache_bytes",
             "cuda_graph_bytes")
    budget, weights, activation, non_torch, kv, graphs = (run.first("memory", n) for n in names)
    if None not in (budget, weights, activation, non_torch, kv, graphs):
        rest = budget - weights - activation - non_torch - kv
        return bool(abs(rest - graphs) < abs(rest))
    from kvplan.engines.vllm.releases import LATEST, era_of

    try:
        era = era_of(dep.engine_version or LATEST)
    except KvplanError:
        return False
    return era.subtracts_cuda_graphs and not dep.enforce_eager
