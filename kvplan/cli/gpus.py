"""kvplan gpus: the catalogue."""

from dataclasses import asdict

from kvplan.cli.options import JsonFlag
from kvplan.cli.output import console, print_json
from kvplan.hardware import Gpu, catalogue, mig_slices
from kvplan.units import GiB

HELP = "List the GPU catalogue (memory as the CUDA runtime reports it)."
ENDS_AT_ONCE = True  # reads and prints, leaves nothing open (kvplan.cli.app.end)


def grouped() -> list[Gpu]:
    """Whole GPUs by vendor, then unified-memory devices, then MIG slices (ID:PROFILE), each in catalogue order."""
    gpus = [*catalogue(), *mig_slices()]
    order = list(dict.fromkeys(g.group for g in gpus if not g.parent and not g.unified_memory))
    order += ["unified memory", "MIG slices"]
    return sorted(gpus, key=lambda g: order.index(g.group))


def list_gpus(json_output: JsonFlag = False) -> None:
    if json_output:  # the catalogue as /api/gpus answers it; each GPU's MIG slices under its slices
        print_json([asdict(g) for g in catalogue()])
        return
    gpus = grouped()
    from rich.table import Table

    table = Table(title="GPU catalogue: memory is the CUDA runtime's total (GiB = 2^30 bytes)")
    for column in ("group", "id", "name", "CUDA total", "NVML MiB", "GB/s", "BF16 TFLOPS", "FP8", "aliases"):
        table.add_column(column, justify="right" if column in ("CUDA total", "NVML MiB", "GB/s") else "left")
    for index, g in enumerate(gpus):
        if index and g.group != gpus[index - 1].group:
            table.add_section()
        heading = g.group if not index or g.group != gpus[index - 1].group else ""
        table.add_row(heading, g.id, g.name, f"{g.memory_bytes / GiB:.2f} GiB", str(g.nvml_total_mib or "-"),
                      str(g.bandwidth_gbps or "-"), str(g.bf16_tflops_dense or "-"), "yes" if g.fp8 else "no",
                      ", ".join(g.aliases))
    console().print(table)


COMMAND = list_gpus
