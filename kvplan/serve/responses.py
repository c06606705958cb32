"""The OpenAPI description of the answers, generated from the code that writes the CLI's documents. A dataclass a
document serialises with asdict (GpuChoice, EngineSettings, Memory, Capacity, LadderRung, Lever, Gpu, Finding)
becomes a model of its fields, typed by its annotations; a key a document writes itself (Plan.to_dict's
"parallel", "kv", "replicas"; size's options; simulate's report) is declared with the attribute it is read from,
and takes that attribute's annotation. Every model is closed (no other keys) and every key is required, so
tests/test_serve_schema.py, which validates real answers against the served /openapi.json, fails when a
document gains, loses or retypes a key this file does not know."""

from __future__ import annotations

import dataclasses
import types
import typing
from functools import cache
from typing import Any, Union

from pydantic import BaseModel, ConfigDict, create_model

CLOSED = ConfigDict(extra="forbid")
Source = tuple[type, str]  # (class, attribute): the key's type is the attribute's annotation


def _annotation(cls: type, attribute: str) -> Any:
    """A dataclass field's annotation, or a property's return annotation."""
    found = getattr(cls, attribute, None)
    if isinstance(found, property) and found.fget is not None:
        return typing.get_type_hints(found.fget)["return"]
    return typing.get_type_hints(cls)[attribute]


def listed(item: Any) -> Any:
    """A JSON array of item (a runtime type, built from models made at run time)."""
    return list[item]


def either(*options: Any) -> Any:
    return Union[options]  # noqa: UP007 (a runtime tuple of types)


def _json(annotation: Any, exclude: tuple[str, ...] = ()) -> Any:
    """The type of a value once asdict and json.dumps have written it: dataclasses as their models, tuples as
    lists."""
    if dataclasses.is_dataclass(annotation) and isinstance(annotation, type):
        return model(annotation, exclude)
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is tuple:
        items = [_json(arg) for arg in args if arg is not Ellipsis]
        return listed(either(*items)) if items else list[Any]
    if origin is list:
        return listed(_json(args[0])) if args else list[Any]
    if origin is dict:
        return dict[str, Any]
    if origin is Union or isinstance(annotation, types.UnionType):
        return either(*(_json(arg) for arg in args))
    return annotation


@cache
def model(cls: type, exclude: tuple[str, ...] = (), name: str | None = None) -> type[BaseModel]:
    """The closed model of a dataclass as asdict writes it, less the excluded fields."""
    fields: dict[str, Any] = {field.name: (_json(_annotation(cls, field.name)), ...)
                              for field in dataclasses.fields(cls) if field.name not in exclude}
    return create_model(name or cls.__name__, __config__=CLOSED, __doc__=cls.__doc__, **fields)


def _typed(value: Any) -> Any:
    return _json(_annotation(*value)) if isinstance(value, tuple) else value


def shape(title: str, doc: str, /, **keys: Any) -> type[BaseModel]:
    """A closed model of a document's own keys: each a (class, attribute) whose annotation types it, or a type."""
    fields: dict[str, Any] = {key: (_typed(value), ...) for key, value in keys.items()}
    return create_model(title, __config__=CLOSED, __doc__=doc, **fields)


def optional(title: str, doc: str, required: dict[str, Any], extra: dict[str, Any]) -> type[BaseModel]:
    """A closed model with keys a document writes only sometimes (extra: key -> type, absent allowed)."""
    fields: dict[str, Any] = {key: (_typed(value), ...) for key, value in required.items()}
    fields.update({key: (value, None) for key, value in extra.items()})
    return create_model(title, __config__=CLOSED, __doc__=doc, **fields)


class ErrorBody(BaseModel):
    """Every user mistake: one line, and the field as it was sent (null when no one field is to blame)."""

    model_config = CLOSED
    error: str
    field: str | None


@cache
def plan() -> type[BaseModel]:
    """Plan.to_dict: one deployment's plan (kvplan/plan.py)."""
    from kvplan.capacity import PoolLayout, TokenPool
    from kvplan.models.model import ModelSpec, ParamCount
    from kvplan.plan import INTERNAL_SETTINGS, Capacity, EngineSettings, GpuChoice, Memory, Plan

    return shape(
        "Plan", "One GPU's plan: kvplan estimate --json for one GPU (Plan.to_dict).",
        model=shape("PlanModel", "The model's summary (ModelSpec.summary).", id=(ModelSpec, "id"),
                    num_layers=(ModelSpec, "num_layers"), kv_layers=(ModelSpec, "num_kv_layers"),
                    num_kv_heads=(ModelSpec, "num_kv_heads"), head_dim=(ModelSpec, "head_dim"),
                    attention=(ModelSpec, "attention"), params=(ParamCount, "total")),
        gpu=model(GpuChoice),
        parallel=shape("PlanParallel", "The parallel split.", tensor=(Plan, "tensor_parallel"),
                       pipeline=(Plan, "pipeline_parallel"), data=(Plan, "data_parallel")),
        engine=model(EngineSettings, INTERNAL_SETTINGS),
        kv=shape("PlanKv", "The KV cache's format and block.", dtype=(Plan, "kv_dtype"),
                 bytes_per_token=(PoolLayout, "bytes_per_token"), block_bytes=(PoolLayout, "block_bytes"),
                 groups=(PoolLayout, "num_groups"), padding_layers=(PoolLayout, "padding_layers")),
        memory=model(Memory),
        capacity=model(Capacity),
        replicas=shape("PlanReplicas", "What the data-parallel replicas hold together.", count=(Plan, "data_parallel"),
                       tokens=(Capacity, "tokens"), max_concurrency=(Capacity, "max_concurrency")),
        limiting_stage=(Plan, "limiting_stage"),
        pools=either(listed(shape("PlanPool", "One of SGLang's separate token pools.", name=(TokenPool, "name"),
                                  tokens=(TokenPool, "tokens"), bytes_per_token=(TokenPool, "bytes_per_token"))),
                     None),
        error=(Plan, "error"),
        notes=(Plan, "notes"),
    )


@cache
def estimate() -> type[BaseModel]:
    """Estimate.to_dict: the plan, and its levers when there are any (kvplan/api.py)."""
    from kvplan.levers import Lever

    return create_model("Estimate", __base__=plan(), __doc__="kvplan estimate --json for one GPU: the plan, and "
                        "levers when the deployment does not fit or --suggest asks.",
                        levers=(either(listed(model(Lever)), None), None))


def estimate_document() -> Any:
    """One GPU's estimate, or a list of them when several GPUs are named (kvplan.cli.estimate.json_document)."""
    return either(estimate(), listed(estimate()))


@cache
def working() -> type[BaseModel]:
    working = shape("Working", "The panel's lines (kvplan.cli.render).", formula=str, pool=str, knobs=str)
    return shape("EstimateWorking", "The page's answer: the estimate, its working and the CLI command.",
                 estimate=estimate_document(), working=listed(working), command=str)


@cache
def size() -> type[BaseModel]:
    """Sizing.to_dict (kvplan/sizing/search.py)."""
    from kvplan.deployment import Deployment
    from kvplan.hardware import Gpu
    from kvplan.sizing.formats import WeightFormat
    from kvplan.sizing.search import Option, Sizing, Split
    from kvplan.sizing.targets import Target

    option = shape(
        "SizeOption", "One candidate deployment and what it gets (Option.to_dict).", gpu=(Gpu, "id"),
        count=(Option, "count"), tensor_parallel_size=(Split, "tensor"), pipeline_parallel_size=(Split, "pipeline"),
        data_parallel_size=(Split, "data"), kv_cache_dtype=(Deployment, "kv_cache_dtype"),
        quantization=(Deployment, "quantization"), requests=(Option, "requests"), kv_tokens=(Option, "kv_tokens"),
        cost_per_hour=(Option, "cost_per_hour"), command=str, headroom=float,
        total_memory_bytes=(Option, "total_memory_bytes"), checkpoint=(WeightFormat, "checkpoint"),
        meets=(Option, "meets"), limits=(Option, "limits"), offload_tokens=(Option, "offload_tokens"),
        host_memory_bytes=(Option, "host_bytes"))
    return shape("Size", "kvplan size --json (Sizing.to_dict).", target=listed(model(Target)),
                 options=listed(option), best_per_gpu=listed(option), closest=listed(option),
                 refused=(Sizing, "refusals"), searched=(Sizing, "searched"), planned=(Sizing, "planned"),
                 pruned=(Sizing, "pruned"), ranked_by=str, notes=(Sizing, "notes"))


@cache
def simulate() -> type[BaseModel]:
    """SimulationReport.to_dict (kvplan/simulate/report.py), its allocators' Outcome.to_dict and Meter.summary."""
    from kvplan.models.model import ModelSpec
    from kvplan.plan import EngineSettings, GpuChoice
    from kvplan.simulate.pool import Pool, StepTime
    from kvplan.simulate.scheduler import Outcome

    scheduler = shape("SimulateScheduler", "The engine's scheduler limits.", max_model_len=(Pool, "max_model_len"),
                      max_num_seqs=(Pool, "max_num_seqs"), max_num_batched_tokens=(Pool, "max_num_batched_tokens"),
                      watermark_blocks=(Pool, "watermark_blocks"))
    step_time = shape("SimulateStepTime", "The step-time model.", fixed_ms=(StepTime, "fixed_ms"),
                      per_1k_tokens_ms=(StepTime, "per_1k_ms"), source=(StepTime, "source"))
    workload = optional("SimulateWorkload", "The workload (Workload.description).",
                        {"source": str, "requests": int, "prompt_len": str, "output_len": str, "sharing": str,
                         "arrivals": str, "seed": int},
                        {"shared_prefix": int | None, "prefix_groups": int | None,
                         "clipped_to_max_model_len": int | None})
    percent = float
    allocator = shape(
        "SimulateAllocator", "One allocator's run (Outcome.to_dict with Meter.summary).", name=(Outcome, "name"),
        completed=(Outcome, "completed"), rejected=(Outcome, "rejected"), preemptions=(Outcome, "preemptions"),
        steps=int, peak_running=int, mean_running=float, tokens_per_step=float, memory_bound_steps_pct=percent,
        split_over=str, token_states_pct=percent, reserved_pct=percent, internal_fragmentation_pct=percent,
        external_fragmentation_pct=percent, free_pct=percent, shared_saved_pct=percent, utilization_pct=percent,
        peak_allocated_bytes=int)
    return shape("Simulate", "kvplan simulate --json (SimulationReport.to_dict).", pool_bytes=(Pool, "pool_bytes"),
                 block_size=(Pool, "block_size"), block_bytes=(Pool, "block_bytes"), num_blocks=(Pool, "num_blocks"),
                 state_bytes_per_sequence=(Pool, "state_bytes"), scheduler=scheduler, step_time=either(step_time, None),
                 model=(ModelSpec, "id"), gpu=(GpuChoice, "name"), engine=(EngineSettings, "label"),
                 prefix_caching=bool, workload=workload, allocators=listed(allocator))


def check() -> Any:
    """check --format json: its findings (Finding.to_dict, kvplan/check/findings.py)."""
    from kvplan.check.findings import Finding

    return listed(model(Finding))


def gpus() -> Any:
    """gpus --json: the catalogue's Gpu records (kvplan/hardware.py)."""
    from kvplan.hardware import Gpu

    return listed(model(Gpu))


def models() -> Any:
    """models list --json: kvplan.cli.models' rows."""
    from kvplan.models.model import ModelSpec, ParamCount

    row = shape("ModelRow", "One bundled or user spec.", id=(ModelSpec, "id"), layers=(ModelSpec, "num_layers"),
                kv_layers=(ModelSpec, "num_kv_layers"), kv_heads=(ModelSpec, "num_kv_heads"),
                head_dim=(ModelSpec, "head_dim"), attention=(ModelSpec, "attention"), params=(ParamCount, "total"),
                params_exact=(ParamCount, "exact"), dtype=(ModelSpec, "dtype"), kv_dtype=str, kv_bytes_per_token=int,
                source=str)
    return listed(row)


def answers(document: Any, description: str) -> dict[int | str, dict[str, Any]]:
    """The route's responses: the document on 200 (1 in the exit header when it cannot serve), ErrorBody on
    a mistake."""
    mistake = {"model": ErrorBody}
    return {200: {"model": document, "description": description},
            400: {**mistake, "description": "A mistake in the request, naming the field as it was sent."},
            413: {**mistake, "description": "The body is over the size cap."},
            422: {**mistake, "description": "A request the server will not run (too many requests, too long)."},
            503: {**mistake, "description": "Too many size or simulate requests at once; try again."}}
