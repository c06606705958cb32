"""A Plan as a rich panel: memory bar, the formula with this model's numbers, capacity, ladder, notes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from kvplan.plan import Plan
from kvplan.units import GB, GiB

if TYPE_CHECKING:
    from kvplan.levers import Lever

BAR_WIDTH = 60
SEGMENTS = (("weights", "weights_bytes", "blue"), ("activation", "activation_bytes", "magenta"),
            ("non-torch", "non_torch_bytes", "yellow"), ("CUDA graphs", "cuda_graph_bytes", "cyan"),
            ("reserve", "reserve_bytes", "white"), ("KV pool", "kv_cache_bytes", "green"))


def _size(n: int) -> str:
    return f"{n / GiB:7.2f} GiB  ({n / GB:.2f} GB)"


def memory_bar(plan: Plan) -> Group:
    memory = plan.memory
    used_bytes = sum(max(getattr(memory, attr), 0) for _, attr, _ in SEGMENTS)
    total = max(memory.total_bytes, used_bytes, 1)  # weights alone may exceed the GPU
    bar = Text()
    used = 0
    rows = Table.grid(padding=(0, 2))
    for label, attr, colour in SEGMENTS:
        value = getattr(memory, attr)
        if value <= 0 and attr != "kv_cache_bytes":
            continue
        cells = round(max(value, 0) / total * BAR_WIDTH)
        bar.append("█" * cells, style=colour)
        used += cells
        rows.add_row(Text("■ " + label, style=colour), _size(value))
    unused = memory.total_bytes - used_bytes
    bar.append("░" * max(0, BAR_WIDTH - used), style="dim")
    if unused >= 0:
        rows.add_row(Text("░ unused", style="dim"), _size(unused))
    else:
        rows.add_row(Text("! over the GPU by", style="bold red"), _size(-unused))
    rows.add_row(Text("  GPU total (CUDA)"), _size(memory.total_bytes))
    return Group(bar, rows)


def formula(plan: Plan) -> str:
    layout = plan.layout
    if not layout.groups:
        return "no attention layers: no KV block pool"
    bs, kvb = layout.block_size, plan.kv_bytes
    if layout.single_spec:
        group = layout.groups[0]
        return f"block bytes = {group.layer.block_formula(group.real_layers, plan.tensor_parallel, bs, kvb)}"
    kinds = ", ".join(f"{g.real_layers}x {g.layer.describe()}" for g in layout.groups)
    return (f"{layout.num_groups} KV groups of {layout.groups[0].slots} layer slots ({kinds}); page = {bs} tokens x "
            f"{layout.page_bytes // bs:,} B = {layout.page_bytes:,} B per layer; block bytes = page x "
            f"{layout.groups[0].slots} = {layout.block_bytes:,} B")


def knobs_line(plan: Plan) -> str:
    """The settings in force, in the engine's own names; a setting the engine does not have is left out."""
    eng = plan.engine
    parts = [(eng.utilization_knob, eng.gpu_memory_utilization), ("block", f"{eng.block_size} tokens"),
             (eng.length_knob, f"{eng.max_model_len:,}"), ("max_num_seqs", eng.max_num_seqs),
             ("max_num_batched_tokens", eng.max_num_batched_tokens)]
    return ", ".join(f"{name} {value}" for name, value in parts if value is not None)


def render_plan(plan: Plan, levers: Sequence[Lever] = ()) -> Panel:
    cap, eng = plan.capacity, plan.engine
    version = f" {eng.version}" if eng.version else ""
    title = (f"{plan.model.id} on {plan.gpu.count}x {plan.gpu.name} · {eng.name}{version} · "
             f"TP {plan.tensor_parallel} PP {plan.pipeline_parallel}")
    facts = Table.grid(padding=(0, 2))
    facts.add_row("knobs", knobs_line(plan))
    facts.add_row("KV", f"{plan.kv_dtype} ({plan.kv_bytes} B), {plan.layout.bytes_per_token:,} B per token "
                        f"on the limiting rank")
    facts.add_row("formula", formula(plan))
    kv_bytes = plan.memory.kv_cache_bytes
    facts.add_row("pool", f"{max(kv_bytes, 0):,} B // {plan.layout.block_bytes:,} B = {cap.num_blocks:,} blocks")
    facts.add_row("KV cache", f"[bold]{cap.tokens:,} tokens[/bold] (as {eng.label} logs '{eng.kv_log}')")
    facts.add_row("concurrency", f"[bold]{cap.max_concurrency:.2f}x[/bold] at {eng.max_model_len:,} tokens per request "
                                 f"({cap.blocks_per_request:,} blocks each)")
    facts.add_row("longest fit", f"{cap.max_model_len_that_fits:,} tokens for one request")
    ladder = Table(title="requests at once by context", title_justify="left", box=None, padding=(0, 2))
    ladder.add_column("context", justify="right")
    ladder.add_column("requests", justify="right")
    ladder.add_column("KV-limited", justify="right")
    for rung in cap.ladder:
        ladder.add_row(f"{rung.context:,}", f"{rung.concurrency:,}", f"{rung.kv_limited:,}")
    parts: list[RenderableType] = [memory_bar(plan), Text(""), facts, Text(""), ladder]
    if plan.error:
        parts += [Text(""), Text(plan.error, style="bold red")]
    if levers:
        table = Table(title="levers", title_justify="left", box=None, padding=(0, 2))
        for column in ("flags", "KV tokens", "concurrency", "fits"):
            table.add_column(column, justify="left" if column == "flags" else "right", no_wrap=True)
        for lever in levers:
            table.add_row(lever.flags, f"{lever.tokens:,}", f"{lever.max_concurrency:.2f}x",
                          "yes" if lever.fits else "no")
        parts += [Text(""), table]
    for note in plan.notes:
        parts.append(Text(f"note: {note}", style="dim"))
    border = "red" if plan.error else "green"
    return Panel(Group(*parts), title=title, border_style=border, subtitle="GiB = 2^30 B, GB = 10^9 B",
                 expand=False)


def render_comparison(plans: Sequence[Plan]) -> Table:
    """Several GPUs side by side: the numbers that decide between them."""
    table = Table(title=f"{plans[0].model.id}: GPUs side by side (GiB = 2^30 B)")
    for column in ("GPU", "CUDA total", "weights/rank", "KV pool", "blocks", "KV tokens", "concurrency", "longest fit",
                   "fits"):
        table.add_column(column, justify="left" if column in ("GPU", "fits") else "right")
    for plan in plans:
        memory, cap = plan.memory, plan.capacity
        table.add_row(f"{plan.gpu.count}x {plan.gpu.id}", f"{memory.total_bytes / GiB:.2f}",
                      f"{memory.weights_bytes / GiB:.2f}", f"{memory.kv_cache_bytes / GiB:.2f}", f"{cap.num_blocks:,}",
                      f"{cap.tokens:,}", f"{cap.max_concurrency:.2f}x", f"{cap.max_model_len_that_fits:,}",
                      "yes" if cap.fits else "[red]no[/red]")
    return table
