"""Issue 20 in the other commands: size keeps LoRA slots and weight offloading as requirements of the pasted
command (and prints them in its launch lines) and searches MIG slices named in --gpus; check's request-fits rule
(KV011) fails a vLLM --config file whose LoRA slots leave no max_model_len request, where the same file without
them passes."""

from __future__ import annotations

import json
import subprocess
import sys

from kvplan.api import estimate


def kvplan(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kvplan.cli.app", *args], capture_output=True, text=True,
                          timeout=300)


def test_check_fails_a_deployment_whose_lora_slots_leave_no_request(tmp_path):
    lora = estimate("Qwen/Qwen2.5-7B", gpu="rtx4090", max_model_len=96000, enable_lora=True, max_loras=4,
                    max_lora_rank=64)
    plain = estimate("Qwen/Qwen2.5-7B", gpu="rtx4090", max_model_len=96000)
    # 1,291,845,632 B of A and B (tests/test_lora_issue20.py) take the pool below one 96,000-token request
    assert plain.capacity.fits and not lora.capacity.fits
    assert lora.capacity.max_model_len_that_fits < 96000 <= plain.capacity.max_model_len_that_fits
    for name, extra in (("plain.yaml", ""), ("lora.yaml", "enable-lora: true\nmax-loras: 4\nmax-lora-rank: 64\n")):
        (tmp_path / name).write_text(f"model: Qwen/Qwen2.5-7B\nmax-model-len: 96000\n{extra}", encoding="utf-8")
    result = kvplan("check", "--gpu", "rtx4090", "--kind", "vllm-config", "--select", "KV011", "--format", "json",
                    str(tmp_path / "plain.yaml"), str(tmp_path / "lora.yaml"))
    assert result.returncode == 1
    verdicts = {(f["file"].rsplit("/", 1)[-1], f["rule"]): f["status"] for f in json.loads(result.stdout)}
    assert verdicts[("plain.yaml", "KV011")] == "pass" and verdicts[("lora.yaml", "KV011")] == "fail"


def test_size_keeps_the_lora_slots_and_prints_them():
    result = kvplan("size", "-m", "Qwen/Qwen2.5-7B", "--target", "8@32K", "--gpus", "h100", "--json", "--",
                    "vllm", "serve", "Qwen/Qwen2.5-7B", "--enable-lora", "--max-loras", "4", "--max-lora-rank", "64")
    best = json.loads(result.stdout)["options"][0]
    assert "--enable-lora --max-loras 4 --max-lora-rank 64" in best["command"]
    direct = estimate("Qwen/Qwen2.5-7B", gpu=best["gpu"], max_model_len=32768, enable_lora=True, max_loras=4,
                      max_lora_rank=64, kv_cache_dtype=best["kv_cache_dtype"])
    assert best["kv_tokens"] == direct.capacity.tokens


def test_size_searches_mig_slices():
    result = kvplan("size", "-m", "Qwen/Qwen2.5-7B", "--target", "2@16K", "--gpus",
                    "a100-80gb-sxm:1g.10gb,a100-80gb-sxm:2g.20gb", "--json")
    best = json.loads(result.stdout)["options"][0]
    # the 7B's 15.26 GB of weights do not fit in a 9.50 GiB slice; the 19.50 GiB one holds 39,440 tokens: budget
    # int(20,937,965,568 x 0.92) = 19,262,928,322, less the weights and RoPE table 15,264,787,456, the activation
    # 736,526,336 (V2's sampler side at 256 x 2,048 as on an RTX 3090, tests/test_cli.py: compute capability 8.0 has
    # the same 8,519,680 B cuBLAS workspace), non-torch 268,435,456 and graphs 730,857,472: 2,262,321,602 B
    # // 917,504 = 2,465 blocks x 16
    assert (best["gpu"], best["total_memory_bytes"], best["kv_tokens"]) == ("a100-80gb-sxm:2g.20gb", 20_937_965_568,
                                                                           39_440)
