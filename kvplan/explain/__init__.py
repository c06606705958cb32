"""kvplan explain: read an engine's startup log, then reconcile what it printed with kvplan's model of it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvplan.errors import KvplanError
from kvplan.explain.record import LoggedRun

if TYPE_CHECKING:
    from kvplan.explain.reconcile import Explanation

MAX_LOG_BYTES = 16 * 2**20  # a startup log with DEBUG lines is a few hundred KiB; sizing lines come early


def read_log(text: str) -> LoggedRun:
    """What TEXT says about sizing. Never fails: what is not there is simply not in the run."""
    from kvplan.explain.inferred import derived_terms, parallelism_from_ranks
    from kvplan.explain.lines import read_into, reconciling_engine

    run = LoggedRun()
    read_into(run, text)
    if run.engine is None and (run.memory or run.capacity):
        run.engine = reconciling_engine()
    parallelism_from_ranks(run)
    derived_terms(run)
    differing = run.ranks_that_differ()
    if differing:
        run.notes.append(f"ranks print different {', '.join(differing)}; the tables show the first rank's")
    return run


def read_source(path: str) -> tuple[str, str]:
    """The text of a log file, or of stdin for '-', and the name to call it by."""
    import sys

    if path == "-":
        data = sys.stdin.buffer.read(MAX_LOG_BYTES + 1)
        name = "stdin"
    else:
        try:
            with open(path, "rb") as handle:
                data = handle.read(MAX_LOG_BYTES + 1)
        except OSError as exc:
            raise KvplanError(f"cannot read the log: {exc.strerror or exc}", path) from None
        name = path
    if len(data) > MAX_LOG_BYTES:
        data = data[:MAX_LOG_BYTES]
    return data.decode("utf-8", errors="replace"), name


def explain(text: str, source: str = "log", model: str | None = None, gpu: str | None = None,
            token: str | None = None) -> Explanation:
    """The log read and reconciled. A text with no line in an engine's own startup format (a README that names
    the engines, say) is the user's mistake (KvplanError)."""
    from kvplan.explain.reconcile import reconcile

    run = read_log(text)
    if run.engine is None:
        raise KvplanError(f"no vLLM / SGLang / TensorRT-LLM startup lines found in {source}")
    return reconcile(run, source, model, gpu, token)
