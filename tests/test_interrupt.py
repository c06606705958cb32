"""Ctrl-C at any moment of a real kvplan process ends it with exit code 130 and no traceback: while the CLI's
modules load, while verify imports torch, and while a command runs. Each run is a real subprocess sent SIGINT
when it announces (on stderr) that it reached the moment under test."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
VERIFY = ["verify", "--device", "cpu", "--gpu", "h100", "--model", "Qwen/Qwen2.5-0.5B", "--kv-cache-memory-bytes",
          "4MiB", "--batch", "2", "--context", "64"]
ANNOUNCE = "reached the moment\n"

# Runs kvplan as its console script does (kvplan.__main__:main), announcing the first import of one module.
AT_IMPORT = """
import sys

class Announce:
    def find_spec(self, name, path=None, target=None):
        if name == {module!r}:
            sys.meta_path.remove(self)
            sys.stderr.write({announce!r})
            sys.stderr.flush()
        return None

sys.meta_path.insert(0, Announce())
from kvplan.__main__ import main
main()
"""

# A decode step that announces itself, then runs for a minute: the interrupt lands inside the command.
IN_THE_DECODE = """
import sys, time
from kvplan.verify import run

def slow_decode(*args, **kwargs):
    sys.stderr.write({announce!r})
    sys.stderr.flush()
    time.sleep(60)

run.run_decode = slow_decode
from kvplan.__main__ import main
main()
"""


def interrupted(script: str, args: list[str]) -> subprocess.CompletedProcess[str]:
    child = subprocess.Popen([sys.executable, "-c", script, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, cwd=ROOT)
    assert child.stderr is not None
    try:
        line = child.stderr.readline()
        assert line == ANNOUNCE, line + child.stderr.read()
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=120)
    finally:
        child.kill()
    return subprocess.CompletedProcess(child.args, child.returncode, out, err)


@pytest.mark.parametrize("module", [
    "typer",  # the CLI's own modules loading (typer, click, rich: tens of ms)
    "kvplan.cli.verify",  # the command's module
    "torch",  # verify's lazy import of torch (seconds)
    "torch.nn",  # deep inside it
])
def test_ctrl_c_while_loading_exits_130(module):
    pytest.importorskip("torch")
    result = interrupted(AT_IMPORT.format(module=module, announce=ANNOUNCE), VERIFY)
    assert result.returncode == 130 and "Traceback" not in result.stderr and "KeyboardInterrupt" not in result.stderr
    assert result.stdout == ""


def test_ctrl_c_while_a_command_runs_exits_130():
    pytest.importorskip("torch")
    result = interrupted(IN_THE_DECODE.format(announce=ANNOUNCE), VERIFY)
    assert result.returncode == 130 and "Traceback" not in result.stderr and result.stdout == ""


def test_the_entry_point_takes_ctrl_c_over_before_anything_heavy():
    # everything imported before the handler is set is kvplan's own start and one tiny stdlib module: typing,
    # signal.py (enum) or typer here would widen the window in which an interrupt ends in a traceback
    probe = "import sys; before = set(sys.modules); import kvplan.__main__; print(sorted(set(sys.modules) - before))"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert result.stdout.strip() == "['__future__', 'kvplan', 'kvplan.__main__', 'kvplan.cli', 'kvplan.cli.interrupt']"
    entry = re.search(r'^kvplan = "(.*)"$', (ROOT / "pyproject.toml").read_text(), re.MULTILINE)
    assert entry is not None and entry.group(1) == "kvplan.__main__:main"
