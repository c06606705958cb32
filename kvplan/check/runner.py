"""kvplan check's one pass: find the files, read each into Items by its kind, build each Deployment through
the same path as kvplan estimate (deployment builders, api.gpu_choices, the model sources, engines.estimate),
and let every selected rule judge it. A bad file is reported and the others are still checked."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from kvplan.check.findings import ERROR, FILE_RULE, PASS, SKIP, Finding
from kvplan.check.item import VALID_VALUES, Item, Problem
from kvplan.check.rules import (
    ENGINE,
    FLAGS,
    GPU,
    MODEL,
    PLAN,
    VALUES,
    Context,
    GpuKnown,
    ModelConfigComplete,
    ModelResolvable,
    ParallelAccepted,
    Rule,
    selected,
)
from kvplan.errors import PARALLEL_SPLIT, KvplanError

if TYPE_CHECKING:
    from kvplan.check.discover import Found
    from kvplan.check.kinds import FileKind
    from kvplan.deployment import Deployment
    from kvplan.models.model import ModelSpec
    from kvplan.plan import GpuChoice, Plan


@dataclass(eq=False)
class Options:
    gpu: str | None = None  # for files that name no GPU
    kind: str | None = None  # force this kind on every file
    select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    skip_unknown: bool = False  # a named file of no kind is a skip record, not an error (the pre-commit hook)
    models: str | None = None  # a folder of config.json files (one folder per model id) beside the manifests
    strict: bool = False  # a model that cannot be resolved fails KV001 instead of warning


CHECKED, SKIPPED, ERRORED = "checked", "skipped", "errored"


@dataclass(frozen=True)
class FileRecord:
    """What became of one file given or found: checked (with its deployments), skipped (with the reason) or
    errored (it, or one of its documents, could not be read)."""

    path: str
    status: str
    reason: str = ""
    deployments: int = 0


@dataclass(eq=False)
class Report:
    findings: list[Finding] = field(default_factory=list)
    files: int = 0
    deployments: int = 0
    records: list[FileRecord] = field(default_factory=list)
    unresolved_models: int = 0  # deployments whose model could not be read: their capacity rules skipped

    @property
    def skipped_files(self) -> list[str]:
        return [record.path for record in self.records if record.status == SKIPPED]

    def count(self, status: str) -> int:
        return sum(1 for record in self.records if record.status == status)


class Planner:
    """Model specs and plans, each computed once per identical request: a fleet repeats its set-ups."""

    def __init__(self, models: str | None = None, strict: bool = False) -> None:
        self.models, self.strict = models, strict
        self.specs: dict[str, ModelSpec | KvplanError] = {}
        self.plans: dict[tuple[str, GpuChoice, tuple[int, ...]], Plan] = {}

    def spec(self, dep: Deployment) -> ModelSpec:
        from kvplan.api import load_model

        assert dep.model is not None
        key = json.dumps([dep.model, dep.revision, dep.hf_overrides], sort_keys=True, default=str)
        if key not in self.specs:
            try:
                self.specs[key] = load_model(local_model(dep.model, self.models), dep.revision, None,
                                             dep.hf_overrides)
            except KvplanError as exc:
                self.specs[key] = exc
        found = self.specs[key]
        if isinstance(found, KvplanError):
            raise found
        return found

    def plan(self, dep: Deployment, spec: ModelSpec, gpu: GpuChoice, ladder: tuple[int, ...]) -> Plan:
        from kvplan.api import draft_model
        from kvplan.engines import plan_deployment

        key = (json.dumps(dep.to_dict(), sort_keys=True, default=str), gpu, ladder)
        if key not in self.plans:  # errors are not kept: their message names this deployment's keys
            self.plans[key] = plan_deployment(spec, dep, gpu, ladder, draft_model(dep))
        return self.plans[key]


# What the model sources say when they could not look (kvplan.models.hub): no answer, offline, or not allowed.
COULD_NOT_LOOK = ("is unreachable", "HF_HUB_OFFLINE is set", "the repo is gated", "access denied", "the Hub answered")


def unresolvable(model: str, exc: KvplanError) -> bool:
    """A Hub repo id that is neither local nor bundled and that the Hub could not be asked for: not a mistake in
    the file. A local path that does not parse, or an id the Hub says does not exist, is one."""
    import os

    return not os.path.exists(os.path.expanduser(model)) and any(words in exc.message for words in COULD_NOT_LOOK)


def local_model(model: str, folder: str | None) -> str:
    """The model as --models DIR keeps it (DIR/ORG/NAME/config.json, DIR/ORG--NAME/config.json or
    DIR/NAME/config.json), else the bundled successor of a renamed repository, else the model as given."""
    import os

    from kvplan.check.models import successor

    if folder is not None and model.strip("/"):
        org, _, name = model.strip("/").rpartition("/")
        for candidate in (os.path.join(folder, org, name), os.path.join(folder, f"{org}--{name}"),
                          os.path.join(folder, name)):
            if os.path.isfile(os.path.join(candidate, "config.json")):
                return os.path.join(candidate, "config.json")
    return successor(model) or model


def check_paths(paths: list[str], options: Options) -> Report:
    from kvplan.check.discover import discover

    rules = selected(options.select, options.ignore)
    forced = None
    if options.kind is not None:
        from kvplan.check.kinds import kind_named

        forced = kind_named(options.kind)
    report = Report()
    planner = Planner(options.models, options.strict)
    for found in discover(paths):
        report.files += 1
        if found.error is not None:
            _record(report, found.path, ERRORED, found.error.message)
            continue
        try:
            read = read_items(found.path, forced)
        except KvplanError as exc:
            _record(report, found.path, ERRORED, _file_message(exc, found.path), getattr(exc, "line", None))
            continue
        _check_file(report, found, read, rules, options, planner)
    return report


def _check_file(report: Report, found: Found, read: Read, rules: tuple[Rule, ...], options: Options,
                planner: Planner) -> None:
    """The file's own record first, then each broken document's error, then each deployment's findings."""
    if read.items:
        reason = f"{len(read.items)} deployment(s) read as {' and '.join(dict.fromkeys(read.labels))}"
        report.records.append(FileRecord(found.path, ERRORED if read.errors else CHECKED, reason, len(read.items)))
        report.findings.append(Finding(found.path, None, FILE_RULE, PASS, reason))
    elif read.errors:
        report.records.append(FileRecord(found.path, ERRORED, read.errors[0][0]))
    elif read.empty or not found.named or options.skip_unknown:
        _record(report, found.path, SKIPPED, read.empty or UNCLASSIFIED)
    else:
        _record(report, found.path, ERRORED, UNCLASSIFIED + "; --kind reads it as one")
    for message, line in read.errors:
        report.findings.append(Finding(found.path, None, FILE_RULE, ERROR, message, line))
    for item in read.items:
        report.deployments += 1
        for ctx in contexts(item, options, planner):
            report.unresolved_models += ctx.unresolved
            report.findings.extend(judge(ctx, rules, found.path))


UNCLASSIFIED = ("not a file kind kvplan check reads (a kvplan deployment file, a vLLM --config file, a Kubernetes "
                "workload, KServe, KubeAI, RayService, a Ray Serve LLM config, llm-d values, Helm values, compose, "
                "a TensorRT-LLM options file or a config.json)")
_FILE_STATUS = {CHECKED: PASS, SKIPPED: SKIP, ERRORED: ERROR}


def _record(report: Report, path: str, status: str, reason: str, line: int | None = None) -> None:
    report.records.append(FileRecord(path, status, reason))
    report.findings.append(Finding(path, None, FILE_RULE, _FILE_STATUS[status], reason, line))


def _file_message(exc: KvplanError, path: str) -> str:
    """The error without the file's own name in front (the finding names the file)."""
    where = exc.where or ""
    if where == path:
        return exc.message
    located = re.sub(r"^\d+: ", "", where.removeprefix(path + ":").lstrip())  # the finding carries the line
    return f"{located}: {exc.message}" if where else exc.message


@dataclass(eq=False)
class Read:
    """A file's documents as far as they read: the Items, the kinds they were read as, each broken document's
    error (message, line), and why a recognised file states no deployment."""

    items: list[Item] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)
    errors: list[tuple[str, int | None]] = field(default_factory=list)
    empty: str = ""


def read_items(path: str, forced: FileKind | None) -> Read:
    """The Items of every document of the file; a broken document is an error of its own, the others read."""
    from kvplan.check.discover import load_sources
    from kvplan.check.kinds import kinds

    read = Read()
    for source in load_sources(path):
        if source.broken is not None:
            read.errors.append((_file_message(source.broken, path), source.broken_line))
            continue
        if source.document is None:
            continue
        kind = forced or next((k for k in kinds() if k.detect(source.document)), None)
        if kind is None:
            read.empty = read.empty or _other_manifest(source.document)
            continue
        try:
            found = kind.items(source)
        except KvplanError as exc:
            read.errors.append((_file_message(exc, path), getattr(exc, "line", None)))
            continue
        read.labels.append(kind.label)
        read.items.extend(found)
        if not found:
            read.empty = read.empty or f"{kind.label}: {getattr(kind, 'EMPTY', 'no deployment in it')}"
    return read


def _other_manifest(document: Any) -> str:
    """A Kubernetes object of another kind (a Service, a ConfigMap): recognised, with nothing to check."""
    if isinstance(document, dict) and "apiVersion" in document and isinstance(document.get("kind"), str):
        return f"a Kubernetes {document['kind'][:60]}: no pod in it runs a model server"
    return ""


def judge(ctx: Context, rules: tuple[Rule, ...], path: str) -> list[Finding]:
    findings = []
    for rule in rules:
        if not rule.applies(ctx):
            continue
        for outcome in rule.evaluate(ctx):
            # an error located as "NAME: key" repeats the deployment the finding already names
            message = outcome.message.removeprefix(f"{ctx.item.name}: ")
            if outcome.status in ("fail", "warn") and rule.hint:
                message = f"{message} (fix: {rule.hint_for(ctx.item.engine)})"
            findings.append(Finding(path, ctx.name, rule.id, outcome.status, message, ctx.item.line_of(outcome.key)))
    return findings


def contexts(item: Item, options: Options, planner: Planner) -> list[Context]:
    """The item built as far as it goes, once per GPU it names."""
    if item.model_config is not None:
        return [_model_config(item)]
    ctx = Context(item, item.name)
    requirements, problems = _requirements(item)
    ctx.requirements = requirements
    built = item.build()
    ctx.waiting = built.unresolved
    ctx.problems = [*built.problems, *problems]
    ctx.reached.add(FLAGS)
    if built.problems:
        ctx.blocked = "the deployment's flags or keys have errors (KV002-KV004)"
        return [ctx]
    draft = built.draft
    for name, (raw, where) in item.defaults.items():
        if name not in draft.values:
            draft.set(name, raw, where)
    if options.gpu is not None and "gpu" not in draft.values and "gpu_memory_bytes" not in draft.values:
        draft.set("gpu", options.gpu, "--gpu")
    try:
        dep = draft.deployment()
    except KvplanError as exc:
        key = next((name for name, (_, where) in draft.values.items() if where == exc.where), None)
        ctx.problems.append(Problem(VALID_VALUES, str(exc), key))
        ctx.blocked = "a value is invalid (see KV004)"
        return [ctx]
    ctx.dep = dep
    ctx.reached.add(VALUES)
    if problems:
        ctx.blocked = "a requirement is invalid (see KV004)"
        return [ctx]
    return _planned(ctx, dep, planner)


def _planned(ctx: Context, dep: Deployment, planner: Planner) -> list[Context]:
    from kvplan.api import gpu_choices
    from kvplan.plan import GpuChoice

    if "model" in ctx.waiting:
        ctx.blocked = ctx.waiting["model"]
        return [ctx]
    if dep.model is None:
        ctx.problems.append(Problem(ModelResolvable.id, "no model given: name one with model: (or the command's model)",
                                    "model"))
        ctx.blocked = "no model (see KV001)"
        return [ctx]
    choices: list[GpuChoice] = []
    unknown_gpu = dep.gpu is None and dep.gpu_memory_bytes is None and dep.kv_cache_memory_bytes is None
    if unknown_gpu:
        ctx.blocked = "no GPU known: pass --gpu or add kvplan: {gpu: ...} to the file"
    else:
        try:
            choices = gpu_choices(dep)
        except KvplanError as exc:
            ctx.problems.append(Problem(GpuKnown.id, str(exc), "gpu"))
            ctx.blocked = "the GPU is unknown (see KV006)"
    try:
        ctx.spec = planner.spec(dep)
    except KvplanError as exc:
        ctx.unresolved = int(not planner.strict and unresolvable(dep.model, exc))
        hint = "; the rules that need the model are skipped (--strict fails them)" if ctx.unresolved else ""
        ctx.problems.append(Problem(ModelResolvable.id, str(exc) + hint, "model"))
        ctx.blocked = "the model cannot be resolved (see KV001)" if ctx.unresolved else \
            "the model cannot be read (see KV001)"
        return [ctx]
    ctx.reached.add(MODEL)
    if ctx.waiting:  # a knob waits for a deploy-time value: the rules that need it cannot judge the plan
        if choices:
            ctx.gpu = choices[0]
            ctx.reached.add(GPU)
        ctx.blocked = "; ".join(dict.fromkeys(ctx.waiting.values()))
        return [ctx]
    if not choices:
        _engine_rules(ctx, dep, GpuChoice("unknown", "unknown GPU", 0, dep.gpu_count))
        return [ctx]
    ctx.reached.add(GPU)
    ladder = tuple(sorted({at["context"] for at in ctx.requirements.get("min_requests_at", [])}))
    planned = []
    for choice in choices:
        one = replace(ctx, name=ctx.name if len(choices) == 1 else f"{ctx.name} [{choice.id}]", gpu=choice,
                      problems=list(ctx.problems), reached=set(ctx.reached))
        try:
            one.plan = planner.plan(dep, one.spec, choice, ladder)  # type: ignore[arg-type]
            one.reached.update((ENGINE, PLAN))
        except KvplanError as exc:
            one.problems.append(_engine_problem(exc, dep))
            one.blocked = "the engine would refuse the deployment (KV004, KV005)"
        planned.append(one)
    return planned


def _engine_rules(ctx: Context, dep: Deployment, gpu: GpuChoice) -> None:
    """Without a GPU, the engine's own refusals that need only the model: tensor-parallel divisions, a
    max_model_len beyond the model's own."""
    from kvplan.deployment.knobs import AUTO
    from kvplan.deployment.rules import check
    from kvplan.engines.common import check_max_model_len

    assert ctx.spec is not None
    try:
        check(dep, ctx.spec, gpu)
        if dep.max_model_len != AUTO:
            check_max_model_len(ctx.spec, dep)
        ctx.reached.add(ENGINE)
    except KvplanError as exc:
        ctx.problems.append(_engine_problem(exc, dep))


def _engine_problem(exc: KvplanError, dep: Deployment) -> Problem:
    """A refusal of the engine, under the rule its code names; the key is the knob its location names."""
    key = next((name for name in dep.origins if exc.where == dep.where(name)), None)
    if exc.code == PARALLEL_SPLIT:
        key = key or next((n for n in ("tensor_parallel_size", "pipeline_parallel_size") if exc.where == dep.where(n)),
                          None)
        return Problem(ParallelAccepted.id, str(exc), key)
    return Problem(VALID_VALUES, str(exc), key)


def _requirements(item: Item) -> tuple[dict[str, Any], list[Problem]]:
    from kvplan.check.requirements import read_requirements

    if not item.requirements:
        return {}, []
    values, problems = read_requirements(item.requirements)
    return values, [Problem(VALID_VALUES, message, key) for key, message in problems]


def _model_config(item: Item) -> Context:
    """A config.json: its spec, KV bytes per token at the dtype it is served in, and its layer layout."""
    from pathlib import Path

    from kvplan.deployment import Deployment
    from kvplan.engines.common import model_dtype
    from kvplan.models.sources import read_local
    from kvplan.units import dtype_bytes

    ctx = Context(item, item.name)
    assert item.model_config is not None
    try:
        spec = read_local(Path(item.model_config))
    except KvplanError as exc:
        ctx.problems.append(Problem(ModelConfigComplete.id, str(exc)))
        return ctx
    dtype, _ = model_dtype(spec, Deployment())
    per_token = spec.kv_bytes_per_token(dtype_bytes(dtype))
    ctx.spec = spec
    ctx.model_note = (f"{spec.architecture}: {per_token:,} KV bytes per token in {dtype}; {spec.num_layers} layers "
                      f"({spec.attention}), {spec.num_kv_heads} KV heads of {spec.head_dim}, max context "
                      f"{spec.max_context:,}")
    return ctx
