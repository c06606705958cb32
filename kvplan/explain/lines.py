"""How a pasted startup log (ANSI colours, progress bars redrawn with carriage returns, wrapped lines, process
prefixes, several ranks) becomes records, and each record is read by the kinds of line the engines' log_lines
modules declare (kvplan/engines/log_lines.py)."""

from __future__ import annotations

import re
from functools import cache

from kvplan.engines.log_lines import LineKind, LogLines, Place
from kvplan.explain.record import LoggedRun

ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-_]")
RANK = re.compile(r"\((\w+) pid=\d+\)")
MAX_LINE = 200_000  # characters: a record longer than this is not a log line worth reading


def log_lines(text: str) -> list[tuple[int, str]]:
    """(line number in the file, text) of each line without colour codes; a progress bar's carriage returns split
    its line into the frames it drew, each under that line's number. CRLF ends one line, as in a Windows file."""
    return [(number, frame[:MAX_LINE]) for number, line in enumerate(ANSI.sub("", text).split("\n"), start=1)
            for frame in line.removesuffix("\r").split("\r")]


def _engine_log_lines() -> list[tuple[str, LogLines]]:
    from kvplan import registry

    return [(name, lines) for name in registry.names() if (lines := registry.log_lines(name)) is not None]


@cache  # keyed by the registry's names, so that an engine registered later is read too
def _record_start(engines: tuple[str, ...]) -> re.Pattern[str]:
    """How a log record starts, in any engine's format. A line that starts none continues the record before it (a
    terminal or an editor wrapped it, or a progress bar redrew)."""
    return re.compile(r"\s*(?:" + "|".join(lines.record_start for _, lines in _engine_log_lines()) + ")")
MAX_WRAPPED = 200  # continuation lines joined to one record at most


def reconciling_engine() -> str | None:
    """The engine whose logs explain reconciles term by term: every figure it reads is one of that engine's lines."""
    return next((name for name, lines in _engine_log_lines() if lines.reconciled), None)


@cache
def _kinds(engines: tuple[str, ...]) -> tuple[LineKind, ...]:
    """Every engine's kinds of line, in the registry's order."""
    return tuple(kind for name, lines in _engine_log_lines() for kind in lines.line_kinds(name))


def records(lines: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """(line number, text) of each record: a line that starts one, with the wrapped lines after it joined back
    as a terminal split them (no separator). A line that starts no record and follows none stands alone."""
    from kvplan import registry

    record_start = _record_start(registry.names())
    found: list[tuple[int, list[str]]] = []
    open_record = False
    length = 0
    for number, line in lines:
        if not line.strip():
            open_record = False
            continue
        starts = bool(record_start.match(line))
        parts = found[-1][1] if found else []
        if open_record and not starts and len(parts) < MAX_WRAPPED and length + len(line) <= MAX_LINE:
            parts.append(line)
            length += len(line)
            continue
        found.append((number, [line]))
        open_record, length = starts, len(line)
    return [(number, "".join(parts)) for number, parts in found]


def read_into(run: LoggedRun, text: str) -> None:
    """Every recognised record of TEXT, read into RUN in log order."""
    from kvplan import registry

    kinds = _kinds(registry.names())
    for number, record in records(log_lines(text)):
        rank_match = RANK.search(record)
        rank = rank_match.group(1) if rank_match else None
        if rank:
            run.ranks.add(rank)
        for kind in kinds:
            match = kind.trigger.search(record)
            if match:
                kind.read(match, record, run, Place(number, rank))
