"""Hybrid (attention beside Mamba / linear-attention state) models in vLLM, release by release (issue 18 sections
2.8 and 2.11): whether prefix caching is on, the Mamba cache mode it runs, and the attention block the state page
is aligned to. Read in each release wheel: config/model.py (is_prefix_caching_supported), engine/arg_utils.py
(enable_prefix_caching's default), model_executor/models/config.py (MambaModelConfig.verify_and_update_config),
platforms/interface.py (_align_hybrid_block_size; in model_executor/models/config.py
HybridAttentionMambaModelConfig before 0.20) and v1/kv_cache_interface.py (MambaSpec.max_memory_usage_bytes)."""

from __future__ import annotations

from math import lcm

from kvplan.deployment import Deployment
from kvplan.models.layers import Layer
from kvplan.models.model import ModelSpec
from kvplan.plan import GpuChoice
from kvplan.units import cdiv

# config/cache.py mamba_cache_mode (none / align / all) first in 0.18.0; earlier releases keep one block a request.
MAMBA_CACHE_MODES_FROM = (0, 18)
# config/model.py is_prefix_caching_supported: a hybrid model's answer is False through 0.25.0 ("Hybrid models do
# not support prefix caching since the feature is still experimental"), True from 0.26.0; EngineArgs takes it as
# enable_prefix_caching's default, so --enable-prefix-caching is what turns it on before 0.26.
HYBRID_PREFIX_CACHING_FROM = (0, 26)
# MambaModelConfig: with prefix caching on and mode "none", "all" for models that support Mamba prefix caching
# (SupportsMambaPrefixCaching), else "align"; 0.20.0-0.21.0 take "align" for them too under speculative decoding;
# 0.28.0 takes "align" for every model; 0.33.0 deprecates --mamba-cache-mode ("no effect").
SPECULATIVE_ALIGN_IN = ((0, 20), (0, 22))
ALIGN_FOR_ALL_FROM = (0, 28)
MODE_FLAG_IGNORED_FROM = (0, 33)
# The architectures whose model class implements SupportsMambaPrefixCaching (0.20.0-0.27.0 model_executor/models:
# nemotron_h, granitemoehybrid, falcon_h1, jamba, zamba2, mamba2, mamba; 0.20.0 also bamba).
MAMBA_PREFIX_CACHING = frozenset({
    "NemotronHForCausalLM", "GraniteMoeHybridForCausalLM", "FalconH1ForCausalLM", "JambaForCausalLM",
    "Zamba2ForCausalLM", "Mamba2ForCausalLM", "MambaForCausalLM"})
# The Mamba-2 SSD chunk when a config names none: the default of every Mamba-2 family's config class
# (mamba_chunk_size / chunk_size = 256); vLLM's own fallback for chunkless models is 2048 (get_mamba_chunk_size).
DEFAULT_CHUNK = 256
# From 0.20.0 the alignment step is max(the backend's smallest kernel block, the block size) (platforms/interface.py
# _align_hybrid_block_size); 0.18.0-0.19.0 take 16, and 64 for MLA (HybridAttentionMambaModelConfig).
PLATFORM_ALIGNMENT_FROM = (0, 20)
# 0.33.0: MLA hybrids align to at least 128 ("TRTLLM/FlashInfer MLA decode kernels"); in align mode a GDN layer on
# FlashInfer's prefill (CUDA SM90; SM10x/12x need CUDA 13 and are not taken) exports checkpoints every
# FLASHINFER_GDN_CHECKPOINT_ALIGNMENT = 64 tokens (v1/attention/backends/gdn_attn.py), so blocks are multiples of 64,
# and holds one checkpoint block more (qwen_gdn_linear_attn.py num_prefill_checkpoint_blocks=1).
MLA_HYBRID_128_FROM = (0, 33)
GDN_CHECKPOINT_FROM = (0, 33)
GDN_CHECKPOINT_ALIGNMENT = 64


def _kinds(spec: ModelSpec) -> set[str]:
    return {cache.kind for layer in spec.layers for cache in layer.cache_layers()}


def is_hybrid(spec: ModelSpec) -> bool:
    caches = [cache for layer in spec.layers for cache in layer.cache_layers()]
    return any(cache.paged_state for cache in caches) and any(cache.holds_kv for cache in caches)


def prefix_caching(spec: ModelSpec, dep: Deployment, version: tuple[int, int]) -> bool:
    """--enable-prefix-caching as given, else the release's default for the model kind."""
    if dep.enable_prefix_caching is not None:
        return dep.enable_prefix_caching
    caches = [cache for layer in spec.layers for cache in layer.cache_layers()]
    if not any(cache.holds_kv for cache in caches):
        return False  # attention-free models: is_prefix_caching_supported is False in every release
    return not is_hybrid(spec) or version >= HYBRID_PREFIX_CACHING_FROM


def mamba_cache_mode(spec: ModelSpec, dep: Deployment, version: tuple[int, int]) -> str:
    """none, align or all, as MambaModelConfig.verify_and_update_config resolves it."""
    if version < MAMBA_CACHE_MODES_FROM or not prefix_caching(spec, dep, version):
        return "none"
    given = dep.mamba_cache_mode if version < MODE_FLAG_IGNORED_FROM else None
    supports_all = spec.architecture in MAMBA_PREFIX_CACHING
    if given in (None, "none"):
        first, last = SPECULATIVE_ALIGN_IN
        speculative = dep.speculative_config is not None and first <= version < last
        return "all" if supports_all and version < ALIGN_FOR_ALL_FROM and not speculative else "align"
    # a given "all" stays where the model supports it (0.28-0.32 too: "all" without support falls back to align)
    return "all" if given == "all" and supports_all else "align"


def gdn_checkpoints(spec: ModelSpec, gpu: GpuChoice, version: tuple[int, int], mode: str) -> bool:
    """0.33's FlashInfer GDN prefill in align mode: 64-token checkpoint alignment and one checkpoint block."""
    return version >= GDN_CHECKPOINT_FROM and mode == "align" and gpu.compute_major == 9 and "gdn" in _kinds(spec)


def alignment_step(spec: ModelSpec, gpu: GpuChoice, version: tuple[int, int], block_size: int, mode: str) -> int:
    """The multiple the attention block is raised in: the backend's smallest kernel block (16: FlashAttention,
    Triton; MLA: FlashInfer MLA's 32 on SM100, else 16) and the block size, from 0.20; 16 / 64 (MLA) before."""
    mla = any(layer.latent_cache for layer in spec.layers)
    if version < PLATFORM_ALIGNMENT_FROM:
        return 64 if mla else 16
    step = max(32 if mla and gpu.compute_major == 10 else 16, block_size)
    if mla and version >= MLA_HYBRID_128_FROM:
        step = max(step, 128)
    if gdn_checkpoints(spec, gpu, version, mode):
        step = lcm(step, GDN_CHECKPOINT_ALIGNMENT)
    return step


def hybrid_block_size(layers: list[Layer], block_size: int, kv_bytes: int, tp: int, step: int, mode: str) -> int:
    """The attention block that holds a whole state page: the smallest multiple of step (in mode "all", of
    lcm(the SSD chunk, step)) whose attention page is at least the state page; a larger block size is kept."""
    states = [cache for layer in layers for cache in layer.cache_layers() if cache.paged_state]
    attention = next((cache for layer in layers for cache in layer.cache_layers() if cache.holds_kv), None)
    if not states or attention is None:
        return block_size
    per_token = attention.page_bytes(1, kv_bytes, tp)
    page = max(state.state_page_bytes(tp) for state in states)
    if mode == "all":
        chunk = lcm(next((c for c in (getattr(s, "chunk_size", None) for s in states) if c), DEFAULT_CHUNK), step)
        return max(block_size, chunk * cdiv(cdiv(page, per_token), chunk))
    return max(block_size, step * cdiv(page, step * per_token))
