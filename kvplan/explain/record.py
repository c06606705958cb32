"""What one engine startup log says: each figure as printed (bytes as integers, from vLLM's two-decimal GiB),
which rank printed it, and what could not be read. Sections and field names follow the explain JSON."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

MEMORY_FIELDS = ("total_bytes", "free_bytes", "budget_bytes", "weights_bytes", "activation_bytes", "peak_torch_bytes",
                 "non_torch_bytes", "cuda_graph_bytes", "kv_cache_bytes")
CAPACITY_FIELDS = ("tokens", "max_concurrency", "concurrency_context", "block_size", "num_blocks",
                   "padding_layers", "mamba_padding_percent")
# The engine flags the explain JSON always shows (null when the log does not print them).
SHOWN_FLAGS = ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size", "max_model_len",
               "gpu_memory_utilization", "dtype", "kv_cache_dtype", "quantization", "block_size", "max_num_seqs",
               "max_num_batched_tokens", "enforce_eager", "enable_prefix_caching", "speculative_config")


@dataclass
class Reading:
    """One figure as a line printed it, and who printed it (a process prefix such as Worker_TP1)."""

    value: Any
    rank: str | None
    line: int


@dataclass
class LoggedRun:
    """Everything read from one log, by section."""

    engine: str | None = None  # vllm, sglang, trtllm; None: nothing recognisable
    engine_generation: str | None = None  # vLLM's "V1" or "V0" engine, when the log says
    version: str | None = None
    version_hint: tuple[str, str] | None = None  # (version, why) when the log's wording dates it
    model: str | None = None
    flags: dict[str, Reading] = field(default_factory=dict)
    memory: dict[str, list[Reading]] = field(default_factory=dict)
    capacity: dict[str, list[Reading]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    ranks: set[str] = field(default_factory=set)  # process prefixes seen: EngineCore_DP0, Worker_TP1, ...
    unusable: set[str] = field(default_factory=set)  # figures printed as no engine prints them (noted once)

    @property
    def engine_label(self) -> str:
        """The engine's own name (vLLM, SGLang, TensorRT-LLM), from the engine registry."""
        from kvplan import registry

        return registry.label(self.engine) if self.engine in registry.names() else "an unknown engine"

    def set_flag(self, name: str, value: Any, rank: str | None, line: int) -> None:
        """The first source of a flag wins: non-default args are read before the engine config repeats them."""
        self.flags.setdefault(name, Reading(value, rank, line))

    def add(self, section: str, name: str, value: Any, rank: str | None, line: int) -> None:
        table = self.memory if section == "memory" else self.capacity
        table.setdefault(name, []).append(Reading(value, rank, line))

    def first(self, section: str, name: str) -> Any:
        """The figure as rank 0 printed it (the first pipeline stage's first rank), else as first printed."""
        readings = (self.memory if section == "memory" else self.capacity).get(name)
        if not readings:
            return None
        return next((r.value for r in readings if _rank_zero(r.rank)), readings[0].value)

    def flag(self, name: str) -> Any:
        reading = self.flags.get(name)
        return reading.value if reading else None

    def ranks_that_differ(self) -> list[str]:
        """The names of the figures that two ranks printed differently."""
        differing = []
        for table in (self.memory, self.capacity):
            for name, readings in table.items():
                by_rank = {r.rank: r.value for r in readings}
                if len(set(by_rank.values())) > 1:
                    differing.append(name)
        return differing

    def to_dict(self) -> dict[str, Any]:
        flags = {name: self.flag(name) for name in SHOWN_FLAGS}
        flags.update((name, reading.value) for name, reading in self.flags.items() if name not in flags)
        return {
            "engine": self.engine,
            "engine_generation": self.engine_generation,
            "version": self.version,
            "model": self.model,
            "flags": flags,
            "memory": {name: self.first("memory", name) for name in MEMORY_FIELDS},
            "capacity": {name: self.first("capacity", name) for name in CAPACITY_FIELDS},
            "notes": list(self.notes),
        }


def _rank_zero(rank: str | None) -> bool:
    """Whether a process prefix names rank 0 of every parallel dimension it names (Worker_PP0, Worker_TP0)."""
    indices = re.findall(r"(?:PP|TP|DP)(\d+)", rank or "")
    return bool(indices) and all(index == "0" for index in indices)

