"""TensorRT-LLM's pools for DeepSeek-V4's compressed sparse attention (kvplan.models.compressed_attention's layer
kind), as the stored NVIDIA/TensorRT-LLM sources build them (PyTorch backend only; each file with the commit read):

- tensorrt_llm/_torch/pyexecutor/model_config.py (id 54702305068): ModelConfig.from_pretrained turns a checkpoint
  ratio of 0 into 1 and takes window_size from sliding_window;
- _torch/attention_backend/sparse/deepseek_v4/cache_manager.py@015279e0 DeepseekV4CacheManager: tokens_per_block 128
  or 256 (asserted), BF16 or FP8 rows; _build_cache_config gives each model layer, by its ratio, manager layers of
  its own window: ratio 1, the sliding window; ratio 4, the sliding window, the compressed latent with the
  indexer's key (no window) and the four compressor states (window 2 x 4); ratio 128, the sliding window with its
  two compressor states (the window's life cycle) and the compressed latent. Each buffer is a block's bytes
  (_get_attn_bytes_per_block: a compressed block holds tokens_per_block / ratio entries). typical_step: one context
  request of max_num_tokens and max_batch_size - 1 decoding at max_seq_len (history max_seq_len - 1);
  constraints: that one decode, and one context of max_num_tokens;
- .../deepseek_v4/deepseek_v4.py@03c233a7 get_token_bytes: head_dim x (1 B FP8, 2 B BF16) for the sliding window
  and the compressed latent; index_head_dim + 4 B per 128 for the indexer's fp8 key; fp32 states of state_factor
  (2 at ratio 4, else 1) x head_dim (x index_head_dim for the indexer's);
- runtime/kv_cache_manager_v2/_storage/_config.py@1148a82f create_storage_config: one life cycle per (window,
  sinks), its buffers coalesced by size into pools, largest first; _life_cycle_registry.py@1548780d
  AttnLifeCycle.get_stale_range: blocks before (history + 1 - window) // tokens_per_block are dropped;
- _storage_manager.py@00f6bd61 StorageManager: the GPU granularity 2 MiB << min(4, log2(quota / 1 GiB)),
  ratio_from_batch (the typical step's slots, each pool rounded up to the granularity), the constraints' minimum
  slots; _storage/_core.py@02e3bf9a ratio_to_slot_count_list shares the quota's grains by that ratio;
- _torch/pyexecutor/kv_cache_manager_v2.py@00be09f7: the GPU quota is kv_cache_config.max_gpu_total_bytes, capped by
  a max_tokens quota where one is set; _torch/pyexecutor/_util.py@00043967 KvCacheCreator.configure_kv_cache_capacity
  leaves max_tokens to the user for V2 and sets max_gpu_total_bytes to the smaller of the free memory's share (less a
  context-MLA workspace reserve) and the bytes given (--kv-cache-memory). The share is free_gpu_memory_fraction x
  (device total - the profiling run's peak + the estimation pool), _cal_max_memory; kvplan's PyTorch-backend peak
  (trtllm/budget.py) stands in for the measured one;
- the reserve (_util.py@00043967 configure_kv_cache_capacity, get_mla_context_workspace_kv_len_cap,
  get_mla_context_workspace_reserve) is min(w x L_cap, share x w / (k + w)) where w, the backend's
  runtime_workspace_bytes_per_token, is above 0 and L_cap is set: L_cap = min(max_batch_size, max_num_tokens) x
  max_seq_len, or kv_cache_config.fp8_context_mla_kv_len_cap floored at max_seq_len and capped there, when block
  reuse is on (KvCacheConfig.enable_block_reuse, default True) and chunked prefill off (enable_chunked_prefill,
  default False), else no reserve (chunked prefill on leaves one only where the backend's
  runtime_workspace_is_chunked_prefill_bounded is False, trtllm.py@017aa0ca: NVFP4 DSA on SM 100+, never
  DeepSeek-V4).
  _torch/attention/backends/trtllm.py@017aa0ca TrtllmAttention.runtime_workspace_bytes_per_token, which the sparse
  backends inherit: 0 without an FP8 KV cache (the NVFP4 term is DSA's only), 0 with one on SM 100/103/107 where
  DeepSeek-V4 runs sparse MLA from the paged cache (TRTLLM_MLA_SHORT_SEQ_MHA_THRESHOLD unset), else
  heads / TP x (qk_rope + qk_nope + v_head_dim) B (cpp attentionOp.cpp contextMlaWorkspaceBytesPerToken). So a
  BF16 cache, or FP8 on Blackwell, reserves nothing and the quota is the share; an FP8 cache on SM 90 reserves
  (Workspace: the head dims from TensorRT-LLM's own DeepseekV4Config, k from the manager's per-token bytes), read
  from the options as kvplan parses them (flags.py: kv_cache_config.enable_block_reuse -> enable_prefix_caching,
  enable_chunked_prefill, kv_cache_config.fp8_context_mla_kv_len_cap);
- TrtllmAttention.__init__ refuses DeepSeek-V4 on SM 120/121 unless the KV dtype is fp8_ds_mla.

Not modelled, refused by name: SM 120/121 (fp8_ds_mla rows), MTP (it widens every window and appends ratios),
pipeline parallelism and attention DP. The newest kv_cache_manager_v2.py also re-syncs the quota across ranks in
tokens, which can only lower it; kvplan keeps the bytes. The scheduler's admission cap that the reserve carries
(reserve / w tokens of summed attended context KV a step) limits prefills, not the pools, and is not modelled.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kvplan.capacity import SplitPools, TokenPool
from kvplan.engines.base import PlanInput
from kvplan.errors import KvplanError
from kvplan.models.compressed_attention import CompressedSparseAttention, PackedCache, unsupported_ratio
from kvplan.models.layers import Layer, has_compressed_attention
from kvplan.plan import EngineSettings
from kvplan.units import GiB, cdiv

if TYPE_CHECKING:
    from kvplan.deployment import Deployment

# where none is given: the manager takes 128 or 256 only, and 128 is the default TensorRT-LLM's DeepSeek-V4 example
# README gives (v1.3.0rc23, as ai-dynamo/aiconfigurator's DSV4 module collector cites it; that README is not stored)
TOKENS_PER_BLOCK = 128
BLOCK_SIZES = (128, 256)
SPARSE_RATIO = 4  # DEEPSEEK_V4_SPARSE_RATIO: the indexed, overlapping-compressor ratio
RATIOS = (1, 4, 128)  # the metadata's supported ratios
STATE_BYTES = 4  # compressor_dtype FLOAT
INDEXER_QUANT_BLOCK, INDEXER_SCALE_BYTES = 128, 4  # indexer_k_dtype fp8: an fp32 scale per 128 values
GPU_PAGE = 2 << 20  # cache_tier_granularity's page; at most 2 MiB << 4
MAX_PAGE_SHIFT = 4
REFUSED = "DeepSeek-V4 on TensorRT-LLM is not modelled"
# configs/deepseekv4.py@17371747 DeepseekV4Config's qk_nope_head_dim default (a DeepSeek-V4 checkpoint names none;
# DeepseekV4Attention asserts its kv_lora_rank 448 beside it)
QK_NOPE_HEAD_DIM = 448
FP8_ROW_BYTES = 1  # the only rows a workspace is reserved for
SPARSE_MLA_SMS = ("10.0", "10.3", "10.7")  # useSparseMLA: TRTLLM-gen kernels read K/V from the paged cache
FP8_DS_MLA_SMS = ("12.0", "12.1")
ROWS_NOTE = ("its rows are head_dim x the KV dtype (BF16 under auto unless the checkpoint names an FP8 KV cache), "
             "not FlashMLA's 584 B")


def applies(layers: tuple[Layer, ...] | list[Layer]) -> bool:
    return has_compressed_attention(layers)


@dataclass(frozen=True)
class LifeCycle:
    """One pool group: the buffers of every manager layer with this window (None: every block kept), coalesced by
    size; a slot is one block of each pool."""

    name: str
    window: int | None
    pools: tuple[tuple[int, int], ...]  # (buffers, bytes of one buffer's block), the largest coalesced first

    @property
    def slot_sizes(self) -> tuple[int, ...]:
        return tuple(count * size for count, size in self.pools)

    def blocks(self, capacity: int, history: int, block: int) -> int:
        """Blocks one request holds: its capacity's, less those its window has passed (get_stale_range)."""
        stale = 0 if self.window is None else max(0, (history + 1 - self.window) // block)
        return cdiv(capacity, block) - stale


def check_ratios(layers: tuple[Layer, ...]) -> None:
    """Refuse, naming TensorRT-LLM, a ratio its DeepSeek-V4 metadata does not take (RATIOS), before kvplan's
    layer model (vLLM's compressor) is asked about it."""
    ratio = unsupported_ratio(layers, RATIOS)
    if ratio is not None:
        raise KvplanError(f"compress_ratios: TensorRT-LLM's DeepSeek-V4 metadata takes ratios 0/1, 4 and 128, "
                          f"not {ratio}")


def layer_buffers(layer: CompressedSparseAttention, block: int, kv_bytes: int) -> list[tuple[int | None, int]]:
    """(window, bytes a block) of each buffer one model layer gives the manager (_build_cache_config)."""
    ratio, latent, window = layer.ratio, layer.latent_dim, layer.window
    if ratio not in RATIOS:
        raise KvplanError(f"compress_ratios: TensorRT-LLM's DeepSeek-V4 metadata takes ratios 0/1, 4 and 128, "
                          f"not {ratio}")
    buffers: list[tuple[int | None, int]] = [(window, latent * kv_bytes * block)]
    if ratio == SPARSE_RATIO:
        key = layer.index_head_dim + layer.index_head_dim // INDEXER_QUANT_BLOCK * INDEXER_SCALE_BYTES
        states = 2 * ratio  # overlapping compressor: a state window of 2 x ratio
        buffers += [(None, latent * kv_bytes * block // ratio), (None, key * block // ratio)]
        buffers += [(states, 2 * latent * STATE_BYTES * block)] * 2
        buffers += [(states, 2 * layer.index_head_dim * STATE_BYTES * block)] * 2
    elif ratio > 1:  # the states share the sliding window's manager layer
        buffers += [(window, latent * STATE_BYTES * block)] * 2 + [(None, latent * kv_bytes * block // ratio)]
    return buffers


def life_cycles(layers: list[CompressedSparseAttention], block: int, kv_bytes: int) -> tuple[LifeCycle, ...]:
    """create_storage_config: life cycles in the order the layers first name them, each's pools by size."""
    by_window: dict[int | None, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    for layer in layers:
        for window, size in layer_buffers(layer, block, kv_bytes):
            by_window[window][size] += 1
    cycles = tuple(LifeCycle("compressed" if window is None else f"window {window}", window,
                             tuple(sorted(((n, s) for s, n in sizes.items()), key=lambda p: -p[0] * p[1])))
                   for window, sizes in by_window.items())
    if len({cycle.slot_sizes for cycle in cycles}) < len(cycles):
        raise KvplanError(f"{REFUSED} where two life cycles share one slot layout (one pool group, not read here)")
    return cycles


def granularity(quota: int) -> int:
    """CacheLevelManager.cache_tier_granularity for GPU memory."""
    return GPU_PAGE << min(MAX_PAGE_SHIFT, max(0, int(math.log(quota / GiB, 2))))


def grains(slots: int, sizes: tuple[int, ...], grain: int) -> int:
    """_grains_for_slots: every pool rounded up to whole grains."""
    return sum(cdiv(slots * size, grain) for size in sizes)


def slots_in(budget: int, sizes: tuple[int, ...], grain: int) -> tuple[int, int]:
    """_grains_to_slots: the most slots `budget` grains hold (a first guess sharing the grains by slot size, then
    raised while they fit), and the grains those take."""
    if budget < sum(cdiv(size, grain) for size in sizes):
        return 0, 0
    guess, left, order = 1 << 63, budget, sorted(sizes)
    for index, size in enumerate(order):
        share = max(cdiv(size, grain), round(left * (size / sum(order[index:]))))
        guess, left = min(guess, share * grain // size), left - share
    low, step = guess, 1
    while grains(low + step, sizes, grain) <= budget:
        low, step = low + step, step * 2
    high = low + step
    while low + 1 < high:
        mid = (low + high) // 2
        low, high = (mid, high) if grains(mid, sizes, grain) <= budget else (low, mid)
    return low, grains(low, sizes, grain)


def share_slots(total: int, sizes: list[tuple[int, ...]], ratio: list[float], grain: int,
                floor: list[int]) -> list[int]:
    """ratio_to_slot_count_list: the grains shared by ratio, smallest share first; a group at or below its
    minimum is pinned there and the rest shared again; then each raised while its grains still hold one more."""
    counts, left, active = [0] * len(sizes), total // grain, list(range(len(sizes)))
    while active:
        budget, got = left, {}
        ordered = sorted(active, key=lambda g: ratio[g])
        for index, group in enumerate(ordered):
            part = ratio[group] / sum(ratio[g] for g in ordered[index:])
            got[group], used = slots_in(round(budget * part), sizes[group], grain)
            budget -= used
        pinned = [group for group in active if got[group] <= floor[group]]
        if not pinned:
            counts = [got.get(g, counts[g]) for g in range(len(sizes))]
            break
        for group in pinned:
            counts[group], used = slots_in(grains(floor[group], sizes[group], grain), sizes[group], grain)
            left -= used
        active = [group for group in active if group not in pinned]
        if active and left <= 0:
            raise KvplanError(f"the KV quota ({total:,} B) cannot hold TensorRT-LLM's minimum DeepSeek-V4 pools")
    for group, size in enumerate(sizes):
        while grains(counts[group] + 1, size, grain) <= grains(counts[group], size, grain):
            counts[group] += 1
    return counts


@dataclass(frozen=True)
class Batch:
    """The manager's typical step and constraints: (capacity, history, how many such requests); counted, not
    listed, so that a max_batch_size of millions costs nothing."""

    typical: tuple[tuple[int, int, int], ...]
    constraints: tuple[tuple[tuple[int, int, int], ...], ...]

    @classmethod
    def of(cls, max_batch_size: int, max_seq_len: int, max_num_tokens: int) -> Batch:
        context, decode = (max_num_tokens, 0, 1), (max_seq_len, max_seq_len - 1)
        return cls((context, (*decode, max_batch_size - 1)), (((*decode, 1),), (context,)))


@dataclass(frozen=True)
class Dsv4Pools:
    """The pool groups of one rank and the slots (blocks) each holds."""

    cycles: tuple[LifeCycle, ...]
    slots: tuple[int, ...]
    block: int
    quota: int
    grain: int
    total: int  # the bytes shared: the quota in whole grains, or the constraints' minimum where that is more

    @property
    def raised(self) -> bool:
        """StorageManager._compute_slot_count_for_level (_storage_manager.py@b2dd2882) shares
        max(_min_quota_for_level, round_up(quota, granularity)): above the quota's grains the minimum won."""
        return self.total > cdiv(self.quota, self.grain) * self.grain

    def used(self) -> str:
        """The bytes the pools hold, and why where they are not the quota given."""
        if not self.raised:
            return f"a {self.quota:,} B quota"
        return (f"{self.total:,} B, not the {self.quota:,} B quota: StorageManager raises the quota to the least "
                "the constraints' minimum slots take (_min_quota_for_level: one max_num_tokens context and one "
                "max_seq_len decode, each pool rounded up to whole grains)")

    def group_bytes(self, index: int) -> int:
        return sum(self.slots[index] * size for size in self.cycles[index].slot_sizes)


def dsv4_pools(cycles: tuple[LifeCycle, ...], quota: int, block: int, batch: Batch) -> Dsv4Pools:
    """StorageManager.__init__: the ratio from the typical step (pools rounded up to the granularity), the minimum
    slots from the constraints (at least 1), the quota rounded up to the granularity (raised to the minimum slots'
    grains where those take more, _compute_slot_count_for_level) and shared."""
    grain = granularity(quota)

    def slots(requests: tuple[tuple[int, int, int], ...]) -> list[int]:
        return [sum(n * cycle.blocks(cap, hist, block) for cap, hist, n in requests) for cycle in cycles]

    sizes = [cycle.slot_sizes for cycle in cycles]
    typical = slots(batch.typical)
    wanted = [sum(cdiv(n * size, grain) * grain for size in group) for n, group in zip(typical, sizes, strict=True)]
    ratio = [part / sum(wanted) for part in wanted]
    floor = [max([1] + [slots(c)[g] for c in batch.constraints]) for g in range(len(cycles))]
    least = sum(grains(n, group, grain) for n, group in zip(floor, sizes, strict=True)) * grain
    total = max(least, cdiv(quota, grain) * grain)
    return Dsv4Pools(cycles, tuple(share_slots(total, sizes, ratio, grain, floor)), block, quota, grain,
                      total)


@dataclass(frozen=True)
class LifeCycleCache(PackedCache):
    """A pool group's page rule for kvplan's SplitPools: a request of `context` tokens holds its blocks less those
    its window has passed (window 0: every block), as at history context - 1."""

    def blocks_per_request(self, context: int, block_size: int, max_num_batched_tokens: int) -> int:
        cycle = LifeCycle(self.role, self.window or None, ())
        return cycle.blocks(context, context - 1, block_size)


def check_deployment(target: PlanInput) -> None:
    """Refuse by name what DeepseekV4CacheManager does that kvplan does not model."""
    dep = target.deployment
    refused = {"speculative_config": (bool(dep.speculative_config), "with MTP: DeepseekV4CacheManager widens every "
                                                                    "window by max_draft_len and appends ratios"),
               "pipeline_parallel_size": (dep.pipeline_parallel_size > 1, "with pipeline parallelism"),
               "attention_data_parallel_size": (dep.attention_data_parallel_size is not None, "with attention DP"),
               "backend": (dep.backend not in (None, "pytorch"), "on the TensorRT engine backend: "
                                                                "DeepseekV4CacheManager is the PyTorch backend's")}
    for field, (given, what) in refused.items():
        if given:
            raise KvplanError(f"{REFUSED} {what}", dep.where(field))
    if target.gpu.compute_capability in FP8_DS_MLA_SMS:
        raise KvplanError(f"{REFUSED} on compute capability {target.gpu.compute_capability}: TrtllmAttention "
                          "requires kv_cache_config.dtype fp8_ds_mla there (packed sparse-MLA rows, not read)")
    if dep.block_size is not None and dep.block_size not in BLOCK_SIZES:
        raise KvplanError(f"DeepseekV4CacheManager requires tokens_per_block 128 or 256, not {dep.block_size}",
                          dep.where("block_size"))
    if dep.kv_cache_dtype not in ("auto", "bfloat16", "fp8", "fp8_e4m3"):
        raise KvplanError(f"DeepseekV4CacheManager keeps BF16 or FP8 rows, not --kv-cache-dtype "
                          f"{dep.kv_cache_dtype}", dep.where("kv_cache_dtype"))


def fp8_rows(kv_cache_dtype: str, checkpoint_dtype: str | None) -> bool:
    """An FP8 KV cache: asked for, or auto on a checkpoint that names one (QuantMode.has_fp8_kv_cache)."""
    return kv_cache_dtype in ("fp8", "fp8_e4m3") or (kv_cache_dtype == "auto" and checkpoint_dtype == "fp8_e4m3")


def no_workspace_cap(dep: Deployment) -> str | None:
    """Why get_mla_context_workspace_kv_len_cap (_util.py@00043967) gives no L_cap, or None where it gives one: its
    workspace_can_exceed_profile is (block reuse and not chunked prefill) or (chunked prefill and a workspace the
    chunk does not bound). DeepSeek-V4's is bounded: TrtllmAttention.runtime_workspace_is_chunked_prefill_bounded
    (trtllm.py@017aa0ca), which the sparse backends inherit, is False for NVFP4 DSA alone."""
    if dep.enable_chunked_prefill:
        return (f"{dep.where('enable_chunked_prefill')} chunked prefill bounds the workspace by its chunk, which "
                "the profiling run covers")
    if dep.enable_prefix_caching is False:
        return (f"{dep.where('enable_prefix_caching')} without block reuse no cached prefix grows the summed "
                "attended KV past the profiling run's max_num_tokens")
    return None


def workspace_kv_len_cap(dep: Deployment, max_batch_size: int, max_num_tokens: int, max_seq_len: int) -> int:
    """get_mla_context_workspace_kv_len_cap where it applies: the never-stall worst case min(max_batch_size,
    max_num_tokens) x max_seq_len, or kv_cache_config.fp8_context_mla_kv_len_cap floored at max_seq_len (one
    request must fit) and capped at that worst case."""
    worst = min(max_batch_size, max_num_tokens) * max_seq_len
    override = dep.fp8_context_mla_kv_len_cap
    return worst if override is None else min(max(override, max_seq_len), worst)


@dataclass(frozen=True)
class Workspace:
    """The context-MLA workspace KvCacheCreator.configure_kv_cache_capacity (_util.py@00043967) reserves from the
    free memory's share for an FP8 cache off SM 100-107's sparse path, with block reuse on and chunked prefill off
    (no_workspace_cap):
    - rate, w: TrtllmAttention.runtime_workspace_bytes_per_token (trtllm.py@017aa0ca) -> AttentionOp::
      contextMlaWorkspaceBytesPerToken (cpp attentionOp.cpp, read_file id 57623691929): heads / TP x (qk_rope +
      qk_nope + v_head_dim) fp8 bytes. DeepSeek-V4's are the in-tree config's (_torch/configs/__init__.py@00b6d5a2
      registers configs/deepseekv4.py@17371747 DeepseekV4Config for model_type deepseek_v4, which
      config_utils.py@00679c66 load_pretrained_config reaches through AutoConfig): qk_rope_head_dim as the checkpoint
      gives it, v_head_dim from its head_dim (the class takes head_dim as v_head_dim's alias) and qk_nope_head_dim
      the class default, QK_NOPE_HEAD_DIM, which the checkpoint does not name; modeling_deepseekv4.py@02586bf0
      DeepseekV4Attention passes those three to MLA;
    - manager, k: _get_kv_size_per_token().slope, DeepseekV4CacheManager.get_cache_size_per_token
      (cache_manager.py@015279e0 _estimate_bytes_per_token): every layer's buffers, a token's bytes each, the
      compressed ones over their ratio (floor), as layer_buffers gives them for a one-token block;
    - cap, L_cap: workspace_kv_len_cap;
    - get_mla_context_workspace_reserve: min(w x L_cap, share x w / (k + w))."""

    rate: int
    manager: int
    cap: int
    override: int | None = None  # kv_cache_config.fp8_context_mla_kv_len_cap as given

    @classmethod
    def of(cls, target: PlanInput, settings: EngineSettings) -> Workspace | None:
        """None where TrtllmAttention declares no rate: no FP8 cache (fp8_rows), or SM 100/103/107 (useSparseMLA:
        K/V read from the paged cache, TRTLLM_MLA_SHORT_SEQ_MHA_THRESHOLD unset); where no L_cap is set
        (no_workspace_cap); and without a GPU (the bytes given are the quota)."""
        dep = target.deployment
        if (not target.gpu.memory_bytes or not fp8_rows(dep.kv_cache_dtype, settings.auto_kv_cache_dtype)
                or target.gpu.compute_capability in SPARSE_MLA_SMS or no_workspace_cap(dep)):
            return None
        layers = [layer for layer in target.spec.layers if isinstance(layer, CompressedSparseAttention)]
        first = layers[0]
        heads = target.spec.num_attention_heads // target.deployment.tensor_parallel_size
        rate = heads * (first.rope_dim + QK_NOPE_HEAD_DIM + first.latent_dim)
        manager = sum(size for layer in layers for _, size in layer_buffers(layer, 1, FP8_ROW_BYTES))
        cap = workspace_kv_len_cap(target.deployment, settings.max_num_seqs or 0,
                                   settings.max_num_batched_tokens or 0, settings.max_model_len)
        return cls(rate, manager, cap, target.deployment.fp8_context_mla_kv_len_cap)

    def reserve(self, share: int) -> int:
        """The bytes reserved from a share: w x L_cap, or where that is more, what leaves the pool
        share x k / (k + w) (the reserve's share x w / (k + w), floored as int(share - reserve) floors it)."""
        if self.rate * self.cap * (self.manager + self.rate) <= share * self.rate:
            return self.rate * self.cap
        return share - share * self.manager // (self.manager + self.rate)

    def describe(self) -> str:
        given = ("min(max_batch_size, max_num_tokens) x max_seq_len" if self.override is None else
                 f"fp8_context_mla_kv_len_cap {self.override:,} floored at max_seq_len, capped at "
                 "min(max_batch_size, max_num_tokens) x max_seq_len")
        return (f"it is the free memory's share less KvCacheCreator's context-MLA workspace reserve, min(w x L_cap, "
                f"share x w / (k + w)) (an FP8 cache off SM 100-107's sparse path, block reuse on and chunked prefill "
                f"off): w = {self.rate:,} B a token, "
                f"heads / TP x (qk_rope + qk_nope {QK_NOPE_HEAD_DIM} + v_head_dim); k = {self.manager:,} B a token "
                f"(DeepseekV4CacheManager.get_cache_size_per_token); L_cap = {self.cap:,} tokens ({given})")


def quota(target: PlanInput, settings: EngineSettings, available: int) -> int:
    """The GPU quota KVCacheManagerV2 takes: the free memory's share less the context-MLA workspace reserve
    (Workspace; none where TrtllmAttention declares no rate), or max_gpu_total_bytes where smaller (KvCacheCreator
    keeps the smaller; 0 B counts as none given, its `> 0` test). Without a GPU the bytes given are the quota."""
    given = target.deployment.kv_cache_memory_bytes or None
    share = available if target.gpu.memory_bytes or given is None else given
    workspace = Workspace.of(target, settings)
    if workspace is not None:
        share -= workspace.reserve(share)
    kv_quota = share if given is None else min(given, share)
    if kv_quota <= 0:
        raise KvplanError(f"{REFUSED} without KV memory: the free memory's share is {share:,} B; give a GPU or "
                          "--kv-cache-memory")
    return kv_quota


def quota_note(target: PlanInput, settings: EngineSettings, pools: Dsv4Pools, share: str) -> str:
    given, kv_quota = target.deployment.kv_cache_memory_bytes, pools.quota
    source = "--kv-cache-memory" if given and given <= kv_quota else share
    raised = f" (the pools hold {pools.total:,} B: StorageManager's minimum slots take more)" if pools.raised else ""
    workspace = Workspace.of(target, settings)
    why = no_workspace_cap(target.deployment)
    reserved = (workspace.describe() if workspace is not None else
                "KvCacheCreator reserves no context-MLA workspace from the share here (it does for an FP8 cache on "
                "SM 90 with block reuse and no chunked prefill" + (f"; {why}" if why else "") + ")")
    return (f"{source} ({kv_quota:,} B) is KVCacheManagerV2's GPU quota (kv_cache_config.max_gpu_total_bytes){raised}, "
            f"shared between DeepseekV4CacheManager's pool groups; {reserved}; {ROWS_NOTE}")


def plan_pools(target: PlanInput, kv_quota: int, block: int, kv_bytes: int, max_batch_size: int,
               max_seq_len: int, max_num_tokens: int) -> Dsv4Pools:
    layers = [layer for layer in target.spec.layers if isinstance(layer, CompressedSparseAttention)]
    return dsv4_pools(life_cycles(layers, block, kv_bytes), kv_quota, block,
                      Batch.of(max_batch_size, max_seq_len, max_num_tokens))


def split_pools(pools: Dsv4Pools, chunk: int) -> SplitPools:
    """The pool groups as kvplan's SplitPools, the compressed one first (its tokens are the plan's): a slot holds
    one block of tokens in every layer of its life cycle."""
    order = sorted(range(len(pools.cycles)), key=lambda i: pools.cycles[i].window is not None)
    token_pools = tuple(TokenPool(pools.cycles[i].name, pools.slots[i] * pools.block,
                                  cdiv(sum(pools.cycles[i].slot_sizes), pools.block),
                                  LifeCycleCache(pools.cycles[i].name, 0, 0, 0, 1, 0, pools.cycles[i].window or 0))
                        for i in order)
    return SplitPools(token_pools, pools.block, chunk)


def note(pools: Dsv4Pools) -> str:
    groups = ", ".join(f"{cycle.name} {slots:,} blocks ({pools.group_bytes(i):,} B: "
                       + " + ".join(f"{n} x {size:,} B" for n, size in cycle.pools) + ")"
                       for i, (cycle, slots) in enumerate(zip(pools.cycles, pools.slots, strict=True)))
    return (f"DeepSeek-V4 (TensorRT-LLM DeepseekV4CacheManager on KVCacheManagerV2): {pools.used()} in "
            f"{pools.grain >> 20} MiB grains, {pools.block}-token blocks, shared by the typical step's needs: "
            f"{groups}")


def default_block(layers: tuple[Layer, ...] | list[Layer]) -> int | None:
    """tokens_per_block where none is given: 128 for DeepSeek-V4 (the manager refuses TensorRT-LLM's 32)."""
    return TOKENS_PER_BLOCK if applies(layers) else None
