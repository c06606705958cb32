"""kvplan estimate: gather the deployment from the front doors, call the core, render."""

from typing import TYPE_CHECKING, Annotated, Any

import typer

from kvplan.cli.options import (
    TAKES_LAUNCH_LINE,
    ConfigOpt,
    EngineOpt,
    JsonFlag,
    ModelOpt,
    RevisionOpt,
    TokenOpt,
    VllmVersionOpt,
    deployment_of,
)

if TYPE_CHECKING:
    from kvplan.api import Estimate

HELP = "KV blocks, tokens and concurrency a deployment gets, as the engine will allocate them."
EPILOG = (
    "Engine flags are vLLM's (dashes or underscores, --flag=value, -tp/-pp/-dp, 32K = 32,768): --dtype, "
    "--kv-cache-dtype, --quantization/-q, --block-size, --tensor-parallel-size/-tp, --pipeline-parallel-size/-pp, "
    "--data-parallel-size/-dp, --gpu-memory-utilization, --max-model-len, --max-num-seqs, --max-num-batched-tokens, "
    "--kv-cache-memory-bytes, --enforce-eager, --speculative-config JSON; with --engine sglang or trtllm their own "
    "names work too (--mem-fraction-static, --context-length, --free-gpu-memory-fraction, ...). kvplan's own: "
    "--weights-memory SIZE, --reserve SIZE (simple engine). "
    "Examples:  kvplan estimate --model Qwen/Qwen2.5-7B --gpu rtx3090 · "
    "kvplan estimate --gpu h100 -- vllm serve Qwen/Qwen2.5-7B --max-model-len 32768 -tp 2 · "
    "kvplan estimate --gpu h100 --config serve.yaml · "
    "kvplan estimate --model meta-llama/Llama-3.1-70B --gpu h100,h200 -tp 4 --json.  "
    "Exit codes: 0 every GPU named serves one max_model_len request; 1 computed, but at least one cannot; "
    "2 bad input. With several GPUs --json prints a list, one plan per GPU."
)
CONTEXT = TAKES_LAUNCH_LINE

TAKES_PASTED = True
ENDS_AT_ONCE = True  # reads and prints, leaves nothing open (kvplan.cli.app.end)


def estimate(
    ctx: typer.Context,
    model: ModelOpt = None,
    gpu: Annotated[str | None, typer.Option("--gpu", help="Catalogue id or alias; comma-separated to compare.")] = None,
    gpu_memory: Annotated[str | None, typer.Option("--gpu-memory", help="Device memory instead of --gpu: 24GiB "
                                                   "(2^30), 24G (vLLM's 2^30) or 24GB (10^9).")] = None,
    engine: EngineOpt = None,
    vllm_version: VllmVersionOpt = None,
    entrypoint: Annotated[str | None, typer.Option("--entrypoint", help="vLLM entry point whose batch defaults "
                                                   "apply: serve (vllm serve, default) or llm (offline LLM class).",
                                                   show_default=False)] = None,
    config: ConfigOpt = None,
    context: Annotated[str | None, typer.Option("--context", help="Context lengths for the ladder, e.g. 4K,32K.")] = None,
    suggest: Annotated[bool, typer.Option("--suggest", help="Show levers even when the deployment fits.")] = False,
    schema: Annotated[bool, typer.Option("--schema", help="Print the deployment's JSON Schema and exit.")] = False,
    json_output: JsonFlag = False,
    revision: RevisionOpt = None,
    token: TokenOpt = None,
) -> int:
    from kvplan.cli.output import print_json

    if schema:
        from kvplan.deployment.schema import json_schema

        print_json(json_schema())
        return 0

    from kvplan.api import estimates
    from kvplan.units import parse_contexts

    deployment = deployment_of(ctx, config, model=(model, "--model"), gpu=(gpu, "--gpu"),
                               gpu_memory_bytes=(gpu_memory, "--gpu-memory"), engine=(engine, "--engine"),
                               engine_version=(vllm_version, "--vllm-version"),
                               entrypoint=(entrypoint, "--entrypoint"), revision=(revision, "--revision"))
    results = estimates(deployment, tuple(parse_contexts(context, "--context")), suggest, token)

    if json_output:
        print_json(json_document(results))
    else:
        import sys

        from kvplan.cli.render import render_comparison, render_plan

        for result in results:
            sys.stdout.write(render_plan(result.plan, result.levers))
        if len(results) > 1:
            from kvplan.cli.output import console

            console().print(render_comparison([result.plan for result in results]))
    return 0 if all(result.plan.capacity.fits for result in results) else 1


def json_document(results: "list[Estimate]") -> Any:
    """The --json document (and kvplan serve's): one plan's, or a list of them when several GPUs are named."""
    documents = [result.to_dict() for result in results]
    return documents if len(documents) > 1 else documents[0]


COMMAND = estimate
