"""One small type per kind of layer, siblings under one protocol (as vLLM's kv_cache_interface has one spec per
kind). Each knows its KV bytes per token and per block, how many blocks one request of a given length holds in
it, what it becomes in a flat pool that caches every token, how its block formula reads, and which parameter
rule counts its mixer."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import KW_ONLY, dataclass, field, replace
from math import prod
from typing import Any, ClassVar, NamedTuple, Protocol

from kvplan.models.fields import ConfigFields
from kvplan.units import DTYPE_BYTES, DsMlaKv, KvFormat, canonical_dtype, cdiv, kv_format


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


def latent_tensor(block_size: int, dim: int, kv_format: KvFormat) -> PageTensor:
    """One block of MLA latents: elements of the cache dtype, or bytes for a packed layout (fp8_ds_mla's 656 B
    per token, allocated as uint8 by vLLM)."""
    per_token = kv_format.latent_bytes(dim)
    if per_token == dim * int(kv_format):
        return PageTensor("latent", (block_size, dim), int(kv_format))
    return PageTensor("latent", (block_size, per_token), 1)


class MixerCounter(Protocol):
    """The parameter rules of one model's config (kvplan.models.params); each layer kind picks its own."""

    def kv_attention(self, kv_heads: int, head_dim: int, value_dim: int | None = None,
                     sliding: bool = False) -> int: ...

    def latent_attention(self, indexer: bool = True) -> int: ...

    def compressed_attention(self, ratio: int) -> int: ...

    def index_branch(self, index_dim: int) -> int: ...

    def state_mixer(self) -> int: ...

    def mamba2_mixer(self, state: Mamba2State) -> int: ...

    def short_conv_mixer(self, state: ShortConvState) -> int: ...

    def kda_mixer(self, state: KdaState) -> int: ...

    def kda_low_rank_mixer(self, state: KdaLowRankGateState) -> int: ...

    def shared_block(self, owner: bool) -> int: ...


class LayerKind(Protocol):
    """What every kind of layer provides. Specs are frozen dataclasses: equal by value, hashable, asdict-able."""

    __dataclass_fields__: ClassVar[dict[str, Any]]
    kind: ClassVar[str]  # the label specs and JSON show
    holds_kv: ClassVar[bool]  # has pages in the KV block pool
    drops_old_tokens: ClassVar[bool]  # frees blocks behind a window, so as_full() changes it
    has_mlp: ClassVar[bool]  # the decoder layer has an MLP (or experts) beside its mixer
    mixer_free: ClassVar[bool]  # the decoder layer is only an MLP or experts, with no token mixer
    paged_state: ClassVar[bool]  # a recurrent state that a paged engine gives blocks in its pool
    state_outside_pool: ClassVar[bool]  # a per-sequence state kept beside the block pool, not counted in it
    latent_cache: ClassVar[bool]  # caches one compressed latent per token (MLA), served by latent backends
    # The one block size the engines' kernels for this kind take, whatever the user asks; None: any
    kernel_block_size: ClassVar[int | None]
    # pages of several sizes packed side by side in one block (vLLM's block-outermost layout; capacity.is_packed)
    block_outermost: ClassVar[bool]
    # DeepSeek-V4's compressed sparse attention, a kind only models/compressed_attention.py builds
    compressed_sparse: ClassVar[bool]

    def block_tokens(self, block_size: int) -> int:
        """Tokens of one of this cache's blocks in a pool of block_size-token blocks (a fixed size of its own)."""
        ...

    @property
    def attention_chunk(self) -> int | None:
        """Attends within fixed chunks of this many tokens (Llama 4's attention_chunk_size); None: it does not."""
        ...

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

    def draft_layer(self) -> LayerKind:
        """The layer a speculative draft of the target's own shape adds (an MTP head), from this first KV layer."""
        ...

    def describe(self) -> str: ...

    def block_formula(self, layers: int, tp: int, block_size: int, kv_bytes: int) -> str:
        """One block of `layers` such layers on one rank, factor by factor, with its bytes."""
        ...

    def mixer_params(self, counter: MixerCounter) -> int: ...

    def cache_layers(self) -> tuple[LayerKind, ...]:
        """The layers an engine registers a cache spec for, one per mixer: this layer itself, or each of the
        mixers of a decoder layer that runs several side by side."""
        ...

    def state_page_bytes(self, tp: int = 1) -> int:
        """One request's recurrent state on one rank, unpadded; 0 where the layer pages no state."""
        ...

    def padded_to(self, attention_page: int, tp: int) -> LayerKind:
        """This layer once the engine pads its state page up to the attention page."""
        ...

    def as_served(self, conv_bytes: int, ssm_bytes: int | None, spec_tokens: int, extra_blocks: int,
                  fallback_ssm_bytes: int | None = None, whole_length: bool = False) -> LayerKind:
        """This layer's state as a paged engine holds it: conv state elements of conv_bytes, SSM state of ssm_bytes
        (None: as the config says, else fallback_ssm_bytes, else as the conv state), conv rows and blocks for
        speculative tokens, and extra_blocks more (an engine's prefix caching of the state); whole_length: a
        block per block_size tokens of the request instead (vLLM's mamba_cache_mode "all")."""
        ...

    def unpaged(self) -> LayerKind:
        """This layer as an engine that keeps recurrent states outside its block pool holds it."""
        ...

    def kept_tokens(self) -> int | None:
        """The most tokens of a sequence this layer's cache keeps at once (its window or chunk); None: all."""
        ...

    def sequence_state_bytes(self, conv_bytes: int, fallback_ssm_bytes: int, tp: int) -> int:
        """One request's state in this layer on one rank, for an engine that keeps states in a pool of their own:
        the conv state in conv_bytes, the SSM state in the config's dtype or else fallback_ssm_bytes; a state the
        config does not shape, its bytes where known, split over the ranks; 0 where the layer keeps no state."""
        ...


Layer = LayerKind


def has_compressed_attention(layers: Iterable[Layer]) -> bool:
    """Whether these layers include DeepSeek-V4's compressed sparse attention. Asked of every model, so it is a flag
    of the kinds: kvplan.models.compressed_attention is imported only for a config that names its keys."""
    return any(layer.compressed_sparse for layer in layers)


class _PlainFlags:
    """The flags of a kind that is none of the special cases they name. Holds no data."""

    mixer_free: ClassVar[bool] = False
    paged_state: ClassVar[bool] = False
    state_outside_pool: ClassVar[bool] = False
    latent_cache: ClassVar[bool] = False
    kernel_block_size: ClassVar[int | None] = None
    block_outermost: ClassVar[bool] = False
    compressed_sparse: ClassVar[bool] = False

    @property
    def attention_chunk(self) -> int | None:
        return None

    def block_tokens(self, block_size: int) -> int:
        return block_size

    def draft_layer(self: Layer) -> Layer:
        return self.as_full()


class _OneMixer(_PlainFlags):
    """What a kind that is one mixer (or none) answers by default: it is its own cache layer and pages no state.
    Holds no data."""

    def cache_layers(self: Layer) -> tuple[Layer, ...]:
        return (self,)

    def state_page_bytes(self, tp: int = 1) -> int:
        return 0

    def padded_to(self: Layer, attention_page: int, tp: int) -> Layer:
        return self

    def as_served(self: Layer, conv_bytes: int, ssm_bytes: int | None, spec_tokens: int, extra_blocks: int,
                  fallback_ssm_bytes: int | None = None, whole_length: bool = False) -> Layer:
        return self

    def unpaged(self: Layer) -> Layer:
        return self

    def kept_tokens(self) -> int | None:
        return None

    def sequence_state_bytes(self, conv_bytes: int, fallback_ssm_bytes: int, tp: int) -> int:
        return 0


class _HeadsOfItsAttention:
    """The kinds that wrap an attention layer (`attention`) and cache per token what its heads hold."""

    attention: FullAttention

    @property
    def kv_heads(self) -> int:
        return self.attention.kv_heads

    @property
    def head_dim(self) -> int:
        return self.attention.head_dim

    def heads_per_rank(self, tp: int) -> int:
        return self.attention.heads_per_rank(tp)


class _KeyValueHeads(_OneMixer):
    """Arithmetic of the kinds that cache a K and a V vector per KV head. Holds no data: each kind is its own
    dataclass, so no kind is an instance of another."""

    kv_heads: int
    head_dim: int
    # V's head dim where it differs from K's (MiMo-V2-Flash: K 192, V 128; vLLM 0.33.0 kv_cache_interface.py
    # AttentionSpec.head_size_v, a page of (head_size + head_size_v) per head and token); None: K's
    value_dim: int | None = None
    holds_kv: ClassVar[bool] = True
    has_mlp: ClassVar[bool] = True
    drops_old_tokens: ClassVar[bool]  # each kind's own

    @property
    def v_head_dim(self) -> int:
        return self.value_dim or self.head_dim

    def dims(self) -> str:
        return str(self.head_dim) if self.v_head_dim == self.head_dim else f"{self.head_dim} (V {self.v_head_dim})"

    def heads_per_rank(self, tp: int) -> int:
        # vLLM replicates KV heads when there are fewer of them than TP ranks.
        return max(1, self.kv_heads // tp)

    def bytes_per_token(self, kv_bytes: int, tp: int = 1) -> int:
        kv = kv_format(kv_bytes)
        return self.heads_per_rank(tp) * (kv.vector_bytes(self.head_dim) + kv.vector_bytes(self.v_head_dim))

    def page_bytes(self, block_size: int, kv_bytes: int, tp: int = 1) -> int:
        return block_size * self.bytes_per_token(kv_bytes, tp)

    def page_tensors(self, block_size: int, kv_bytes: int, tp: int = 1) -> tuple[PageTensor, ...]:
        heads = self.heads_per_rank(tp)
        return (PageTensor("key", (block_size, heads, self.head_dim), kv_bytes),
                PageTensor("value", (block_size, heads, self.v_head_dim), kv_bytes))

    def as_full(self) -> FullAttention:
        return FullAttention(self.kv_heads, self.head_dim, self.value_dim)

    def block_formula(self, layers: int, tp: int, block_size: int, kv_bytes: int) -> str:
        total = layers * self.page_bytes(block_size, kv_bytes, tp)
        kv = kv_format(kv_bytes)
        if self.v_head_dim == self.head_dim:
            return (f"2 x {layers} layers x {self.heads_per_rank(tp)} KV heads x "
                    f"{kv.describe(self.head_dim, block_size)} = {total:,} B")
        return (f"{layers} layers x {self.heads_per_rank(tp)} KV heads x (K {kv.describe(self.head_dim, block_size)}"
                f" + V {kv.describe(self.v_head_dim, block_size)}) = {total:,} B")

    def mixer_params(self, counter: MixerCounter) -> int:
        return counter.kv_attention(self.kv_heads, self.head_dim, self.value_dim, self.drops_old_tokens)


@dataclass(frozen=True)
class FullAttention(_KeyValueHeads):
    """Every token of the context stays cached: K and V, per KV head."""

    kv_heads: int
    head_dim: int
    value_dim: int | None = None
    kind: ClassVar[str] = "full"
    drops_old_tokens: ClassVar[bool] = False

    def blocks_per_request(self, context: int, block_size: int, max_num_batched_tokens: int) -> int:
        return cdiv(context, block_size)

    def describe(self) -> str:
        return f"full attention, {self.kv_heads} KV heads x {self.dims()}"


@dataclass(frozen=True)
class SlidingWindow(_KeyValueHeads):
    """Only the last `window` tokens are attended to; older blocks are freed."""

    kv_heads: int
    head_dim: int
    window: int
    value_dim: int | None = None
    kind: ClassVar[str] = "sliding"
    drops_old_tokens: ClassVar[bool] = True

    def blocks_per_request(self, context: int, block_size: int, max_num_batched_tokens: int) -> int:
        # A prefill chunk of max_num_batched_tokens can sit on top of the window; one more block for the
        # window not starting on a block boundary (vLLM SlidingWindowSpec.max_memory_usage_bytes).
        held = min(self.window - 1 + max_num_batched_tokens, context)
        return cdiv(held, block_size) + 1

    def kept_tokens(self) -> int:
        return self.window

    def describe(self) -> str:
        return f"sliding window {self.window}, {self.kv_heads} KV heads x {self.dims()}"


@dataclass(frozen=True)
class ChunkedLocal(_KeyValueHeads):
    """Attention restarts at every chunk boundary (Llama 4's attention_chunk_size)."""

    kv_heads: int
    head_dim: int
    chunk: int
    kind: ClassVar[str] = "chunked"
    drops_old_tokens: ClassVar[bool] = True

    @property
    def attention_chunk(self) -> int | None:
        return self.chunk

    def blocks_per_request(self, context: int, block_size: int, max_num_batched_tokens: int) -> int:
        return cdiv(min(self.chunk + max_num_batched_tokens, context), block_size)

    def kept_tokens(self) -> int:
        return self.chunk  # the most a chunk holds

    def describe(self) -> str:
        return f"chunked local {self.chunk}, {self.kv_heads} KV heads x {self.head_dim}"


@dataclass(frozen=True)
class IndexedAttention(_HeadsOfItsAttention, _OneMixer):
    """Full attention with a sparse-attention indexer's key cached beside it (MiniMax-M3's sparse_attention_config
    layers). vLLM 0.33.0 models/minimax_m3/nvidia/model.py MiniMaxM3SparseAttention registers its K and V as a
    FullAttentionSpec, and its MiniMaxM3Indexer (common/indexer.py MiniMaxM3IndexerCache) one key of
    sparse_index_dim per token: a single head replicated on every rank (an MLAAttentionSpec of one head), in
    bfloat16 whatever the KV cache dtype (attention_config indexer_kv_dtype 'auto' -> 'bf16'; SGLang 0.5.23
    mem_cache/memory_pool.py MiniMaxSparseKVPool keeps it in the model dtype). The sparse kernels read pages of one
    128-token sparse block (the backends' get_supported_kernel_block_sizes). Its kind is 'full': vLLM keeps these
    specs and the dense layers' in one uniform-type group whose block costs the sum of their pages (never
    equalised through the block size)."""

    attention: FullAttention
    index_dim: int
    index_bytes: int  # the index key's element size
    kind: ClassVar[str] = "full"
    holds_kv: ClassVar[bool] = True
    has_mlp: ClassVar[bool] = True
    drops_old_tokens: ClassVar[bool] = False
    kernel_block_size: ClassVar[int | None] = 128

    def bytes_per_token(self, kv_bytes: int, tp: int = 1) -> int:
        return self.attention.bytes_per_token(kv_bytes, tp) + self.index_dim * self.index_bytes

    def page_bytes(self, block_size: int, kv_bytes: int, tp: int = 1) -> int:
        return block_size * self.bytes_per_token(kv_bytes, tp)

    def page_tensors(self, block_size: int, kv_bytes: int, tp: int = 1) -> tuple[PageTensor, ...]:
        return (*self.attention.page_tensors(block_size, kv_bytes, tp),
                PageTensor("index_k", (block_size, self.index_dim), self.index_bytes))

    def blocks_per_request(self, context: int, block_size: int, max_num_batched_tokens: int) -> int:
        return cdiv(context, block_size)

    def as_full(self) -> IndexedAttention:
        return self

    def describe(self) -> str:
        return f"{self.attention.describe()} + index key {self.index_dim}"

    def block_formula(self, layers: int, tp: int, block_size: int, kv_bytes: int) -> str:
        total = layers * self.page_bytes(block_size, kv_bytes, tp)
        return (f"{layers} layers x {block_size} tokens x ({self.attention.bytes_per_token(kv_bytes, tp)} B K and V "
                f"+ {self.index_dim} x {self.index_bytes} B index key) = {total:,} B")

    def mixer_params(self, counter: MixerCounter) -> int:
        return self.attention.mixer_params(counter) + counter.index_branch(self.index_dim)


class _Latent(_OneMixer):
    """Arithmetic of the MLA kinds: one latent per token, whole on every tensor-parallel rank, every token kept.
    Holds no data, like _KeyValueHeads."""

    latent_dim: int
    latent_cache: ClassVar[bool] = True
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

    def page_bytes(self: Layer, block_size: int, kv_bytes: int, tp: int = 1) -> int:
        return block_size * self.bytes_per_token(kv_bytes, tp)

    def blocks_per_request(self, context: int, block_size: int, max_num_batched_tokens: int) -> int:
        return cdiv(context, block_size)

    def mixer_params(self, counter: MixerCounter) -> int:
        return counter.latent_attention()


@dataclass(frozen=True)
class LatentAttention(_Latent):
    """MLA: one compressed latent (kv_lora_rank + qk_rope_head_dim) per token; no separate K and V,
    and the same latent is kept whole on every tensor-parallel rank."""

    latent_dim: int
    # qk_nope_head_dim, which picks vLLM's Blackwell MLA backend (engines/vllm/blocks.py); not part of the cache
    nope_head_dim: int | None = field(default=None, compare=False)
    kind: ClassVar[str] = "mla"

    def bytes_per_token(self, kv_bytes: int, tp: int = 1) -> int:
        return kv_format(kv_bytes).latent_bytes(self.latent_dim)

    def page_tensors(self, block_size: int, kv_bytes: int, tp: int = 1) -> tuple[PageTensor, ...]:
        return (latent_tensor(block_size, self.latent_dim, kv_format(kv_bytes)),)

    def as_full(self) -> LatentAttention:
        return self

    def describe(self) -> str:
        return f"MLA latent {self.latent_dim}"

    def block_formula(self, layers: int, tp: int, block_size: int, kv_bytes: int) -> str:
        total = layers * self.page_bytes(block_size, kv_bytes, tp)
        return (f"{layers} layers x {self.latent_dim} latent x {block_size} tokens x {kv_bytes} B = {total:,} B "
                "(MLA: no K/V factor, whole on every rank)")


@dataclass(frozen=True)
class SparseLatentAttention(_Latent):
    """DeepSeek sparse attention (DeepSeek-V3.2, the configs with a lightning indexer: index_topk, index_head_dim):
    the MLA latent per token, and beside it in the same page the indexer's own key, one vector of index_head_dim
    per token for all its heads (vLLM deepseek_v2.py DeepseekV32IndexerCache: an MLAAttentionSpec of one head).
    The indexer key is fp8 with one fp32 scale per 128 values whatever the cache dtype (uint8, head_dim + head_dim
    // 128 x 4 = 132 B); an 8-bit latent is kept in the fp8_ds_mla layout, the only fp8 one the sparse FlashMLA
    kernels read (vLLM's sparse backend maps fp8 there; SGLang's NSA pool stores the same 656 B). vLLM groups the
    two specs of each layer in one UniformTypeKVCacheSpecs, whose block costs the sum of their pages, and forces
    64-token blocks for the sparse backend (platforms/cuda.py); SGLang pages NSA at 64 too."""

    latent_dim: int
    index_head_dim: int
    index_heads: int
    index_topk: int
    kind: ClassVar[str] = "sparse_mla"
    kernel_block_size: ClassVar[int | None] = 64
    INDEXER_QUANT_BLOCK: ClassVar[int] = 128  # values per fp32 scale (vLLM Indexer.quant_block_size)
    INDEXER_SCALE_BYTES: ClassVar[int] = 4

    def latent_format(self, kv_bytes: int) -> KvFormat:
        served = kv_format(kv_bytes)
        return DsMlaKv(1) if int(served) == 1 else served

    def latent_bytes_per_token(self, kv_bytes: int) -> int:
        return self.latent_format(kv_bytes).latent_bytes(self.latent_dim)

    def indexer_bytes_per_token(self) -> int:
        return self.index_head_dim + self.index_head_dim // self.INDEXER_QUANT_BLOCK * self.INDEXER_SCALE_BYTES

    def bytes_per_token(self, kv_bytes: int, tp: int = 1) -> int:
        return self.latent_bytes_per_token(kv_bytes) + self.indexer_bytes_per_token()

    def page_tensors(self, block_size: int, kv_bytes: int, tp: int = 1) -> tuple[PageTensor, ...]:
        return (latent_tensor(block_size, self.latent_dim, self.latent_format(kv_bytes)),
                PageTensor("indexer_k", (block_size, self.indexer_bytes_per_token()), 1))

    def as_full(self) -> SparseLatentAttention:
        return self

    def describe(self) -> str:
        return (f"sparse MLA latent {self.latent_dim} + indexer K {self.index_head_dim} "
                f"({self.index_heads} heads, top {self.index_topk})")

    def block_formula(self, layers: int, tp: int, block_size: int, kv_bytes: int) -> str:
        total = layers * self.page_bytes(block_size, kv_bytes, tp)
        return (f"{layers} layers x {block_size} tokens x ({self.latent_bytes_per_token(kv_bytes)} B latent + "
                f"{self.indexer_bytes_per_token()} B indexer K) = {total:,} B (sparse MLA: whole on every rank)")


@dataclass(frozen=True)
class IndexerSharingLatentAttention(_Latent):
    """A DeepSeek-sparse-attention layer that reuses an earlier layer's top-k indices and so has no indexer of its
    own (GLM-5.2's index_topk_freq): vLLM 0.33.0 models/deepseek_v32/attention.py builds no Indexer, hence no
    DeepseekV32IndexerCache, where skip_topk, and SGLang 0.5.23 model_executor/pool_configurator.py gives such a
    layer a 0-row index-K buffer (_should_elide_dsa_index_k). What it caches is the sparse MLA latent alone, in
    SparseLatentAttention's layout and 64-token blocks; it shares that kind, as vLLM keeps both specs in one
    UniformTypeKVCacheSpecs whose block costs the sum of their pages."""

    latent_dim: int
    index_topk: int
    kind: ClassVar[str] = "sparse_mla"
    kernel_block_size: ClassVar[int | None] = 64

    def latent_format(self, kv_bytes: int) -> KvFormat:
        served = kv_format(kv_bytes)
        return DsMlaKv(1) if int(served) == 1 else served  # fp8_ds_mla, as SparseLatentAttention

    def bytes_per_token(self, kv_bytes: int, tp: int = 1) -> int:
        return self.latent_format(kv_bytes).latent_bytes(self.latent_dim)

    def page_tensors(self, block_size: int, kv_bytes: int, tp: int = 1) -> tuple[PageTensor, ...]:
        return (latent_tensor(block_size, self.latent_dim, self.latent_format(kv_bytes)),)

    def as_full(self) -> IndexerSharingLatentAttention:
        return self

    def describe(self) -> str:
        return f"sparse MLA latent {self.latent_dim} on an earlier layer's indexer (top {self.index_topk})"

    def block_formula(self, layers: int, tp: int, block_size: int, kv_bytes: int) -> str:
        total = layers * self.page_bytes(block_size, kv_bytes, tp)
        return (f"{layers} layers x {block_size} tokens x {self.bytes_per_token(kv_bytes)} B latent = {total:,} B "
                "(sparse MLA sharing an indexer: whole on every rank)")

    def mixer_params(self, counter: MixerCounter) -> int:
        return counter.latent_attention(indexer=False)


class _NoPages(_OneMixer):
    """Arithmetic of the kinds that hold nothing in the KV block pool. Holds no data, like _KeyValueHeads."""

    holds_kv: ClassVar[bool] = False
    drops_old_tokens: ClassVar[bool] = False

    def bytes_per_token(self, kv_bytes: int, tp: int = 1) -> int:
        return 0

    def page_bytes(self, block_size: int, kv_bytes: int, tp: int = 1) -> int:
        return 0

    def page_tensors(self, block_size: int, kv_bytes: int, tp: int = 1) -> tuple[PageTensor, ...]:
        return ()

    def blocks_per_request(self, context: int, block_size: int, max_num_batched_tokens: int) -> int:
        return 0


class _NoHeads:
    """The kinds whose layers keep a state rather than per-token K and V heads."""

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


@dataclass(frozen=True)
class StateOnly(_NoPages, _NoHeads):
    """Mamba / linear-attention layers: a fixed state per sequence, nothing per token."""

    state_bytes: int | None = None  # per sequence at the checkpoint dtype, where the config defines it
    kind: ClassVar[str] = "none"
    has_mlp: ClassVar[bool] = False  # a Mamba block is its mixer and one norm
    state_outside_pool: ClassVar[bool] = True

    def as_full(self) -> StateOnly:
        return self

    def sequence_state_bytes(self, conv_bytes: int, fallback_ssm_bytes: int, tp: int) -> int:
        return cdiv(self.state_bytes or 0, tp)

    def describe(self) -> str:
        state = f", state {self.state_bytes} B/seq" if self.state_bytes else ""
        return f"no KV (state only{state})"

    def block_formula(self, layers: int, tp: int, block_size: int, kv_bytes: int) -> str:
        return f"0 B ({layers} state-only layers: a fixed state per sequence, no per-token KV)"

    def mixer_params(self, counter: MixerCounter) -> int:
        return counter.state_mixer()


@dataclass(frozen=True)
class RecurrentState(_OneMixer, _NoHeads):
    """Arithmetic shared by the kinds whose layers keep a fixed recurrent state per request (Mamba, Gated
    DeltaNet, short convolutions). vLLM v1 (0.10+) pages that state in the same block pool as attention:
    one block holds one request's whole state (kv_cache_interface.MambaSpec), so nothing here grows with
    the context. The dtype and engine fields are keyword-only and filled by the engine: the conv state is
    kept in the served model dtype, the SSM state in mamba_ssm_dtype when the config names one
    (mamba_utils.MambaStateDtypeCalculator), speculative tokens add conv rows and blocks, and the page may
    be padded up to the attention page."""

    _: KW_ONLY
    conv_bytes: int = 2  # element size of the conv state: the config's dtype, the served one once an engine sets it
    ssm_bytes: int | None = None  # element size of the SSM / recurrent state; None: as the conv state
    spec_tokens: int = 0  # speculative tokens per step: conv rows kept for them (mamba_utils, num_spec)
    held_blocks: int = 1  # blocks one request holds: 1, plus speculative and prefix-caching blocks
    # vLLM mamba_cache_mode "all" (v1/kv_cache_interface.py MambaSpec.max_memory_usage_bytes): cdiv(length,
    # block_size) + speculative blocks, a state kept at every block boundary
    whole_length: bool = False
    padded_page: int | None = None  # the page once padded to the attention page (MambaSpec.page_size_padded)
    kind: ClassVar[str]  # each mixer's own
    has_mlp: ClassVar[bool]
    holds_kv: ClassVar[bool] = False  # no per-token K/V; a paged engine still gives the state blocks (capacity)
    paged_state: ClassVar[bool] = True
    drops_old_tokens: ClassVar[bool] = False

    def state_tensors(self, tp: int = 1) -> tuple[PageTensor, ...]:
        raise NotImplementedError

    def describe(self) -> str:
        raise NotImplementedError

    def state_page_bytes(self, tp: int = 1) -> int:
        return page_tensors_bytes(self.state_tensors(tp))

    @property
    def state_bytes(self) -> int:
        """One request's state in this layer, unsplit (TP 1), as StateOnly gives it."""
        return self.state_page_bytes(1)

    def page_bytes(self, block_size: int, kv_bytes: int, tp: int = 1) -> int:
        return self.padded_page if self.padded_page is not None else self.state_page_bytes(tp)

    def page_tensors(self, block_size: int, kv_bytes: int, tp: int = 1) -> tuple[PageTensor, ...]:
        tensors = self.state_tensors(tp)
        padding = self.page_bytes(block_size, kv_bytes, tp) - page_tensors_bytes(tensors)
        return (*tensors, PageTensor("padding", (padding,), 1)) if padding > 0 else tensors

    def blocks_per_request(self, context: int, block_size: int, max_num_batched_tokens: int) -> int:
        return cdiv(context, block_size) + self.spec_tokens if self.whole_length else self.held_blocks

    def as_full(self) -> StateOnly:
        # An engine with one flat token pool keeps this state outside it.
        return self.unpaged()

    def unpaged(self) -> StateOnly:
        return StateOnly(self.state_bytes)

    def sequence_state_bytes(self, conv_bytes: int, fallback_ssm_bytes: int, tp: int) -> int:
        typed = replace(self, conv_bytes=conv_bytes, ssm_bytes=self.ssm_bytes or fallback_ssm_bytes)
        return typed.state_page_bytes(tp)

    def padded_to(self, attention_page: int, tp: int) -> Layer:
        # vLLM: "Padding mamba page size by X%" so that every group's pages are equal
        return replace(self, padded_page=attention_page) if self.state_page_bytes(tp) < attention_page else self

    def as_served(self, conv_bytes: int, ssm_bytes: int | None, spec_tokens: int, extra_blocks: int,
                  fallback_ssm_bytes: int | None = None, whole_length: bool = False) -> Layer:
        held = 1 + spec_tokens + extra_blocks
        ssm = ssm_bytes if ssm_bytes is not None else (
            self.ssm_bytes if self.ssm_bytes is not None else fallback_ssm_bytes)
        return replace(self, conv_bytes=conv_bytes, ssm_bytes=ssm, spec_tokens=spec_tokens, held_blocks=held,
                       whole_length=whole_length)

    def block_formula(self, layers: int, tp: int, block_size: int, kv_bytes: int) -> str:
        shapes = " + ".join(f"{t.name} {'x'.join(map(str, t.shape))} x {t.element_bytes} B"
                            for t in self.state_tensors(tp))
        page = self.page_bytes(block_size, kv_bytes, tp)
        padded = f", padded to {page:,} B" if page != self.state_page_bytes(tp) else ""
        return (f"{layers} layers x ({shapes} = {self.state_page_bytes(tp):,} B{padded}) = {layers * page:,} B "
                "(one whole state per block, whatever the context)")

    def mixer_params(self, counter: MixerCounter) -> int:
        return counter.state_mixer()

    def _ssm(self) -> int:
        return self.ssm_bytes if self.ssm_bytes is not None else self.conv_bytes


@dataclass(frozen=True)
class Mamba1State(RecurrentState):
    """A Mamba-1 mixer (Mamba, Jamba): conv state (kernel - 1, inner) and SSM state (inner, state), inner
    split across TP ranks (mamba_utils.MambaStateShapeCalculator.mamba1_state_shape)."""

    inner: int
    state_size: int
    conv_kernel: int
    kind: ClassVar[str] = "mamba1"
    has_mlp: ClassVar[bool] = False  # a Mamba block is its mixer and one norm

    def state_tensors(self, tp: int = 1) -> tuple[PageTensor, ...]:
        inner = self.inner // tp
        return (PageTensor("conv", (self.conv_kernel - 1, inner), self.conv_bytes),
                PageTensor("ssm", (inner, self.state_size), self._ssm()))

    def describe(self) -> str:
        return f"Mamba-1 state, inner {self.inner} x state {self.state_size}, conv {self.conv_kernel}"


@dataclass(frozen=True)
class Mamba2State(RecurrentState):
    """A Mamba-2 mixer (Nemotron-H, Granite-4.0-H, Falcon-H1, Bamba, Mamba2): conv state over inner + 2 x groups
    x state channels and SSM state (heads, head_dim, state) per rank; groups that do not divide across the
    ranks are replicated up to the TP size (mamba2_state_shape, extra_groups_for_head_shards)."""

    inner: int
    heads: int
    head_size: int  # per SSM head (the config's mamba head_dim)
    groups: int
    state_size: int
    conv_kernel: int
    # the SSD kernel's chunk (mamba_chunk_size, else chunk_size; None: the configs' 256), which vLLM's
    # mamba_cache_mode "all" aligns blocks to (engines/vllm/hybrid.py); not part of the state
    chunk_size: int | None = field(default=None, compare=False)
    kind: ClassVar[str] = "mamba2"
    has_mlp: ClassVar[bool] = False

    def state_tensors(self, tp: int = 1) -> tuple[PageTensor, ...]:
        groups = self.groups if self.groups % tp == 0 else tp
        conv_dim = (self.inner + 2 * groups * self.state_size) // tp
        return (PageTensor("conv", (self.conv_kernel - 1 + self.spec_tokens, conv_dim), self.conv_bytes),
                PageTensor("ssm", (self.heads // tp, self.head_size, self.state_size), self._ssm()))

    def describe(self) -> str:
        return (f"Mamba-2 state, {self.heads} heads x {self.head_size} x state {self.state_size}, "
                f"{self.groups} groups, conv {self.conv_kernel}")

    def mixer_params(self, counter: MixerCounter) -> int:
        return counter.mamba2_mixer(self)


@dataclass(frozen=True)
class GatedDeltaNetState(RecurrentState):
    """A Gated DeltaNet linear-attention mixer (Qwen3-Next, Qwen3.5): conv state over 2 x key + value channels
    and a recurrent state (value heads, value dim, key dim) per rank (gated_delta_net_state_shape)."""

    key_heads: int
    value_heads: int
    key_dim: int
    value_dim: int
    conv_kernel: int
    kind: ClassVar[str] = "gdn"
    has_mlp: ClassVar[bool] = True  # every Qwen3-Next / Qwen3.5 layer has its MLP or experts

    def state_tensors(self, tp: int = 1) -> tuple[PageTensor, ...]:
        conv_dim = (2 * self.key_heads * self.key_dim + self.value_heads * self.value_dim) // tp
        return (PageTensor("conv", (self.conv_kernel - 1 + self.spec_tokens, conv_dim), self.conv_bytes),
                PageTensor("recurrent", (self.value_heads // tp, self.value_dim, self.key_dim), self._ssm()))

    def describe(self) -> str:
        return (f"Gated DeltaNet state, {self.value_heads} value heads x {self.value_dim} x {self.key_dim} key "
                f"dim, conv {self.conv_kernel}")


@dataclass(frozen=True)
class ShortConvState(RecurrentState):
    """A gated short convolution (LFM2): only a conv state (L_cache - 1, hidden) per rank
    (short_conv_state_shape)."""

    channels: int
    conv_kernel: int
    kind: ClassVar[str] = "shortconv"
    has_mlp: ClassVar[bool] = True

    def state_tensors(self, tp: int = 1) -> tuple[PageTensor, ...]:
        return (PageTensor("conv", (self.conv_kernel - 1, self.channels // tp), self.conv_bytes),)

    def describe(self) -> str:
        return f"short conv state, {self.channels} channels, kernel {self.conv_kernel}"

    def mixer_params(self, counter: MixerCounter) -> int:
        return counter.short_conv_mixer(self)


@dataclass(frozen=True)
class KdaState(RecurrentState):
    """A Kimi Delta Attention linear-attention mixer (Kimi-K3, Kimi-Linear: linear_attn_config), vLLM 0.33.0
    model_executor/layers/mamba/mamba_utils.py kda_state_shape: a conv state over q, k and v (3 x heads x head_dim
    channels) and a recurrent state (heads, head_dim, head_dim) per rank, the recurrent state float32 under auto
    (kda_state_dtype; SGLang 0.5.23 configs/mamba_utils.py mamba2_state_dtype's default too)."""

    heads: int
    head_size: int
    conv_kernel: int
    kind: ClassVar[str] = "kda"
    has_mlp: ClassVar[bool] = True

    def state_tensors(self, tp: int = 1) -> tuple[PageTensor, ...]:
        conv_dim = 3 * self.heads * self.head_size // tp
        return (PageTensor("conv", (self.conv_kernel - 1 + self.spec_tokens, conv_dim), self.conv_bytes),
                PageTensor("recurrent", (self.heads // tp, self.head_size, self.head_size), self._ssm()))

    def describe(self) -> str:
        return f"KDA state, {self.heads} heads x {self.head_size} x {self.head_size}, conv {self.conv_kernel}"

    def mixer_params(self, counter: MixerCounter) -> int:
        return counter.kda_mixer(self)


@dataclass(frozen=True)
class KdaLowRankGateState(KdaState):
    """Kimi-Linear's KDA mixer (linear_attn_config without use_full_rank_gate): the same states as Kimi-K3's
    (vLLM 0.33.0 model_executor/layers/mamba/gdn/kimi_gdn_linear_attn.py KimiGatedDeltaNetAttention.get_state_shape
    reads num_heads, head_dim and short_conv_kernel_size whatever the gate), its output gate from a low-rank pair
    of projections of its own (g_a_proj, g_b_proj) rather than a slice of the fused input projection."""

    def mixer_params(self, counter: MixerCounter) -> int:
        return counter.kda_low_rank_mixer(self)


def checkpoint_conv_bytes(lm: ConfigFields) -> int:
    """Bytes of one conv-state element where no engine rule says otherwise: the checkpoint's dtype (torch_dtype,
    transformers 5's dtype; float32, PretrainedConfig's default, where neither is written), 2 for a name
    units.DTYPE_BYTES does not weigh, at least 1."""
    return max(1, int(DTYPE_BYTES.get(canonical_dtype(lm.text(("torch_dtype", "dtype")) or "float32"), 2)))


RECURRENT_STATES = (Mamba1State, Mamba2State, GatedDeltaNetState, ShortConvState, KdaState)


@dataclass(frozen=True)
class MlpBlock(_NoPages, _NoHeads):
    """A decoder layer that is only an MLP or a set of experts, with no token mixer and so nothing cached (Nemotron-H's
    '-' and 'E' layers: vLLM nemotron_h.py NemotronHMLPDecoderLayer and NemotronHMoEDecoderLayer)."""

    kind: ClassVar[str] = "none"  # the label of every layer that caches nothing
    has_mlp: ClassVar[bool] = True
    mixer_free: ClassVar[bool] = True

    def as_full(self) -> MlpBlock:
        return self

    def describe(self) -> str:
        return "no KV (an MLP or experts only, no mixer)"

    def block_formula(self, layers: int, tp: int, block_size: int, kv_bytes: int) -> str:
        return f"0 B ({layers} MLP-only layers: no mixer, nothing cached)"

    def mixer_params(self, counter: MixerCounter) -> int:
        return 0


@dataclass(frozen=True)
class SharedKv(_NoPages):
    """An attention layer that reads the KV cache of an earlier layer (vLLM kv_sharing_target_layer_name,
    Gemma 3n's num_kv_shared_layers): it computes attention but caches nothing of its own."""

    kv_heads: int
    head_dim: int
    kind: ClassVar[str] = "shared"
    has_mlp: ClassVar[bool] = True

    def heads_per_rank(self, tp: int) -> int:
        return max(1, self.kv_heads // tp)

    def as_full(self) -> SharedKv:
        return self

    def describe(self) -> str:
        return f"attention on an earlier layer's KV (shared), {self.kv_heads} KV heads x {self.head_dim}"

    def block_formula(self, layers: int, tp: int, block_size: int, kv_bytes: int) -> str:
        return f"0 B ({layers} layers reuse an earlier layer's KV cache)"

    def mixer_params(self, counter: MixerCounter) -> int:
        return counter.kv_attention(self.kv_heads, self.head_dim)


class _AttentionBesideState(_HeadsOfItsAttention, _PlainFlags):
    """What a decoder layer with an attention mixer and a recurrent mixer answers: vLLM v1 registers the two as two
    cache layers (cache_layers), so the pool sees an attention spec and a state spec per decoder layer; what it
    caches per token is its attention's. Holds no data: each kind is its own dataclass with `attention` and
    `mixer`, rebuilt by dataclasses.replace."""

    attention: FullAttention
    mixer: Layer  # a Mamba2State from the config's mamba fields, or a sizeless StateOnly without them
    holds_kv: ClassVar[bool] = True
    drops_old_tokens: ClassVar[bool] = False
    # The state flags stay plain: the state sits in its own cache layer (cache_layers), which answers them for the pool.

    def bytes_per_token(self, kv_bytes: int, tp: int = 1) -> int:
        return self.attention.bytes_per_token(kv_bytes, tp)

    def page_bytes(self, block_size: int, kv_bytes: int, tp: int = 1) -> int:
        return sum(layer.page_bytes(block_size, kv_bytes, tp) for layer in self.cache_layers())

    def page_tensors(self, block_size: int, kv_bytes: int, tp: int = 1) -> tuple[PageTensor, ...]:
        return tuple(t for layer in self.cache_layers() for t in layer.page_tensors(block_size, kv_bytes, tp))

    def blocks_per_request(self, context: int, block_size: int, max_num_batched_tokens: int) -> int:
        return sum(layer.blocks_per_request(context, block_size, max_num_batched_tokens)
                   for layer in self.cache_layers())

    def cache_layers(self) -> tuple[Layer, ...]:
        return self.attention, self.mixer

    def state_page_bytes(self, tp: int = 1) -> int:
        return self.mixer.state_page_bytes(tp)

    def as_full(self: Any) -> Any:
        return replace(self, attention=self.attention.as_full(), mixer=self.mixer.as_full())

    def padded_to(self: Any, attention_page: int, tp: int) -> Any:
        return replace(self, mixer=self.mixer.padded_to(attention_page, tp))

    def as_served(self: Any, conv_bytes: int, ssm_bytes: int | None, spec_tokens: int, extra_blocks: int,
                  fallback_ssm_bytes: int | None = None, whole_length: bool = False) -> Any:
        return replace(self, mixer=self.mixer.as_served(conv_bytes, ssm_bytes, spec_tokens, extra_blocks,
                                                        fallback_ssm_bytes, whole_length))

    def kept_tokens(self) -> int | None:
        return self.attention.kept_tokens()

    def unpaged(self: Any) -> Any:
        return replace(self, mixer=self.mixer.unpaged())

    def sequence_state_bytes(self, conv_bytes: int, fallback_ssm_bytes: int, tp: int) -> int:
        return self.mixer.sequence_state_bytes(conv_bytes, fallback_ssm_bytes, tp)

    def block_formula(self, layers: int, tp: int, block_size: int, kv_bytes: int) -> str:
        return " + ".join(layer.block_formula(layers, tp, block_size, kv_bytes) for layer in self.cache_layers())


@dataclass(frozen=True)
class ParallelHybrid(_AttentionBesideState):
    """A decoder layer whose input goes through an attention mixer and a Mamba-2 mixer side by side, their outputs
    summed, then one MLP (Falcon-H1: vLLM falcon_h1.py FalconH1ParallelHybrid). vLLM v1 registers the two mixers
    as two cache layers, the Mamba one under the layer index num_hidden_layers + i."""

    attention: FullAttention
    mixer: Layer
    kind: ClassVar[str] = "parallel"
    has_mlp: ClassVar[bool] = True

    def describe(self) -> str:
        return f"parallel: {self.attention.describe()} beside {self.mixer.describe()}"

    def mixer_params(self, counter: MixerCounter) -> int:
        return sum(layer.mixer_params(counter) for layer in self.cache_layers())


@dataclass(frozen=True)
class SharedBlockHybrid(_AttentionBesideState):
    """A Zamba2 'hybrid' layer (vLLM 0.33.0 model_executor/models/zamba2.py Zamba2HybridLayer): one of the
    num_mem_blocks shared transformer blocks (attention over the concatenated hidden and embedding, 2 x hidden
    wide, then a gated MLP), a hidden x hidden linear, then the layer's own Mamba-2 decoder. The blocks' weights
    are shared, but each invocation has an Attention of its own (Zamba2Attention.dpa_list, registered as
    attn.{j} with j unique across the hybrid positions), so every hybrid position caches its own K and V, as
    many KV heads as attention heads (the Attention is built without num_kv_heads), beside its Mamba-2 state.
    The parameters: the Mamba-2 mixer and, per position, the linear and the LoRA adapters of the MLP (and of q,
    k and v where use_shared_attention_adapter); the shared block once, at its first position (owns_block)."""

    attention: FullAttention
    mixer: Layer
    owns_block: bool = field(default=False, compare=False)  # counts the shared block's weights (its first use)
    kind: ClassVar[str] = "shared_block"
    has_mlp: ClassVar[bool] = False  # the shared block's MLP is counted by mixer_params

    def describe(self) -> str:
        return f"shared block: {self.attention.describe()} of its own, then {self.mixer.describe()}"

    def mixer_params(self, counter: MixerCounter) -> int:
        return self.mixer.mixer_params(counter) + counter.shared_block(self.owns_block)
