"""The rules of kvplan check, each a type with a stable id, a one-line summary and a fix hint. Build-stage
rules report what building the Deployment found (deployment.launch, values, rules and the engines raise the
errors; the runner files each under its rule); the others judge the Plan, the model or the manifest."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kvplan.check.findings import FAIL, PASS, SKIP, WARN, Outcome
from kvplan.check.item import CURRENT_FLAGS, KNOWN_FLAGS, VALID_VALUES, Item, Problem
from kvplan.units import GiB

if TYPE_CHECKING:
    from kvplan.deployment import Deployment
    from kvplan.models.model import ModelSpec
    from kvplan.plan import GpuChoice, Plan

# The stages a deployment goes through, in order; a rule of a stage not reached is skipped.
FLAGS, VALUES, GPU, MODEL, ENGINE, PLAN = "flags", "values", "gpu", "model", "engine", "plan"


@dataclass(eq=False)
class Context:
    """One deployment on one GPU, as far as it could be built."""

    item: Item
    name: str
    requirements: dict[str, Any] = field(default_factory=dict)
    dep: Deployment | None = None
    gpu: GpuChoice | None = None
    spec: ModelSpec | None = None
    plan: Plan | None = None
    problems: list[Problem] = field(default_factory=list)
    reached: set[str] = field(default_factory=set)
    blocked: str = ""  # why the stages after the last reached did not run
    model_note: str = ""  # what KV050 reports of a config.json
    unresolved: int = 0  # 1 when the model could not be resolved (not bundled, not under --models, no Hub)
    waiting: dict[str, str] = field(default_factory=dict)  # knob -> the deploy-time variable its value waits for

    def waits(self, *knobs: str) -> str | None:
        """Why a rule that needs these knobs cannot judge them (a value that waits for a variable)."""
        return next((self.waiting[knob] for knob in knobs if knob in self.waiting), None)


class Rule:
    id = ""
    name = ""
    summary = ""
    hint = ""

    def applies(self, ctx: Context) -> bool:
        return ctx.item.model_config is None

    def evaluate(self, ctx: Context) -> list[Outcome]:
        raise NotImplementedError

    def hint_for(self, engine: str) -> str:
        """The fix hint in the engine's own words: a knob the engine spells otherwise is named as its command
        line spells it (SGLang's --context-length for max_model_len), asked of the engine's dialect."""
        return engine_words(self.hint, engine)


def engine_words(text: str, engine: str) -> str:
    import re

    from kvplan import registry
    from kvplan.deployment.declaration import BY_NAME

    if engine not in registry.names():
        return text
    dialect, knobs = registry.dialect(engine), BY_NAME()

    def spelled(match: re.Match[str]) -> str:
        knob = knobs[match.group(0)]
        own = dialect.flag_for(knob)
        return match.group(0) if own == "--" + knob.name.replace("_", "-") else own

    names = sorted((name for name in knobs if "_" in name and name in text), key=len, reverse=True)
    return re.sub(r"\b(" + "|".join(map(re.escape, names)) + r")\b", spelled, text) if names else text


class StageRule(Rule):
    """Fails with what building the deployment raised under this rule; passes once its stage ran."""

    stage = ""

    def evaluate(self, ctx: Context) -> list[Outcome]:
        failed = [Outcome(FAIL, p.message, p.key) for p in ctx.problems if p.rule == self.id]
        if failed:
            return failed
        if self.stage in ctx.reached:
            return self.passed(ctx)
        return [Outcome(SKIP, ctx.blocked)]

    def passed(self, ctx: Context) -> list[Outcome]:
        return [Outcome(PASS, self.summary)]


class ModelResolvable(StageRule):
    id, name, stage = "KV001", "model-resolvable", MODEL
    summary = "the model is a bundled id, a local config.json or a Hub repo id kvplan can read"
    hint = "name a bundled id (kvplan models list), a config.json path, or import the spec (kvplan models import)"

    def evaluate(self, ctx: Context) -> list[Outcome]:
        if ctx.unresolved:
            return [Outcome(WARN, p.message, p.key) for p in ctx.problems if p.rule == self.id]
        return super().evaluate(ctx)

    def passed(self, ctx: Context) -> list[Outcome]:
        spec = ctx.spec
        assert spec is not None
        return [Outcome(PASS, f"{spec.id} ({spec.source.kind}): {spec.num_layers} layers, {spec.attention} attention",
                        "model")]


class KnownFlags(StageRule):
    id, name, stage = KNOWN_FLAGS, "known-flags", FLAGS
    summary = "every flag and key is one the engine knows"
    hint = "fix the spelling (the message suggests the closest flag) or remove the key"


class CurrentFlags(StageRule):
    """Refused flags fail (raised by deployment.launch for the pinned version); flags the catalogue lists as
    renamed or removed in a later release than the pinned one warn, with today's spelling."""

    id, name, stage = CURRENT_FLAGS, "current-flags", FLAGS
    summary = "no flag that the pinned engine version renamed or removed"
    hint = "use today's flag the message names, or pin the image to a release that still has the old one"

    def passed(self, ctx: Context) -> list[Outcome]:
        outcomes = [Outcome(WARN, f"--{flag} is renamed or removed ({when}); today: {new}", flag)
                    for flag, (new, when) in renamed_flags(ctx.item).items()]
        return outcomes or [Outcome(PASS, self.summary)]


def renamed_flags(item: Item, removed_only: bool = False) -> dict[str, tuple[str, str]]:
    """The item's flags that the engine's catalogue lists as renamed or removed: flag -> (today, when)."""
    from kvplan.deployment.dialect import dialect_of

    table = dialect_of(item.engine).catalogue().renamed
    return {flag: (table[flag][0], table[flag][1]) for flag in dict.fromkeys(item.flags)
            if flag in table and (table[flag][2] or not removed_only)}


class ValidValues(StageRule):
    id, name, stage = VALID_VALUES, "valid-values", ENGINE
    summary = "every value has the right type, is in range, and is one the engine accepts for this model and GPU"
    hint = "give a value of the type and range the message states"


class ParallelAccepted(StageRule):
    id, name, stage = "KV005", "parallel-accepted", ENGINE
    summary = "tensor and pipeline parallel sizes divide the model as the engine requires"
    hint = "choose a tensor-parallel size that divides the attention heads (and KV heads), e.g. 1, 2, 4 or 8"

    def passed(self, ctx: Context) -> list[Outcome]:
        dep = ctx.dep
        assert dep is not None
        return [Outcome(PASS, f"TP {dep.tensor_parallel_size} x PP {dep.pipeline_parallel_size} x DP "
                              f"{dep.data_parallel_size}", "tensor_parallel_size")]


class GpuKnown(StageRule):
    id, name, stage = "KV006", "gpu-known", GPU
    summary = "the GPU is a catalogue id or a memory size"
    hint = "pass --gpu ID, or add kvplan: {gpu: ID} to the file (kvplan gpus lists the ids)"

    def evaluate(self, ctx: Context) -> list[Outcome]:
        outcomes = super().evaluate(ctx)
        if outcomes[0].status == SKIP and ctx.item.gpu_notes:
            return [Outcome(SKIP, note, "gpu") for note in ctx.item.gpu_notes]
        return outcomes

    def passed(self, ctx: Context) -> list[Outcome]:
        gpu = ctx.gpu
        assert gpu is not None
        return [Outcome(PASS, f"{gpu.count} x {gpu.name} ({gpu.memory_bytes / GiB:.2f} GiB)", "gpu")]


class PlanRule(Rule):
    """Judges the Plan; skipped when the deployment could not be planned."""

    key: str | None = None

    def evaluate(self, ctx: Context) -> list[Outcome]:
        if ctx.plan is None:
            return [Outcome(SKIP, ctx.blocked, self.key)]
        return [self.judge(ctx.plan, ctx)]

    def judge(self, plan: Plan, ctx: Context) -> Outcome:
        raise NotImplementedError


def _no_kv_memory(plan: Plan) -> bool:
    memory = plan.memory
    return memory.kv_cache_bytes <= 0 or memory.weights_bytes + memory.kv_cache_bytes > memory.total_bytes


class WeightsFit(PlanRule):
    id, name, key = "KV010", "weights-fit", "gpu_memory_utilization"
    summary = "weights and the engine's overheads leave room for a KV cache within the memory budget"
    hint = "raise gpu_memory_utilization, add GPUs (tensor_parallel_size), or serve a quantized model"

    def judge(self, plan: Plan, ctx: Context) -> Outcome:
        memory = plan.memory
        if _no_kv_memory(plan):
            return Outcome(FAIL, plan.error or f"weights {memory.weights_bytes / GiB:.2f} GiB leave no KV cache",
                           self.key)
        return Outcome(PASS, f"weights {memory.weights_bytes / GiB:.2f} GiB per GPU of a {memory.budget_bytes / GiB:.2f} "
                             f"GiB budget; {memory.kv_cache_bytes / GiB:.2f} GiB left for the KV cache", self.key)


class RequestFits(PlanRule):
    id, name, key = "KV011", "request-fits", "max_model_len"
    summary = "one request of max_model_len tokens fits in the KV cache (else the engine refuses to start)"
    hint = "lower max_model_len to the estimated maximum the message quotes, or raise gpu_memory_utilization"

    def judge(self, plan: Plan, ctx: Context) -> Outcome:
        if _no_kv_memory(plan):
            return Outcome(SKIP, "no KV cache at all (see KV010)", self.key)
        capacity, length = plan.capacity, plan.engine.max_model_len
        if not plan.layout.groups:
            return Outcome(PASS, "the model has no attention KV cache (state-only layers)", self.key)
        if not capacity.fits:
            return Outcome(FAIL, plan.error or f"one request of {length:,} tokens does not fit", self.key)
        return Outcome(PASS, f"one request of {length:,} tokens needs {capacity.request_bytes / GiB:.2f} GiB; the pool "
                             f"holds {capacity.tokens:,} tokens, {capacity.max_concurrency:g} such requests at once",
                       self.key)


class Requirement(PlanRule):
    """A requirement the file states; checked only where it is stated."""

    def applies(self, ctx: Context) -> bool:
        return super().applies(ctx) and self.name.replace("-", "_") in ctx.requirements

    @property
    def key(self) -> str:  # type: ignore[override]
        return self.name.replace("-", "_")


class MinConcurrency(Requirement):
    id, name = "KV020", "min-concurrency"
    summary = "at least min_concurrency requests of max_model_len tokens at once"
    hint = "lower max_model_len, quantize the KV cache (kv_cache_dtype fp8), add GPUs, or raise max_num_seqs"

    def judge(self, plan: Plan, ctx: Context) -> Outcome:
        need, got = ctx.requirements["min_concurrency"], plan.capacity.max_concurrency
        seqs = plan.engine.max_num_seqs
        if seqs is not None and seqs < need:
            return Outcome(FAIL, f"max_num_seqs {seqs:,} runs fewer than the {need:g} requests required", self.key)
        status = PASS if got >= need else FAIL
        return Outcome(status, f"{got:g} requests of {plan.engine.max_model_len:,} tokens at once; {need:g} required",
                       self.key)


class MinKvTokens(Requirement):
    id, name = "KV021", "min-kv-tokens"
    summary = "the KV cache holds at least min_kv_tokens tokens"
    hint = "raise gpu_memory_utilization, quantize the KV cache (kv_cache_dtype fp8) or add GPUs"

    def judge(self, plan: Plan, ctx: Context) -> Outcome:
        need, got = ctx.requirements["min_kv_tokens"], plan.capacity.tokens
        return Outcome(PASS if got >= need else FAIL, f"{got:,} tokens in the KV cache; {need:,} required", self.key)


class MinMaxModelLen(Requirement):
    id, name = "KV022", "min-max-model-len"
    summary = "max_model_len is at least min_max_model_len"
    hint = "raise max_model_len (up to the model's own maximum) and check KV011 still passes"

    def judge(self, plan: Plan, ctx: Context) -> Outcome:
        need, got = ctx.requirements["min_max_model_len"], plan.engine.max_model_len
        return Outcome(PASS if got >= need else FAIL, f"max_model_len {got:,}; {need:,} required", self.key)


class MinRequestsAt(Requirement):
    id, name = "KV023", "min-requests-at"
    summary = "at least `requests` requests of `context` tokens at once"
    hint = "lower max_num_seqs only if it caps the count; otherwise add KV memory (utilization, fp8 KV, GPUs)"

    def judge(self, plan: Plan, ctx: Context) -> Outcome:
        rungs = {rung.context: rung for rung in plan.capacity.ladder}
        parts, status = [], PASS
        for wanted in ctx.requirements["min_requests_at"]:
            context, requests = wanted["context"], wanted["requests"]
            if context > plan.engine.max_model_len:
                status = FAIL
                parts.append(f"{context:,} tokens is longer than max_model_len {plan.engine.max_model_len:,}: refused")
                continue
            got = rungs[context].concurrency
            if got < requests:
                status = FAIL
            parts.append(f"{got:,} requests of {context:,} tokens at once; {requests:,} required")
        return Outcome(status, "; ".join(parts), self.key)


class MaxUtilization(Requirement):
    id, name = "KV024", "max-gpu-memory-utilization"
    summary = "the engine takes at most max_gpu_memory_utilization of each GPU"
    hint = "lower gpu_memory_utilization to the limit"

    def judge(self, plan: Plan, ctx: Context) -> Outcome:
        limit, got = ctx.requirements["max_gpu_memory_utilization"], plan.engine.gpu_memory_utilization
        if got is None:
            return Outcome(SKIP, f"{plan.engine.label} sizes its pool without a utilization share", self.key)
        return Outcome(PASS if got <= limit else FAIL, f"gpu_memory_utilization {got:g}; at most {limit:g} allowed",
                       self.key)


class GpuCount(Rule):
    id, name = "KV030", "gpu-count"
    summary = "the GPUs the manifest gives the deployment equal TP x PP x DP"
    hint = "make the manifest's GPU count (nvidia.com/gpu, requestGPU, devices) equal TP x PP x DP"

    def applies(self, ctx: Context) -> bool:
        return super().applies(ctx) and (ctx.item.gpu_count is not None or bool(ctx.item.gpu_count_note))

    def evaluate(self, ctx: Context) -> list[Outcome]:
        waiting = ctx.waits("gpu_count", *PARALLEL_KNOBS)
        if waiting:
            return [Outcome(SKIP, waiting, "gpu_count")]
        if ctx.dep is None:
            return [Outcome(SKIP, ctx.blocked, "gpu_count")]
        dep, given = ctx.dep, ctx.item.gpu_count
        wanted = f"TP {dep.tensor_parallel_size} x PP {dep.pipeline_parallel_size} x DP {dep.data_parallel_size}"
        if given == dep.gpu_count:
            return [Outcome(PASS, f"{given} GPU(s) = {wanted}", "gpu_count")]
        return [Outcome(FAIL, f"the file gives {given} GPU(s), but {wanted} = {dep.gpu_count}", "gpu_count")]


PARALLEL_KNOBS = ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size")


class HighUtilization(Rule):
    id, name = "KV040", "high-utilization"
    summary = "warns when gpu_memory_utilization is above 0.95 (little left for other processes and fragmentation)"
    hint = "keep gpu_memory_utilization at 0.95 or below"
    LIMIT = 0.95  # the threshold for a risky set-up

    def evaluate(self, ctx: Context) -> list[Outcome]:
        waiting = ctx.waits("gpu_memory_utilization")
        if ctx.dep is None or waiting:
            return [Outcome(SKIP, waiting or ctx.blocked, "gpu_memory_utilization")]
        value = ctx.dep.gpu_memory_utilization
        if value is not None and value > self.LIMIT:
            return [Outcome(WARN, f"gpu_memory_utilization {value:g} is above {self.LIMIT}", "gpu_memory_utilization")]
        return [Outcome(PASS, "utilization at or below 0.95" if value is not None else "the engine's default "
                        "utilization", "gpu_memory_utilization")]


class SmallPool(PlanRule):
    id, name, key = "KV041", "small-pool", "max_model_len"
    summary = "warns when the KV pool holds fewer than 2 x max_model_len tokens (long requests queue one at a time)"
    hint = "lower max_model_len or add KV memory so that at least two long requests run at once"

    def judge(self, plan: Plan, ctx: Context) -> Outcome:
        tokens, length = plan.capacity.tokens, plan.engine.max_model_len
        if not plan.capacity.fits:
            return Outcome(SKIP, "one request does not fit (see KV011)", self.key)
        if tokens < 2 * length:
            return Outcome(WARN, f"the pool holds {tokens:,} tokens, less than 2 x max_model_len = {2 * length:,}",
                           self.key)
        return Outcome(PASS, f"the pool holds {tokens:,} tokens, {tokens / length:.1f} x max_model_len", self.key)


class LoraSlots(PlanRule):
    id, name, key = "KV044", "lora-slots", "enable_lora"
    summary = "a LoRA deployment's adapter slots still leave room for one max_model_len request"
    hint = "fewer LoRA slots or a lower max_lora_rank, a shorter max_model_len, or more memory per GPU"

    def applies(self, ctx: Context) -> bool:
        return super().applies(ctx) and ctx.dep is not None and ctx.dep.enable_lora

    def judge(self, plan: Plan, ctx: Context) -> Outcome:
        from dataclasses import replace

        from kvplan.api import draft_model
        from kvplan.engines import plan_deployment

        if ctx.dep is None or ctx.spec is None or ctx.gpu is None or _no_kv_memory(plan):
            return Outcome(SKIP, "no KV cache at all (see KV010)", self.key)
        bare = plan_deployment(ctx.spec, replace(ctx.dep, enable_lora=False), ctx.gpu, (), draft_model(ctx.dep))
        slots = plan.memory.weights_bytes - bare.memory.weights_bytes
        lost = bare.memory.kv_cache_bytes - plan.memory.kv_cache_bytes
        taken = f"the LoRA slots take {slots / GiB:.2f} GiB of weights per GPU ({lost / GiB:.2f} GiB of KV cache)"
        length = plan.engine.max_model_len
        if plan.capacity.fits:
            return Outcome(PASS, f"{taken}; one request of {length:,} tokens still fits", self.key)
        if not bare.capacity.fits:
            return Outcome(SKIP, f"one request of {length:,} tokens does not fit even without LoRA (see KV011)",
                           self.key)
        return Outcome(FAIL, f"{taken}: one request of {length:,} tokens fits without them, not with them (the "
                             f"longest that fits: {plan.capacity.max_model_len_that_fits:,})", self.key)


class ReplicatedKvHeads(Rule):
    id, name = "KV042", "replicated-kv-heads"
    summary = "warns when tensor_parallel_size exceeds the KV heads: each rank then holds a copy of a head"
    hint = "use a tensor-parallel size up to the KV-head count, and pipeline or data parallelism beyond it"

    def evaluate(self, ctx: Context) -> list[Outcome]:
        waiting = ctx.waits("tensor_parallel_size")
        if ctx.dep is None or ctx.spec is None or waiting:
            return [Outcome(SKIP, waiting or ctx.blocked, "tensor_parallel_size")]
        tp = ctx.dep.tensor_parallel_size
        heads = max((layer.kv_heads for layer in ctx.spec.kv_layers if not layer.latent_cache), default=0)
        if heads and tp > heads:
            return [Outcome(WARN, f"tensor_parallel_size {tp} > {heads} KV heads: each head is replicated on "
                                  f"{tp // heads} ranks, so the KV cache holds {tp // heads} copies",
                            "tensor_parallel_size")]
        return [Outcome(PASS, f"{heads} KV heads over {tp} rank(s)", "tensor_parallel_size")]


class FloatingTag(Rule):
    id, name = "KV043", "floating-tag"
    summary = "warns when the image tag floats (latest) and the command uses flags a release removed"
    hint = "pin the image to a release (vllm/vllm-openai:v0.x.y) or move to today's flags"

    def applies(self, ctx: Context) -> bool:
        return super().applies(ctx) and ctx.item.image is not None

    def evaluate(self, ctx: Context) -> list[Outcome]:
        image = ctx.item.image
        assert image is not None
        removed = renamed_flags(ctx.item, removed_only=True)
        if image.floating and removed:
            names = ", ".join(f"--{flag} ({when}; today: {new})" for flag, (new, when) in removed.items())
            return [Outcome(WARN, f"{image.reference} floats to each new release, and {names}", "image")]
        state = "pinned" if not image.floating else "floating, but no flag it uses was removed"
        return [Outcome(PASS, f"{image.reference}: {state}", "image")]


class ModelConfigComplete(Rule):
    id, name = "KV050", "model-config"
    summary = "a config.json parses into a complete model spec (KV bytes per token and layout reported)"
    hint = "add the missing field the message names (kvplan models show explains the parsed spec)"

    def applies(self, ctx: Context) -> bool:
        return ctx.item.model_config is not None

    def evaluate(self, ctx: Context) -> list[Outcome]:
        failed = [Outcome(FAIL, p.message) for p in ctx.problems if p.rule == self.id]
        return failed or [Outcome(PASS, ctx.model_note)]


RULES: tuple[Rule, ...] = (
    ModelResolvable(), KnownFlags(), CurrentFlags(), ValidValues(), ParallelAccepted(), GpuKnown(),
    WeightsFit(), RequestFits(), MinConcurrency(), MinKvTokens(), MinMaxModelLen(), MinRequestsAt(),
    MaxUtilization(), GpuCount(), HighUtilization(), SmallPool(), LoraSlots(), ReplicatedKvHeads(), FloatingTag(),
    ModelConfigComplete(),
)


def selected(select: list[str], ignore: list[str]) -> tuple[Rule, ...]:
    """Rules whose id starts with one of select (all when empty) and with none of ignore, as ruff reads them."""
    from kvplan.errors import KvplanError

    for option, codes in (("--select", select), ("--ignore", ignore)):
        for code in codes:
            if not any(rule.id.startswith(code.upper()) or rule.name == code for rule in RULES):
                raise KvplanError(f"no rule id starts with {code!r} (kvplan check --list-rules lists them)", option)

    def matches(rule: Rule, codes: list[str]) -> bool:
        return any(rule.id.startswith(code.upper()) or rule.name == code for code in codes)

    return tuple(rule for rule in RULES if (not select or matches(rule, select)) and not matches(rule, ignore))
