"""The deployments the oracle feeds each release: kvplan's bundled model specs (trimmed Hugging Face configs) on
catalogue GPUs, with the KV memory given where the planning code needs it. Pure Python: read by generate.py, and
each case's kvplan arguments are what tests/test_oracle.py runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
GiB = 2**30

# (model, tensor parallel size): plain decoders and sliding-window models whose layer kinds the config states
# (layer_types, or Gemma 2's alternation); vllm_adapter.layer_kinds reads them.
KV_MODELS = (
    ("Qwen/Qwen2.5-0.5B-Instruct", 1),
    ("Qwen/Qwen2.5-7B", 1),
    ("meta-llama/Llama-3.1-8B", 1),
    ("Qwen/Qwen3-8B", 1),
    ("mistralai/Mistral-Nemo-Instruct-2407", 1),
    ("microsoft/phi-4", 1),
    ("meta-llama/Llama-2-7b-hf", 1),
    ("Qwen/Qwen2.5-32B", 2),
    ("meta-llama/Llama-3.1-70B", 4),
    ("google/gemma-2-9b-it", 1),
    ("google/gemma-3-1b-it", 1),
    ("openai/gpt-oss-20b", 1),
)
KV_MEMORY = (4 * GiB, 20 * GiB)
# GPUs for the batch, utilization and capture-size defaults (the tiers by name and memory, SM100, SM120)
DEFAULT_GPUS = ("h100-sxm", "h200", "a100-80gb-sxm", "a100-40gb-sxm", "l40s", "rtx4090", "b200",
                "rtx-pro-6000-blackwell", "l4")
DEFAULTS_MODEL = "Qwen/Qwen2.5-7B"


def spec_config(model: str) -> dict[str, Any]:
    path = REPO / "model_specs" / (model.replace("/", "__") + ".json")
    config = dict(json.loads(path.read_text())["config"])
    config["_name"] = model
    return config


def gpu(gpu_id: str) -> dict[str, Any]:
    for entry in json.loads((REPO / "kvplan" / "data" / "gpus.json").read_text())["gpus"]:
        if entry["id"] == gpu_id:
            return {"id": gpu_id, "name": entry["name"], "memory": entry["memory_bytes"],
                    "capability": entry["compute_capability"], "nvml_mib": entry.get("nvml_total_mib")}
    raise KeyError(gpu_id)


def kvplan_args(case: dict[str, Any], version: str) -> list[str]:
    """The kvplan estimate arguments of a case (knobs by vLLM's flag names)."""
    args = ["--model", case["model"], "--gpu", case["gpu"]["id"], "--vllm-version", version]
    for knob, value in sorted(case.get("knobs", {}).items()):
        args += ["--" + knob.replace("_", "-"), str(value)]
    if case["kind"] == "kv":
        args += ["--kv-cache-memory-bytes", str(case["kv_memory"])]
    return args


def cases() -> list[dict[str, Any]]:
    """Every deployment, each with an id stable across releases."""
    found: list[dict[str, Any]] = []
    for model, tp in KV_MODELS:
        config = spec_config(model)
        longest = config.get("max_position_embeddings") or 8192
        for memory in KV_MEMORY:
            for length in sorted({min(longest, 8192), min(longest, 32768)}):
                if memory == KV_MEMORY[0] and length != min(longest, 32768):
                    continue  # the small memory at the long context only
                knobs: dict[str, Any] = {"max_model_len": length}
                if tp > 1:
                    knobs["tensor_parallel_size"] = tp
                found.append({"kind": "kv", "model": model, "config": config, "gpu": gpu("h100-sxm"),
                              "knobs": knobs, "kv_memory": memory})
    for model, extra in (("Qwen/Qwen2.5-7B", {"kv_cache_dtype": "fp8"}), ("meta-llama/Llama-3.1-8B",
                                                                         {"kv_cache_dtype": "fp8"}),
                         ("Qwen/Qwen2.5-7B", {"block_size": 32}), ("google/gemma-3-1b-it", {"block_size": 32})):
        found.append({"kind": "kv", "model": model, "config": spec_config(model), "gpu": gpu("h100-sxm"),
                      "knobs": {"max_model_len": 32768, **extra}, "kv_memory": 10 * GiB})
    for gpu_id in DEFAULT_GPUS:
        found.append({"kind": "defaults", "model": DEFAULTS_MODEL, "config": spec_config(DEFAULTS_MODEL),
                      "gpu": gpu(gpu_id), "knobs": {"max_model_len": 32768}})
    for index, case in enumerate(found):
        case["id"] = index
    return found


# SGLang: ServerArgs defaults by GPU (the memory tiers at 20, 35, 60, 90 and 160 GiB, and TP 4), one plain decoder
SGLANG_GPUS = ("t4", "rtx4090", "rtx5090", "l40s", "a100-40gb-sxm", "a100-80gb-sxm", "h100-sxm", "h200", "b200",
               "rtx-pro-6000-blackwell")
SGLANG_MODELS = (("Qwen/Qwen2.5-7B", 1), ("Qwen/Qwen2.5-7B", 4), ("meta-llama/Llama-3.1-8B", 1))
# (model, GPU, TP, ServerArgs keywords, kvplan flags): the rules that change by release (issue 18 section 3): the
# MLA prefill-graph reserve, attention DP inside TP (DeepSeek's standard launch), the prefill graphs capped by
# --max-total-tokens, n-gram speculation (no draft weights; prefill graphs off in 0.5.10), chunked prefill off
SGLANG_EXTRA = (
    ("deepseek-ai/DeepSeek-V3", "h200", 8, {}, []),
    ("deepseek-ai/DeepSeek-V3", "h200", 8, {"dp_size": 8, "enable_dp_attention": True},
     ["--dp", "8", "--enable-dp-attention"]),
    ("Qwen/Qwen2.5-7B", "h100-sxm", 1, {"max_total_tokens": 3000}, ["--max-total-tokens", "3000"]),
    ("Qwen/Qwen2.5-7B", "h100-sxm", 4, {"dp_size": 2, "enable_dp_attention": True},
     ["--dp", "2", "--enable-dp-attention"]),
    ("Qwen/Qwen2.5-7B", "h100-sxm", 1, {"speculative_algorithm": "NGRAM"},
     ["--speculative-config", '{"method": "ngram", "num_speculative_tokens": 4}']),
    # chunked prefill off: the activation reserve counts max_prefill_tokens, no prefill graph sizes (MLA: 1.5 GiB)
    ("Qwen/Qwen2.5-7B", "h100-sxm", 1, {"chunked_prefill_size": -1}, ["--chunked-prefill-size", "-1"]),
    ("deepseek-ai/DeepSeek-V3", "h200", 8, {"chunked_prefill_size": -1}, ["--chunked-prefill-size", "-1"]),
)


def sglang_args(case: dict[str, Any], version: str) -> list[str]:
    """kvplan estimate arguments of an SGLang case, at the release that answered it."""
    args = ["--engine", "sglang", "--model", case["model"], "--gpu", case["gpu"]["id"],
            "--context-length", str(case["context_length"]), "--engine-version", version]
    if case["tp"] > 1:
        args += ["--tp-size", str(case["tp"])]
    return args + case.get("flags", [])


def sglang_cases() -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for model, tp in SGLANG_MODELS:
        for gpu_id in SGLANG_GPUS:
            found.append({"kind": "defaults", "model": model, "config": spec_config(model), "gpu": gpu(gpu_id),
                          "tp": tp, "context_length": 32768})
    for model, gpu_id, tp, server_args, flags in SGLANG_EXTRA:
        found.append({"kind": "defaults", "model": model, "config": spec_config(model), "gpu": gpu(gpu_id),
                      "tp": tp, "context_length": 32768, "server_args": server_args, "flags": flags})
    for index, case in enumerate(found):
        case["id"] = index
    return found
