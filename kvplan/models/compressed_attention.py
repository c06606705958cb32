"""DeepSeek-V4's compressed sparse attention, a layer kind of its own (a sibling of kvplan.models.layers' kinds,
under the same LayerKind protocol). What each layer caches is read from the config alone: its entry of
compress_ratios (0: sliding window only; 4: compressed sparse attention, with a lightning indexer; 128: heavily
compressed attention), sliding_window, head_dim, qk_rope_head_dim and the index_* fields.

As vLLM 0.33.0 builds it (vllm/models/deepseek_v4/attention.py DeepseekV4Attention, DeepseekV4Indexer;
models/deepseek_v4/compressor.py CompressorStateCache; v1/attention/backends/mla/sparse_swa.py DeepseekV4SWACache),
each layer registers several caches, every one a spec of its own in one block pool:
- the sliding window of uncompressed entries (every layer): one latent entry per token, blocks of 64 tokens,
  window sliding_window;
- where the ratio is above 1, the compressed latent: one entry per `ratio` tokens, in blocks of the pool's block
  size, every entry kept; and its compressor's state, fp32 rows of 2 x coff x head_dim (coff 2 where the windows
  overlap, ratio 4; else 1), in blocks of 4 (ratio 4) or 8 (ratio 128) tokens, a sliding window of coff x ratio;
- where the ratio is 4, the indexer's key: index_head_dim fp8 values and one fp32 scale per 128 (132 B) per
  compressed entry, and the indexer compressor's fp32 state (2 x 2 x index_head_dim) in blocks of 4.
A latent entry is kept in the fp8_ds_mla layout FlashMLA reads, whatever --kv-cache-dtype says (attention.py
_resolve_dsv4_kv_cache_dtype turns auto into fp8_ds_mla and refuses any other than fp8; DeepseekV4FlashMLAAttention
is the class on every CUDA GPU but compute capability 12.x, whose FlashInfer rows are not modelled here): 448 NoPE
bytes, 64 RoPE values in bf16 and one UE8M0 scale per 64 NoPE values plus one pad byte, 584 B (state_content_bytes).
Each page is rounded up to a multiple of 576 B (the specs' alignment under fp8_ds_mla). vLLM packs these pages of
different sizes side by side in one block (the block-outermost layout its DeepSeek-V4 backends declare;
v1/core/kv_cache_planning.py _get_packed_kv_cache_groups), which kvplan.capacity.packed_groups follows."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, ClassVar

from kvplan.errors import KvplanError
from kvplan.models.fields import ConfigFields
from kvplan.models.layers import Layer, MixerCounter, PageTensor, _OneMixer, has_compressed_attention
from kvplan.units import cdiv

SWA_BLOCK = 64  # DeepseekV4SWACache's block_size default, which DeepseekV4Attention keeps
STATE_BLOCKS = {4: 4, 128: 8}  # CompressorStateCache.block_size by compress ratio
INDEXED_RATIO = 4  # "Only C4A uses sparse attention and hence has indexer" (DeepseekV4Attention.__init__)
DS_ALIGNMENT = 576  # the specs' alignment under fp8_ds_mla
INDEXER_QUANT_BLOCK, SCALE_BYTES, STATE_BYTES = 128, 4, 4  # DeepseekV4Indexer.quant_block_size; fp32
NOPE_SCALE_BLOCK = 64  # DeepseekCompressor._quant_block for head_dim 512: one UE8M0 scale per 64 NoPE values


@dataclass(frozen=True)
class PackedCache(_OneMixer):
    """One cache a compressed sparse attention layer registers: entries of one size, one per `tokens_per_entry`
    tokens, in blocks of `own_block` tokens (0: the pool's block size), a sliding `window` of tokens (0: every
    entry kept). `entry` is fixed bytes, or 0 for a latent entry (584 B in fp8_ds_mla)."""

    role: str
    latent_dim: int
    rope_dim: int
    entry: int
    tokens_per_entry: int
    own_block: int
    window: int
    kind: ClassVar[str] = "csa_cache"
    holds_kv: ClassVar[bool] = True
    drops_old_tokens: ClassVar[bool] = False
    has_mlp: ClassVar[bool] = True
    latent_cache: ClassVar[bool] = True
    kernel_block_size: ClassVar[int | None] = 256
    block_outermost: ClassVar[bool] = True  # pages of several sizes packed in one block

    @property
    def kv_heads(self) -> int:
        return 1

    @property
    def head_dim(self) -> int:
        return self.latent_dim

    def heads_per_rank(self, tp: int) -> int:
        return 1  # max_tp_shards=1: whole on every rank

    def entry_bytes(self, kv_bytes: int) -> int:
        if self.entry:
            return self.entry
        nope = self.latent_dim - self.rope_dim  # fp8_ds_mla, whatever kv_bytes says (module docstring)
        return nope + 2 * self.rope_dim + nope // NOPE_SCALE_BLOCK + 1

    def block_tokens(self, block_size: int) -> int:
        return self.own_block or block_size

    def page_bytes(self, block_size: int, kv_bytes: int, tp: int = 1) -> int:
        raw = self.block_tokens(block_size) // self.tokens_per_entry * self.entry_bytes(kv_bytes)
        return cdiv(raw, DS_ALIGNMENT) * DS_ALIGNMENT

    def bytes_per_token(self, kv_bytes: int, tp: int = 1) -> int:
        return cdiv(self.entry_bytes(kv_bytes), self.tokens_per_entry)

    def page_tensors(self, block_size: int, kv_bytes: int, tp: int = 1) -> tuple[PageTensor, ...]:
        page = self.page_bytes(block_size, kv_bytes, tp)
        return (PageTensor(self.role, (page,), 1),)

    def blocks_per_request(self, context: int, block_size: int, max_num_batched_tokens: int) -> int:
        # the window kinds hold window - 1 + the in-flight tokens, plus one block for a window not starting on a
        # block boundary (vLLM SlidingWindowSpec.max_admission_blocks_per_request); the others every token
        if self.window:
            return cdiv(min(self.window - 1 + max_num_batched_tokens, context), block_size) + 1
        return cdiv(context, block_size)

    def kept_tokens(self) -> int | None:
        return self.window or None

    def as_full(self) -> Layer:
        raise KvplanError("DeepSeek-V4's compressed sparse attention is modelled in vLLM's own packed KV pool "
                          "and SGLang 0.5.23's DeepSeek-V4 pools only: not in a flat token pool or with vLLM's "
                          "hybrid KV cache manager disabled")

    def describe(self) -> str:
        keeps = f"window {self.window}" if self.window else "every entry"
        return f"{self.role}: 1 entry per {self.tokens_per_entry} tokens, {keeps}"

    def block_formula(self, layers: int, tp: int, block_size: int, kv_bytes: int) -> str:
        entries = self.block_tokens(block_size) // self.tokens_per_entry
        page = self.page_bytes(block_size, kv_bytes, tp)
        return (f"{layers} x {self.role} {page:,} B ({entries} x {self.entry_bytes(kv_bytes)} B, "
                f"{self.block_tokens(block_size)}-token blocks)")

    def mixer_params(self, counter: MixerCounter) -> int:
        return 0  # counted once, by the decoder layer's CompressedSparseAttention


@dataclass(frozen=True)
class WindowCache(PackedCache):
    """A PackedCache that keeps only a sliding window of tokens (window > 0): the uncompressed latents and the
    compressors' states."""

    kind: ClassVar[str] = "csa_window"
    drops_old_tokens: ClassVar[bool] = True


@dataclass(frozen=True)
class PackedGroup(_OneMixer):
    """One of vLLM's packed KV cache groups as a single view of the block (its UniformTypeKVCacheSpecs): each
    member's pages side by side from byte 0, then padding up to the block's bytes (the widest group's), which every
    group shares (v1/core/kv_cache_planning.py get_kv_cache_config_from_groups, block-outermost). verify allocates
    a packed pool through these views."""

    members: tuple[tuple[Layer, int], ...]  # each spec with its layer count, in the group's order
    block_bytes: int
    kind: ClassVar[str] = "packed_group"
    holds_kv: ClassVar[bool] = True
    drops_old_tokens: ClassVar[bool] = False
    has_mlp: ClassVar[bool] = False

    @property
    def kv_heads(self) -> int:
        return 1

    @property
    def head_dim(self) -> int:
        return 0

    def heads_per_rank(self, tp: int) -> int:
        return 1

    def bytes_per_token(self, kv_bytes: int, tp: int = 1) -> int:
        return sum(layer.bytes_per_token(kv_bytes, tp) * count for layer, count in self.members)

    def page_bytes(self, block_size: int, kv_bytes: int, tp: int = 1) -> int:
        return self.block_bytes

    def page_tensors(self, block_size: int, kv_bytes: int, tp: int = 1) -> tuple[PageTensor, ...]:
        pages = [tensor for layer, count in self.members for _ in range(count)
                 for tensor in layer.page_tensors(layer.block_tokens(block_size), kv_bytes, tp)]
        tensors = [PageTensor(f"{tensor.name} {index}", tensor.shape, tensor.element_bytes)
                   for index, tensor in enumerate(pages)]
        padding = self.block_bytes - sum(tensor.nbytes for tensor in tensors)
        return (*tensors, PageTensor("padding", (padding,), 1)) if padding > 0 else tuple(tensors)

    def blocks_per_request(self, context: int, block_size: int, max_num_batched_tokens: int) -> int:
        return max(layer.blocks_per_request(context, layer.block_tokens(block_size), max_num_batched_tokens)
                   for layer, _ in self.members)

    def as_full(self) -> Layer:
        return self.members[0][0].as_full()

    def describe(self) -> str:
        return " + ".join(f"{count} x {layer.describe()}" for layer, count in self.members)

    def block_formula(self, layers: int, tp: int, block_size: int, kv_bytes: int) -> str:
        return " + ".join(layer.block_formula(count, tp, block_size, kv_bytes) for layer, count in self.members)

    def mixer_params(self, counter: MixerCounter) -> int:
        return 0


@dataclass(frozen=True)
class CompressedSparseAttention(_OneMixer):
    """A DeepSeek-V4 attention layer: a sliding window of uncompressed latents beside, where `ratio` is above 1,
    one compressed latent per `ratio` tokens (with an indexer where the ratio is 4). Its caches are the
    PackedCache entries cache_layers() gives, each a spec of its own in vLLM's pool."""

    latent_dim: int
    rope_dim: int
    window: int
    ratio: int  # 1: sliding window only (compress_ratios 0)
    index_head_dim: int
    index_heads: int
    index_topk: int
    kind: ClassVar[str] = "csa"
    holds_kv: ClassVar[bool] = True
    drops_old_tokens: ClassVar[bool] = False
    has_mlp: ClassVar[bool] = True
    latent_cache: ClassVar[bool] = True
    # DeepseekV4SparseMLABackend and DeepseekV4IndexerBackend take only 256-token blocks, so the platform's
    # _preferred_block_size_for_backends settles there (platforms/interface.py)
    kernel_block_size: ClassVar[int | None] = 256
    block_outermost: ClassVar[bool] = True
    compressed_sparse: ClassVar[bool] = True

    @property
    def kv_heads(self) -> int:
        return 1

    @property
    def head_dim(self) -> int:
        return self.latent_dim

    @property
    def indexed(self) -> bool:
        return self.ratio == INDEXED_RATIO

    def heads_per_rank(self, tp: int) -> int:
        return 1

    def cache_layers(self) -> tuple[Layer, ...]:
        caches: list[PackedCache] = [WindowCache("sliding window", self.latent_dim, self.rope_dim, 0, 1, SWA_BLOCK,
                                                 self.window)]
        if self.ratio > 1:
            coff = 1 + (self.ratio == INDEXED_RATIO)  # overlapping windows (DeepseekCompressor.overlap)
            state_block = STATE_BLOCKS.get(self.ratio)
            if state_block is None:
                raise KvplanError(f"compress_ratios: a ratio of {self.ratio} is not one vLLM 0.33.0's compressor "
                                  f"takes (4 or 128)")
            caches += [PackedCache("compressed latent", self.latent_dim, self.rope_dim, 0, self.ratio, 0, 0),
                       WindowCache("compressor state", self.latent_dim, self.rope_dim,
                                   2 * coff * self.latent_dim * STATE_BYTES, 1, state_block, coff * self.ratio)]
        if self.indexed:
            key = self.index_head_dim + self.index_head_dim // INDEXER_QUANT_BLOCK * SCALE_BYTES
            caches += [PackedCache("indexer key", self.latent_dim, self.rope_dim, key, self.ratio, 0, 0),
                       WindowCache("indexer state", self.latent_dim, self.rope_dim,
                                   2 * 2 * self.index_head_dim * STATE_BYTES, 1, STATE_BLOCKS[self.ratio],
                                   2 * self.ratio)]
        return tuple(caches)

    def bytes_per_token(self, kv_bytes: int, tp: int = 1) -> int:
        return sum(cache.bytes_per_token(kv_bytes, tp) for cache in self.cache_layers())

    def page_bytes(self, block_size: int, kv_bytes: int, tp: int = 1) -> int:
        return sum(cache.page_bytes(block_size, kv_bytes, tp) for cache in self.cache_layers())

    def page_tensors(self, block_size: int, kv_bytes: int, tp: int = 1) -> tuple[PageTensor, ...]:
        return tuple(t for cache in self.cache_layers() for t in cache.page_tensors(block_size, kv_bytes, tp))

    def blocks_per_request(self, context: int, block_size: int, max_num_batched_tokens: int) -> int:
        return sum(cache.blocks_per_request(context, cache.block_tokens(block_size), max_num_batched_tokens)
                   for cache in self.cache_layers())

    def as_full(self) -> Layer:
        return self.cache_layers()[0].as_full()

    def draft_layer(self) -> Layer:
        # an MTP layer sits past num_hidden_layers, outside compress_ratios: DeepseekV4Attention gives it ratio 1,
        # the sliding window alone (vLLM 0.33.0 models/deepseek_v4/nvidia/mtp.py builds a DeepseekV4DecoderLayer)
        return replace(self, ratio=1)

    def describe(self) -> str:
        if self.ratio == 1:
            return f"sliding window {self.window} of {self.latent_dim}-wide latents"
        indexer = (f", indexer K {self.index_head_dim} ({self.index_heads} heads, top {self.index_topk})"
                   if self.indexed else "")
        return (f"compressed sparse attention 1/{self.ratio}: latent {self.latent_dim} + sliding window "
                f"{self.window}{indexer}")

    def block_formula(self, layers: int, tp: int, block_size: int, kv_bytes: int) -> str:
        return " + ".join(cache.block_formula(layers, tp, block_size, kv_bytes) for cache in self.cache_layers())

    def mixer_params(self, counter: MixerCounter) -> int:
        return counter.compressed_attention(self.ratio)


# transformers' DeepseekV4Config names each layer's kind in layer_types, its ratio in compress_rates (these defaults)
LAYER_TYPE_RATES = {"sliding_attention": 0, "compressed_sparse_attention": 4, "heavily_compressed_attention": 128}


def _ratios(lm: ConfigFields) -> list[Any] | None:
    """compress_ratios as the checkpoint writes it, else derived from layer_types and compress_rates as vLLM 0.33.0
    does (transformers_utils/deepseek_v4_utils.py get_compress_ratios); None for any other config."""
    ratios = lm.array("compress_ratios")
    if ratios is not None:
        return ratios
    kinds = lm.data.get("layer_types")
    # sliding_attention alone is any sliding-window model's; a compressed kind makes it DeepSeek-V4's
    if (not isinstance(kinds, list) or not all(kind in LAYER_TYPE_RATES for kind in kinds)
            or not any(LAYER_TYPE_RATES[kind] for kind in kinds)):
        return None
    rates = LAYER_TYPE_RATES | (lm.mapping("compress_rates") or {})
    return [rates.get(kind, 0) for kind in lm.array("layer_types") or []]


def compressed_layers(lm: ConfigFields, num_layers: int) -> list[Layer] | None:
    """The layers of a config with compress_ratios (one entry per decoder layer, then the MTP layers', which vLLM
    leaves out of the main model: DeepseekV4Attention takes layer_types[layer_id] only below num_hidden_layers);
    None for any other config. A ratio of 0 is a sliding-window-only layer (compress_ratio max(1, 0))."""
    ratios = _ratios(lm)
    if ratios is None:
        return None
    if len(ratios) < num_layers:
        raise lm.fail("compress_ratios", f"has {len(ratios)} entries for {num_layers} layers")
    checked = [r for r in ratios[:num_layers] if isinstance(r, int) and not isinstance(r, bool) and r >= 0]
    if len(checked) < num_layers:
        raise lm.fail("compress_ratios", "must be a list of non-negative integers, one per layer")
    latent, rope = lm.integer("head_dim"), lm.integer("qk_rope_head_dim")
    window = lm.integer("sliding_window")
    index = (lm.integer("index_head_dim", 0, minimum=0), lm.integer("index_n_heads", 0, minimum=0),
             lm.integer("index_topk", 0, minimum=0))
    if INDEXED_RATIO in checked and not index[0]:
        raise lm.fail("index_head_dim", "is missing, but compress_ratios names layers of ratio 4, which have an "
                                        "indexer")
    return [CompressedSparseAttention(latent, rope, window, max(1, ratio), *index) for ratio in checked]


def unsupported_ratio(layers: tuple[Layer, ...] | list[Layer], accepted: tuple[int, ...]) -> int | None:
    """The first compress ratio of these DeepSeek-V4 layers outside `accepted` (1: the checkpoint's 0, the sliding
    window alone), for each engine's own refusal before the layers' caches are built; None where all are."""
    return next((layer.ratio for layer in layers
                 if isinstance(layer, CompressedSparseAttention) and layer.ratio not in accepted), None)


def flat_pool_layer(layer: Layer) -> Layer:
    """A cache layer in the flat pool of an engine that sizes DeepSeek-V4's pools apart (SGLang, TensorRT-LLM):
    DeepSeek-V4's caches stay as they are; every other kind keeps every token (its as_full)."""
    return layer if isinstance(layer, PackedCache) else layer.as_full()


def compressed_notes(layers: tuple[Layer, ...]) -> list[str]:
    """What a plan of these layers should say whatever the engine: the caches' own format."""
    if not has_compressed_attention(layers):
        return []
    return ["DeepSeek-V4's caches are planned as vLLM 0.33.0 and SGLang 0.5.23 build them, in FlashMLA's 584 B "
            "latent rows (vLLM's fp8_ds_mla, SGLang's KVLayout.V4); TensorRT-LLM's DeepseekV4CacheManager keeps "
            "head_dim x the KV dtype a row (engines/trtllm/deepseek_v4.py)"]
