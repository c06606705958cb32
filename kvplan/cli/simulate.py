"""kvplan simulate: build the deployment's plan, read or generate the workload, play it through the allocators,
render."""

from typing import TYPE_CHECKING, Annotated

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
    from kvplan.deployment import Deployment
    from kvplan.plan import Plan
    from kvplan.simulate.report import SimulationReport

HELP = "Play a workload through a plan's KV pool: contiguous reservation against paging, request by request."
EPILOG = (
    "The deployment is given as for kvplan estimate (--model/--gpu and vLLM's engine flags, --config, or a pasted "
    "'-- vllm serve ...'); --kv-cache-memory SIZE sets the pool instead, block bytes still from the model. "
    "Distributions: fixed:L, uniform:A-B, lognormal:MEAN,SIGMA (MEAN in tokens), zipf:THETA,MIN-MAX. The defaults, "
    "lognormal:1155,0.5 prompts and lognormal:211,1.0 outputs, match the mean and median of the Azure "
    "conversation trace (examples/traces/). A trace (--trace FILE) is CSV or JSON Lines: prompt_len,output_len"
    "[,arrival,n,beam_width,prefix_id,prefix_len], Azure's TIMESTAMP,ContextTokens,GeneratedTokens or Vidur's "
    "arrived_at,num_prefill_tokens,num_decode_tokens. Time runs in engine steps; arrival times are mapped onto "
    "steps by --step-time A_MS,B_MS_PER_1K_TOKENS, by default the GPU datasheet's roofline (weights read once "
    "per step, 2 FLOPs per parameter per token), which real steps exceed.  "
    "Examples:  kvplan simulate --model Qwen/Qwen2.5-7B --gpu rtx3090 --max-model-len 4096 --requests 2000 · "
    "kvplan simulate --model Qwen/Qwen2.5-7B --gpu h100 --n 4 --prompt-len fixed:2000 --output-len fixed:200 · "
    "kvplan simulate --gpu h100 --trace examples/traces/AzureLLMInferenceTrace_conv.csv -- vllm serve "
    "Qwen/Qwen2.5-7B --max-model-len 8192.  Exit codes: 0 simulated; 2 bad input."
)
CONTEXT = TAKES_LAUNCH_LINE

TAKES_PASTED = True
ENDS_AT_ONCE = True  # reads and prints, leaves nothing open (kvplan.cli.app.end)


def simulate(
    ctx: typer.Context,
    model: ModelOpt = None,
    gpu: Annotated[str | None, typer.Option("--gpu", help="Catalogue id or alias.")] = None,
    gpu_memory: Annotated[str | None, typer.Option("--gpu-memory", help="Device memory instead of --gpu.")] = None,
    engine: EngineOpt = None,
    vllm_version: VllmVersionOpt = None,
    config: ConfigOpt = None,
    kv_cache_memory: Annotated[str | None, typer.Option("--kv-cache-memory", help="The KV pool's size, instead of "
                                                        "the plan's: 8GiB, 8G (2^30) or 8GB (10^9).")] = None,
    requests: Annotated[int, typer.Option("--requests", help="Synthetic requests.")] = 1000,
    prompt_len: Annotated[str, typer.Option("--prompt-len", help="Prompt lengths (after any shared prefix).")]
    = "lognormal:1155,0.5",
    output_len: Annotated[str, typer.Option("--output-len", help="Output lengths.")] = "lognormal:211,1.0",
    n: Annotated[int, typer.Option("--n", help="Parallel samples per request.")] = 1,
    beam_width: Annotated[int, typer.Option("--beam-width", help="Beam search width.")] = 1,
    shared_prefix: Annotated[int, typer.Option("--shared-prefix", help="Tokens of a shared system prompt that "
                                               "starts each request.")] = 0,
    prefix_groups: Annotated[int, typer.Option("--prefix-groups", help="Distinct shared prompts.")] = 1,
    rate: Annotated[float | None, typer.Option("--rate", help="Poisson arrivals, requests/s; default all at "
                                               "once.")] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the synthetic workload.")] = 0,
    trace: Annotated[str | None, typer.Option("--trace", help="A recorded workload, CSV or JSON Lines.")] = None,
    step_time: Annotated[str | None, typer.Option("--step-time", help="A_MS,B_MS_PER_1K_TOKENS: one step's time.")]
    = None,
    allocators: Annotated[str, typer.Option("--allocators", help="Comma-separated.")]
    = "contiguous-max,contiguous-pow2,contiguous-oracle,paged",
    prefix_caching: Annotated[bool, typer.Option("--prefix-caching/--no-prefix-caching",
                                                 help="Paged: reuse cached full blocks of shared prefixes.")] = True,
    plot: Annotated[str | None, typer.Option("--plot", help="Also write the chart to FILE.png (matplotlib).")] = None,
    json_output: JsonFlag = False,
    revision: RevisionOpt = None,
    token: TokenOpt = None,
) -> int:
    from kvplan.simulate.cli_inputs import allocator_names, check_plot_path, workload_from_options
    from kvplan.simulate.pool import parse_step_time
    from kvplan.simulate.runner import simulate_plan

    names = allocator_names(allocators)
    if plot is not None:
        check_plot_path(plot)
    timing = parse_step_time(step_time) if step_time is not None else None
    workload = workload_from_options(trace=trace, requests=requests, prompt_len=prompt_len, output_len=output_len,
                                     n=n, beam_width=beam_width, shared_prefix=shared_prefix,
                                     prefix_groups=prefix_groups, rate=rate, seed=seed)
    deployment = deployment_of(ctx, config, model=(model, "--model"), gpu=(gpu, "--gpu"),
                               gpu_memory_bytes=(gpu_memory, "--gpu-memory"), engine=(engine, "--engine"),
                               engine_version=(vllm_version, "--vllm-version"), revision=(revision, "--revision"),
                               kv_cache_memory_bytes=(kv_cache_memory, "--kv-cache-memory"))
    plan = _one_plan(deployment, token)
    report = simulate_plan(plan, workload, names, kv_cache_bytes=deployment.kv_cache_memory_bytes,
                           prefix_caching=prefix_caching, step_time=timing)
    if plot is not None:
        from kvplan.simulate.report import write_plot

        write_plot(report, plot)
    _print(report, json_output, None if deployment.kv_cache_memory_bytes is not None else plan.error)
    return 0


def _one_plan(deployment: "Deployment", token: str | None) -> "Plan":
    from kvplan.api import estimates
    from kvplan.errors import KvplanError

    results = estimates(deployment, (), False, token)
    if len(results) > 1:
        raise KvplanError("simulate plays one GPU at a time; name one", "--gpu")
    return results[0].plan


def _print(report: "SimulationReport", json_output: bool, plan_error: str | None) -> None:
    """The report, for scripts or people; plan_error: why the plan itself would not serve (said on stderr)."""
    if json_output:
        from kvplan.cli.output import print_json

        print_json(report.to_dict())
        return
    import sys

    from kvplan.cli.output import terminal_width
    from kvplan.simulate.report import render_text

    if plan_error:
        sys.stderr.write(f"kvplan: note: {plan_error}\n")
    sys.stdout.write(render_text(report, terminal_width()))


COMMAND = simulate
