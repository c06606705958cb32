"""kvplan verify: gather the deployment from the front doors, hold its plan against the real device, render."""

from typing import TYPE_CHECKING, Annotated, Any

import typer

from kvplan.cli.interrupt import ctrl_c_exits_at_once
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

HELP = "Allocate the planned KV block pool on the real device and run a paged decode step over it."
EPILOG = (
    "Plans with estimate's rules for this device's real memory (torch.cuda.mem_get_info), stands in for the "
    "weights and working memory with real allocations, allocates the pool from the layer kinds' page shapes, "
    "runs a paged decode step through shuffled block tables and compares it with plain attention. Engine flags, "
    "--config and a pasted launch command after -- work as for estimate. --device cpu is a dry run whose pool is "
    "capped by --max-pool-bytes (plan for a GPU with --gpu / --gpu-memory). Needs torch: pip install "
    "'kvplan\\[verify]'. Examples:  kvplan verify --model Qwen/Qwen2.5-7B --probe · "
    "kvplan verify --device cpu --gpu h100 -- vllm serve Qwen/Qwen2.5-7B --max-model-len 32K · "
    "kvplan verify --nproc 2 -- vllm serve meta-llama/Llama-3.1-8B -tp 2.  "
    "Exit codes: 0 the plan held; 1 it did not (the pool did not fit, bytes differ, decode mismatch); "
    "2 bad input or no device."
)
CONTEXT = TAKES_LAUNCH_LINE

TAKES_PASTED = True


def verify(
    ctx: typer.Context,
    model: ModelOpt = None,
    device: Annotated[str | None, typer.Option("--device", help="cuda, cuda:N or cpu (a dry run); default the "
                                               "first GPU.", show_default=False)] = None,
    gpu: Annotated[str | None, typer.Option("--gpu", help="--device cpu only: plan for this catalogue GPU.")] = None,
    gpu_memory: Annotated[str | None, typer.Option("--gpu-memory", help="--device cpu only: plan for this much "
                                                   "device memory.")] = None,
    max_pool_bytes: Annotated[str, typer.Option("--max-pool-bytes", help="--device cpu: the most the pool may "
                                                "take.")] = "256MiB",
    no_weights: Annotated[bool, typer.Option("--no-weights", help="Allocate no stand-ins for weights and working "
                                             "memory: the pool against free memory alone.")] = False,
    probe: Annotated[bool, typer.Option("--probe", help="Search the largest pool that fits even when the plan "
                                        "fits.")] = False,
    kernel: Annotated[str, typer.Option("--kernel", help="gather, or flex (torch FlexAttention).")] = "gather",
    nproc: Annotated[int, typer.Option("--nproc", help="Processes, one per rank (tensor x pipeline parallel).")] = 1,
    batch: Annotated[int, typer.Option("--batch", help="Sequences in the decode step.")] = 8,
    context: Annotated[str, typer.Option("--context", help="Longest sequence of the decode batch.")] = "1K",
    engine: EngineOpt = None,
    vllm_version: VllmVersionOpt = None,
    config: ConfigOpt = None,
    json_output: JsonFlag = False,
    revision: RevisionOpt = None,
    token: TokenOpt = None,
) -> int:
    # Every check of the user's input comes before torch is imported (seconds), so a mistake fails at once.
    longest, cap = _checked_numbers(kernel, batch, context, max_pool_bytes)
    deployment = deployment_of(ctx, config, model=(model, "--model"), gpu=(gpu, "--gpu"),
                               gpu_memory_bytes=(gpu_memory, "--gpu-memory"), engine=(engine, "--engine"),
                               engine_version=(vllm_version, "--vllm-version"), revision=(revision, "--revision"))
    _check_dry_run_target(device, deployment)
    with ctrl_c_exits_at_once():  # torch's import holds nothing to free, and an interrupt inside it is no clean error
        from kvplan.verify import require_torch

        require_torch()
        from kvplan.verify.api import verify as run_verify
        from kvplan.verify.run import VerifyOptions

    options = VerifyOptions(deployment, device, cap, no_weights, probe, kernel, batch, longest, token=token,
                      show_progress=not json_output)
    document, code = run_verify(options, nproc)
    if document is not None:  # None: a torchrun rank other than 0
        _print(document, json_output)
    return code


def _checked_numbers(kernel: str, batch: int, context: str, max_pool_bytes: str) -> tuple[int, int]:
    """The decode's longest sequence and the pool cap, in tokens and bytes."""
    from kvplan.errors import KvplanError
    from kvplan.units import parse_human_int, parse_size

    if kernel not in ("gather", "flex"):
        raise KvplanError(f"unknown kernel {kernel!r}; choose gather or flex", "--kernel")
    if batch < 1 or batch > 4096:
        raise KvplanError(f"expected 1 to 4096 sequences, got {batch}", "--batch")
    longest = parse_human_int(context, "--context") or 0
    if longest < 1 or longest > 2**24:
        raise KvplanError(f"expected 1 to 16M tokens, got {context!r}", "--context")
    cap = parse_size(max_pool_bytes, "--max-pool-bytes")
    if cap <= 0:
        raise KvplanError("must be above 0", "--max-pool-bytes")
    return longest, cap


def _check_dry_run_target(device: str | None, deployment: "Deployment") -> None:
    from kvplan.errors import KvplanError

    if (device or "").strip().lower() == "cpu" and deployment.gpu is None and deployment.gpu_memory_bytes is None \
            and deployment.kv_cache_memory_bytes is None:
        raise KvplanError("a CPU dry run plans for a GPU it does not have: name it with --gpu ID or --gpu-memory "
                          "SIZE (or give --kv-cache-memory-bytes)", "--device cpu")


def _print(document: dict[str, Any], json_output: bool) -> None:
    if json_output:
        from kvplan.cli.output import print_json

        print_json(document)
    else:
        import sys

        from kvplan.verify.report import render

        sys.stdout.write(render(document))


COMMAND = verify
