"""An Explanation as text: what the log says, the memory terms side by side, the capacity figures against the
replay and the prediction from scratch, and the verdict. GiB (2^30) throughout, as vLLM prints it."""

from __future__ import annotations

from kvplan.explain.reconcile import TERMS, Check, Explanation, Term
from kvplan.explain.record import SHOWN_FLAGS
from kvplan.units import GiB

MISSING = "-"
TERM_LABELS = {"total": "total", "budget": "budget (x utilization)", "weights": "weights",
               "activation": "activation peak", "non_torch": "non-torch", "cuda_graphs": "CUDA graphs",
               "kv_cache": "KV cache"}
FIGURE_LABELS = {"num_blocks": "blocks", "tokens": "tokens", "max_concurrency": "concurrency",
                 "block_size": "block size", "padding_layers": "padding layers", "offload_tokens": "CPU tier tokens",
                 "offload_host_bytes": "CPU tier host", "encoder_cache_tokens": "encoder budget"}


def _gib(value: int | None) -> str:
    return MISSING if value is None else f"{value / GiB:.2f}"


def _signed_gib(value: int | None) -> str:
    return MISSING if value is None else f"{value / GiB:+.2f}"


def _figure(name: str, value: float | None) -> str:
    if value is None:
        return MISSING
    if name == "max_concurrency":
        return f"{value:.2f}x"
    if name == "offload_host_bytes":
        return f"{value / 1e9:.2f} GB"
    return f"{int(value):,}"


def header(explanation: Explanation) -> list[str]:
    run = explanation.run
    engine = run.engine_label
    version = f" {run.version}" if run.version else " (version not printed)"
    generation = f" ({run.engine_generation} engine)" if run.engine_generation else ""
    parts = [explanation.model or run.model or "model not named", f"{engine}{version}{generation}"]
    if explanation.gpu is not None:
        parts.append(f"{explanation.gpu.name} x{explanation.gpu.count}")
    lines = [" · ".join(parts)]
    flags = [f"{name} {_flag(run.flag(name))}" for name in SHOWN_FLAGS if run.flag(name) is not None]
    if flags:
        lines.append("flags: " + " · ".join(flags))
    return lines


def _flag(value: object) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1000:
        return f"{value:,}"
    text = str(value)
    return text if len(text) <= 60 else text[:57] + "..."


def memory_table(terms: list[Term]) -> list[str]:
    rows = [f"{'Memory per rank (GiB)':<26}{'logged':>9}{'kvplan':>9}{'kvplan - logged':>17}"]
    for term in terms:
        diff = f"{_signed_gib(term.diff_bytes):>17}" if term.in_budget else "   not in this vLLM's budget"
        rows.append(f"  {TERM_LABELS[term.term]:<24}{_gib(term.logged_bytes):>9}{_gib(term.kvplan_bytes):>9}{diff}")
    return rows


def capacity_table(explanation: Explanation) -> list[str]:
    kv = explanation.run.first("memory", "kv_cache_bytes")
    replayed = f"replayed ({_gib(kv)} GiB +-0.005)"
    rows = [f"{'Capacity':<17}{'logged':>12}  {replayed:<30}{'from scratch':>13}"]
    for check in explanation.checks:
        rows.append(_check_row(check))
    return rows


def _check_row(check: Check) -> str:
    low, high = sorted((check.low, check.high))
    span = _figure(check.figure, low) if low == high else \
        f"{_figure(check.figure, low)} - {_figure(check.figure, high)}"
    mark = "ok" if check.matches else "MISMATCH"
    return (f"  {FIGURE_LABELS[check.figure]:<15}{_figure(check.figure, check.logged):>12}  {span + '  ' + mark:<30}"
            f"{_figure(check.figure, check.scratch):>13}")


def logged_capacity(explanation: Explanation) -> list[str]:
    run = explanation.run
    shown = [(name, run.first("capacity", name)) for name in FIGURE_LABELS]
    printed = [f"{FIGURE_LABELS[name]} {_figure(name, value)}" for name, value in shown if value is not None]
    return ["logged capacity: " + " · ".join(printed)] if printed else []


def verdict(explanation: Explanation) -> list[str]:
    lines = []
    gap = explanation.kv_gap
    if gap is not None:
        if explanation.explained_by is None:
            unsplit = "" if abs(gap) <= GiB // 100 else \
                " the terms the log prints do not account for it."
            lines.append(f"From scratch kvplan's KV cache is {_signed_gib(gap)} GiB from the log's" +
                         (", within its rounding." if not unsplit else f";{unsplit}"))
        else:
            term = next(t for t in explanation.terms if t.term == explanation.explained_by)
            lines.append(f"From scratch kvplan's KV cache is {_signed_gib(gap)} GiB from the log's; the term that "
                         f"explains it: {TERM_LABELS[term.term]} ({_signed_gib(term.diff_bytes)} GiB).")
    matches = explanation.replay_matches
    if matches is True:
        lines.append("Replay: kvplan gives vLLM's figures to the block from the logged KV cache memory.")
    elif matches is False:
        wrong = ", ".join(FIGURE_LABELS[c.figure] for c in explanation.checks if not c.matches)
        lines.append(f"Replay: kvplan does NOT give vLLM's figures from the logged KV cache memory ({wrong}).")
    elif explanation.reconciled:
        lines.append("Replay: " + _why_no_replay(explanation))
    return lines


def _why_no_replay(explanation: Explanation) -> str:
    if explanation.model_error:
        return ("not possible without the model's config (see model: above); pass --model with a bundled id, a "
                "Hub id or a local config.json.")
    if explanation.run.notes or explanation.notes:
        return "not possible from this log (see the notes)."
    return "not possible from this log: it prints no KV cache memory to replay."


def missing_line(explanation: Explanation) -> list[str]:
    run = explanation.run
    absent = [TERM_LABELS[t] for t, name, _ in TERMS if run.first("memory", name) is None]
    absent += [FIGURE_LABELS[name] for name in ("num_blocks", "tokens", "max_concurrency")
               if run.first("capacity", name) is None and name not in run.unusable]
    if run.version is None:
        absent.append("version")
    return [f"not in the log: {', '.join(absent)}"] if absent else []


def render(explanation: Explanation) -> str:
    lines = header(explanation)
    if not explanation.reconciled:
        lines += [f"  {note}" for note in explanation.notes]
        return "\n".join(lines) + "\n"
    if explanation.model_error:
        lines.append(f"model: {explanation.model_error}")
    run = explanation.run
    logged = [f"{TERM_LABELS[term]} {_gib(run.first('memory', name))}" for term, name, _ in TERMS
              if run.first("memory", name) is not None]
    sections = [
        memory_table(explanation.terms) if explanation.terms else
        (["logged memory (GiB): " + " · ".join(logged)] if logged else []),
        capacity_table(explanation) if explanation.checks else logged_capacity(explanation),
        [*verdict(explanation), *missing_line(explanation)],
    ]
    for section in sections:
        if section:
            lines += ["", *section]
    notes = run.notes + explanation.notes
    if notes:
        lines.append("notes:")
        lines += [f"  - {note}" for note in notes]
    return "\n".join(lines) + "\n"
