"""What each engine's log_lines module declares about the records it prints, so that explain can tell whose log it
reads without naming an engine."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LogLines:
    """How the engine's log records look."""

    record_start: str  # a regular expression: how one of its records starts (a line that does not continues one)
    # a regular expression for a record only this engine prints; None where explain reads every line of the
    # engine's itself (vLLM's, in kvplan/explain/lines.py)
    recognised: str | None = None
