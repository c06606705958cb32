"""The search: every GPU x count x parallel split x KV dtype x weight format, each planned by the engine's own
code, kept when it meets every target, ranked by cost (or GPUs, then memory). Pure: values in, values out.

Pruning is exact, not a heuristic: since the ranking grows with the GPU count (count x price, or count then count x
memory), a GPU's counts are tried upwards and stop at the first count that meets the targets; and for one GPU and
split, formats are tried smallest first, because more bytes of KV or weights never hold more requests: once a
format misses, every format at least as large is skipped. Each candidate is planned with its whole split, DP
included: a replica's weights can depend on DP (vLLM spreads a MoE model's experts over TP x DP ranks)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from kvplan.deployment import Deployment
from kvplan.errors import KvplanError
from kvplan.hardware import Gpu
from kvplan.models.model import ModelSpec, Quantization
from kvplan.plan import GpuChoice, Plan
from kvplan.sizing.command import engine_has, launch_command
from kvplan.sizing.formats import KvFormat, WeightFormat
from kvplan.sizing.targets import Target
from kvplan.units import GiB

CHECKPOINT_FORMATS = ("awq", "gptq")  # weight formats that are another checkpoint, not a switch (sizing.formats)

PARALLEL = ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size")


@dataclass(frozen=True)
class Split:
    tensor: int
    pipeline: int
    data: int

    @property
    def count(self) -> int:
        return self.tensor * self.pipeline * self.data

    def __str__(self) -> str:
        return f"{self.tensor}/{self.pipeline}/{self.data}"


@dataclass(frozen=True)
class Space:
    """What may vary. Fields the base deployment fixes (a pasted -tp 2) are not searched."""

    gpus: tuple[Gpu, ...]
    kv_formats: tuple[KvFormat, ...]
    weight_formats: tuple[WeightFormat, ...]
    max_gpus: int = 8
    gpus_per_node: int = 8  # tensor parallelism stays within one node
    host_memory_bytes: int | None = None  # host memory one node has for a CPU KV tier (--host-memory)

    def host_bytes_per_node(self, option: Option) -> int:
        """The CPU KV tier's host memory on each node the option spans: every replica's tier, spread as its
        GPUs are (whole nodes of gpus_per_node, the last one the rest)."""
        nodes = -(-option.count // self.gpus_per_node)
        return -(-option.host_bytes // nodes)

    def splits(self, count: int, base: Deployment) -> list[Split]:
        fixed = {name: getattr(base, name) for name in PARALLEL if base.given(name)}
        if not engine_has(base.engine, "data_parallel_size"):
            fixed.setdefault("data_parallel_size", 1)  # the engine has no replicas of its own (trtllm-serve)
        found = []
        for tp in range(1, min(count, self.gpus_per_node) + 1):
            for pp in range(1, count // tp + 1):
                if count % (tp * pp):
                    continue
                split = Split(tp, pp, count // (tp * pp))
                values = dict(zip(PARALLEL, (split.tensor, split.pipeline, split.data), strict=True))
                if all(values[name] == value for name, value in fixed.items()):
                    found.append(split)
        return found


@dataclass(eq=False)
class Option:
    """One candidate deployment and what it gets: requests per target across all replicas."""

    gpu: Gpu
    split: Split
    kv: KvFormat
    weights: WeightFormat
    deployment: Deployment
    plan: Plan | None  # one replica's; None when the engine refuses the split
    requests: tuple[int, ...] = ()
    meets: bool = False
    limits: tuple[str, ...] = ()
    price: float | None = None  # per GPU-hour

    @property
    def count(self) -> int:
        return self.split.count

    @property
    def cost_per_hour(self) -> float | None:
        return None if self.price is None else round(self.price * self.count, 4)

    @property
    def total_memory_bytes(self) -> int:
        return self.gpu.memory_bytes * self.count

    @property
    def kv_tokens(self) -> int:
        """One replica's pool, as the engine logs it."""
        return self.plan.capacity.tokens if self.plan is not None else 0

    @property
    def offload_tokens(self) -> int:
        """One replica's CPU KV tier (vLLM --kv-offloading-size, LMCache, SGLang's hierarchical cache)."""
        return self.plan.capacity.offload_tokens if self.plan is not None else 0

    @property
    def host_bytes(self) -> int:
        """Host memory the CPU KV tiers of all replicas pin."""
        return self.plan.capacity.offload_host_bytes * self.split.data if self.plan is not None else 0

    def headroom(self, targets: tuple[Target, ...]) -> float:
        """The smallest share of a target met: 1.0 meets it exactly."""
        return min((got / target.requests for got, target in zip(self.requests, targets, strict=True)), default=0.0)

    def command(self) -> str:
        """The launch line. An option that loads another checkpoint (a 4-bit AWQ or GPTQ one) names it in place of
        the model and leaves --quantization to the checkpoint: `--quantization awq` on the model's own 16-bit
        checkpoint is a line the engine refuses (Cannot find the config file for awq)."""
        if self.weights.checkpoint and self.plan is not None and self.plan.model.quantization is not None and \
                self.deployment.model:
            stand_in = f"<{(self.weights.quantization or '').upper()}-checkpoint-of-{self.deployment.model}>"
            return launch_command(replace(self.deployment, model=stand_in, quantization=None))
        return launch_command(self.deployment)

    def to_dict(self, targets: tuple[Target, ...]) -> dict[str, Any]:
        return {
            "gpu": self.gpu.id, "count": self.count, "tensor_parallel_size": self.split.tensor,
            "pipeline_parallel_size": self.split.pipeline, "data_parallel_size": self.split.data,
            "kv_cache_dtype": self.deployment.kv_cache_dtype, "quantization": self.deployment.quantization,
            "requests": list(self.requests), "kv_tokens": self.kv_tokens, "cost_per_hour": self.cost_per_hour,
            "command": self.command(), "headroom": round(self.headroom(targets), 3),
            "total_memory_bytes": self.total_memory_bytes, "checkpoint": self.weights.checkpoint,
            "meets": self.meets, "limits": list(self.limits), "offload_tokens": self.offload_tokens,
            "host_memory_bytes": self.host_bytes,
        }


@dataclass(eq=False)
class Sizing:
    """The search's answer: options that meet every target, cheapest first; when none does, the closest."""

    targets: tuple[Target, ...]
    options: list[Option]  # every option that meets the targets, ranked
    best_per_gpu: list[Option]
    closest: list[Option]  # when nothing meets: the best try of each GPU, nearest first
    refusals: list[str]  # what the engine refused (TP sizes the model's heads do not divide, ...)
    searched: int  # candidates in the space up to each GPU's stopping count
    planned: int  # engine plans made
    pruned: int  # candidates skipped because a smaller format at the same split missed
    priced: bool
    notes: list[str] = field(default_factory=list)

    @property
    def found(self) -> bool:
        return bool(self.options)

    def to_dict(self, top: int | None = None) -> dict[str, Any]:
        def listed(options: list[Option]) -> list[dict[str, Any]]:
            return [option.to_dict(self.targets) for option in options]

        return {
            "target": [{"requests": t.requests, "context": t.context} for t in self.targets],
            "options": listed(self.options[:top]), "best_per_gpu": listed(self.best_per_gpu),
            "closest": listed(self.closest), "refused": self.refusals, "searched": self.searched,
            "planned": self.planned, "pruned": self.pruned,
            "ranked_by": "cost_per_hour" if self.priced else "gpus, then total memory", "notes": self.notes,
        }


def rank_key(option: Option, targets: tuple[Target, ...], priced: bool) -> tuple[Any, ...]:
    """Cheapest first; ties keep the most requests at the largest target context, then the most at the others
    (longest first); then the fewer GPUs. Python's sort is stable, so remaining ties keep the search's order."""
    by_length = sorted(range(len(targets)), key=lambda i: -targets[i].context)
    headroom = tuple(-option.requests[i] for i in by_length)
    cost: tuple[Any, ...] = (option.cost_per_hour,) if priced else (option.count, option.total_memory_bytes)
    return (*cost, *headroom, option.count, option.total_memory_bytes)


def limits(option: Option, targets: tuple[Target, ...]) -> tuple[str, ...]:
    """What keeps an option short of the targets, in the words a user acts on."""
    plan = option.plan
    if plan is None:
        return ()
    memory = plan.memory
    if memory.kv_cache_bytes <= 0:
        return (f"weights do not fit: {memory.weights_bytes / GiB:.1f} GiB per GPU leave no room for KV cache",)
    if plan.error is not None:
        return (f"KV too small: {memory.kv_cache_bytes / GiB:.1f} GiB per GPU holds no "
                f"{plan.engine.max_model_len:,}-token request",)
    rungs = {rung.context: rung for rung in plan.capacity.ladder}
    found = []
    for got, target in zip(option.requests, targets, strict=True):
        if got >= target.requests:
            continue
        rung = rungs[target.context]
        if rung.kv_limited * option.split.data < target.requests:
            found.append(f"KV too small: {got:,} of {target.requests:,} requests at {target.context:,} tokens")
        else:
            found.append(f"max_num_seqs {plan.engine.max_num_seqs:,} per replica: {got:,} of "
                         f"{target.requests:,} at {target.context:,} tokens")
    return tuple(found)


@dataclass(eq=False)
class _Planner:
    """Plans candidates with the engine's own code, counting them; refusals are kept with their reason."""

    spec: ModelSpec
    contexts: tuple[int, ...]
    draft: ModelSpec | None
    planned: int = 0
    refusals: dict[str, None] = field(default_factory=dict)

    def plan(self, gpu: Gpu, dep: Deployment, split: Split) -> Plan | None:
        from kvplan.engines import plan_deployment

        self.planned += 1
        choice = GpuChoice.of(gpu, split.count)
        spec = self.spec
        if dep.quantization in CHECKPOINT_FORMATS and spec.quantization is None:
            # a 4-bit checkpoint of the model loads in its place: planned as that checkpoint, which the engine
            # accepts, not as --quantization on the 16-bit one, which it refuses
            spec = replace(spec, quantization=Quantization(dep.quantization, 4, 128))
        try:
            return plan_deployment(spec, dep, choice, self.contexts, self.draft)
        except KvplanError as exc:
            self.refusals[exc.message] = None
            return None


def candidate(base: Deployment, split: Split, kv: KvFormat, weights: WeightFormat) -> Deployment:
    changes: dict[str, Any] = {"tensor_parallel_size": split.tensor, "pipeline_parallel_size": split.pipeline,
                               "data_parallel_size": split.data}
    if not base.given("kv_cache_dtype"):
        changes["kv_cache_dtype"] = kv.name
    if not base.given("quantization"):
        changes["quantization"] = weights.quantization
    return replace(base, **changes)


def search(spec: ModelSpec, base: Deployment, targets: tuple[Target, ...], space: Space,
           prices: dict[str, float] | None = None, draft: ModelSpec | None = None) -> Sizing:
    """base: the deployment as the user fixed it, max_model_len set; prices per GPU-hour by catalogue id."""
    priced = prices is not None
    contexts = tuple(sorted({target.context for target in targets}))
    planner = _Planner(spec, contexts, draft)
    stored_16_bit = spec.quantization is None
    meeting: list[Option] = []
    tried: list[Option] = []
    searched = pruned = 0
    for gpu in space.gpus:
        formats = smallest_first([(kv, weights) for kv in space.kv_formats for weights in space.weight_formats
                                  if kv.runs_on(gpu) and weights.runs_on(gpu)], stored_16_bit)
        for count in range(1, space.max_gpus + 1):
            found_here = False
            for split in space.splits(count, base):
                missed: list[tuple[KvFormat, WeightFormat]] = []
                for kv, weights in formats:
                    searched += 1
                    if any(kv_missed.no_larger_than(kv) and weights_missed.no_larger_than(weights, stored_16_bit)
                           for kv_missed, weights_missed in missed):
                        pruned += 1
                        continue
                    dep = candidate(base, split, kv, weights)
                    plan = planner.plan(gpu, dep, split)
                    option = evaluate(gpu, split, kv, weights, dep, plan, targets, prices)
                    if option is None:
                        continue  # refused: says nothing of the larger formats
                    host_short = host_limited(option, space)
                    if not option.meets and not host_short:  # a larger format may pin less host memory
                        missed.append((kv, weights))
                    (meeting if option.meets else tried).append(option)
                    found_here = found_here or option.meets
            if found_here:
                break
    meeting.sort(key=lambda option: rank_key(option, targets, priced))
    closest = [] if meeting else _closest(tried, targets)
    return Sizing(targets, meeting, _first_per_gpu(meeting), closest, list(planner.refusals), searched,
                  planner.planned, pruned, priced)


def smallest_first(formats: list[tuple[KvFormat, WeightFormat]], stored_16_bit: bool
                   ) -> list[tuple[KvFormat, WeightFormat]]:
    """An order in which no format comes before one no larger than it: FP8 KV first, then by bits a weight (the
    checkpoint as stored counts as 16 when it is 16-bit, else last); the order asked for among equals."""
    def size(pair: tuple[KvFormat, WeightFormat]) -> tuple[int, int]:
        kv, weights = pair
        bits = weights.bits if weights.bits is not None else 16 if stored_16_bit else 99
        return (0 if kv.needs_fp8 else 1, bits)

    return sorted(formats, key=size)


def evaluate(gpu: Gpu, split: Split, kv: KvFormat, weights: WeightFormat, dep: Deployment, plan: Plan | None,
             targets: tuple[Target, ...], prices: dict[str, float] | None) -> Option | None:
    if plan is None:
        return None
    rungs = {rung.context: rung.concurrency for rung in plan.capacity.ladder}
    requests = tuple(rungs[target.context] * split.data for target in targets)
    starts = plan.error is None and plan.capacity.fits
    meets = starts and all(got >= target.requests for got, target in zip(requests, targets, strict=True))
    option = Option(gpu, split, kv, weights, dep, plan, requests, meets,
                    price=prices.get(gpu.id) if prices is not None else None)
    if not meets:
        option.limits = limits(option, targets)
    return option


def host_limited(option: Option, space: Space) -> bool:
    """Whether the option's CPU KV tier needs more host memory on a node than --host-memory; if so it meets
    nothing, and says why."""
    if space.host_memory_bytes is None or not option.host_bytes:
        return False
    need = space.host_bytes_per_node(option)
    if need <= space.host_memory_bytes:
        return False
    option.meets = False
    option.limits = (*option.limits, f"host memory: the CPU KV tier pins {need / GiB:.1f} GiB a node, over "
                                     f"--host-memory {space.host_memory_bytes / GiB:.1f} GiB")
    return True


def _first_per_gpu(ranked: list[Option]) -> list[Option]:
    seen: dict[str, Option] = {}
    for option in ranked:
        seen.setdefault(option.gpu.id, option)
    return list(seen.values())


def _closest(tried: list[Option], targets: tuple[Target, ...], limit: int = 5) -> list[Option]:
    """Each GPU's nearest miss, nearest first: one that starts, the largest share of the targets met, the most
    KV tokens in all replicas, the most KV memory (the least short of it), then the fewest GPUs."""
    def nearness(option: Option) -> tuple[Any, ...]:
        plan = option.plan
        starts = plan is not None and plan.error is None
        kv_bytes = plan.memory.kv_cache_bytes if plan is not None else 0
        return (not starts, -option.headroom(targets), -option.kv_tokens * option.split.data, -kv_bytes,
                option.count)

    return _first_per_gpu(sorted(tried, key=nearness))[:limit]
