"""One output helper: the page width and colour rule, rich for tables, JSON for scripts; one-line errors."""

from __future__ import annotations

import json
import os
import shutil
import sys
from functools import lru_cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console


def terminal_width() -> int:
    """COLUMNS when set, else the terminal's width, else 120: pipes and CI logs get a wide page rather than
    an 80-column fallback."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 20:
        return int(columns)
    if sys.stdout.isatty():
        return shutil.get_terminal_size().columns
    return 120


def colour_wanted() -> bool:
    if os.environ.get("NO_COLOR"):
        return False
    return bool(os.environ.get("FORCE_COLOR")) or sys.stdout.isatty()


@lru_cache(maxsize=1)
def console() -> Console:
    """rich loads only when something is rendered for people (not for --json)."""
    from rich.console import Console

    return Console(highlight=False, emoji=False, width=terminal_width())


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2) + "\n")


def error_line(message: str) -> None:
    text = " ".join(str(message).split())
    sys.stderr.write(f"kvplan: error: {text}\n")
