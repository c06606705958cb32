"""SGLang 0.5.23's pools for DeepSeek-V4's compressed sparse attention (kvplan.models.compressed_attention's layer
kind), for the default launch on CUDA, read from the release wheel:

- model_executor/pool_configurator.py DSV4PoolConfigurator (create_memory_pool_configurator picks it for
  DeepSeek-V4): calculate_pool_sizes, _get_bytes_per_swa_token, _compressed_bytes_per_full_token,
  _get_c128_state_fixed_bytes, _compute_dsv4_sizes, finalize_with_max_running_requests;
- mem_cache/deepseek_v4_memory_pool.py: select_dsv4_kv_layout (SGLANG_DSV4_KV_LAYOUT "v4": KVLayout.V4),
  get_dsv4_indexer_bytes_per_token, get_compress_state_ring_size, collect_sources_by_ratio; the pools themselves
  in DeepSeekV4TokenToKVPool;
- kernels/ops/attention/dsv4/kv_layout.py KVLayout.V4: a row of 448 fp8 NoPE + 64 bf16 RoPE + 8 scale bytes (584 B),
  a page padded to a multiple of 576 B (page_bytes);
- arg_groups/model_overrides/deepseek_v4.py: page_size 256 on CUDA, swa_full_tokens_ratio 0.1 when not given
  (which kv_cache_hook then records as explicitly set, so the configurator sizes the SWA pool by the ratio, never
  from the request cap); arg_groups/deepseek_v4_hook.py: max_running_requests 256 when not given, dsv4_attn_backend
  flashmla (flashmla_mega and trtllm are DeepSeek-V4.1's or opt-in);
- environ.py: SGLANG_DSV4_COMPRESS_STATE_DTYPE float32, SGLANG_OPT_USE_ONLINE_COMPRESS off (a 128-row c128 ring).

The pools: a sliding-window pool of every layer (swa tokens: `ratio` x the full pool, 585 B a token a layer at page
256, plus the c4 compressor states it addresses, 8 ring rows a page), per ratio-4 layer a compressed latent pool
(one row per 4 tokens, page 64) and an indexer pool (132 B per compressed token), per ratio-128 layer a compressed
latent pool (page 2), and the ratio-128 compressor states, fixed per request slot. The "full" pool is the logical
token index only: no layer keeps a full-rate latent. The configurator's arithmetic is floating point; it is kept
here in the same order, so that the truncations fall where SGLang's do.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from kvplan.capacity import SplitPools, TokenPool
from kvplan.engines.base import PlanInput
from kvplan.engines.sglang.releases import RELEASES, release_of
from kvplan.errors import KvplanError
from kvplan.models.compressed_attention import (
    CompressedSparseAttention,
    PackedCache,
    has_compressed_attention,
    unsupported_ratio,
)
from kvplan.models.layers import Layer
from kvplan.units import cdiv

RELEASE = (0, 5, 23)
PAGE_SIZE = 256  # model_overrides/deepseek_v4.py, CUDA
SWA_FULL_TOKENS_RATIO = 0.1  # model_overrides/deepseek_v4.py (DSV4_DEFAULT_SWA_FULL_TOKENS_RATIO too)
MAX_RUNNING_REQUESTS = 256  # deepseek_v4_hook.apply_deepseek_v4_defaults
AUTO_KV_CACHE_DTYPE = "fp8_e4m3"  # arg_groups/overrides.py _deepseek_v4_kv_cache_dtype: auto on CUDA
V4_ROW_SCALE_BYTES, V4_PAGE_ALIGN = 8, 576  # KVLayout.V4: 7 UE8M0 scales + 1 pad a row; the TMA row stride
STATE_BYTES = 4  # SGLANG_DSV4_COMPRESS_STATE_DTYPE float32
RING_ROWS = {4: 8, 128: 128}  # get_compress_state_ring_size without speculative decoding
INDEXER_QUANT_BLOCK, INDEXER_SCALE_BYTES = 128, 4  # get_dsv4_indexer_bytes_per_token, fp8 (CUDA)
C128_STATE_ROW_ALIGN = 128  # CompressStatePool pads its rows to the compress ratio
# flags that take DSV4PoolConfigurator off the default path, with their default
MODE_FLAGS = {
    "dsv4-attn-backend": "flashmla; trtllm keeps 512 B uniform-FP8 rows, flashmla_mega is DeepSeek-V4.1's",
    "enable-hisparse": "off; HiSparse shrinks the c4 pool by its host-to-device ratio",
    "enable-encoder-swa-bounded-replay": "off; the SWA window then lives in per-request windows",
}


def applies(layers: tuple[Layer, ...] | list[Layer]) -> bool:
    """Whether the model is DeepSeek-V4's compressed sparse attention (its layers are that kind)."""
    return has_compressed_attention(layers)


# mem_cache/deepseek_v4_memory_pool.py collect_sources_by_ratio: ratios 0, 1, 2, 4 and 128, any other a ValueError
# "Unsupported compression ratio"; ratio 2's kv-source layers (and their rings) are not modelled here
SGLANG_RATIOS, MODELLED_RATIOS = (0, 1, 2, 4, 128), (1, 4, 128)


def check_ratios(layers: tuple[Layer, ...] | list[Layer]) -> None:
    """Refuse, naming SGLang, a ratio its DeepSeek-V4 pools do not take or kvplan does not model for it."""
    ratio = unsupported_ratio(layers, MODELLED_RATIOS)
    if ratio is None:
        return
    if ratio in SGLANG_RATIOS:
        raise KvplanError(f"compress_ratios: SGLang 0.5.23 takes a ratio of {ratio} (kv-source layers, "
                          "collect_sources_by_ratio), which kvplan does not model; it models 0, 4 and 128")
    raise KvplanError(f"compress_ratios: a ratio of {ratio} is not one SGLang 0.5.23's DeepSeek-V4 pools take "
                      "(0, 1, 2, 4 or 128: collect_sources_by_ratio raises 'Unsupported compression ratio')")


@dataclass(frozen=True)
class Dsv4Geometry:
    """What the configurator reads from the config: the layers of each ratio, the latent and indexer widths."""

    layers: int  # every layer has a sliding window
    c4_layers: int
    c128_layers: int
    latent: int  # qk_nope_head_dim + qk_rope_head_dim
    rope: int
    index_head_dim: int
    window: int

    @classmethod
    def of(cls, layers: list[CompressedSparseAttention]) -> Dsv4Geometry:
        first = layers[0]
        return cls(len(layers), sum(layer.ratio == 4 for layer in layers), sum(layer.ratio == 128 for layer in layers),
                   first.latent_dim, first.rope_dim, first.index_head_dim, first.window)

    @property
    def row_bytes(self) -> int:
        """DSV4PoolConfigurator.kv_bytes under flashmla: NoPE fp8, RoPE bf16, 8 scale bytes (584 for Flash)."""
        return (self.latent - self.rope) + 2 * self.rope + V4_ROW_SCALE_BYTES

    def page_bytes(self, tokens: int) -> int:
        """KVLayout.page_bytes: a page of `tokens` rows padded to a multiple of 576 B."""
        return cdiv(tokens * self.row_bytes, V4_PAGE_ALIGN) * V4_PAGE_ALIGN

    def paged_row(self, page: int, ratio: int = 0) -> float:
        """_get_paged_kv_bytes_per_token: a row's share of its padded page (a compressed pool's page is page //
        ratio rows)."""
        rows = page // ratio if ratio else page
        return self.page_bytes(rows) / rows

    @property
    def indexer_bytes(self) -> int:
        """get_dsv4_indexer_bytes_per_token (fp8): index_head_dim values and one fp32 scale per 128."""
        return self.index_head_dim + self.index_head_dim // INDEXER_QUANT_BLOCK * INDEXER_SCALE_BYTES

    def c4_state_bytes(self) -> int:
        """One c4 compressor state row with its indexer's: 2 x 2 x head_dim fp32 each (overlapping windows)."""
        return 2 * 2 * self.latent * STATE_BYTES + 2 * 2 * self.index_head_dim * STATE_BYTES

    def swa_token_bytes(self, page: int) -> float:
        """_get_bytes_per_swa_token: a sliding-window row in every layer, and the c4 states (ring rows a page)."""
        return self.paged_row(page) * self.layers + RING_ROWS[4] / page * self.c4_state_bytes() * self.c4_layers

    def compressed_token_bytes(self, page: int) -> float:
        """The compressed pools' bytes one full-pool token adds (_compressed_bytes_per_full_token, in
        collect_sources_by_ratio's order: ratio 4, then 128)."""
        c4 = 1 / 4 * self.paged_row(page, 4) + 1 / 4 * self.indexer_bytes
        return sum((c4 * self.c4_layers, 1 / 128 * self.paged_row(page, 128) * self.c128_layers))

    def full_token_bytes(self, page: int, ratio: float) -> float:
        """_get_bytes_per_full_token in ratio mode."""
        return ratio * self.swa_token_bytes(page) + self.compressed_token_bytes(page)

    def c128_state_bytes(self, requests: int) -> int:
        """_get_c128_state_fixed_bytes: a 128-row ring per request slot (requests + 1), the pool's ring + 1 more,
        padded to 128 rows; rows of 2 x head_dim fp32, in every ratio-128 layer."""
        if not self.c128_layers:
            return 0
        ring = RING_ROWS[128]
        rows = cdiv((requests + 1) * ring + ring + 1, C128_STATE_ROW_ALIGN) * C128_STATE_ROW_ALIGN
        return rows * 2 * self.latent * STATE_BYTES * self.c128_layers


@dataclass(frozen=True)
class Dsv4Pools:
    """The sizes DSV4PoolConfigurator gives the pools of one rank ("DSV4 pool sizes: full=..., swa=..., c4=...,
    c128=..., c4_state=..., c128_state=...")."""

    full: int
    swa: int
    c4: int
    c128: int
    c4_state: int
    c128_state: int
    requests: int  # resolve_max_num_reqs: min(requested per worker, full // 2)


def dsv4_pools(geometry: Dsv4Geometry, available: int, requested: int, ratio: float,
               page: int = PAGE_SIZE) -> Dsv4Pools:
    """calculate_pool_sizes, then resolve_max_num_reqs and finalize_with_max_running_requests. requested: the
    max_running_requests of one attention-DP worker."""
    fixed = geometry.c128_state_bytes(requested)
    full = int(max(available - fixed, 0) / geometry.full_token_bytes(page, ratio)) // page * page
    swa = int(full * ratio) // page * page
    if geometry.window + page >= swa:  # validate_swa_pool_size
        raise KvplanError(f"SGLang's DeepSeek-V4 SWA pool ({swa:,} tokens) cannot hold one request (the sliding "
                          f"window {geometry.window} + page {page}): raise --swa-full-tokens-ratio or the KV budget")
    requests = min(requested, full // 2)
    return Dsv4Pools(full, swa, full // 4, full // 128, swa // page * RING_ROWS[4], (requests + 1) * RING_ROWS[128],
                     requests)


def check_default_launch(target: PlanInput) -> None:
    """Refuse by name the paths DSV4PoolConfigurator takes that kvplan does not model."""
    dep, gpu = target.deployment, target.gpu
    if release_of(dep.engine_version) != RELEASE:
        raise KvplanError("DeepSeek-V4's pools are modelled as SGLang 0.5.23 builds them (DSV4PoolConfigurator); "
                          f"SGLang {dep.engine_version or RELEASES.newest} is not read", dep.where("engine_version"))
    if gpu.compute_major is None and (gpu.compute_capability or "").startswith("gfx"):
        raise KvplanError("DeepSeek-V4 on ROCm takes SGLang's unified_kv / aiter pools, which kvplan does not model")
    refused = {"speculative_config": (bool(dep.speculative_config), "a speculative draft (ring sizes 16/256, the "
                                                                     "(T+1)/T inflation)"),
               "max_total_tokens": (dep.max_total_tokens is not None, "--max-total-tokens "
                                                                     "(calculate_pool_sizes_from_max_tokens)"),
               "pipeline_parallel_size": (dep.pipeline_parallel_size > 1, "pipeline parallelism (per-stage slices)")}
    for field, (given, what) in refused.items():
        if given:
            raise KvplanError(f"SGLang's DeepSeek-V4 pools with {what} are not modelled", dep.where(field))
    passed = [flag for flag in MODE_FLAGS if any(re.search(rf"--{flag}\b", note) for note in dep.notes)]
    if passed:  # the flag parser records these in the deployment's notes (accepted, or not memory-relevant)
        raise KvplanError(f"SGLang's DeepSeek-V4 pools with --{passed[0]} are not modelled (only its default: "
                          f"{MODE_FLAGS[passed[0]]})")
    if dep.kv_cache_dtype not in ("auto", "fp8", "fp8_e4m3"):
        raise KvplanError(f"SGLang's DeepSeek-V4 pools are modelled for the fp8 FlashMLA rows only (auto resolves "
                          f"to fp8_e4m3), not --kv-cache-dtype {dep.kv_cache_dtype}", dep.where("kv_cache_dtype"))


def split_pools(target: PlanInput, pool_bytes: int, attention_dp: int, chunk: int) -> tuple[SplitPools, Dsv4Pools]:
    """The pools of one rank as kvplan's SplitPools: the full (logical) pool, which a request holds whole and whose
    bytes per token are the compressed pools', and the sliding-window pool."""
    check_default_launch(target)
    dep = target.deployment
    layers = [layer for layer in target.spec.layers if isinstance(layer, CompressedSparseAttention)]
    geometry = Dsv4Geometry.of(layers)
    ratio = dep.swa_full_tokens_ratio if dep.swa_full_tokens_ratio is not None else SWA_FULL_TOKENS_RATIO
    requested = max(1, (dep.max_num_seqs or MAX_RUNNING_REQUESTS) // attention_dp)
    sizes = dsv4_pools(geometry, pool_bytes, requested, ratio)
    # a request holds its whole context in the full (logical) index and its window, plus a chunk, in the SWA pool
    index = PackedCache("full index", geometry.latent, geometry.rope, 0, 1, 0, 0)
    window = layers[0].cache_layers()[0]
    full_pool = TokenPool("full", sizes.full, math.ceil(geometry.compressed_token_bytes(PAGE_SIZE)), index)
    swa_pool = TokenPool("swa", sizes.swa, math.ceil(geometry.swa_token_bytes(PAGE_SIZE)), window)
    return SplitPools((full_pool, swa_pool), PAGE_SIZE, chunk), sizes


def note(sizes: Dsv4Pools, geometry_layers: list[Layer]) -> str:
    layers = [layer for layer in geometry_layers if isinstance(layer, CompressedSparseAttention)]
    g = Dsv4Geometry.of(layers)
    return (f"DeepSeek-V4 (SGLang 0.5.23 DSV4PoolConfigurator): full {sizes.full:,} tokens (logical index), swa "
            f"{sizes.swa:,} ({g.layers} layers x {g.paged_row(PAGE_SIZE):g} B, page {PAGE_SIZE}), c4 {sizes.c4:,} "
            f"({g.c4_layers} layers x {g.paged_row(PAGE_SIZE, 4):g} B + indexer {g.indexer_bytes} B, page "
            f"{PAGE_SIZE // 4}), c128 {sizes.c128:,} ({g.c128_layers} layers x {g.paged_row(PAGE_SIZE, 128):g} B, "
            f"page {PAGE_SIZE // 128}), c4 state {sizes.c4_state:,} rows, c128 state {sizes.c128_state:,} rows "
            f"(fixed per request slot)")


def default_running_requests(layers: tuple[Layer, ...] | list[Layer]) -> int | None:
    """max_running_requests where none is given: 256 for DeepSeek-V4 (deepseek_v4_hook.apply_deepseek_v4_defaults),
    else None (SGLang's estimate from the pool)."""
    return MAX_RUNNING_REQUESTS if applies(layers) else None
