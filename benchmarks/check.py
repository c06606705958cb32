"""kvplan check's speed on a fleet: 100 files of 10 deployments each (1,000 deployments, a mix of models, GPUs
and lengths, most repeated across files as fleets repeat their set-ups), checked by one process. Prints the
wall time of the whole command (start-up included) and of the check itself, and the command's CPU time (what
the wall time is on an idle core; the wall time grows when other work shares the cores). Target: under 5 s
on 2 cores."""

from __future__ import annotations

import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MODELS = ("Qwen/Qwen2.5-7B", "meta-llama/Llama-3.1-8B", "meta-llama/Llama-3.1-70B", "Qwen/Qwen3-32B",
          "google/gemma-3-27b-it", "mistralai/Mixtral-8x7B-v0.1")
GPUS = ("h100", "a100-80gb-sxm", "l40s", "h200")
LENGTHS = (8192, 16384, 32768)
FILES, PER_FILE = 100, 10


def fleet_file(index: int) -> str:
    lines = ["kvplan:", '  vllm_version: "0.11"', "deployments:"]
    for slot in range(PER_FILE):
        n = index * PER_FILE + slot
        model = MODELS[n % len(MODELS)]
        tp = 4 if "70B" in model or "Mixtral" in model or "32B" in model or "27b" in model else 1
        lines += [f"  - name: svc-{index}-{slot}", f"    model: {model}", f"    gpu: {GPUS[n % len(GPUS)]}",
                  f"    gpu_count: {tp}", f"    tensor_parallel_size: {tp}",
                  f"    max_model_len: {LENGTHS[n % len(LENGTHS)]}", "    gpu_memory_utilization: 0.9",
                  "    enable-prefix-caching: true", f"    min_concurrency: {1 + n % 4}",
                  f"    min_requests_at: {{context: 4096, requests: {1 + n % 8}}}"]
    return "\n".join(lines) + "\n"


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        for index in range(FILES):
            (root / f"fleet-{index:03}.yaml").write_text(fleet_file(index))
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        result = subprocess.run([sys.executable, "-m", "kvplan.cli.app", "check", str(root), "--format", "json"],
                                capture_output=True, text=True)
        command = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime

        from kvplan.check import Options, check_paths

        started = time.perf_counter()
        report = check_paths([str(root)], Options())
        in_process = time.perf_counter() - started
    print(f"{FILES} files, {report.deployments} deployments, {len(report.findings)} findings, exit {result.returncode}")
    print(f"kvplan check (one process, start-up included): {command:.2f} s wall, {cpu:.2f} s CPU")
    print(f"check_paths in process:                        {in_process:.2f} s")


if __name__ == "__main__":
    main()
