"""kvplan size (placeholder until its issue lands)."""

from __future__ import annotations

from kvplan.errors import KvplanError

HELP = "Not built yet."


def size() -> int:
    raise KvplanError("kvplan size is not built yet")


COMMAND = size
