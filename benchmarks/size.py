"""How long kvplan size takes over the whole catalogue, 1..8 GPUs, every split and format, and how many candidates
it looks at. The target: under 2 s a search on a 2-core machine (the model's spec is loaded once per search)."""

from __future__ import annotations

import time

from kvplan.hardware import catalogue
from kvplan.sizing import size

SEARCHES = [
    # (model, targets, what it shows)
    ("Qwen/Qwen2.5-7B", ["32@8K"], "met on one GPU of every type: each GPU stops at its first count"),
    ("meta-llama/Llama-3.1-70B", ["32@8K", "4@128K"], "two targets, several GPUs"),
    ("meta-llama/Llama-3.1-70B", ["5000@128K"], "nothing meets it: every GPU x count x split is planned"),
    ("Qwen/Qwen3-30B-A3B", ["64@32K"], "a MoE model"),
]

if __name__ == "__main__":
    print(f"catalogue: {len(catalogue())} GPUs; 1..8 GPUs each; KV auto,fp8; weights none,fp8,awq")
    print(f"{'model':28} {'targets':22} {'seconds':>8} {'searched':>9} {'planned':>8} {'found':>6}  what it shows")
    for model, targets, why in SEARCHES:
        started = time.perf_counter()
        sizing = size(model, targets, max_gpus=8, quantization="none,fp8,awq")
        elapsed = time.perf_counter() - started
        print(f"{model:28} {','.join(targets):22} {elapsed:8.2f} {sizing.searched:9,} {sizing.planned:8,} "
              f"{len(sizing.options):6}  {why}")
