"""Each endpoint's answer: the request through the core, in the order kvplan/cli calls it, as the document the
CLI prints with --json (and the exit code the CLI would return). No FastAPI here: simulate and size run these in a
worker process."""

from __future__ import annotations

import os
import tempfile
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any

from kvplan.errors import KvplanError
from kvplan.serve.errors import ApiError
from kvplan.serve.request import Request

if TYPE_CHECKING:
    from kvplan.api import Estimate

MAX_SIMULATED_REQUESTS = 20_000  # benchmarks/simulate.py's largest workload: about 2 s on one core


@dataclass
class Answer:
    document: Any
    exit_code: int


def estimate_results(request: Request) -> list[Estimate]:
    from kvplan.api import estimates
    from kvplan.units import parse_contexts

    deployment = request.deployment()
    contexts = tuple(parse_contexts(request.option("context"), request.flag_of("context")))
    return estimates(deployment, contexts, request.option("suggest"), None)


def estimate(request: Request) -> Answer:
    from kvplan.cli.estimate import json_document

    results = estimate_results(request)
    return Answer(json_document(results), 0 if all(result.plan.capacity.fits for result in results) else 1)


def size(request: Request) -> Answer:
    from kvplan.sizing import size_deployment
    from kvplan.sizing.prices import parse_price_flags
    from kvplan.sizing.targets import parse_targets
    from kvplan.units import parse_size

    option = request.option
    targets = parse_targets(option("target") or [], request.flag_of("target"))
    top = option("top")
    if not 1 <= top <= 1000:  # typer's min and max on --top
        raise ApiError(f"must be from 1 to 1000, got {top}", request.fields.get("--top", "top"))
    priced = parse_price_flags(option("price"), request.flag_of("price")) if option("price") else None
    host = option("host_memory")
    host_bytes = parse_size(host, request.flag_of("host_memory")) if host is not None else None
    sizing = size_deployment(request.deployment(), targets, option("gpus"), option("max_gpus"),
                             option("gpus_per_node"), option("kv_cache_dtype"), option("quantization"), priced, None,
                             host_bytes)
    return Answer(sizing.to_dict(top), 0 if sizing.found else 1)


def simulate(request: Request) -> Answer:
    from kvplan.api import estimates
    from kvplan.simulate.cli_inputs import allocator_names, workload_from_options
    from kvplan.simulate.pool import parse_step_time
    from kvplan.simulate.runner import simulate_plan

    option = request.option
    if option("requests") > MAX_SIMULATED_REQUESTS:
        raise ApiError(f"at most {MAX_SIMULATED_REQUESTS:,} requests over HTTP (kvplan simulate takes more)",
                       request.fields.get("--requests", "requests"), 422)
    names = allocator_names(option("allocators"))
    timing = parse_step_time(option("step_time")) if option("step_time") is not None else None
    workload = workload_from_options(trace=None, requests=option("requests"), prompt_len=option("prompt_len"),
                                     output_len=option("output_len"), n=option("n"), beam_width=option("beam_width"),
                                     shared_prefix=option("shared_prefix"), prefix_groups=option("prefix_groups"),
                                     rate=option("rate"), seed=option("seed"))
    deployment = request.deployment()
    results = estimates(deployment, (), False, None)
    if len(results) > 1:
        raise KvplanError("simulate plays one GPU at a time; name one", request.flag_of("gpu"))
    report = simulate_plan(results[0].plan, workload, names, kv_cache_bytes=deployment.kv_cache_memory_bytes,
                           prefix_caching=option("prefix_caching"), step_time=timing)
    return Answer(report.to_dict(), 0)


def check(text: str, name: str, gpu: str | None, kind: str | None, select: str | None, ignore: str | None) -> Answer:
    """check's JSON findings for one file's text, named as the user named it."""
    import json

    from kvplan.check import Options, check_paths
    from kvplan.check.findings import exit_code
    from kvplan.check.reporters import REPORTERS

    def codes(text: str | None) -> list[str]:
        return [code.strip() for code in (text or "").split(",") if code.strip()]

    if gpu is not None:
        from kvplan.hardware import find_gpu

        try:
            find_gpu(gpu)  # as the CLI does: a GPU named once, up front, not blamed on every deployment
        except KvplanError as exc:
            raise ApiError(exc.message, "gpu") from None
    if kind is not None:
        from kvplan.check.kinds import kind_named

        try:
            kind_named(kind)
        except KvplanError as exc:
            raise ApiError(exc.message, "kind") from None
    with tempfile.TemporaryDirectory(prefix="kvplan-serve-") as folder:
        path = os.path.join(folder, name)
        with open(path, "w", encoding="utf-8") as out:
            out.write(text)
        try:
            report = check_paths([path], Options(gpu, kind, codes(select), codes(ignore)))
        except KvplanError as exc:
            raise ApiError(exc.message, (exc.where or "").lstrip("-") or None) from None
        report.findings = [replace(finding, file=name, message=finding.message.replace(path, name))
                           for finding in report.findings]
    return Answer(json.loads(REPORTERS["json"]().render(report)), exit_code(report.findings))


def gpus() -> Answer:
    from kvplan.api import gpus as catalogue

    return Answer([asdict(gpu) for gpu in catalogue()], 0)


def models() -> Answer:
    from kvplan.cli.models import model_rows

    rows, _skipped = model_rows()
    return Answer(rows, 0)
