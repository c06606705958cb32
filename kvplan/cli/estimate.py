"""kvplan estimate: parse flags, call the core, render."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from kvplan.cli.options import JsonFlag, RevisionOpt, TokenOpt
from kvplan.errors import KvplanError
from kvplan.units import parse_human_int

HELP = "KV blocks, tokens and concurrency a deployment gets, as the engine will allocate them."
EPILOG = ("Examples:  kvplan estimate --model Qwen/Qwen2.5-7B --gpu rtx3090 · "
          "kvplan estimate --model meta-llama/Llama-3.1-70B --gpu h100 -tp 4 --kv-cache-dtype fp8 --json · "
          "kvplan estimate --model ./config.json --gpu-memory 24GiB --engine simple")


def _speculative(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise KvplanError(f"invalid JSON: {exc.msg} at column {exc.colno}", "--speculative-config") from None
    if not isinstance(value, dict):
        raise KvplanError("expected a JSON object such as '{\"method\": \"eagle\", \"num_speculative_tokens\": 3}'",
                          "--speculative-config")
    return value


def _env_switch(name: str) -> bool | None:
    """vLLM's own environment switches, honoured when set: '0' / '1'."""
    import os

    value = os.environ.get(name)
    if value is None or value == "":
        return None
    if value not in ("0", "1"):
        raise KvplanError(f"must be 0 or 1, got {value!r}", name)
    return value == "1"


def _contexts(text: str | None) -> list[int] | None:
    if not text:
        return None
    values = [parse_human_int(part, "--context") for part in text.split(",") if part.strip()]
    if any(v is None or v < 1 for v in values):
        raise KvplanError("contexts must be positive integers", "--context")
    return [v for v in values if v is not None]


def estimate(
    model: Annotated[str, typer.Option("--model", "-m", help="Bundled id, local config.json or directory, or Hub id.",
                                       show_default=False)],
    gpu: Annotated[str | None, typer.Option("--gpu", help="Catalogue id or alias; comma-separated to compare.")] = None,
    gpu_memory: Annotated[str | None, typer.Option("--gpu-memory", help="Device memory instead of --gpu: bytes, "
                                                   "24GB (10^9) or 24GiB (2^30).")] = None,
    engine: Annotated[str, typer.Option("--engine", help="vllm, sglang, trtllm or simple.")] = "vllm",
    vllm_version: Annotated[str | None, typer.Option("--vllm-version", help="Era of vLLM's accounting, e.g. 0.11; "
                                                     "default the newest.")] = None,
    dtype: Annotated[str, typer.Option("--dtype")] = "auto",
    kv_cache_dtype: Annotated[str, typer.Option("--kv-cache-dtype")] = "auto",
    quantization: Annotated[str | None, typer.Option("--quantization", "-q")] = None,
    block_size: Annotated[int | None, typer.Option("--block-size")] = None,
    tensor_parallel_size: Annotated[int, typer.Option("--tensor-parallel-size", "-tp")] = 1,
    pipeline_parallel_size: Annotated[int, typer.Option("--pipeline-parallel-size", "-pp")] = 1,
    gpu_memory_utilization: Annotated[float | None, typer.Option("--gpu-memory-utilization")] = None,
    max_model_len: Annotated[str | None, typer.Option("--max-model-len")] = None,
    max_num_seqs: Annotated[int | None, typer.Option("--max-num-seqs")] = None,
    max_num_batched_tokens: Annotated[str | None, typer.Option("--max-num-batched-tokens")] = None,
    kv_cache_memory: Annotated[str | None, typer.Option("--kv-cache-memory", "--kv-cache-memory-bytes",
                                                        help="KV pool size; skips profiling as vLLM does.")] = None,
    enforce_eager: Annotated[bool, typer.Option("--enforce-eager")] = False,
    speculative_config: Annotated[str | None, typer.Option("--speculative-config", help="JSON, as vLLM takes it.")] = None,
    weights_memory: Annotated[str | None, typer.Option("--weights-memory", help="Measured weights size.")] = None,
    reserve: Annotated[str | None, typer.Option("--reserve", help="simple engine: memory held back (default 1GB).")] = None,
    context: Annotated[str | None, typer.Option("--context", help="Context lengths for the ladder, e.g. 4K,32K.")] = None,
    suggest: Annotated[bool, typer.Option("--suggest", help="Show levers even when the deployment fits.")] = False,
    json_output: JsonFlag = False,
    revision: RevisionOpt = None,
    token: TokenOpt = None,
) -> int:
    from dataclasses import replace

    from kvplan.deployment import Deployment
    from kvplan.engines import estimate as plan_for
    from kvplan.hardware import find_gpu
    from kvplan.models.sources import resolve
    from kvplan.plan import GpuChoice
    from kvplan.units import parse_size

    if gpu is None and gpu_memory is None and kv_cache_memory is None:
        raise KvplanError("say which GPU: --gpu ID (kvplan gpus lists them) or --gpu-memory SIZE", "--gpu")
    if gpu is not None and gpu_memory is not None:
        raise KvplanError("give --gpu or --gpu-memory, not both", "--gpu-memory")
    deployment = Deployment(
        engine=engine.lower(), engine_version=vllm_version, dtype=dtype.lower(), kv_cache_dtype=kv_cache_dtype.lower(),
        quantization=quantization, block_size=block_size, tensor_parallel_size=tensor_parallel_size,
        pipeline_parallel_size=pipeline_parallel_size, gpu_memory_utilization=gpu_memory_utilization,
        max_model_len=parse_human_int(max_model_len, "--max-model-len"), max_num_seqs=max_num_seqs,
        max_num_batched_tokens=parse_human_int(max_num_batched_tokens, "--max-num-batched-tokens"),
        kv_cache_memory_bytes=parse_size(kv_cache_memory, "--kv-cache-memory") if kv_cache_memory else None,
        enforce_eager=enforce_eager, speculative_config=_speculative(speculative_config),
        weights_memory_bytes=parse_size(weights_memory, "--weights-memory") if weights_memory else None,
        reserve_bytes=parse_size(reserve, "--reserve") if reserve is not None else None,
        estimate_cudagraphs=_env_switch("VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS"),
    )
    if engine.lower() != "vllm" and vllm_version is not None:
        raise KvplanError("--vllm-version applies to --engine vllm only", "--vllm-version")
    ladder = _contexts(context)
    count = tensor_parallel_size * pipeline_parallel_size
    choices: list[tuple[GpuChoice, str | None]] = []
    if gpu is not None:
        for name in [part.strip() for part in gpu.split(",") if part.strip()]:
            found = find_gpu(name)
            choices.append((GpuChoice(found.id, found.name, found.memory_bytes, count), found.compute_capability))
    else:
        size = parse_size(gpu_memory, "--gpu-memory") if gpu_memory else 0
        choices.append((GpuChoice("custom", f"custom GPU ({gpu_memory or 'unspecified'})", size, count), None))
    if not choices:
        raise KvplanError("no GPU named", "--gpu")

    spec = resolve(model, revision, token)
    results = []
    for choice, cc in choices:
        dep = replace(deployment, gpu_memory_bytes=choice.memory_bytes)
        plan = plan_for(spec, dep, choice, cc, ladder)
        lever_list = []
        if suggest or not plan.capacity.fits:
            from kvplan.levers import levers

            lever_list = levers(spec, dep, choice, cc, plan)
        results.append((plan, lever_list))

    if json_output:
        from dataclasses import asdict

        from kvplan.cli.output import print_json

        documents = []
        for plan, lever_list in results:
            document = plan.to_dict()
            if lever_list:
                document["levers"] = [asdict(lever) for lever in lever_list]
            documents.append(document)
        print_json(documents if len(documents) > 1 else documents[0])
    else:
        from kvplan.cli.output import console
        from kvplan.cli.render import render_comparison, render_plan

        for plan, lever_list in results:
            console.print(render_plan(plan, lever_list))
        if len(results) > 1:
            console.print(render_comparison([plan for plan, _ in results]))
    return 0 if any(plan.capacity.fits for plan, _ in results) else 1
