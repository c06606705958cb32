"""What a CPU KV tier beside vLLM's GPU pool holds: its tokens, the pinned host memory it takes over all the
deployment's workers, and the panel's words for it."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class CpuTier:
    tokens: int = 0
    host_bytes: int = 0
    notes: list[str] = field(default_factory=list)
