"""A deployment: the GPU, parallelism and engine knobs, named like vLLM's flags. Validated here so that
every engine can trust it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kvplan.errors import KvplanError

KV_CACHE_DTYPES = ("auto", "float16", "bfloat16", "float32", "fp8", "fp8_e4m3", "fp8_e5m2")
MODEL_DTYPES = ("auto", "float16", "half", "bfloat16", "float32", "float")
VLLM_BLOCK_SIZES = (1, 8, 16, 32, 64, 128, 256)
ENGINES = ("vllm", "sglang", "trtllm", "simple")


@dataclass(frozen=True)
class Deployment:
    engine: str = "vllm"
    engine_version: str | None = None
    gpu_memory_bytes: int = 0
    dtype: str = "auto"
    kv_cache_dtype: str = "auto"
    quantization: str | None = None
    block_size: int | None = None
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    gpu_memory_utilization: float | None = None
    max_model_len: int | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    kv_cache_memory_bytes: int | None = None
    enforce_eager: bool = False
    speculative_config: dict[str, Any] | None = None
    weights_memory_bytes: int | None = None
    reserve_bytes: int | None = None
    estimate_cudagraphs: bool | None = None  # VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS; None: the era's default

    def validate(self, num_attention_heads: int, num_layers: int) -> None:
        """One-line errors worded like vLLM's own argument checks."""
        if self.engine not in ENGINES:
            raise KvplanError(f"unknown engine {self.engine!r}; choose one of {', '.join(ENGINES)}", "--engine")
        util = self.gpu_memory_utilization
        if util is not None and not 0 < util <= 1:
            raise KvplanError(f"GPU memory utilization must be within (0, 1]. Got {util}.",
                              "--gpu-memory-utilization")
        if self.kv_cache_dtype not in KV_CACHE_DTYPES:
            raise KvplanError(f"invalid choice {self.kv_cache_dtype!r} (choose from {', '.join(KV_CACHE_DTYPES)})",
                              "--kv-cache-dtype")
        if self.dtype not in MODEL_DTYPES:
            raise KvplanError(f"invalid choice {self.dtype!r} (choose from {', '.join(MODEL_DTYPES)})", "--dtype")
        if self.block_size is not None:
            if self.engine == "vllm" and self.block_size not in VLLM_BLOCK_SIZES:
                raise KvplanError(f"invalid choice {self.block_size} (choose from "
                                  f"{', '.join(map(str, VLLM_BLOCK_SIZES))})", "--block-size")
            if self.block_size < 1:
                raise KvplanError(f"must be a positive integer, got {self.block_size}", "--block-size")
        for flag, value in (("--tensor-parallel-size", self.tensor_parallel_size),
                            ("--pipeline-parallel-size", self.pipeline_parallel_size)):
            if value < 1:
                raise KvplanError(f"must be a positive integer, got {value}", flag)
        tp = self.tensor_parallel_size
        if num_attention_heads and num_attention_heads % tp:
            raise KvplanError(f"Total number of attention heads ({num_attention_heads}) must be divisible by "
                              f"tensor parallel size ({tp}).", "--tensor-parallel-size")
        if self.pipeline_parallel_size > num_layers:
            raise KvplanError(f"pipeline parallel size ({self.pipeline_parallel_size}) exceeds the model's "
                              f"{num_layers} layers", "--pipeline-parallel-size")
        for flag, number in (("--max-model-len", self.max_model_len), ("--max-num-seqs", self.max_num_seqs),
                             ("--max-num-batched-tokens", self.max_num_batched_tokens)):
            if number is not None and number < 1:
                raise KvplanError(f"must be a positive integer, got {number}", flag)
        for flag, size in (("--kv-cache-memory", self.kv_cache_memory_bytes),
                           ("--weights-memory", self.weights_memory_bytes), ("--reserve", self.reserve_bytes)):
            if size is not None and size < 0:
                raise KvplanError(f"must not be negative, got {size}", flag)
        if self.gpu_memory_bytes <= 0 and self.kv_cache_memory_bytes is None:
            raise KvplanError("GPU memory must be positive; pass --gpu or --gpu-memory", "--gpu-memory")
