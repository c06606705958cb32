"""A simulation's results as the JSON document and as text for people: a table of the allocators and a chart of
each one's pool over time; optionally an image of the chart (matplotlib)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kvplan.errors import KvplanError
from kvplan.simulate.pool import Pool, StepTime
from kvplan.simulate.scheduler import Outcome
from kvplan.simulate.workload import Workload

BARS = " ▁▂▃▄▅▆▇█"


@dataclass
class SimulationReport:
    pool: Pool
    workload: Workload
    outcomes: list[Outcome]
    step_time: StepTime | None = None
    context: dict[str, Any] = field(default_factory=dict)  # the plan's model, GPU and engine

    def to_dict(self) -> dict[str, Any]:
        pool = self.pool
        return {
            "pool_bytes": pool.pool_bytes, "block_size": pool.block_size, "block_bytes": pool.block_bytes,
            "num_blocks": pool.num_blocks, "state_bytes_per_sequence": pool.state_bytes,
            "scheduler": {"max_model_len": pool.max_model_len, "max_num_seqs": pool.max_num_seqs,
                          "max_num_batched_tokens": pool.max_num_batched_tokens,
                          "watermark_blocks": pool.watermark_blocks},
            "step_time": None if self.step_time is None else {
                "fixed_ms": round(self.step_time.fixed_ms, 4), "per_1k_tokens_ms": round(self.step_time.per_1k_ms, 4),
                "source": self.step_time.source},
            **self.context,
            "workload": self.workload.description,
            "allocators": [{key: value for key, value in outcome.to_dict().items()} for outcome in self.outcomes],
        }


def render_text(report: SimulationReport, width: int = 120) -> str:
    pool, lines = report.pool, []
    heading = " · ".join(str(report.context[key]) for key in ("model", "gpu") if report.context.get(key))
    lines.append(f"{heading}\nKV pool {pool.pool_bytes / 2**30:.2f} GiB: {pool.num_blocks:,} blocks of "
                 f"{pool.block_size} tokens ({pool.block_bytes:,} B); max_model_len {pool.max_model_len:,}, "
                 f"max_num_seqs {pool.max_num_seqs}, max_num_batched_tokens {pool.max_num_batched_tokens:,}")
    lines.append("Workload: " + ", ".join(f"{key} {value}" for key, value in report.workload.description.items()))
    if report.step_time is not None:
        lines.append(f"Step time: {report.step_time.fixed_ms:.2f} ms + {report.step_time.per_1k_ms:.3f} ms per "
                     f"1K tokens ({report.step_time.source})")
    rows = [outcome.to_dict() for outcome in report.outcomes]
    columns = [("allocator", "name", "{}"), ("done", "completed", "{:,}"), ("steps", "steps", "{:,}"),
               ("peak run", "peak_running", "{:,}"), ("mean run", "mean_running", "{:.1f}"),
               ("tok/step", "tokens_per_step", "{:.1f}"), ("preempt", "preemptions", "{:,}"),
               ("mem-bound", "memory_bound_steps_pct", "{:.1f}%"), ("real KV", "token_states_pct", "{:.1f}%"),
               ("reserved", "reserved_pct", "{:.1f}%"), ("int frag", "internal_fragmentation_pct", "{:.1f}%"),
               ("ext frag", "external_fragmentation_pct", "{:.1f}%"), ("shared", "shared_saved_pct", "{:.1f}%")]
    cells = [[label for label, _, _ in columns]] + [[form.format(row[key]) for _, key, form in columns] for row in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(columns))]
    for index, line in enumerate(cells):
        lines.append("  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in
                               enumerate(zip(line, widths, strict=True))))
        if index == 0:
            lines.append("  ".join("-" * w for w in widths))
    lines.append("real KV, reserved, int frag and ext frag split the pool, averaged over the steps in which a request "
                 "waited for memory (mem-bound: their share of the steps); ext frag is what was free while it "
                 "waited. shared: blocks saved by sharing over the blocks the same sequences would hold without it.")
    for outcome in report.outcomes:
        if outcome.rejected:
            lines.append(f"{outcome.name} turned away {outcome.rejected:,} request(s): what it reserves for one "
                         "is more than the whole pool, so they never ran.")
    never = [row["name"] for row in rows if row["split_over"] != "memory-bound steps"]
    if never:
        lines.append(f"No request waited for memory under {', '.join(never)}: the split there is over all steps.")
    chart_width = max(20, min(100, width - 24))
    lines.append(f"\nPool over time (█ = 100% of the pool; {chart_width} columns span each run's steps):")
    name_width = max(len(outcome.name) for outcome in report.outcomes)
    for outcome in report.outcomes:
        series = outcome.meter.series
        lines.append(f"{outcome.name.ljust(name_width)} allocated |{sparkline(series, 2, chart_width)}|")
        lines.append(f"{''.ljust(name_width)} real KV   |{sparkline(series, 1, chart_width)}|")
    return "\n".join(lines) + "\n"


def sparkline(series: list[tuple[int, float, float]], column: int, width: int) -> str:
    if not series:
        return " " * width
    last = series[-1][0] + 1
    bins: list[list[float]] = [[] for _ in range(width)]
    for point in series:
        bins[min(width - 1, point[0] * width // last)].append(point[column])
    out, previous = [], 0.0
    for values in bins:
        previous = sum(values) / len(values) if values else previous
        out.append(BARS[min(len(BARS) - 1, round(previous * (len(BARS) - 1)))])
    return "".join(out)


def write_plot(report: SimulationReport, path: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise KvplanError("--plot needs matplotlib: pip install 'kvplan[plot]'", "--plot") from None
    figure, axes = plt.subplots(len(report.outcomes), 1, figsize=(9, 1.8 * len(report.outcomes) + 1),
                                squeeze=False, sharex=True, sharey=True)
    for axis, outcome in zip(axes[:, 0], report.outcomes, strict=True):
        steps = [point[0] for point in outcome.meter.series]
        axis.fill_between(steps, [100 * p[2] for p in outcome.meter.series], step="post", alpha=0.35,
                          label="allocated")
        axis.plot(steps, [100 * p[1] for p in outcome.meter.series], drawstyle="steps-post", label="real KV")
        axis.set_title(outcome.name, fontsize=9, loc="left")
        axis.set_ylim(0, 100)
        axis.set_ylabel("% of pool")
    axes[-1, 0].set_xlabel("engine step")
    axes[0, 0].legend(loc="lower right", fontsize=8)
    figure.tight_layout()
    try:
        figure.savefig(path)
    except (OSError, ValueError) as exc:
        raise KvplanError(f"cannot write the chart: {exc}", "--plot") from None
    finally:
        plt.close(figure)
