"""One output helper: rich text for people, JSON for scripts; one-line errors on stderr."""

from __future__ import annotations

import json
import os
import sys
from functools import lru_cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console


@lru_cache(maxsize=1)
def console() -> Console:
    """rich loads only when something is rendered for people (not for --json)."""
    from rich.console import Console

    # Pipes and CI logs get a wide page rather than rich's 80-column fallback.
    return Console(highlight=False, emoji=False, width=None if sys.stdout.isatty() or "COLUMNS" in os.environ else 120)


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2) + "\n")


def error_line(message: str) -> None:
    text = " ".join(str(message).split())
    sys.stderr.write(f"kvplan: error: {text}\n")
