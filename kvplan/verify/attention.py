"""How each layer kind attends over its page: which page tensors are its keys and values, how many query heads
share one KV head, and which cached positions a decode query sees. One small type per kind; a kind with no entry
here (a state-only mixer, a kind added later) is skipped by the decode step, with a note."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from kvplan.models.layers import ChunkedLocal, FullAttention, LatentAttention, Layer, SlidingWindow


class Visibility(Protocol):
    def visible(self, positions: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """Which cached positions the decode query of a sequence of `lengths` tokens (itself the last) sees;
        elementwise tensor ops only, so FlexAttention's mask_mod can use it too."""
        ...


@dataclass(frozen=True)
class Causal:
    def visible(self, positions: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        return positions < lengths


@dataclass(frozen=True)
class Window:
    """The last `window` tokens, the query's own included (vLLM's sliding_window)."""

    window: int

    def visible(self, positions: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        return (positions < lengths) & (positions >= lengths - self.window)


@dataclass(frozen=True)
class Chunk:
    """Only the tokens of the query's own chunk (Llama 4's attention_chunk_size)."""

    chunk: int

    def visible(self, positions: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        start = torch.div(lengths - 1, self.chunk, rounding_mode="floor") * self.chunk
        return (positions < lengths) & (positions >= start)


@dataclass(frozen=True)
class KeyValue:
    """Separate key and value tensors per KV head; grouped-query heads share them."""

    kv_heads: int
    head_dim: int
    visibility: Visibility
    shared: bool = False  # one tensor serves as key and value

    def key_value(self, page: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        return page["key"], page["value"]

    @property
    def query_dim(self) -> int:
        return self.head_dim


@dataclass(frozen=True)
class Latent:
    """MLA modelled over its cache: queries projected to the latent (kv_lora_rank + rope part) attend to the
    latent, which serves as key and value for every query head (one 'KV head')."""

    latent_dim: int
    visibility: Visibility = Causal()
    kv_heads: int = 1
    shared: bool = True

    def key_value(self, page: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        latent = page["latent"].unsqueeze(-2)  # (blocks, block_size, 1, latent)
        return latent, latent

    @property
    def query_dim(self) -> int:
        return self.latent_dim


Attention = KeyValue | Latent


def _windowless(layer: Any, tp: int) -> Attention:
    return KeyValue(layer.heads_per_rank(tp), layer.head_dim, Causal())


_BY_KIND: dict[type, Callable[[Any, int], Attention]] = {
    FullAttention: _windowless,
    SlidingWindow: lambda layer, tp: KeyValue(layer.heads_per_rank(tp), layer.head_dim, Window(layer.window)),
    ChunkedLocal: lambda layer, tp: KeyValue(layer.heads_per_rank(tp), layer.head_dim, Chunk(layer.chunk)),
    LatentAttention: lambda layer, tp: Latent(layer.latent_dim),
}


def attention_for(layer: Layer, tp: int) -> Attention | None:
    make = _BY_KIND.get(type(layer))
    return make(layer, tp) if make is not None else None


def query_heads(attention_heads: int, tp: int, attention: Attention) -> int:
    """Query heads of one rank: a whole multiple of its KV heads (vLLM replicates KV heads when TP exceeds them)."""
    per_rank = max(1, attention_heads // tp)
    return max(1, per_rank // attention.kv_heads) * attention.kv_heads
