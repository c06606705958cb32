"""A one-line progress display on stderr, shown only on a terminal (never with --json or in a pipe)."""

from __future__ import annotations

import sys


class Progress:
    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled and sys.stderr.isatty()

    def step(self, text: str) -> None:
        if self.enabled:
            sys.stderr.write(f"\r\033[K{text}...")
            sys.stderr.flush()

    def done(self) -> None:
        if self.enabled:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()
