"""One small type per kind of layer. Each knows its KV bytes per token and per block, and how many blocks
one request of a given length holds in it (the rules of vLLM's kv_cache_interface, one spec per kind)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from kvplan.units import cdiv


@dataclass(frozen=True)
class FullAttention:
    """Every token of the context stays cached: K and V, per KV head."""

    kv_heads: int
    head_dim: int
    kind: ClassVar[str] = "full"
    holds_kv: ClassVar[bool] = True

    def heads_per_rank(self, tp: int) -> int:
        # vLLM replicates KV heads when there are fewer of them than TP ranks.
        return max(1, self.kv_heads // tp)

    def bytes_per_token(self, kv_bytes: int, tp: int = 1) -> int:
        return 2 * self.heads_per_rank(tp) * self.head_dim * kv_bytes

    def page_bytes(self, block_size: int, kv_bytes: int, tp: int = 1) -> int:
        return block_size * self.bytes_per_token(kv_bytes, tp)

    def blocks_per_request(self, context: int, block_size: int, max_num_batched_tokens: int) -> int:
        return cdiv(context, block_size)

    def as_full(self) -> FullAttention:
        return FullAttention(self.kv_heads, self.head_dim)

    def describe(self) -> str:
        return f"full attention, {self.kv_heads} KV heads x {self.head_dim}"


@dataclass(frozen=True)
class SlidingWindow(FullAttention):
    """Only the last `window` tokens are attended to; older blocks are freed."""

    window: int = 0
    kind: ClassVar[str] = "sliding"

    def blocks_per_request(self, context: int, block_size: int, max_num_batched_tokens: int) -> int:
        # A prefill chunk of max_num_batched_tokens can sit on top of the window; one more block for the
        # window not starting on a block boundary (vLLM SlidingWindowSpec.max_memory_usage_bytes).
        held = min(self.window - 1 + max_num_batched_tokens, context)
        return cdiv(held, block_size) + 1

    def describe(self) -> str:
        return f"sliding window {self.window}, {self.kv_heads} KV heads x {self.head_dim}"


@dataclass(frozen=True)
class ChunkedLocal(FullAttention):
    """Attention restarts at every chunk boundary (Llama 4's attention_chunk_size)."""

    chunk: int = 0
    kind: ClassVar[str] = "chunked"

    def blocks_per_request(self, context: int, block_size: int, max_num_batched_tokens: int) -> int:
        return cdiv(min(self.chunk + max_num_batched_tokens, context), block_size)

    def describe(self) -> str:
        return f"chunked local {self.chunk}, {self.kv_heads} KV heads x {self.head_dim}"


@dataclass(frozen=True)
class LatentAttention:
    """MLA: one compressed latent (kv_lora_rank + qk_rope_head_dim) per token; no separate K and V,
    and the same latent is kept whole on every tensor-parallel rank."""

    latent_dim: int
    kind: ClassVar[str] = "mla"
    holds_kv: ClassVar[bool] = True
    kv_heads: ClassVar[int] = 1

    @property
    def head_dim(self) -> int:
        return self.latent_dim

    def heads_per_rank(self, tp: int) -> int:
        return 1

    def bytes_per_token(self, kv_bytes: int, tp: int = 1) -> int:
        return self.latent_dim * kv_bytes

    def page_bytes(self, block_size: int, kv_bytes: int, tp: int = 1) -> int:
        return block_size * self.bytes_per_token(kv_bytes, tp)

    def blocks_per_request(self, context: int, block_size: int, max_num_batched_tokens: int) -> int:
        return cdiv(context, block_size)

    def as_full(self) -> LatentAttention:
        return self

    def describe(self) -> str:
        return f"MLA latent {self.latent_dim}"


@dataclass(frozen=True)
class StateOnly:
    """Mamba / linear-attention layers: a fixed state per sequence, nothing per token."""

    state_bytes: int | None = None  # per sequence at the checkpoint dtype, where the config defines it
    kind: ClassVar[str] = "none"
    holds_kv: ClassVar[bool] = False
    kv_heads: ClassVar[int] = 0
    head_dim: ClassVar[int] = 0

    def heads_per_rank(self, tp: int) -> int:
        return 0

    def bytes_per_token(self, kv_bytes: int, tp: int = 1) -> int:
        return 0

    def page_bytes(self, block_size: int, kv_bytes: int, tp: int = 1) -> int:
        return 0

    def blocks_per_request(self, context: int, block_size: int, max_num_batched_tokens: int) -> int:
        return 0

    def as_full(self) -> StateOnly:
        return self

    def describe(self) -> str:
        state = f", state {self.state_bytes} B/seq" if self.state_bytes else ""
        return f"no KV (state only{state})"


Layer = FullAttention | SlidingWindow | ChunkedLocal | LatentAttention | StateOnly
