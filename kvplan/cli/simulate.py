"""kvplan simulate (placeholder until its issue lands)."""

from __future__ import annotations

from kvplan.errors import KvplanError

HELP = "Not built yet."


def simulate() -> int:
    raise KvplanError("kvplan simulate is not built yet")


COMMAND = simulate
