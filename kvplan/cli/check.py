"""kvplan check (placeholder until its issue lands)."""

from __future__ import annotations

from kvplan.errors import KvplanError

HELP = "Not built yet."


def check() -> int:
    raise KvplanError("kvplan check is not built yet")


COMMAND = check
