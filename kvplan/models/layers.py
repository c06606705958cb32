"""One small type per kind of layer, siblings under one protocol (as vLLM's kv_cache_interface has one spec per
kind). Each knows its KV bytes per token and per block, how many blocks one request of a given length holds in
it, what it becomes in a flat pool that caches every token, how its block formula reads, and which parameter
rule counts its mixer."""

from __future__ import annotations

from dataclasses import dataclass
from math import prod
from typing import Any, ClassVar, NamedTuple, Protocol

from kvplan.units import cdiv


class PageTensor(NamedTuple):
    """One tensor of a layer's page on one rank: what it holds, its shape for one block, and its element size.
    A page is the concatenation of its tensors' bytes; verify allocates these shapes, capacity counts page_bytes,
    and the two agree by construction (page_tensors_bytes)."""

    name: str
    shape: tuple[int, ...]
    element_bytes: int

    @property
    def nbytes(self) -> int:
        return prod(self.shape) * self.element_bytes


def page_tensors_bytes(tensors: tuple[PageTensor, ...]) -> int:
    return sum(tensor.nbytes for tensor in tensors)


class MixerCounter(Protocol):
    """The parameter rules of one model's config (kvplan.models.params); each layer kind picks its own."""

    def kv_attention(self, kv_heads: int, head_dim: int) -> int: ...

    def latent_attention(self) -> int: ...

    def state_mixer(self) -> int: ...


class LayerKind(Protocol):
    """What every kind of layer provides. Specs are frozen dataclasses: equal by value, hashable, asdict-able."""

    __dataclass_fields__: ClassVar[dict[str, Any]]
    kind: ClassVar[str]  # the label specs and JSON show
    holds_kv: ClassVar[bool]  # has pages in the KV block pool
    drops_old_tokens: ClassVar[bool]  # frees blocks behind a window, so as_full() changes it
    has_mlp: ClassVar[bool]  # the decoder layer has an MLP (or experts) beside its mixer

    @property
    def kv_heads(self) -> int: ...

    @property
    def head_dim(self) -> int: ...

    def heads_per_rank(self, tp: int) -> int: ...

    def bytes_per_token(self, kv_bytes: int, tp: int = 1) -> int: ...

    def page_bytes(self, block_size: int, kv_bytes: int, tp: int = 1) -> int: ...

    def page_tensors(self, block_size: int, kv_bytes: int, tp: int = 1) -> tuple[PageTensor, ...]:
        """The tensors of one block's page on one rank; their bytes sum to page_bytes."""
        ...

    def blocks_per_request(self, context: int, block_size: int, max_num_batched_tokens: int) -> int: ...

    def as_full(self) -> LayerKind:
        """This layer as an engine with one flat pool (SGLang, TensorRT-LLM) holds it: every token cached."""
        ...

    def describe(self) -> str: ...

    def block_formula(self, layers: int, tp: int, block_size: int, kv_bytes: int) -> str:
        """One block of `layers` such layers on one rank, factor by factor, with its bytes."""
        ...

    def mixer_params(self, counter: MixerCounter) -> int: ...


Layer = LayerKind


class _KeyValueHeads:
    """Arithmetic of the kinds that cache a K and a V vector per KV head. Holds no data: each kind is its own
    dataclass, so no kind is an instance of another."""

    kv_heads: int
    head_dim: int
    holds_kv: ClassVar[bool] = True
    has_mlp: ClassVar[bool] = True

    def heads_per_rank(self, tp: int) -> int:
        # vLLM replicates KV heads when there are fewer of them than TP ranks.
        return max(1, self.kv_heads // tp)

    def bytes_per_token(self, kv_bytes: int, tp: int = 1) -> int:
        return 2 * self.heads_per_rank(tp) * self.head_dim * kv_bytes

    def page_bytes(self, block_size: int, kv_bytes: int, tp: int = 1) -> int:
        return block_size * self.bytes_per_token(kv_bytes, tp)

    def page_tensors(self, block_size: int, kv_bytes: int, tp: int = 1) -> tuple[PageTensor, ...]:
        shape = (block_size, self.heads_per_rank(tp), self.head_dim)
        return PageTensor("key", shape, kv_bytes), PageTensor("value", shape, kv_bytes)

    def as_full(self) -> FullAttention:
        return FullAttention(self.kv_heads, self.head_dim)

    def block_formula(self, layers: int, tp: int, block_size: int, kv_bytes: int) -> str:
        total = layers * self.page_bytes(block_size, kv_bytes, tp)
        return (f"2 x {layers} layers x {self.heads_per_rank(tp)} KV heads x {self.head_dim} head dim x "
                f"{block_size} tokens x {kv_bytes} B = {total:,} B")

    def mixer_params(self, counter: MixerCounter) -> int:
        return counter.kv_attention(self.kv_heads, self.head_dim)


@dataclass(frozen=True)
class FullAttention(_KeyValueHeads):
    """Every token of the context stays cached: K and V, per KV head."""

    kv_heads: int
    head_dim: int
    kind: ClassVar[str] = "full"
    drops_old_tokens: ClassVar[bool] = False

    def blocks_per_request(self, context: int, block_size: int, max_num_batched_tokens: int) -> int:
        return cdiv(context, block_size)

    def describe(self) -> str:
        return f"full attention, {self.kv_heads} KV heads x {self.head_dim}"


@dataclass(frozen=True)
class SlidingWindow(_KeyValueHeads):
    """Only the last `window` tokens are attended to; older blocks are freed."""

    kv_heads: int
    head_dim: int
    window: int
    kind: ClassVar[str] = "sliding"
    drops_old_tokens: ClassVar[bool] = True

    def blocks_per_request(self, context: int, block_size: int, max_num_batched_tokens: int) -> int:
        # A prefill chunk of max_num_batched_tokens can sit on top of the window; one more block for the
        # window not starting on a block boundary (vLLM SlidingWindowSpec.max_memory_usage_bytes).
        held = min(self.window - 1 + max_num_batched_tokens, context)
        return cdiv(held, block_size) + 1

    def describe(self) -> str:
        return f"sliding window {self.window}, {self.kv_heads} KV heads x {self.head_dim}"


@dataclass(frozen=True)
class ChunkedLocal(_KeyValueHeads):
    """Attention restarts at every chunk boundary (Llama 4's attention_chunk_size)."""

    kv_heads: int
    head_dim: int
    chunk: int
    kind: ClassVar[str] = "chunked"
    drops_old_tokens: ClassVar[bool] = True

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
    drops_old_tokens: ClassVar[bool] = False
    has_mlp: ClassVar[bool] = True

    @property
    def kv_heads(self) -> int:
        return 1

    @property
    def head_dim(self) -> int:
        return self.latent_dim

    def heads_per_rank(self, tp: int) -> int:
        return 1

    def bytes_per_token(self, kv_bytes: int, tp: int = 1) -> int:
        return self.latent_dim * kv_bytes

    def page_bytes(self, block_size: int, kv_bytes: int, tp: int = 1) -> int:
        return block_size * self.bytes_per_token(kv_bytes, tp)

    def page_tensors(self, block_size: int, kv_bytes: int, tp: int = 1) -> tuple[PageTensor, ...]:
        return (PageTensor("latent", (block_size, self.latent_dim), kv_bytes),)

    def blocks_per_request(self, context: int, block_size: int, max_num_batched_tokens: int) -> int:
        return cdiv(context, block_size)

    def as_full(self) -> LatentAttention:
        return self

    def describe(self) -> str:
        return f"MLA latent {self.latent_dim}"

    def block_formula(self, layers: int, tp: int, block_size: int, kv_bytes: int) -> str:
        total = layers * self.page_bytes(block_size, kv_bytes, tp)
        return (f"{layers} layers x {self.latent_dim} latent x {block_size} tokens x {kv_bytes} B = {total:,} B "
                "(MLA: no K/V factor, whole on every rank)")

    def mixer_params(self, counter: MixerCounter) -> int:
        return counter.latent_attention()


@dataclass(frozen=True)
class StateOnly:
    """Mamba / linear-attention layers: a fixed state per sequence, nothing per token."""

    state_bytes: int | None = None  # per sequence at the checkpoint dtype, where the config defines it
    kind: ClassVar[str] = "none"
    holds_kv: ClassVar[bool] = False
    drops_old_tokens: ClassVar[bool] = False
    has_mlp: ClassVar[bool] = False  # a Mamba block is its mixer and one norm

    @property
    def kv_heads(self) -> int:
        return 0

    @property
    def head_dim(self) -> int:
        return 0

    def heads_per_rank(self, tp: int) -> int:
        return 0

    def bytes_per_token(self, kv_bytes: int, tp: int = 1) -> int:
        return 0

    def page_bytes(self, block_size: int, kv_bytes: int, tp: int = 1) -> int:
        return 0

    def page_tensors(self, block_size: int, kv_bytes: int, tp: int = 1) -> tuple[PageTensor, ...]:
        return ()

    def blocks_per_request(self, context: int, block_size: int, max_num_batched_tokens: int) -> int:
        return 0

    def as_full(self) -> StateOnly:
        return self

    def describe(self) -> str:
        state = f", state {self.state_bytes} B/seq" if self.state_bytes else ""
        return f"no KV (state only{state})"

    def block_formula(self, layers: int, tp: int, block_size: int, kv_bytes: int) -> str:
        return f"0 B ({layers} state-only layers: a fixed state per sequence, no per-token KV)"

    def mixer_params(self, counter: MixerCounter) -> int:
        return counter.state_mixer()
