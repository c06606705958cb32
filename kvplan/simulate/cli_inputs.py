"""The command line's inputs to a simulation, checked before anything runs: the workload, the allocator names,
the chart's file."""

from __future__ import annotations

from pathlib import Path

from kvplan.errors import KvplanError
from kvplan.simulate.allocators import ALLOCATORS
from kvplan.simulate.distributions import parse_distribution
from kvplan.simulate.workload import Workload, sharing_mode, synthetic

PLOT_FORMATS = (".png", ".svg", ".pdf")


def allocator_names(text: str) -> tuple[str, ...]:
    names = tuple(part.strip() for part in text.split(",") if part.strip())
    unknown = [name for name in names if name not in ALLOCATORS]
    if unknown or not names:
        raise KvplanError(f"unknown allocator {', '.join(unknown) or '(none)'}; choose from {', '.join(ALLOCATORS)}",
                          "--allocators")
    return names


def check_plot_path(path: str) -> None:
    """Refused before the simulation runs: a missing matplotlib, an unknown image format, a missing folder."""
    if Path(path).suffix.lower() not in PLOT_FORMATS:
        raise KvplanError(f"the chart is written as {', '.join(PLOT_FORMATS)}; got {path!r}", "--plot")
    if not Path(path).parent.is_dir():
        raise KvplanError(f"no folder {str(Path(path).parent)!r} to write the chart in", "--plot")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise KvplanError("--plot needs matplotlib: pip install 'kvplan[plot]'", "--plot") from None


def workload_from_options(*, trace: str | None, requests: int, prompt_len: str, output_len: str, n: int,
                          beam_width: int, shared_prefix: int, prefix_groups: int, rate: float | None,
                          seed: int) -> Workload:
    if trace is not None:
        from kvplan.simulate.traces import read_trace

        return read_trace(trace, shared_prefix)
    sharing = sharing_mode(n, beam_width, "--beam-width" if beam_width != 1 else "--n")
    return synthetic(requests, parse_distribution(prompt_len, "--prompt-len"),
                     parse_distribution(output_len, "--output-len"), sharing=sharing, shared_prefix=shared_prefix,
                     prefix_groups=prefix_groups, rate=rate, seed=seed)
