"""kvplan verify (placeholder until its issue lands)."""

from __future__ import annotations

from kvplan.errors import KvplanError

HELP = "Not built yet."


def verify() -> int:
    raise KvplanError("kvplan verify is not built yet")


COMMAND = verify
