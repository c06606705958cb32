"""kvplan explain (placeholder until its issue lands)."""

from __future__ import annotations

from kvplan.errors import KvplanError

HELP = "Not built yet."


def explain() -> int:
    raise KvplanError("kvplan explain is not built yet")


COMMAND = explain
