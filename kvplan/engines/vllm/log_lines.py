"""What vLLM's startup log prints about sizing, one kind of line each, as explain reads it."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from kvplan.engines.log_lines import (
    COUNT,
    GIB,
    NUMBER,
    Figures,
    LineKind,
    LogLines,
    Place,
    Utilization,
    count,
    figure,
    gb_bytes,
    ratio,
)
from kvplan.engines.vllm.literals import config_pairs, python_dict
from kvplan.units import GiB

if TYPE_CHECKING:
    from kvplan.explain.record import LoggedRun

ENGINE = "vllm"
PRINT_HALF_STEP = int(0.005 * GiB)  # vLLM prints GiB with two decimals: a printed figure is within this


class Banner(LineKind):
    """`version 0.19.0` and `model   google/gemma-2-9b-it` in the start-up banner."""

    trigger = re.compile(r"[▄█▀]\s+(version|model)\s+(\S+)\s*$")

    def read(self, match: re.Match[str], line: str, run: LoggedRun, at: Place) -> None:
        if match.group(1) == "version":
            run.version = run.version or match.group(2)
        else:
            run.model = run.model or match.group(2)
        run.engine = ENGINE


class NonDefaultArgs(LineKind):
    """`non-default args: {...}`: the flags the user set, by vLLM's own names."""

    trigger = re.compile(r"non-default args: \{")

    def read(self, match: re.Match[str], line: str, run: LoggedRun, at: Place) -> None:
        args, unread = python_dict(line[match.end():])
        for name, value in args.items():
            run.set_flag(name, value, at.rank, at.number)
        if isinstance(args.get("model"), str):
            run.model = args["model"]
        elif isinstance(args.get("model_tag"), str) and run.model is None:
            run.model = args["model_tag"]
        if unread:
            run.notes.append(f"line {at.number}: the non-default args are cut off or elided; {len(args)} read, "
                             f"{unread} not")
        if args:  # "non-default args: {...}" quoted in prose holds none
            run.engine = ENGINE


class EngineConfig(LineKind):
    """`Initializing a V1 LLM engine (v0.19.0) with config: model=..., dtype=torch.bfloat16, ...` (V0 writes
    `an LLM engine`)."""

    trigger = re.compile(r"Initializing an? (V1 )?LLM engine \(v?([^)\s]+)\) with config: ")
    flags = {"tensor_parallel_size": "tensor_parallel_size", "pipeline_parallel_size": "pipeline_parallel_size",
             "data_parallel_size": "data_parallel_size", "max_seq_len": "max_model_len",
             "quantization": "quantization", "kv_cache_dtype": "kv_cache_dtype", "enforce_eager": "enforce_eager",
             "enable_prefix_caching": "enable_prefix_caching", "dtype": "dtype", "block_size": "block_size"}

    def read(self, match: re.Match[str], line: str, run: LoggedRun, at: Place) -> None:
        run.engine = ENGINE
        run.engine_generation = run.engine_generation or ("V1" if match.group(1) else "V0")
        run.version = run.version or match.group(2)
        pairs = config_pairs(line[match.end():])
        if isinstance(pairs.get("model"), str):
            run.model = run.model or pairs["model"]
        for key, name in self.flags.items():
            if key in pairs:
                value = pairs[key]
                if name == "dtype" and isinstance(value, str):
                    value = value.removeprefix("torch.")
                run.set_flag(name, value, at.rank, at.number)


class Era(LineKind):
    """A line whose wording only one range of vLLM releases used: the era, when the version is not printed."""

    def __init__(self, trigger: str, version: str, releases: str) -> None:
        self.trigger = re.compile(trigger)
        self.version = version
        self.releases = releases

    def read(self, match: re.Match[str], line: str, run: LoggedRun, at: Place) -> None:
        if run.version_hint is None:
            run.version_hint = (self.version, f"line {at.number} has the wording of {self.releases}")
        run.engine = ENGINE


class LmcacheConfig(LineKind):
    """LMCache's settings as its engine prints them in each vLLM worker (lmcache v1/cache_engine.py "Creating
    LMCacheEngine with config:", a repr of its config or a dict of it by release; v1/config.py _log_config "LMCache
    Configuration:", sizes as '5.0 GB'): LMCacheConnectorV1 ran, with this max_local_cpu_size and chunk_size."""

    trigger = re.compile(r"LMCache INFO: (?:Creating LMCacheEngine with config|LMCache Configuration):")
    size = re.compile(r"max_local_cpu_size'?(?:=|': '?)" + NUMBER)
    chunk = re.compile(r"[\s{(,]'?chunk_size'?(?:=|': )(\d+)")

    def read(self, match: re.Match[str], line: str, run: LoggedRun, at: Place) -> None:
        run.engine = run.engine or ENGINE
        connector = run.flags.get("kv_transfer_config")
        if connector is None or not isinstance(connector.value, dict):  # vLLM prints it as KVTransferConfig(...)
            run.flags.pop("kv_transfer_config", None)
            run.set_flag("kv_transfer_config", {"kv_connector": "LMCacheConnectorV1"}, at.rank, at.number)
        size, chunk = self.size.search(line[match.end():]), self.chunk.search(line[match.end():])
        if size:
            run.set_flag("lmcache_max_local_cpu_size", float(size.group(1)), at.rank, at.number)
        if chunk:
            run.set_flag("lmcache_chunk_size", int(chunk.group(1)), at.rank, at.number)


KINDS: tuple[LineKind, ...] = (
    Banner(),
    NonDefaultArgs(),
    EngineConfig(),
    # worker start: "worker init memory snapshot: ... free_memory=78.68GiB, total_memory=79.19GiB"
    Figures(r"memory snapshot:", figure(r"free_memory=" + GIB, "memory", "free_bytes"),
            figure(r"total_memory=" + GIB, "memory", "total_bytes")),
    Figures(r"worker requested memory:", figure(r"requested memory: " + GIB, "memory", "budget_bytes")),
    Figures(r"Model loading took|Loading model weights took",
            figure(r"took " + GIB, "memory", "weights_bytes")),
    # v0.17+: "Memory profiling takes 21.51 seconds. Total non KV cache memory: 21.11GiB; torch peak memory
    # increase: 3.65GiB; non-torch forward increase memory: 0.25GiB; weights memory: 17.22GiB."
    Figures(r"Total non KV cache memory:",
            figure(r"torch peak memory increase: " + GIB, "memory", "activation_bytes"),
            figure(r"non-torch forward increase memory: " + GIB, "memory", "non_torch_bytes"),
            figure(r"weights memory: " + GIB, "memory", "weights_bytes")),
    # v0.7-v0.10: "total_gpu_memory (23.58GiB) x gpu_memory_utilization (0.99) = 23.35GiB" and "model weights take
    # 21.21GiB; non_torch_memory takes 0.20GiB; PyTorch activation peak memory takes 0.37GiB; the rest of the
    # memory reserved for KV Cache is 1.57GiB."
    Figures(r"total_gpu_memory \(", figure(r"total_gpu_memory \(" + GIB, "memory", "total_bytes"),
            figure(r"\) = " + GIB, "memory", "budget_bytes")),
    Utilization(r"gpu_memory_utilization \(" + NUMBER + r"\)"),
    Figures(r"model weights take|the rest of the memory reserved for KV Cache",
            figure(r"model weights take " + GIB, "memory", "weights_bytes"),
            figure(r"non_torch_memory takes " + GIB, "memory", "non_torch_bytes"),
            figure(r"activation peak memory takes " + GIB, "memory", "activation_bytes"),
            figure(r"reserved for KV Cache is " + GIB, "memory", "kv_cache_bytes")),
    # V0 (v0.6): "Memory profiling results: total_gpu_memory=23.58GiB ... non_torch_memory=0.35GiB
    # kv_cache_size=3.81GiB gpu_memory_utilization=0.90"
    Figures(r"Memory profiling results:", figure(r"total_gpu_memory=" + GIB, "memory", "total_bytes"),
            figure(r"peak_torch_memory=" + GIB, "memory", "peak_torch_bytes"),
            figure(r"non_torch_memory=" + GIB, "memory", "non_torch_bytes"),
            figure(r"kv_cache_size=" + GIB, "memory", "kv_cache_bytes")),
    Utilization(r"Memory profiling results:.*gpu_memory_utilization=" + NUMBER),
    # the V0 worker's summary line, as the kvplan calibration notes date it (vllm#10517: V0, 0.6.4-0.6.x)
    Era(r"Memory profiling results: total_gpu_memory=", "0.6", "vLLM 0.6.4-0.6.x (V0)"),
    Figures(r"Estimated CUDA graph memory:", figure(r"memory: " + GIB, "memory", "cuda_graph_bytes")),
    # "CUDA graph pool memory: 0.09 GiB (actual), 0.13 GiB (estimated)": the estimate is what the budget uses
    Figures(r"CUDA graph pool memory:", figure(GIB + r" \(estimated\)", "memory", "cuda_graph_bytes")),
    # v0.19+: "Free memory on device (78.68/79.19 GiB) on startup. Desired GPU memory utilization is (0.95,
    # 75.23 GiB). Actual usage is 17.22 GiB for weight, 3.65 GiB for peak activation, 0.25 GiB for non-torch
    # memory, and 1.09 GiB for CUDAGraph memory. ... Current kv cache memory in use is 54.12 GiB."
    Figures(r"Free memory on device \(",
            figure(r"Free memory on device \(" + NUMBER, "memory", "free_bytes"),
            figure(r"on device \([\d.]+/" + GIB, "memory", "total_bytes"),
            figure(r"utilization is \([\d.]+, " + GIB, "memory", "budget_bytes"),
            figure(GIB + r" for weight", "memory", "weights_bytes"),
            figure(GIB + r" for peak activation", "memory", "activation_bytes"),
            figure(GIB + r" for non-torch", "memory", "non_torch_bytes"),
            figure(r"kv cache memory in use is " + GIB, "memory", "kv_cache_bytes")),
    Utilization(r"Desired GPU memory utilization is \(" + NUMBER + ","),
    Figures(r"Available KV cache memory:", figure(r"memory: " + GIB, "memory", "kv_cache_bytes")),
    Figures(r"GPU KV cache size:", figure(r"size: " + COUNT + r" tokens", "capacity", "tokens", count)),
    Figures(r"Maximum concurrency for",
            figure(r"for " + COUNT + r" tokens per request", "capacity", "concurrency_context", count),
            figure(r"request: (-?\d+(?:\.\d+)?|-?inf|nan)x", "capacity", "max_concurrency", ratio)),
    Figures(r"GPU blocks:|num_gpu_blocks is:",
            figure(r"(?:GPU blocks:|num_gpu_blocks is:) " + COUNT, "capacity", "num_blocks", count)),
    # V0's refusal: "... larger than the maximum number of tokens that can be stored in KV cache (23648)."
    Figures(r"tokens that can be stored in KV cache \(",
            figure(r"stored in KV cache \(" + COUNT + r"\)", "capacity", "tokens", count)),
    Figures(r"Setting attention block size to",
            figure(r"block size to " + COUNT + r" tokens", "capacity", "block_size", count)),
    Figures(r"Padding mamba page size by",
            figure(r"page size by " + NUMBER + "%", "capacity", "mamba_padding_percent", ratio)),
    Figures(r"padding layers", figure(r"Add " + COUNT + r" padding layers", "capacity", "padding_layers", count)),
    # v1/worker/gpu_model_runner.py profile_run: "Encoder cache will be initialized with a budget of 8192 tokens,
    # and profiled with 3 video items of the maximum feature size." (engines/vllm/multimodal.py)
    Figures(r"Encoder cache will be initialized",
            figure(r"budget of " + COUNT + r" tokens", "capacity", "encoder_cache_tokens", count),
            figure(r"profiled with " + COUNT + r" \w+ items", "capacity", "encoder_items", count)),
    # the native CPU KV tier's shared region, 0.33.0 v1/kv_offload/cpu/shared_offload_region.py: "Created mmap file
    # /dev/shm/vllm_offload_<engine>.mmap (68.72 GB)", num_chunks x the aligned chunk in 10^9 B
    Figures(r"Created mmap file \S*vllm_offload\S*\.mmap \(\d",
            figure(r"\.mmap \(" + NUMBER + r" GB\)", "capacity", "offload_host_bytes", gb_bytes)),
    LmcacheConfig(),
)

# A record starts with a Ray worker's process prefix, a level and a date (INFO 10-07), or an ISO date.
LOG_LINES = LogLines(record_start=r"\(\w+ pid=\d+\)|(?:INFO|DEBUG|WARNING|WARN|ERROR|CRITICAL)\s+\d\d-\d\d|"
                                  r"\[\d{4}-\d\d-\d\d", kinds=KINDS, reconciled=True)
