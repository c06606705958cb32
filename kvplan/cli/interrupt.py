"""Ctrl-C ends kvplan with exit code 130 (128 + SIGINT, what a shell reports for it) and no traceback, at any
moment. Where nothing is held yet or any longer (the CLI's modules loading, torch's import, the interpreter's
shutdown) it exits at once: a KeyboardInterrupt there can land in a __del__ or a weakref callback, where Python
prints it as 'Exception ignored' and carries on. While a command runs it stays a KeyboardInterrupt, so that what
the command holds (verify's pool) is freed on the way out. This module is imported before anything else of the
CLI, so it imports only what the interpreter has loaded at start."""

from __future__ import annotations

import _signal as signal  # the C module: signal.py would first import enum (7 ms)
import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import FrameType, TracebackType

INTERRUPTED = 130


def exit_at_once(signum: int, frame: FrameType | None) -> None:
    os._exit(INTERRUPTED)


def _on_ctrl_c(handler: object) -> object:
    """Set the SIGINT handler, returning the one before; outside the main thread (which alone may) nothing."""
    try:
        return signal.signal(signal.SIGINT, handler)
    except ValueError:
        return None


def exit_at_once_on_ctrl_c() -> None:
    _on_ctrl_c(exit_at_once)


def interrupt_on_ctrl_c() -> None:
    _on_ctrl_c(signal.default_int_handler)


class ctrl_c_exits_at_once:  # noqa: N801 (used as a context manager, named as one)
    """For a stretch that holds nothing, such as a heavy import; the handler before it is put back after."""

    def __enter__(self) -> None:
        self.before = _on_ctrl_c(exit_at_once)

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        if self.before is not None:
            _on_ctrl_c(self.before)
