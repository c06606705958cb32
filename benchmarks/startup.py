"""Median wall time of `kvplan estimate` on a bundled model against a bare `python -c pass`.
Target: at most 0.25 s median on a 2-core machine. Prints figures; asserts nothing."""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import time

RUNS = 21
COMMANDS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "kvplan estimate (fits)": [sys.executable, "-m", "kvplan.cli.app", "estimate", "--model", "Qwen/Qwen2.5-7B",
                               "--gpu", "rtx3090", "--max-model-len", "32768"],
    "kvplan estimate (does not fit: levers)": [sys.executable, "-m", "kvplan.cli.app", "estimate", "--model",
                                               "Qwen/Qwen2.5-7B", "--gpu", "rtx3090"],
    "kvplan estimate --json": [sys.executable, "-m", "kvplan.cli.app", "estimate", "--model", "Qwen/Qwen2.5-7B",
                               "--gpu", "rtx3090", "--json"],
    "kvplan models list": [sys.executable, "-m", "kvplan.cli.app", "models", "list"],
}


def median_seconds(command: list[str]) -> float:
    times = []
    for _ in range(RUNS):
        start = time.perf_counter()
        subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


if __name__ == "__main__":
    console_script = shutil.which("kvplan")
    if console_script:
        COMMANDS["kvplan (console script)"] = [console_script, "estimate", "--model", "Qwen/Qwen2.5-7B", "--gpu",
                                               "rtx3090", "--max-model-len", "32768"]
    baseline = None
    for name, command in COMMANDS.items():
        seconds = median_seconds(command)
        baseline = seconds if baseline is None else baseline
        print(f"{name:45s} median {seconds * 1000:7.1f} ms  (+{(seconds - baseline) * 1000:6.1f} ms over bare python)")
