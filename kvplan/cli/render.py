"""A Plan as a panel: memory bar, the formula with this model's numbers, capacity, ladder, levers, notes.
Several plans side by side are a rich table."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from kvplan.cli.panel import Box, Span
from kvplan.plan import Plan
from kvplan.units import GB, GiB

if TYPE_CHECKING:
    from rich.table import Table

    from kvplan.levers import Lever

BAR_WIDTH = 60
SEGMENTS = (("weights", "weights_bytes", "blue"), ("activation", "activation_bytes", "magenta"),
            ("non-torch", "non_torch_bytes", "yellow"), ("CUDA graphs", "cuda_graph_bytes", "cyan"),
            ("reserve", "reserve_bytes", "white"), ("KV pool", "kv_cache_bytes", "green"))


def _size(n: int) -> str:
    return f"{n / GiB:7.2f} GiB  ({n / GB:.2f} GB)"


def memory_bar(plan: Plan, box: Box) -> None:
    memory = plan.memory
    used_bytes = sum(max(getattr(memory, attr), 0) for _, attr, _ in SEGMENTS)
    total = max(memory.total_bytes, used_bytes, 1)  # weights alone may exceed the GPU
    bar: list[Span] = []
    rows: list[tuple[str, list[Span], str]] = []
    used = 0
    for label, attr, colour in SEGMENTS:
        value = getattr(memory, attr)
        if value <= 0 and attr != "kv_cache_bytes":
            continue
        cells = round(max(value, 0) / total * BAR_WIDTH)
        bar.append(Span("█" * cells, colour))
        used += cells
        rows.append(("■ " + label, [Span(_size(value))], colour))
    bar.append(Span("░" * max(0, BAR_WIDTH - used), "dim"))
    unused = memory.total_bytes - used_bytes
    if unused >= 0:
        rows.append(("░ unused", [Span(_size(unused))], "dim"))
    else:
        rows.append(("! over the GPU by", [Span(_size(-unused))], "bold red"))
    rows.append(("  GPU total (CUDA)", [Span(_size(memory.total_bytes))], ""))
    box.spans(*bar)
    width = max(len(label) for label, _, _ in rows)
    for label, value, style in rows:
        box.spans(Span(label.ljust(width), style), Span("  "), *value)


def formula(plan: Plan) -> str:
    layout = plan.layout
    if not layout.groups:
        return "no attention layers: no KV block pool"
    bs, kvb = layout.block_size, plan.kv_bytes
    if layout.single_spec:
        group = layout.groups[0]
        return f"block bytes = {group.layer.block_formula(group.real_layers, plan.tensor_parallel, bs, kvb)}"
    if len(layout.groups) == 1 and layout.mixed:  # layers of different pages in one block: each spec's own sum
        terms = [f"({layer.block_formula(count, plan.tensor_parallel, bs, kvb)})" for layer, count in layout.mixed]
        return f"block bytes = {' + '.join(terms)} = {layout.block_bytes:,} B"
    if own_pools(plan):
        return "block bytes: each pool's own (the pool line and the notes give them)"
    if layout.groups[0].members:  # vLLM's packed groups: a block id costs the widest group's pages
        terms = [" + ".join(layer.block_formula(count, plan.tensor_parallel, bs, kvb) for layer, count in g.members)
                 for g in layout.groups]
        return (f"block bytes = the widest of {layout.num_groups} packed groups ("
                f"{'; '.join(terms)}) = {layout.block_bytes:,} B")
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


def own_pools(plan: Plan) -> bool:
    """Pools the engine sizes by rules of its own (DeepSeek-V4's on SGLang and TensorRT-LLM), whose blocks are not the
    flat layout's bytes divided out: the panel names those pools, not the layout's block formula."""
    block_bytes = plan.layout.block_bytes
    return plan.pools is not None and (not block_bytes or
                                       max(plan.memory.kv_cache_bytes, 0) // block_bytes != plan.capacity.num_blocks)


def pool_line(plan: Plan) -> str:
    kv_bytes, block_bytes = max(plan.memory.kv_cache_bytes, 0), plan.layout.block_bytes
    if plan.pools is None:
        return f"{kv_bytes:,} B // {block_bytes:,} B = {plan.capacity.num_blocks:,} blocks"
    split = ", ".join(f"{pool.name} {pool.tokens:,} tokens x {pool.bytes_per_token:,} B" for pool in plan.pools.pools)
    if own_pools(plan):
        return f"{kv_bytes:,} B in the engine's own pools: {split}"
    return f"{kv_bytes:,} B // {block_bytes:,} B = {plan.capacity.num_blocks:,} blocks, re-split into {split}"


def render_plan(plan: Plan, levers: Sequence[Lever] = ()) -> str:
    cap, eng = plan.capacity, plan.engine
    version = f" {eng.version}" if eng.version else ""
    title = (f"{plan.model.id} on {plan.gpu.count}x {plan.gpu.name} · {eng.name}{version} · "
             f"TP {plan.tensor_parallel} PP {plan.pipeline_parallel}"
             f"{f' DP {plan.data_parallel}' if plan.data_parallel > 1 else ''}")
    box = Box()
    memory_bar(plan, box)
    box.blank()
    box.rows([
        ("knobs", [Span(knobs_line(plan))]),
        ("KV", [Span(f"{plan.kv_dtype} ({plan.kv_bytes} B), {plan.layout.bytes_per_token:,} B per token on the "
                     "limiting rank")]),
        ("formula", [Span(formula(plan))]),
        ("pool", [Span(pool_line(plan))]),
        ("KV cache", [Span(f"{cap.tokens:,} tokens", "bold"), Span(f" (as {eng.label} logs '{eng.kv_log}')")]),
        ("concurrency", [Span(f"{cap.max_concurrency:.2f}x", "bold"),
                         Span(f" at {eng.max_model_len:,} tokens per request ({cap.blocks_per_request:,} blocks "
                              "each)")]),
        ("longest fit", [Span(f"{cap.max_model_len_that_fits:,} tokens for one request" if cap.max_model_len_that_fits
                              else "none: no request fits")]),
    ])
    box.blank()
    box.table("requests at once by context", ["context", "requests", "KV-limited"],
              [[f"{r.context:,}", f"{r.concurrency:,}", f"{r.kv_limited:,}"] for r in cap.ladder])
    if plan.error:
        box.blank()
        box.paragraph(plan.error, "bold red")
    if levers:
        box.blank()
        box.table("levers", ["flags", "KV tokens", "concurrency", "fits"],
                  [[lever.flags, f"{lever.tokens:,}", f"{lever.max_concurrency:.2f}x", "yes" if lever.fits else "no"]
                   for lever in levers], left=(0,))
    for note in plan.notes:
        box.paragraph(f"note: {note}", "dim")
    return box.draw(title, "GiB = 2^30 B, GB = 10^9 B", "red" if plan.error else "green")


def render_comparison(plans: Sequence[Plan]) -> Table:
    """Several GPUs side by side: the numbers that decide between them."""
    from rich.table import Table

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
