"""kvplan size: gather the deployment and the targets, call the search, render the options."""

import sys
from typing import TYPE_CHECKING, Annotated

import typer

from kvplan.cli.options import (
    TAKES_LAUNCH_LINE,
    ConfigOpt,
    JsonFlag,
    ModelOpt,
    RevisionOpt,
    TokenOpt,
    VllmVersionOpt,
    deployment_of,
)
from kvplan.sizing.command import launchable

if TYPE_CHECKING:
    from kvplan.sizing import Option, Sizing

HELP = "The cheapest deployments that meet every target, each as a launch command to paste."
EPILOG = (
    "A target N@CONTEXT is N requests of CONTEXT tokens each running at once (8K = 8,192); give several and every "
    "one must hold; max_model_len defaults to the largest context. Searched: every GPU in --gpus (default the whole "
    "catalogue, or every priced one), 1..--max-gpus GPUs, every TP x PP x DP split the engine accepts for the "
    "model (TP within one node), each --kv-cache-dtype and --quantization the GPU runs (no FP8 on GPUs without "
    "it). Engine flags, a --config file or a pasted launch command after -- fix what they name. "
    "Ranked by cost per hour when prices are given, else by GPU count, then total GPU memory; ties keep the most "
    "requests at the largest target context. "
    "Examples:  kvplan size -m Qwen/Qwen2.5-7B --target 32@8K · "
    "kvplan size -m meta-llama/Llama-3.1-70B --target 32@8K --target 4@128K --gpus h100,a100-80gb,l40s "
    "--price h100=2.9,a100-80gb=1.8,l40s=0.9 · kvplan size --target 16@32K --prices prices.yaml -- vllm serve "
    "Qwen/Qwen2.5-14B --max-num-seqs 64.  Exit codes: 0 found; 1 nothing meets every target (the closest are "
    "shown with what limits them); 2 bad input."
)
CONTEXT = TAKES_LAUNCH_LINE

TAKES_PASTED = True
ENDS_AT_ONCE = True  # reads and prints, leaves nothing open (kvplan.cli.app.end)


LAUNCHABLE = launchable()  # the engines whose launch lines size can print


def size(
    ctx: typer.Context,
    target: Annotated[list[str] | None, typer.Option("--target", help="N@CONTEXT: N requests of CONTEXT "
                                                     "tokens at once, e.g. 32@8K; repeat for more.",
                                                     show_default=False)] = None,
    model: ModelOpt = None,
    gpus: Annotated[str | None, typer.Option("--gpus", help="Catalogue GPUs to search, comma-separated; default "
                                             "all.")] = None,
    max_gpus: Annotated[int, typer.Option("--max-gpus", help="Most GPUs in one deployment.")] = 8,
    gpus_per_node: Annotated[int, typer.Option("--gpus-per-node", help="GPUs per node: the largest tensor-parallel "
                                               "size.")] = 8,
    engine: Annotated[str | None, typer.Option("--engine", help=f"{', '.join(LAUNCHABLE[:-1])} or "
                                                                f"{LAUNCHABLE[-1]}.")] = None,
    vllm_version: VllmVersionOpt = None,
    kv_cache_dtype: Annotated[str | None, typer.Option("--kv-cache-dtype", help="KV dtypes to try, e.g. auto,fp8 "
                                                       "(default auto,fp8).", show_default=False)] = None,
    quantization: Annotated[str | None, typer.Option("--quantization", help="Weight formats to try: none, fp8, awq, "
                                                     "gptq (awq and gptq: a 4-bit checkpoint; default none).",
                                                     show_default=False)] = None,
    price: Annotated[list[str] | None, typer.Option("--price", help="Price per GPU-hour: h100=2.9,l40s=0.9.",
                                                    show_default=False)] = None,
    prices: Annotated[str | None, typer.Option("--prices", help="A YAML file of 'gpu: price per hour' lines.",
                                               show_default=False)] = None,
    host_memory: Annotated[str | None, typer.Option("--host-memory", help="Host memory a node has for the CPU KV "
                                                    "tier the deployment keeps (e.g. 512GiB): an option whose "
                                                    "tier needs more meets nothing.", show_default=False)] = None,
    top: Annotated[int, typer.Option("--top", help="How many options to list.", min=1, max=1000)] = 5,
    config: ConfigOpt = None,
    json_output: JsonFlag = False,
    revision: RevisionOpt = None,
    token: TokenOpt = None,
) -> int:
    from kvplan.errors import KvplanError
    from kvplan.sizing import size_deployment
    from kvplan.sizing.prices import parse_price_flags, read_price_file
    from kvplan.sizing.targets import parse_targets
    from kvplan.units import parse_size

    targets = parse_targets(target or [], "--target")
    if price and prices:
        raise KvplanError("give prices as --price or in a --prices file, not both", "--prices")
    priced = parse_price_flags(price) if price else read_price_file(prices) if prices else None
    deployment = deployment_of(ctx, config, model=(model, "--model"), engine=(engine, "--engine"),
                               engine_version=(vllm_version, "--vllm-version"), revision=(revision, "--revision"))
    host = parse_size(host_memory, "--host-memory") if host_memory is not None else None
    sizing = size_deployment(deployment, targets, gpus, max_gpus, gpus_per_node, kv_cache_dtype, quantization,
                             priced, token, host)
    if json_output:
        from kvplan.cli.output import print_json

        print_json(sizing.to_dict(top))
    else:
        render(sizing, top)
    return 0 if sizing.found else 1


def _headroom(share: float) -> str:
    return f"x{share:.2f}" if share >= 0.01 else "x<0.01"


def _row(number: int, option: "Option", sizing: "Sizing", limits: bool, host: bool = False) -> list[str]:
    split = option.split
    row = [str(number), f"{option.count}x {option.gpu.id}", f"{split.tensor}/{split.pipeline}/{split.data}",
           option.deployment.kv_cache_dtype, option.deployment.quantization or "as stored",
           *(f"{got:,}" for got in option.requests), f"{option.kv_tokens:,}",
           _headroom(option.headroom(sizing.targets))]
    if host:
        row.append(f"{option.offload_tokens:,} / {option.host_bytes / 2**30:,.1f}")
    if sizing.priced:
        row.append(f"{option.cost_per_hour:,.2f}")
    if limits:
        row.append("; ".join(option.limits) or "-")
    return row


def _table(title: str, options: "list[Option]", sizing: "Sizing", first: int, limits: bool = False) -> None:
    from rich.table import Table

    from kvplan.cli.output import console

    host = any(option.host_bytes for option in options)  # a CPU KV tier: its tokens a replica, host memory in all
    table = Table(title=title, title_justify="left")
    columns = ["#", "GPUs", "TP/PP/DP", "KV", "weights", *(f"req @{t.context:,}" for t in sizing.targets),
               "KV tokens/replica", "headroom", *(["CPU tier tokens / host GiB"] if host else []),
               *(["cost/h"] if sizing.priced else []), *(["limited by"] if limits else [])]
    for column in columns:
        table.add_column(column, justify="left" if column in ("GPUs", "KV", "weights", "limited by") else "right")
    for number, option in enumerate(options, start=first):
        table.add_row(*_row(number, option, sizing, limits, host))
    console().print(table)
    # Commands as plain lines, never wrapped by the table, so that each can be pasted whole.
    sys.stdout.write("".join(f"  {number}  {option.command()}\n" for number, option in enumerate(options, first)))


def render(sizing: "Sizing", top: int) -> None:
    wanted = " and ".join(str(t) for t in sizing.targets)
    ranked = "cost per hour" if sizing.priced else "GPU count, then total GPU memory"
    if sizing.found:
        shown = sizing.options[:top]
        _table(f"Cheapest deployments for {wanted} at once (by {ranked})", shown, sizing, 1)
        others = [option for option in sizing.best_per_gpu if option not in shown]
        if others:
            sys.stdout.write("\n")
            _table("Best of each other GPU type", others, sizing, len(shown) + 1)
    else:
        sys.stdout.write(f"No deployment searched meets {wanted} at once.\n")
        if sizing.closest:
            _table("Closest, and what limits them", sizing.closest, sizing, 1, limits=True)
    if not sizing.found:
        for refusal in sizing.refusals:
            sys.stdout.write(f"refused by the engine: {refusal}\n")
    for note in sizing.notes:
        sys.stdout.write(f"note: {note}\n")
    sys.stdout.write(f"searched {sizing.searched:,} candidates: {sizing.planned:,} engine plans, {sizing.pruned:,} "
                     "skipped where a smaller KV dtype or weight format missed at the same split; larger counts of a "
                     "GPU not searched once one meets the targets\n")


COMMAND = size
