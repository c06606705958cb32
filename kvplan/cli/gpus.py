"""kvplan gpus: the catalogue."""

from __future__ import annotations

from dataclasses import asdict

from kvplan.cli.options import JsonFlag
from kvplan.cli.output import console, print_json
from kvplan.hardware import catalogue
from kvplan.units import GiB

HELP = "List the GPU catalogue (memory as the CUDA runtime reports it)."


def list_gpus(json_output: JsonFlag = False) -> None:
    gpus = catalogue()
    if json_output:
        print_json([asdict(g) for g in gpus])
        return
    from rich.table import Table

    table = Table(title="GPU catalogue: memory is the CUDA runtime's total (GiB = 2^30 bytes)")
    for column in ("id", "name", "CUDA total", "NVML MiB", "GB/s", "BF16 TFLOPS", "FP8", "aliases"):
        table.add_column(column, justify="right" if column in ("CUDA total", "NVML MiB", "GB/s") else "left")
    for g in gpus:
        table.add_row(g.id, g.name, f"{g.memory_bytes / GiB:.2f} GiB", str(g.nvml_total_mib or "-"),
                      str(g.bandwidth_gbps or "-"), str(g.bf16_tflops_dense or "-"), "yes" if g.fp8 else "no",
                      ", ".join(g.aliases))
    console().print(table)


COMMAND = list_gpus
