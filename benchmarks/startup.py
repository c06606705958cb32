"""Median wall time of `kvplan estimate` on a bundled model against a bare `python -c pass`.
Target: at most 0.10 s median on a 2-core machine. Prints figures; asserts nothing. Each command runs as
`python -m kvplan`, the console script's entry point (kvplan/__main__.py: the collector off at start, os._exit
after a command that ends at once; kvplan/cli/app.py end()).

`--instructions` counts instructions with valgrind instead (steady where wall time is not); `--where` splits one
estimate's time into the CLI's import (typer and click), the classes dataclasses builds, and the rest.
Bytecode is written and warmed up first, as on a user's machine (pip compiles an installed package); a
PYTHONDONTWRITEBYTECODE in the environment would otherwise recompile every module on every run."""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import time

RUNS = 21
COMMANDS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "kvplan estimate (fits)": [sys.executable, "-m", "kvplan", "estimate", "--model", "Qwen/Qwen2.5-7B",
                               "--gpu", "rtx3090", "--max-model-len", "32768"],
    "kvplan estimate (does not fit: levers)": [sys.executable, "-m", "kvplan", "estimate", "--model",
                                               "Qwen/Qwen2.5-7B", "--gpu", "rtx3090"],
    "kvplan estimate --json": [sys.executable, "-m", "kvplan", "estimate", "--model", "Qwen/Qwen2.5-7B",
                               "--gpu", "rtx3090", "--max-model-len", "32768", "--json"],
    "kvplan estimate -- vllm serve ...": [sys.executable, "-m", "kvplan", "estimate", "--gpu", "rtx3090", "--",
                                          "vllm", "serve", "Qwen/Qwen2.5-7B", "--max-model-len", "32768", "--port",
                                          "8000"],
    "kvplan models list": [sys.executable, "-m", "kvplan", "models", "list"],
}


ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def median_seconds(command: list[str]) -> tuple[float, float]:
    """Median wall time and median CPU time (user + system) of the command, in seconds. CPU time is the
    steadier figure on a shared machine."""
    import resource

    subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, env=ENV)  # warm-up
    walls, cpus = [], []
    for _ in range(RUNS):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, env=ENV)
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return statistics.median(walls), statistics.median(cpus)


def instructions(command: list[str]) -> int | None:
    """Instructions the command executes, counted by valgrind's callgrind: the same on every run, so two
    versions can be compared on a machine whose clock wanders. None without valgrind."""
    import re

    if shutil.which("valgrind") is None:
        return None
    subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, env=ENV)  # bytecode
    result = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *command],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False, env=ENV)
    found = re.search(r"refs:\s+([\d,]+)", result.stderr)
    return int(found.group(1).replace(",", "")) if found else None


# Run in a child: typer's import timed on its own, then the estimate with dataclasses' class builder timed.
WHERE = """
import sys, time
start = time.perf_counter()
import typer
cli = time.perf_counter() - start
import dataclasses
built = [0, 0.0]
build = dataclasses._process_class
def timed(cls, *args, **kwargs):
    start = time.perf_counter()
    try:
        return build(cls, *args, **kwargs)
    finally:
        built[0] += 1
        built[1] += time.perf_counter() - start
dataclasses._process_class = timed
from kvplan.cli.app import main
main({args!r})
total = time.perf_counter() - start
kvplan = sum(name.startswith("kvplan") for name in sys.modules)
sys.stderr.write(f"WHERE {{total * 1000:.1f}} {{cli * 1000:.1f}} {{built[0]}} {{built[1] * 1000:.1f}} {{kvplan}}\\n")
"""


def where(command: list[str]) -> str:
    """One estimate split three ways, each part's median over RUNS (after the interpreter's own start)."""
    code = WHERE.format(args=command[3:])
    rows = []
    for _ in range(RUNS):
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False, env=ENV)
        found = [line.split()[1:] for line in result.stderr.splitlines() if line.startswith("WHERE ")]
        rows += found[:1]
    total, cli, count, classes, modules = (statistics.median(float(row[i]) for row in rows) for i in range(5))
    return (f"{total:6.1f} ms: typer, click and the stdlib they load {cli:5.1f}, {count:.0f} dataclasses built "
            f"{classes:5.1f}, the rest {total - cli - classes:5.1f} ({modules:.0f} kvplan modules)")


if __name__ == "__main__":
    if "--instructions" in sys.argv:
        for name, command in COMMANDS.items():
            count = instructions(command)
            print(f"{name:40s} {count / 1e6:8.1f} M instructions" if count else f"{name:40s} (no valgrind)")
        sys.exit(0)
    if "--where" in sys.argv:
        for name, command in COMMANDS.items():
            if "estimate" in name:
                print(f"{name:40s} {where(command)}")
        sys.exit(0)
    console_script = shutil.which("kvplan")
    if console_script:
        COMMANDS["kvplan (console script)"] = [console_script, "estimate", "--model", "Qwen/Qwen2.5-7B", "--gpu",
                                               "rtx3090", "--max-model-len", "32768"]
    baseline = None
    for name, command in COMMANDS.items():
        wall, cpu = median_seconds(command)
        baseline = wall if baseline is None else baseline
        print(f"{name:40s} median {wall * 1000:6.1f} ms wall (+{(wall - baseline) * 1000:6.1f} over bare python), "
              f"{cpu * 1000:6.1f} ms CPU")
