"""kvplan verify on one GPU (written for an H200): the plan for Qwen/Qwen2.5-7B held against the device with the
probe, then the paged decode's KV bandwidth at batch 64 x 4K context (gather kernel; FlexAttention on a smaller
pool). Prints figures; asserts nothing. Each run is bounded, the whole well under 5 minutes.

    python benchmarks/verify_device.py                      # on the GPU machine, kvplan[verify] installed
    python benchmarks/verify_device.py --device cpu --gpu h200   # a local smoke run of the script itself"""

from __future__ import annotations

import json
import subprocess
import sys
import time

MODEL = "Qwen/Qwen2.5-7B"
RUNS = {
    "plan + probe": ["--probe"],
    "decode batch 64 x 4K (gather)": ["--batch", "64", "--context", "4K"],
    # FlexAttention sees the whole physical pool as its KV sequence: a 16 GiB pool keeps its block mask small.
    "decode batch 64 x 4K (flex, 16 GiB pool)": ["--batch", "64", "--context", "4K", "--kernel", "flex",
                                                 "--kv-cache-memory-bytes", "16GiB"],
}
LIMIT_S = 90


def verify(args: list[str]) -> tuple[int, dict | None, str, float]:
    command = [sys.executable, "-m", "kvplan.cli.app", "verify", "--model", MODEL, "--json", *args]
    began = time.perf_counter()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=LIMIT_S)
    except subprocess.TimeoutExpired:
        return 124, None, f"timed out after {LIMIT_S} s", time.perf_counter() - began
    elapsed = time.perf_counter() - began
    try:
        return done.returncode, json.loads(done.stdout), done.stderr.strip(), elapsed
    except json.JSONDecodeError:
        return done.returncode, None, done.stderr.strip()[-400:], elapsed


def figures(document: dict) -> list[str]:
    device, plan, allocated = document["device"], document["plan"], document["allocated"]
    decode, probe = document["decode"], document["probe"]
    lines = [f"device {device['name']} (catalogue {device['catalogue_id']}): total {device['total_bytes']:,} B, "
             f"free {device['free_bytes']:,} B",
             f"plan {plan['num_blocks']:,} blocks = {plan['pool_bytes']:,} B; allocated {allocated['num_blocks']:,} "
             f"blocks = {allocated['pool_bytes']:,} B, bytes ok {allocated['ok']}, fits {allocated['fits']}"]
    if probe:
        lines.append(f"probe: largest pool {probe['max_blocks']:,} blocks; plan vs reality {probe['plan_error_pct']}%")
    if decode:
        peak = decode["peak_bandwidth_gbps"]
        share = (f" = {decode['bandwidth_gbps'] / peak * 100:.1f}% of the catalogue's {peak:,.0f} GB/s"
                 if peak and decode["bandwidth_gbps"] else " (no catalogue peak)")
        lines.append(f"decode batch {decode['batch']}: {decode['seconds'] * 1000:.2f} ms, {decode['kv_bytes_read']:,} "
                     f"B of KV, {decode['bandwidth_gbps']} GB/s{share}; max |err| {decode['max_abs_err']} "
                     f"(tolerance {decode['tolerance']}), ok {decode['ok']}")
    lines += [f"note: {note}" for note in document["notes"]]
    return lines


def main() -> None:
    extra = sys.argv[1:]
    for name, args in RUNS.items():
        code, document, stderr, elapsed = verify([*args, *extra])
        print(f"== {name}: exit {code}, {elapsed:.1f} s wall")
        if document is None:
            print(f"   no document: {stderr}")
            continue
        for line in figures(document):
            print(f"   {line}")


if __name__ == "__main__":
    main()
