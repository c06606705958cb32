"""The entry points' exit (kvplan/cli/app.py end()): after a command that reads and prints (module attribute
ENDS_AT_ONCE), with no atexit handler and no other thread, the process ends with os._exit once its output is
flushed, skipping the interpreter's shutdown; anything else exits as before. A module-level object whose __del__
prints is the witness: the shutdown's module teardown calls it, os._exit does not."""

from __future__ import annotations

import atexit
import subprocess
import sys
import threading

import pytest

from kvplan.cli import app

WITNESS = """
import sys
class Witness:
    def __del__(self):
        sys.stdout.write("shutdown ran\\n")
witness = Witness()
{setup}
sys.argv = ["kvplan", *{args!r}]
from kvplan.__main__ import main
main()
"""
ESTIMATE = ["estimate", "--model", "Qwen/Qwen2.5-7B", "--gpu", "rtx3090", "--max-model-len", "32768"]


def entry_point(args, setup=""):
    return subprocess.run([sys.executable, "-c", WITNESS.format(args=args, setup=setup)], capture_output=True,
                          text=True, timeout=120)


def test_an_estimate_ends_at_once_with_its_output_and_exit_code():
    fits = entry_point(ESTIMATE)
    assert fits.returncode == 0 and fits.stdout.startswith("╭") and fits.stdout.endswith("╯\n")
    assert "shutdown ran" not in fits.stdout
    refused = entry_point(["estimate", "--model", "Qwen/Qwen2.5-7B", "--gpu", "nope"])
    assert refused.returncode == 2 and refused.stderr.startswith("kvplan: error: --gpu: unknown GPU 'nope'")
    assert "shutdown ran" not in refused.stdout
    # computed but does not fit: exit code 1. Its default max_model_len, 131,072 tokens x 57,344 B of KV a token
    # (2 x 28 layers x 4 KV heads x 128 x 2 B) = 7.00 GiB, is more than the ~5.8 GiB pool an RTX 3090 leaves
    assert entry_point(["estimate", "--model", "Qwen/Qwen2.5-7B", "--gpu", "rtx3090", "--json"]).returncode == 1


def test_other_commands_and_registered_handlers_get_the_shutdown():
    assert "shutdown ran" in entry_point(["verify", "--help"]).stdout  # verify holds a device: no ENDS_AT_ONCE
    handler = entry_point(ESTIMATE, setup="import atexit; atexit.register(print, 'handler ran')")
    assert handler.returncode == 0 and handler.stdout.endswith("handler ran\nshutdown ran\n")


class Ended(Exception):
    pass


@pytest.fixture
def exits(monkeypatch):
    """end() run in this process: which exit it takes, with CPython's atexit count set to none registered."""
    taken = []

    def at_once(code):
        taken.append(("os._exit", code))
        raise Ended

    monkeypatch.setattr(app.os, "_exit", at_once)
    monkeypatch.setattr(atexit, "_ncallbacks", lambda: 0)
    monkeypatch.setattr(app, "_ends_at_once", True)
    # threads other tests of the session leave running (a served app, a browser) count as none: this test's own
    # thread is the one that must keep the ordinary exit
    others, count = threading.active_count() - 1, threading.active_count
    monkeypatch.setattr(threading, "active_count", lambda: count() - others)

    def end(code):
        with pytest.raises((Ended, SystemExit)) as raised:
            app.end(code)
        if raised.type is SystemExit:
            taken.append(("sys.exit", raised.value.code))
        return taken[-1]

    return end


def test_end_takes_os_exit_only_when_nothing_waits_for_the_shutdown(exits, monkeypatch):
    assert exits(1) == ("os._exit", 1)
    monkeypatch.setattr(app, "_ends_at_once", False)
    assert exits(1) == ("sys.exit", 1)
    monkeypatch.setattr(app, "_ends_at_once", True)
    monkeypatch.setattr(atexit, "_ncallbacks", lambda: 1)
    assert exits(0) == ("sys.exit", 0)
    monkeypatch.setattr(atexit, "_ncallbacks", lambda: 0)
    release = threading.Event()
    worker = threading.Thread(target=release.wait)
    worker.start()
    try:
        assert exits(0) == ("sys.exit", 0)
    finally:
        release.set()
        worker.join()
    assert exits(2) == ("os._exit", 2)


def test_a_failed_flush_takes_the_ordinary_exit(exits, monkeypatch):
    class ClosedPipe:
        def flush(self):
            raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(sys, "stdout", ClosedPipe())
    assert exits(0) == ("sys.exit", 0)


def test_the_collector_stays_off_only_for_a_command_that_ends_at_once(capsys):
    """The entry points start with gc off; main() turns it back on for verify (its pool), never off itself."""
    import gc

    try:
        gc.disable()
        assert app.main(["gpus", "--json"]) == 0 and not gc.isenabled()
        assert app.main(["verify", "--help"]) == 0 and gc.isenabled()
        assert app.main(["gpus", "--json"]) == 0 and gc.isenabled()  # an in-process caller's gc is left as it was
    finally:
        gc.enable()
    capsys.readouterr()
