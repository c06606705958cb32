"""SGLang: the KV pool is the memory free after the weights are loaded, less (1 - mem_fraction_static) of the memory
that was free before loading, divided by the per-token cell size and aligned to the page size.

Sources (sgl-project/sglang, read in stored copies):
- python/sglang/srt/model_executor/model_runner_kv_cache_mixin.py (v0.5.6-v0.5.9): profile_max_num_token,
  set_num_tokens_hybrid_swa, init_memory (max_total_tokens cap, then page alignment).
- python/sglang/srt/mem_cache/kv_cache_configurator.py + model_executor/pool_configurator.py (the later split of
  the same rule: _profile_available_bytes, DefaultPoolConfigurator, HybridSWAPoolConfigurator), and its
  _handle_max_mamba_cache, which budgets the pool's padding slot (v0.5.9's handle_max_mamba_cache did not).
- python/sglang/srt/server_args.py _handle_gpu_memory_settings (v0.5.x, after PR #10975): the default
  mem_fraction_static, chunked_prefill_size and cuda_graph_max_bs by GPU size.
- python/sglang/srt/mem_cache/kv_cache_configurator.py mm_runtime_reservation_gb (2026): a multimodal model's
  embedding cache (SGLANG_VLM_CACHE_SIZE_MB, 100) is taken out of the KV budget, where model_config.is_multimodal
  (0.5.23; multimodal.is_multimodal).

Where the engine measures: "free before load" is the world-minimum of free memory at the end of
init_torch_distributed (bootstrap / model_runner), not the "Load weight begin" line printed later, and "free after
load" is measured again in the profiling step, after the RoPE cache pre-expansion and the TP barrier that follow
the "Load weight end" line (again the minimum over all ranks). Startup logs print neither figure, which is why
replays of real logs land a few tens of MiB above the logged pool (docs/calibration.md).
"""

from __future__ import annotations

from typing import Any

from kvplan.capacity import PoolLayout, SplitPools, TokenPool, pool_layouts
from kvplan.deployment import Deployment
from kvplan.engines import common
from kvplan.engines.base import CUDA_CONTEXT_BYTES, PlanInput, PoolRules
from kvplan.engines.common import Stage
from kvplan.engines.sglang import compressed, multimodal, speculative, towers
from kvplan.engines.sglang.backend import aiter_default, prefill_graphs_captured, uses_mla
from kvplan.engines.sglang.defaults import (
    AITER_ABOVE_CONTEXT,
    AITER_FRACTION,
    MAX_PREFILL_TOKENS,
    VisionFractionCut,
    default_mem_fraction,
    gpu_defaults,
    prefill_graph_mib,
    unknown_gpu_fraction,
    vision_fraction_cut,
    vlm_mem_fraction,  # noqa: F401 (named here by tests/test_sglang_rules.py)
)
from kvplan.engines.sglang.hicache import host_tier
from kvplan.engines.sglang.lora import lora_pool
from kvplan.engines.sglang.lora import note as lora_note
from kvplan.engines.sglang.offload import offloaded_weights
from kvplan.engines.sglang.releases import (
    KV_DTYPES_FROM,
    MAMBA_PADDING_SLOT_BUDGETED_FROM,
    RELEASES,
    SWA_FULL_POOL_CELL_FROM,
    release_of,
)
from kvplan.engines.sglang.running import extra_buffer, mamba_slots_per_request, running_requests
from kvplan.errors import KvplanError
from kvplan.models.compressed_attention import flat_pool_layer
from kvplan.models.layers import Layer
from kvplan.plan import EngineSettings, GpuChoice, Memory
from kvplan.units import MiB, dtype_bytes

# server_args defaults: the share of the rest memory given to Mamba states when --max-mamba-cache-size is not set,
# and the SWA pool's size relative to the full-attention pool.
MAMBA_FULL_MEMORY_RATIO = 0.9
MAMBA_SSM_BYTES = 4  # mamba_ssm_dtype float32, where the config names none
SWA_FULL_TOKENS_RATIO = 0.8
# configs/model_config.py is_hybrid_swa_model (v0.5.6-v0.5.9; Gemma 4 joined later): the architectures SGLang
# gives a full-attention and a sliding-window pool (SWAKVPool). Every other model with windowed layers (Gemma 2
# and 3, Mistral's sliding_window) keeps every token of every layer in one pool.
HYBRID_SWA_ARCHITECTURES = frozenset({
    "Llama4ForConditionalGeneration", "GptOssForCausalLM", "MiMoV2FlashForCausalLM", "MiMoV2MTP",
    "Step3p5ForCausalLM", "Step3p5MTP", "Gemma4ForCausalLM", "Gemma4ForConditionalGeneration"})
# SGLANG_VLM_CACHE_SIZE_MB's default (environ.py), reserved out of the KV budget of multimodal models; taken
# before the Mamba split, since only then does S05's logged 124-slot Mamba pool follow from its printed memory.
MULTIMODAL_RESERVATION_BYTES = 100 * MiB

def rest_bytes(free_before_load: float, free_after_load: float, fraction: float, multimodal: bool = False) -> int:
    """profile_max_num_token: memory free after loading, less the non-static share of what was free before, and
    less the multimodal embedding cache for a multimodal model."""
    return int(free_after_load - free_before_load * (1 - fraction)) - (MULTIMODAL_RESERVATION_BYTES if multimodal
                                                                        else 0)


def mamba_pool(rest: int, state_bytes_per_request: int, ratio: float | None = None,
               given: int | None = None, padding_budgeted: bool = True) -> tuple[int, int]:
    """_handle_max_mamba_cache: the Mamba state slots (--max-mamba-cache-size, or as many as fit in the share
    `ratio` : 1 of the rest memory between states and the full-attention KV pool) and the bytes it takes from the
    rest, one padding slot included. Before 0.5.17 (padding_budgeted False: releases.py
    MAMBA_PADDING_SLOT_BUDGETED_FROM) the slots are int(budget // state) and the rest loses the slots alone; the
    padding slot is still allocated, out of the held-back memory. Returns (slots, bytes)."""
    padding = 1 if padding_budgeted else 0
    if given is None:
        ratio = MAMBA_FULL_MEMORY_RATIO if ratio is None else ratio
        budget = rest * ratio / (1 + ratio)
        given = max(int((budget - padding * state_bytes_per_request) // state_bytes_per_request), 0)
    return given, (given + padding) * state_bytes_per_request


def pool_tokens(rest: int, cell_bytes: int, page_size: int = 1, cap: int | None = None) -> int:
    """max_total_num_tokens: whole cells in the rest memory, capped by --max-total-tokens, in whole pages."""
    tokens = max(rest, 0) // cell_bytes
    if cap is not None:
        tokens = min(tokens, cap)
    return tokens // page_size * page_size


def swa_split(tokens: int, full_cell: int, swa_cell: int, ratio: float | None = None,
              page_size: int = 1) -> tuple[int, int]:
    """set_num_tokens_hybrid_swa: the memory of `tokens` cells of every layer, re-split so that the sliding-window
    pool holds `ratio` times the full pool's tokens (cells summed over each kind's layers). Returns
    (full_layer_tokens, swa_layer_tokens)."""
    ratio = SWA_FULL_TOKENS_RATIO if ratio is None else ratio
    full = int(tokens * (full_cell + swa_cell) / (full_cell + ratio * swa_cell))
    return full // page_size * page_size, swa_tokens(full, ratio, page_size)


def full_pool_tokens(pool_bytes: int, full_cell: int, swa_cell: int, ratio: float | None = None,
                     cap: int | None = None, page_size: int = 1) -> int:
    """HybridSWAPoolConfigurator (model_executor/pool_configurator.py, 0.5.11+): the full-attention pool's tokens are
    the pool's bytes over a cell of F + ratio x S, then at most --max-total-tokens, in whole pages."""
    ratio = SWA_FULL_TOKENS_RATIO if ratio is None else ratio
    tokens = int(max(pool_bytes, 0) // (full_cell + ratio * swa_cell))
    return (tokens if cap is None else min(tokens, cap)) // page_size * page_size


def _caps_full_pool(target: PlanInput) -> bool:
    """A hybrid-SWA architecture with full and sliding layers, on a release that sizes its full pool directly."""
    layers = [layer for layer in target.spec.layers if layer.holds_kv]
    return (target.spec.architecture in HYBRID_SWA_ARCHITECTURES and release_of(target.deployment.engine_version)
            >= SWA_FULL_POOL_CELL_FROM and any(layer.drops_old_tokens for layer in layers)
            and not all(layer.drops_old_tokens for layer in layers))


def swa_tokens(full_tokens: int, ratio: float | None = None, page_size: int = 1) -> int:
    """The sliding-window pool: `ratio` times the full-attention pool, in whole pages."""
    ratio = SWA_FULL_TOKENS_RATIO if ratio is None else ratio
    return int(full_tokens * ratio) // page_size * page_size


def gpu_mib(gpu: GpuChoice) -> float:
    """The GPU memory server_args sizes its defaults by (nvidia-smi's total, in MiB), or the CUDA total."""
    from kvplan.hardware import find_gpu

    try:
        found = find_gpu(gpu.id)
    except KvplanError:
        found = None
    if found is not None and found.id == gpu.id and found.nvml_total_mib:
        return float(found.nvml_total_mib)
    return gpu.memory_bytes / MiB


def _speculative_algorithm(target: PlanInput) -> str | None:
    config = target.deployment.speculative_config or {}
    method = config.get("method") or ("draft_model" if config.get("model") else None)
    if method is None:
        return None
    return "STANDALONE" if method == "draft_model" else str(method)


def settings_version(dep: Deployment) -> str:
    return dep.engine_version or RELEASES.newest


def _default_fraction(target: PlanInput, mib: float, chunked: int, graph_bs: int, release: tuple[int, ...]) -> float:
    """mem_fraction_static by server_args' heuristic for this release, lowered for a vision tower (after the
    fallback too: every release runs adjust_mem_fraction_for_vlm on whichever fraction it chose)."""
    cut = _vision_cut(target)
    base = _heuristic_fraction(target, mib, chunked, graph_bs, release)
    return cut.apply(base) if cut is not None else base


def _heuristic_fraction(target: PlanInput, mib: float, chunked: int, graph_bs: int,
                        release: tuple[int, ...]) -> float:
    """server_args' heuristic before any vision-tower cut; where the GPU size is not known server_args' fallback
    (defaults.unknown_gpu_fraction: 0.88 until 0.5.19, 0.95 from 0.5.20)."""
    if mib <= 0:
        return unknown_gpu_fraction(release)
    dep = target.deployment
    prefill = prefill_graph_mib(min(chunked, dep.max_total_tokens or chunked), uses_mla(target.spec),
                                prefill_graphs_captured(target, release))
    # chunked prefill off (-1): the activation reserve counts max_prefill_tokens (server_args.py), no prefill sizes
    activation = MAX_PREFILL_TOKENS if chunked < 0 else chunked
    return default_mem_fraction(mib, dep.tensor_parallel_size, dep.pipeline_parallel_size, activation, graph_bs,
                                attention_dp(target), _speculative_algorithm(target), release, prefill)


def _vision_cut(target: PlanInput) -> VisionFractionCut | None:
    """How adjust_mem_fraction_for_vlm lowers the default fraction for the model's vision_config; None without one
    (an audio tower alone: Qwen2-Audio), where it returns the fraction as it is, and where the model is not
    multimodal or the run's flags skip the cut (multimodal.text_only), where it does not run."""
    tower = target.spec.tower
    if tower is None or tower.named_sizes is None or multimodal.text_only(target) is not None:
        return None
    return vision_fraction_cut(*tower.named_sizes, tower.config_type)


def _fraction_inputs(target: PlanInput) -> tuple[float, int, int, tuple[int, ...]]:
    """(GPU MiB, chunked prefill size, decode CUDA-graph batch, release) the default fraction is taken from."""
    dep = target.deployment
    release, mib = release_of(dep.engine_version), gpu_mib(target.gpu)
    chunked, graph_bs = gpu_defaults(mib, dep.tensor_parallel_size, release)
    return mib, dep.max_num_batched_tokens or chunked, graph_bs, release


def state_bytes_per_request(target: PlanInput) -> int:
    """One request's Mamba / linear-attention state on one rank: the conv state in the served dtype, the SSM state
    in the config's mamba_ssm_dtype or float32 (server_args' mamba_ssm_dtype default), its heads divided by the
    attention TP size (configs/qwen3_next.py mamba2_cache_params: tp_world_size=get_attention_tp_size())."""
    spec, dep = target.spec, target.deployment
    served = dtype_bytes(common.model_dtype(spec, dep, target.gpu)[0])
    return sum(layer_state_bytes(layer, served, attention_tp(target)) for layer in spec.layers)


def layer_state_bytes(layer: Layer, served: int, ranks: int) -> int:
    """One request's state in one layer on one rank, as SGLang types it: the conv state in the served dtype, the SSM
    state in the config's mamba_ssm_dtype or else float32 (the kind's own sequence_state_bytes)."""
    return layer.sequence_state_bytes(served, MAMBA_SSM_BYTES, ranks)


class Sglang(PoolRules):
    name = "sglang"
    label = "SGLang"
    kv_log = "KV Cache is allocated. #tokens: N"
    flat_pool = True

    def settings(self, target: PlanInput) -> EngineSettings:
        dep = target.deployment
        tp = dep.tensor_parallel_size
        if tp % attention_dp(target):
            # compute_dp_attention_world_info: rank r joins attention group r // (tp // attn_dp), which must be one
            # of the attn_dp groups
            raise KvplanError(f"attention data parallel {attention_dp(target)} must divide tensor parallel {tp}: "
                              "SGLang splits the TP ranks into that many equal attention groups",
                              dep.where("attention_data_parallel_size"))
        multimodal.check(target)
        compressed.check_ratios(target.spec.layers)
        mib, chunked, graph_bs, release = _fraction_inputs(target)
        first = KV_DTYPES_FROM.get(dep.kv_cache_dtype)
        if first is not None and release < first:
            raise KvplanError(f"SGLang {settings_version(dep)} has no --kv-cache-dtype {dep.kv_cache_dtype} (from "
                              f"{'.'.join(map(str, first))})", dep.where("kv_cache_dtype"))
        fraction = dep.gpu_memory_utilization
        if fraction is None:
            fraction = _default_fraction(target, mib, chunked, graph_bs, release)
        length = common.check_max_model_len(target.spec, dep)
        if aiter_default(target) and length > AITER_ABOVE_CONTEXT:
            fraction *= AITER_FRACTION
        if attention_dp(target) > 1:  # _handle_data_parallelism, after the fraction: each DP rank's own chunk
            chunked //= attention_dp(target)
        return EngineSettings(
            # DeepSeek sparse attention: server_args "Setting page size to 64 for DeepSeek DSA" (CUDA), whatever
            # --page-size says
            "sglang", self.label, self.kv_log, dep.engine_version or RELEASES.newest, fraction,
            # --chunked-prefill-size -1: a prefill step takes whole requests
            common.kernel_block_size(target.spec) or dep.block_size or 1, length, dep.max_num_seqs,
            chunked if chunked > 0 else None,
            utilization_knob="mem_fraction_static", length_knob="context_length",
            auto_kv_cache_dtype=auto_kv_cache_dtype(target))

    def served_layers(self, target: PlanInput, settings: EngineSettings, layers: list[Layer],
                      model_bytes: int) -> list[Layer]:
        return super().served_layers(target, settings, speculative.target_layers(target, settings, layers),
                                     model_bytes)

    def stage_facts(self, stage: Stage) -> dict[str, Any]:
        return {"first": stage.first}  # the towers' layout over TP (towers.stage_extra_bytes)

    def stage_memory(self, target: PlanInput, settings: EngineSettings, weights_bytes: int, decoder_layers: int,
                     last: bool, first: bool = True) -> Memory:
        dep, total = target.deployment, target.gpu.memory_bytes
        if last and dep.weights_memory_bytes is None and speculative.outside_pool(target):
            weights_bytes -= speculative.draft_share(target, settings)[1]  # loaded after the pool is sized
        if dep.weights_memory_bytes is None:
            weights_bytes += towers.stage_extra_bytes(target, first)
        moved = offloaded_weights(target.spec, dep, decoder_layers,
                                  dtype_bytes(common.model_dtype(target.spec, dep, target.gpu)[0]))
        if moved and dep.weights_memory_bytes is None:
            weights_bytes -= moved.moved_bytes
        lora = lora_pool(target.spec, dep, common.model_dtype(target.spec, dep, target.gpu)[0])
        if lora and dep.weights_memory_bytes is None:
            weights_bytes += lora.layer_bytes * decoder_layers
        fraction = settings.gpu_memory_utilization or 1
        before = max(total - CUDA_CONTEXT_BYTES, 0)
        held_back = int(before * (1 - fraction))
        rest = self._rest(target, settings, weights_bytes)
        if rest > 0:
            rest -= self._mamba(target, rest)[1]
        pool = dep.kv_cache_memory_bytes if dep.kv_cache_memory_bytes is not None else rest
        return Memory(total, int(before * fraction), weights_bytes, non_torch_bytes=total - before,
                      reserve_bytes=held_back, kv_cache_bytes=pool)

    @staticmethod
    def _rest(target: PlanInput, settings: EngineSettings, weights_bytes: int) -> int:
        before = max(target.gpu.memory_bytes - CUDA_CONTEXT_BYTES, 0)
        return rest_bytes(before, before - weights_bytes, settings.gpu_memory_utilization or 1,
                          multimodal=multimodal.is_multimodal(target))

    @staticmethod
    def _mamba(target: PlanInput, rest: int) -> tuple[int, int]:
        """(slots, bytes) of the Mamba state pool; (0, 0) for a model without states."""
        dep, per_request = target.deployment, state_bytes_per_request(target)
        if not per_request:
            return 0, 0
        given = dep.max_mamba_cache_size
        if given is not None:  # handle_max_mamba_cache: a given size is shared by the attention-DP groups
            given //= attention_dp(target)
        elif dep.disable_radix_cache and dep.max_num_seqs is not None:
            # without the radix cache the slots are the running requests (0.5.9 handle_max_mamba_cache; 0.5.23
            # kv_cache_configurator.py _handle_max_mamba_cache: at least 1)
            given = max(1, dep.max_num_seqs // attention_dp(target))
        return mamba_pool(rest, per_request, dep.mamba_full_memory_ratio, given,
                          release_of(dep.engine_version) >= MAMBA_PADDING_SLOT_BUDGETED_FROM)

    def flat_layer(self, layer: Layer) -> Layer:
        return flat_pool_layer(layer)

    def capped_blocks(self, target: PlanInput, settings: EngineSettings, blocks: int) -> int:
        if compressed.applies(target.spec.layers):  # the pages of DSV4PoolConfigurator's full (logical) pool
            return self._compressed(target, settings, 0)[1].full // settings.block_size
        cap = target.deployment.max_total_tokens  # --max-total-tokens: at most this many tokens in the pool
        if cap is None or _caps_full_pool(target):  # 0.5.11+ hybrid SWA: the cap is on the full pool (pools)
            return blocks
        return min(blocks, cap // settings.block_size)

    def offload_tier(self, target: PlanInput, settings: EngineSettings, layout: PoolLayout, tokens: int,
                     split: bool) -> tuple[int, list[str]]:
        return host_tier(target.deployment, layout, tokens, split)

    def pool_notes(self, target: PlanInput, settings: EngineSettings, num_blocks: int) -> list[str]:
        if compressed.applies(target.spec.layers):
            return [compressed.note(self._compressed(target, settings, 0)[1], list(target.spec.layers))]
        cap = target.deployment.max_total_tokens
        if cap is not None and num_blocks * settings.block_size >= cap - settings.block_size:
            return [f"max_total_tokens caps the pool at {cap:,} tokens"]
        return []

    def kv_tensor_parallel(self, target: PlanInput) -> int:
        return attention_tp(target)

    def pools(self, target: PlanInput, settings: EngineSettings, stage: int, tokens: int, kv_bytes: int,
              kv_tp: int) -> SplitPools | None:
        """set_num_tokens_hybrid_swa (model_runner_kv_cache_mixin.py, v0.5.6-v0.5.9), after the page alignment,
        the --max-total-tokens cap and the minimum over pipeline stages: a hybrid-SWA architecture's profiled
        tokens, whose cell counted every layer, re-split into a full-attention pool and a sliding-window pool of
        swa_full_tokens_ratio times its tokens (all-SWA models: the one sliding pool). From 0.5.11 the full pool is
        the pool's bytes over F + ratio x S, capped directly (full_pool_tokens). A request holds its whole context
        in the full pool and, in the sliding pool, what the layer kind's page rule says (the window plus a prefill
        chunk at most)."""
        spec, page = target.spec, settings.block_size
        if compressed.applies(spec.layers):  # DeepSeek-V4: SGLang 0.5.23's DSV4PoolConfigurator (compressed.py)
            return self._compressed(target, settings, stage)[0]
        if spec.architecture not in HYBRID_SWA_ARCHITECTURES:
            return None
        # the split counts the whole model's full and SWA layers (model_config's layer ids), whatever the stage
        layers = [layer for layer in spec.layers if layer.holds_kv]
        windowed = [layer for layer in layers if layer.drops_old_tokens]
        full = [layer for layer in layers if not layer.drops_old_tokens]
        if not windowed:
            return None
        swa_cell = sum(layer.bytes_per_token(kv_bytes, kv_tp) for layer in windowed)
        chunk = settings.max_num_batched_tokens or settings.max_model_len
        if not full:
            return SplitPools((TokenPool("swa", tokens // page * page, swa_cell, windowed[0]),), page, chunk)
        full_cell = sum(layer.bytes_per_token(kv_bytes, kv_tp) for layer in full)
        ratio = target.deployment.swa_full_tokens_ratio
        if _caps_full_pool(target):
            full_tokens = full_pool_tokens(self._stage_pool_bytes(target, settings, stage), full_cell, swa_cell,
                                           ratio, target.deployment.max_total_tokens, page)
            swa = swa_tokens(full_tokens, ratio, page)
        else:
            full_tokens, swa = swa_split(tokens, full_cell, swa_cell, ratio, page)
        return SplitPools((TokenPool("full", full_tokens, full_cell, full[0]),
                           TokenPool("swa", swa, swa_cell, windowed[0])), page, chunk)

    def request_cap(self, target: PlanInput, settings: EngineSettings, memory: Memory) -> tuple[int | None, str | None]:
        """max_running_requests once the pool is sized (running.py), a Mamba hybrid's also at most its state slots
        // the slots a request takes."""
        dep, release = target.deployment, release_of(target.deployment.engine_version)
        tokens = self._pool_tokens(target, settings, memory)
        given = dep.max_num_seqs or compressed.default_running_requests(target.spec.layers)
        cap = running_requests(tokens, settings.max_model_len, given, attention_dp(target), release)
        shortest = min(common.ladder_contexts(target, settings.max_model_len)[0], default=settings.max_model_len)
        note = (f"max_running_requests {cap:,}: SGLang's default for a pool of {tokens:,} tokens at context "
                f"{settings.max_model_len:,} caps the short contexts" if dep.max_num_seqs is None
                and cap < tokens // max(shortest, 1) else None)
        if not state_bytes_per_request(target):
            return cap, note
        slots = self._mamba(target, max(self._rest(target, settings, memory.weights_bytes), 0))[0]
        radix = not dep.disable_radix_cache
        ratio = mamba_slots_per_request(target.spec.architecture, release, radix)
        if slots // ratio >= cap:
            return cap, note
        strategy = ("radix cache off" if not radix else "radix cache on, " + (
            "extra_buffer" if extra_buffer(target.spec.architecture, release) else "no_buffer"))
        return slots // ratio, (f"Mamba state slots cap running requests at {slots} // {ratio} = {slots // ratio} "
                                f"(SGLang's max_running_requests, {strategy})")

    def _compressed(self, target: PlanInput, settings: EngineSettings,
                    stage: int) -> tuple[SplitPools, compressed.Dsv4Pools]:
        """DeepSeek-V4's pools on one rank of `stage` (compressed.py)."""
        return compressed.split_pools(target, self._stage_pool_bytes(target, settings, stage), attention_dp(target),
                                      settings.max_num_batched_tokens or settings.block_size)

    def _stage_pool_bytes(self, target: PlanInput, settings: EngineSettings, stage: int) -> int:
        """The KV pool bytes of one pipeline stage, as stage_memory sizes it."""
        found = common.prepare(target, True, settings, self).stages[stage]
        return self.stage_memory(target, settings, found.weights_bytes, found.decoder_layers, found.last,
                                 **self.stage_facts(found)).kv_cache_bytes

    def _pool_tokens(self, target: PlanInput, settings: EngineSettings, memory: Memory) -> int:
        """max_total_num_tokens as build_plan sizes it (the full-attention pool's of a hybrid-SWA model)."""
        prepared = common.prepare(target, True, settings, self)
        kv_tp = self.kv_tensor_parallel(target)
        layouts = pool_layouts([stage.layers for stage in prepared.stages], settings.block_size, prepared.kv_bytes,
                               kv_tp, settings.max_model_len)
        blocks = min(self.capped_blocks(target, settings, layout.num_blocks(max(memory.kv_cache_bytes, 0)))
                     for layout in layouts)
        split = self.pools(target, settings, 0, blocks * settings.block_size, prepared.kv_bytes, kv_tp)
        return split.pools[0].tokens if split is not None else blocks * settings.block_size

    def notes(self, target: PlanInput, settings: EngineSettings) -> list[str]:
        given = target.deployment.gpu_memory_utilization is not None
        fraction = settings.gpu_memory_utilization
        if fraction is not None and fraction <= 0:  # only the default heuristic gives one: the flag must be > 0
            notes = [f"mem_fraction_static {fraction}: SGLang's default heuristic reserves more MiB for "
                     f"activations, CUDA graphs and buffers than this GPU's {gpu_mib(target.gpu):,.0f} MiB, so no "
                     "fraction is left for weights and KV cache and SGLang stops at startup (not enough memory)"]
        else:
            notes = [f"mem_fraction_static {fraction}" + ("" if given else " (SGLang's default heuristic for this GPU)")
                     + f"; held back: {1 - (fraction or 1):.3f} of the memory free before the weights load"]
        moved = offloaded_weights(target.spec, target.deployment,
                                  target.spec.num_layers // target.deployment.pipeline_parallel_size,
                                  dtype_bytes(common.model_dtype(target.spec, target.deployment, target.gpu)[0]))
        if moved:
            notes.append(moved.note(target.deployment.gpu_count))
        lora = lora_pool(target.spec, target.deployment,
                         common.model_dtype(target.spec, target.deployment, target.gpu)[0])
        if lora:
            notes.append(lora_note(lora, target.spec.num_layers // target.deployment.pipeline_parallel_size))
        cut = _vision_cut(target)
        if not given and cut is not None and fraction is not None and fraction > 0:
            notes.append(cut.note(_heuristic_fraction(target, *_fraction_inputs(target))))
        dep = target.deployment
        tower_note = towers.note(target)
        if tower_note:
            notes.append(tower_note)
        if multimodal.is_multimodal(target):
            notes.append(f"multimodal model: {MULTIMODAL_RESERVATION_BYTES // MiB} MiB of the KV budget kept for "
                         "the embedding cache (SGLANG_VLM_CACHE_SIZE_MB)")
        notes += multimodal.notes(target, fraction_given=given)
        per_request = state_bytes_per_request(target)
        if per_request and release_of(dep.engine_version) < MAMBA_PADDING_SLOT_BUDGETED_FROM:
            notes.append("Mamba padding slot: allocated beside the slots but not taken from the rest memory before "
                         "SGLang 0.5.17 (handle_max_mamba_cache), so it comes out of the held-back memory")
        if per_request and dep.max_mamba_cache_size is not None:
            shared = (f" // attention DP {attention_dp(target)} = {dep.max_mamba_cache_size // attention_dp(target)}"
                      if attention_dp(target) > 1 else "")
            notes.append(f"Mamba state pool: {dep.max_mamba_cache_size} slots as given{shared} ({per_request:,} B "
                         "per request per rank, one padding slot more); the full-attention KV pool gets the rest")
        elif per_request and dep.disable_radix_cache and dep.max_num_seqs is not None:
            notes.append(f"Mamba state pool: {self._mamba(target, 0)[0]} slots, one a running request "
                         "(--disable-radix-cache with --max-running-requests), one padding slot more")
        elif per_request:
            ratio = MAMBA_FULL_MEMORY_RATIO if dep.mamba_full_memory_ratio is None else dep.mamba_full_memory_ratio
            notes.append(f"Mamba state pool: {ratio} : 1 of the rest memory between states "
                         f"({per_request:,} B per request per rank, one padding slot more) and the full-attention "
                         "KV pool")
        if attention_dp(target) > 1:
            notes.append(f"attention data parallel {attention_dp(target)}: each rank keeps the KV heads of TP "
                         f"{dep.tensor_parallel_size} // {attention_dp(target)} = {self.kv_tensor_parallel(target)} "
                         "ranks")
        if any(layer.drops_old_tokens for layer in target.spec.layers):
            notes.append(_window_note(target))
        if (settings.auto_kv_cache_dtype and dep.kv_cache_dtype == "auto" and common.kernel_block_size(target.spec)
                and not compressed.applies(target.spec.layers)):  # DeepSeek-V4's 584 B rows: its pool note says
            notes.append(f"DeepSeek sparse attention on this GPU: SGLang's automatic KV cache dtype is "
                         f"{settings.auto_kv_cache_dtype} (656 B latent per token)")
        return notes + _release_notes(target, settings)


def _release_notes(target: PlanInput, settings: EngineSettings) -> list[str]:
    """What this release does that the panel's figures do not show."""
    notes = [speculative.NOTE] if speculative.outside_pool(target) else []
    if aiter_default(target) and settings.max_model_len > AITER_ABOVE_CONTEXT:
        notes.append(f"ROCm: SGLang's default attention backend is aiter, which scales mem_fraction_static by "
                     f"{AITER_FRACTION} above {AITER_ABOVE_CONTEXT:,} tokens of context (a --attention-backend "
                     "given is not read)")
    return notes + modelopt_kv_notes(target, settings)


def auto_kv_cache_dtype(target: PlanInput) -> str | None:
    """server_args _set_default_nsa_kv_cache_dtype: DeepSeek sparse attention on SM100+ caches fp8_e4m3 when the
    KV cache dtype is auto."""
    if compressed.applies(target.spec.layers):  # DeepSeek-V4 on CUDA, any SM (compressed.py)
        return compressed.AUTO_KV_CACHE_DTYPE
    major = target.gpu.compute_major
    if common.kernel_block_size(target.spec) and major is not None and major >= 10:
        return "fp8_e4m3"
    return modelopt_auto_kv(target)


MODELOPT_KV_FROM = (0, 5, 9)  # the earliest release read


def modelopt_auto_kv(target: PlanInput) -> str | None:
    """kv_cache_dtype auto is fp8_e4m3 where the model's quant_config has kv_cache_quant_algo FP8 (SGLang 0.5.23
    mem_cache/kv_cache_dtype.py configure_kv_cache_dtype; 0.5.9 model_runner.py the same rule); releases
    before 0.5.9 were not read and keep the model dtype."""
    release = tuple(int(part) for part in (target.deployment.engine_version or RELEASES.newest).split(".")[:3]
                    if part.isdigit())
    return "fp8_e4m3" if common.modelopt_fp8_kv(target.spec) and release >= MODELOPT_KV_FROM else None


def modelopt_kv_notes(target: PlanInput, settings: EngineSettings) -> list[str]:
    """Any kv_cache_quant_algo but FP8 (NVFP4 included) leaves kv_cache_dtype auto at the model dtype, with no
    word from SGLang (0.5.23 mem_cache/kv_cache_dtype.py configure_kv_cache_dtype and 0.5.9 model_runner.py
    configure_kv_cache_dtype test for FP8 alone; modelopt_quant.py keeps the value only for the scales)."""
    algo = common.modelopt_kv_algo(target.spec)
    if target.deployment.kv_cache_dtype != "auto" or not algo or algo == "FP8" or settings.auto_kv_cache_dtype:
        return []
    source = target.spec.quantization.source if target.spec.quantization else ""
    return [f"the checkpoint's {source} names kv_cache_quant_algo {algo}; SGLang applies only FP8 to "
            "kv_cache_dtype auto: KV cache in the model dtype"]


def _window_note(target: PlanInput) -> str:
    ratio = target.deployment.swa_full_tokens_ratio
    if target.spec.architecture not in HYBRID_SWA_ARCHITECTURES:
        return (f"{target.spec.architecture} is not one of SGLang's hybrid-SWA architectures: its sliding and "
                "chunked layers cache every token in one pool" + (f"; swa_full_tokens_ratio {ratio} does not apply"
                                                                 if ratio is not None else ""))
    shown = SWA_FULL_TOKENS_RATIO if ratio is None else ratio
    if _caps_full_pool(target):
        return (f"swa_full_tokens_ratio {shown}: SGLang sizes the full-attention pool over a cell of full + {shown} x "
                f"sliding-window bytes and the sliding-window pool at {shown} x its tokens (full_layer_tokens / "
                "swa_layer_tokens); --max-total-tokens caps the full pool")
    return (f"swa_full_tokens_ratio {shown}: SGLang splits the profiled tokens into a full-attention pool and a "
            f"sliding-window pool of {shown} x its tokens (full_layer_tokens / swa_layer_tokens)")


def attention_tp(target: PlanInput) -> int:
    """get_attention_tp_size, which get_cell_size_per_token, the KV pools and the Mamba state shapes divide heads
    by (layers/dp_attention.py compute_dp_attention_world_info, v0.5.x): TP // attn_dp with attention data
    parallelism."""
    return max(1, target.deployment.tensor_parallel_size // attention_dp(target))


def attention_dp(target: PlanInput) -> int:
    """SGLang's attention data-parallel degree (--attn-dp-size): 1 where not given."""
    return target.deployment.attention_data_parallel_size or 1


ENGINE = Sglang()
