"""Key lines of a checked file, scoped to the part of it one deployment came from. The lines themselves come from
the YAML parser's node marks (kvplan.deployment.config_file.load_located)."""

from __future__ import annotations

from kvplan.deployment.config_file import KeyPath as Path
from kvplan.errors import LocatedError

__all__ = ["LocatedError", "Path", "scoped"]


def scoped(lines: dict[Path, int], prefix: Path) -> dict[Path, int]:
    """The lines under prefix, with the prefix cut off."""
    size = len(prefix)
    return {path[size:]: line for path, line in lines.items() if path[:size] == prefix and len(path) > size}
