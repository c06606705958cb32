"""vLLM's KV budget, era by era (the eras in releases.py): available = CUDA total x utilization - weights -
profiled activation peak - non-torch memory - the CUDA-graph estimate (v0.20+, a first capture plus a part per
further batch size captured), per rank; blocks are the floor per rank and the minimum over ranks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kvplan.capacity import PoolLayout
from kvplan.deployment import Deployment
from kvplan.engines import common
from kvplan.engines.base import PlanInput, PoolRules
from kvplan.engines.common import Stage
from kvplan.engines.vllm import kv_scheme
from kvplan.engines.vllm.blocks import kv_block_size
from kvplan.engines.vllm.deepseek_v4 import served_kv_cache_dtype
from kvplan.engines.vllm.hybrid import (
    alignment_step,
    gdn_checkpoints,
    hybrid_block_size,
    is_hybrid,
    mamba_cache_mode,
)
from kvplan.engines.vllm.interconnect import tp_growth
from kvplan.engines.vllm.moe_workspace import MoeKernel, SharedWorkspace, moe_kernel, moe_shape, routing_bytes
from kvplan.engines.vllm.mxfp4 import mxfp4_experts
from kvplan.engines.vllm.releases import (
    CHUNKED_HYBRID_KV_ON_FROM,
    GB10_SMALL_TIER_FROM,
    HYBRID_ALLOCATOR_FROM,
    IN_FLIGHT_TOKENS_FROM,
    LATEST,
    NULL_BLOCK_HELD_FROM,
    PAGED_STATES_FROM,
    SM100_CAPTURE_1024_FROM,
    SPARSE_FP8_DEFAULT_IN,
    TOKENS_FROM_CONCURRENCY_FROM,
    Era,
    era_of,
    parse_version,
    release_of,
)
from kvplan.engines.vllm.runner import graph_estimate_on, model_runner, profiles_graphs, runner_notes
from kvplan.engines.vllm.sampler import ProfileSampler, profile_sampler, triton_buffer_note
from kvplan.engines.vllm.ssm import SsmDtype, auto_ssm_dtype
from kvplan.errors import KvplanError
from kvplan.models.layers import Layer, has_compressed_attention
from kvplan.models.model import ModelSpec
from kvplan.plan import EngineSettings, GpuChoice, Memory
from kvplan.units import GiB, MiB, dtype_bytes
from kvplan.weights import ExpertPlacement

if TYPE_CHECKING:
    from kvplan.engines.vllm.lora import Lora
    from kvplan.engines.vllm.multimodal import EncoderProfile
    from kvplan.engines.vllm.offload import Offload

# The state kinds whose prefixes mamba_cache_mode "align" caches: Mamba-2 and Gated DeltaNet (their layers'
# get_kv_cache_spec hands vLLM a MambaSpec in align mode); the others hold one block per request.
PREFIX_CACHED_STATE_KINDS = frozenset({"mamba2", "gdn"})
BIG_GPU_BYTES = 70 * GiB  # vLLM's batch defaults switch at 70 GiB of device memory

# The CUDA-graph estimate (v1/worker/gpu_model_runner.py profile_cudagraph_memory, PR #30515): each graph mode
# captures its two largest sizes into one shared pool; the first capture's memory counts once (the largest over the
# modes, which never replay together) and the second's once per further size of each mode ("Estimated PIECEWISE CUDA
# graph memory: 138.00 MiB first-capture + (51-1) x 6.00 MiB per-graph", "Estimated FULL ...: 260.00 MiB
# first-capture + (51-1) x 6.00 MiB", "0.84 GiB total" = 260 + 50 x 6 + 50 x 6 MiB). The two figures are the
# medians over the v0.19 H100 logs that capture 51 sizes in both modes (data/calibration.yaml L01-L23,
# graph_parts_mib): the larger first capture 256 MiB (84 to 522 MiB), a further graph 0.1875 MiB per decoder layer
# on the rank and mode (1 to 26 MiB a graph).
CUDA_GRAPH_FIRST_CAPTURE = 256 * MiB
CUDA_GRAPH_PER_GRAPH_PER_LAYER = 3 * MiB // 16
# Architectures whose vLLM config raises the largest capture size from 512 (model_executor/models/config.py
# GptOssForCausalLMConfig: "Overriding max cuda graph capture size to 1024 for performance", 83 sizes; L17 logs
# PIECEWISE=83), unless compilation_config names sizes.
LARGEST_CAPTURE = {"GptOssForCausalLM": 1024}


def cuda_graph_bytes(decoder_layers: int, sizes: tuple[int, int]) -> int:
    """The estimate for (PIECEWISE, FULL) captured sizes: one first capture, and a part per further size and mode."""
    further = sum(max(count - 1, 0) for count in sizes)
    return CUDA_GRAPH_FIRST_CAPTURE + CUDA_GRAPH_PER_GRAPH_PER_LAYER * decoder_layers * further


def default_largest_capture(gpu: GpuChoice, version: tuple[int, int]) -> int:
    """The largest default capture size before max_num_seqs bounds it: 512, and 1,024 on SM100 (B200, B300) from
    v0.28 (vLLM 0.28.0 config/vllm.py _set_cudagraph_sizes: 1024 if is_device_capability_family(100) else 512; 0.27.0
    has 512 everywhere; the oracle's B200 cases capture 83 sizes in 0.28, 51 in 0.27, issue 18 section 2.4)."""
    return 1024 if version >= SM100_CAPTURE_1024_FROM and gpu.compute_major == 10 else 512


def cuda_graph_sizes(max_num_seqs: int, max_num_batched_tokens: int, spec_tokens: int,
                     architecture: str = "", default_largest: int = 512, rounded: bool = True) -> tuple[int, int]:
    """How many batch sizes vLLM captures by default, PIECEWISE and FULL (cudagraph_mode FULL_AND_PIECEWISE).
    PIECEWISE takes every size of the default list (config/vllm.py VllmConfig._set_cudagraph_sizes, as the 2026
    releases have it; compilation_config's own sizes are not modelled): up to min(max_num_seqs x (1 + speculative
    tokens) x 2, 512, max_num_batched_tokens) (an architecture of LARGEST_CAPTURE: its own size, bounded by
    max_num_batched_tokens), the sizes 1, 2, 4, then every 8 below 256 and every 16 from 256;
    with speculative decoding each is rounded up to a multiple of 1 + speculative tokens
    (compilation.py adjust_cudagraph_sizes_for_spec_decode) and duplicates dropped, except under Model Runner V2
    (rounded False: 0.26.0+ compilation.py resolve_cudagraph_mode_and_sizes rounds only "not use_v2_model_runner";
    V2 sizes its graphs in v1/worker/gpu/cudagraph_utils.py). FULL takes the uniform-decode ones among them: at
    most max_num_seqs x (1 + speculative tokens) (cudagraph_dispatcher.py initialize_cudagraph_keys)."""
    query = 1 + spec_tokens
    raised = LARGEST_CAPTURE.get(architecture)
    largest = min(raised, max_num_batched_tokens) if raised else min(max_num_seqs * query * 2, default_largest,
                                                                     max_num_batched_tokens)
    listed = [size for size in (1, 2, 4) if size <= largest]
    listed += list(range(8, min(largest + 1, 256), 8)) + list(range(256, largest + 1, 16))
    # rounded sizes past the largest are dropped, and the query length alone is left when none remains
    if not rounded:
        query = 1
    sizes = {up for size in listed if (up := -(-size // query) * query) <= largest} or {query}
    return len(sizes), sum(query <= size <= query * max_num_seqs for size in sizes)


def captures_full_graphs(spec: ModelSpec, dep: Deployment) -> bool:
    """Whether vLLM captures FULL graphs beside the PIECEWISE ones: not at -O1 (cudagraph_mode PIECEWISE,
    config/vllm.py OPTIMIZATION_LEVEL_01), nor with chunked local attention, whose ChunkedLocalAttention backend
    has AttentionCGSupport.NEVER ("setting cudagraph_mode=PIECEWISE")."""
    return dep.optimization_level != 1 and not any(layer.attention_chunk for layer in spec.layers)


def hybrid_kv_manager(spec: ModelSpec, dep: Deployment, version: tuple[int, int]) -> bool:
    """vLLM turns its hybrid KV cache manager off for models with chunked local attention (Llama 4's
    attention_chunk_size) unless VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE is set, and always with an
    EAGLE drafter (config/vllm.py VllmConfig.__post_init__, v0.10+). The variable defaults to on from v0.14
    (CHUNKED_HYBRID_KV_ON_FROM: vLLM 0.14.0 envs.py "1", 0.13.0 "0"). Off, every layer caches every token
    (kv_cache_utils.unify_hybrid_kv_cache_specs)."""
    if not any(layer.attention_chunk for layer in spec.layers):
        return True
    method = str((dep.speculative_config or {}).get("method") or "").lower()
    allowed = version >= CHUNKED_HYBRID_KV_ON_FROM if dep.chunked_hybrid_kv is None else dep.chunked_hybrid_kv
    return bool(allowed) and "eagle" not in method


def sliding_as_full(spec: ModelSpec, settings: EngineSettings) -> bool:
    """V1 before its hybrid allocator (HYBRID_ALLOCATOR_FROM): sliding-window layers beside full-attention ones
    become full attention, one group (vLLM 0.8.5 v1/core/kv_cache_utils.py unify_hybrid_kv_cache_specs: 'It will
    convert all SlidingWindowSpec to FullAttentionSpec if both types are present')."""
    kinds = {layer.kind for layer in spec.layers}
    return (0, 8) <= _release(settings) < HYBRID_ALLOCATOR_FROM and {"full", "sliding"} <= kinds


def activation_bytes(era: Era, spec: ModelSpec, tp: int, max_num_seqs: int, mnbt: int,
                     sampler: ProfileSampler | None = None, experts: MoeKernel | None = None,
                     expert_slices: int | None = None) -> int:
    """The profiling run's torch peak. Before v0.17 the era's fitted copies and fixed bytes. From v0.17
    (peak_of_larger) the larger of the dummy forward and the sampler's pass: the forward's widest point (the era's
    copies of hidden and intermediate, derived from the MLP's shapes; at a MoE layer its routing buffers,
    moe_workspace.routing_bytes, and its shared experts' MLP) with the era's fixed bytes, and the sampler's
    (sampler.py) with what stays allocated beside it (PyTorch's cuBLAS workspace, its fixed_bytes: V1 from 0.17,
    Model Runner V2 from 0.22); beside both, a MoE model's fused-MoE
    workspace (moe_workspace.py; experts: the kernel's kind, SharedWorkspace when not given), made by the first MoE
    layer and kept; expert_slices: how many ways each expert is cut (TP when not given; 1 with expert parallelism,
    whole experts; DP's gathered tokens are not modelled).

    Kept, not derived: the era's 0.12 GiB beside the forward's shapes, the cuBLAS workspace among it. What the
    compiled forward holds beyond those shapes is not read in the source; the logs whose peak is the forward's
    show it, and no one figure: the llm-d-planner v0.19 pipeline logs of Llama-3.1-8B (data/calibration.yaml L10,
    L11) print 1.10 GiB on the first stage and 1.05 GiB on the middle ones, 0.225 and 0.05 GiB above the shapes,
    the 32 MiB cuBLAS workspace and the middle stages' received buffers (received_bytes); engine-calibration Y13
    (Gemma-4-31B, vLLM 0.23.0, 20 sequences) implies 0.105 GiB above them.

    Model Runner V2's sampler side is read in the source as V1's: its profile_run (0.22.0-0.33.0 v1/worker/gpu/
    model_runner.py) holds hidden_states and sample_hidden_states through _dummy_sampler_run (hidden_bytes, one
    sampled copy) and the cuBLAS workspace stays (sampler.v2_sampler's fixed_bytes), so the 0.12 GiB is left on
    the forward's side only."""
    sampler = sampler or ProfileSampler(era.logits_copies)
    rows = min(max_num_seqs, mnbt)
    logits = sampler.peak_bytes(rows, spec.vocab_size) + sampler.hidden_bytes(rows, mnbt, spec.hidden_size)
    hidden = era.hidden_copies * mnbt * spec.hidden_size * 2
    if era.peak_of_larger:
        beside = era.fixed_bytes if sampler.fixed_bytes is None else sampler.fixed_bytes
        shape = moe_shape(spec, mnbt, tp if expert_slices is None else expert_slices)
        mlp = era.mlp_copies * mnbt * spec.intermediate_size / tp * 2
        if shape is None or spec.moe is None:
            return int(max(hidden + mlp + era.fixed_bytes, logits + beside))
        held = (experts or SharedWorkspace()).held_bytes(shape)
        shared = spec.moe.shared_experts * spec.moe.shared_intermediate_size
        moe_layer = held + routing_bytes(shape) + era.mlp_copies * mnbt * shared / tp * 2
        # a dense layer sees the workspace only once a MoE layer before it has made it (DeepSeek's first dense
        # layers run before any)
        moe_layers = [i for i in range(spec.num_layers)
                      if i not in spec.moe.dense_layers and i not in spec.moe.mlp_free_layers]
        dense = [i for i in spec.moe.dense_layers if i < spec.num_layers]
        dense_layer = (mlp + (held if moe_layers and max(dense) > moe_layers[0] else 0)) if dense else 0.0
        return int(max(hidden + max(moe_layer, dense_layer) + era.fixed_bytes, held + logits + beside))
    # before v0.17: the era's fitted copies and fixed bytes, the MLP at the routed experts' width for a MoE model
    mlp_width = spec.intermediate_size
    if spec.moe is not None:
        mlp_width = spec.moe.experts_per_token * spec.moe.expert_intermediate_size
    mlp = era.mlp_copies * mnbt * mlp_width / tp * 2
    return int(logits + hidden + mlp) + era.fixed_bytes


def received_bytes(spec: ModelSpec, mnbt: int) -> int:
    """V1's buffers for what a pipeline stage after the first receives: _dummy_run (v1/worker/gpu_model_runner.py,
    0.17.0-0.33.0) makes self.intermediate_tensors once, make_empty_intermediate_tensors for max_num_tokens
    (max_num_batched_tokens) rows, and keeps them; the decoder models' hidden_states and residual
    (model_executor/models/llama.py make_empty_intermediate_tensors_factory, torch.zeros of batch x hidden), 16-bit."""
    return 2 * mnbt * spec.hidden_size * 2


def ssm_dtype(target: PlanInput, version: tuple[int, int]) -> SsmDtype:
    """--mamba-ssm-cache-dtype, or what vLLM makes of auto for the architecture and version (vllm_ssm)."""
    dep = target.deployment
    if dep.mamba_ssm_cache_dtype != "auto":
        return SsmDtype(forced=dtype_bytes(dep.mamba_ssm_cache_dtype, dep.where("mamba_ssm_cache_dtype")))
    dtype = common.model_dtype(target.spec, dep, target.gpu)[0]
    where = dep.where("dtype") if dep.dtype != "auto" else f"{target.spec.source.location}: torch_dtype"
    return auto_ssm_dtype(target.spec.architecture, version, dtype_bytes(dtype, where))


def expert_placement(spec: ModelSpec, dep: Deployment) -> ExpertPlacement | None:
    """How the MoE layers spread their experts (see weights.ExpertPlacement): over TP x DP ranks, whole with
    --enable-expert-parallel, plus EPLB's redundant experts. vLLM's own checks (config/parallel.py
    ParallelConfig, v0.10+): EPLB needs expert parallel, and redundant experts need EPLB."""
    config = dep.eplb_config or {}
    redundant = config.get("num_redundant_experts") or 0
    if not isinstance(redundant, int) or isinstance(redundant, bool) or redundant < 0:
        raise KvplanError(f"num_redundant_experts must be a non-negative integer, not {redundant!r}",
                          dep.where("eplb_config"))
    if dep.enable_eplb and not dep.enable_expert_parallel:
        raise KvplanError("enable_expert_parallel must be True to use EPLB.", dep.where("enable_eplb"))
    if redundant and not dep.enable_eplb:
        raise KvplanError(f"num_redundant_experts is set to {redundant} but EPLB is not enabled. Either enable "
                          "EPLB or unset num_redundant_experts.", dep.where("eplb_config"))
    if spec.moe is None:
        return None
    ranks = dep.tensor_parallel_size * dep.data_parallel_size
    return ExpertPlacement(ranks, dep.enable_expert_parallel and ranks > 1, redundant)


@dataclass(frozen=True)
class BatchTier:
    """One branch of vLLM's batch defaults (EngineArgs.get_batch_defaults, vllm/engine/arg_utils.py): the GPUs it
    takes, and its max_num_seqs and max_num_batched_tokens by entry point (UsageContext OPENAI_API_SERVER for
    `vllm serve`, LLM_CLASS for the offline LLM class)."""

    seqs: int
    tokens: dict[str, int]  # entry point (serve | llm) -> max_num_batched_tokens
    min_memory: int = 0  # device memory (CUDA total) at least this
    names: tuple[str, ...] = ()  # the device name contains one of these (empty: any)
    excluded: tuple[str, ...] = ()  # and none of these
    excluded_capabilities: tuple[str, ...] = ()  # nor a device of these compute capabilities

    def takes(self, gpu: GpuChoice) -> bool:
        name = gpu.name.lower()
        return (gpu.memory_bytes >= self.min_memory and (not self.names or any(n in name for n in self.names))
                and not any(n in name for n in self.excluded)
                and (gpu.compute_capability or "") not in self.excluded_capabilities)


SMALL_TIER = BatchTier(256, {"serve": 2048, "llm": 8192})
BIG_TOKENS = {"serve": 8192, "llm": 16384}
# (first version, tiers in the order vLLM tries them; SMALL_TIER takes the rest)
BATCH_TIERS = (
    # PR #12369 (Jan 2025): larger defaults for H100 and H200, chosen by device name.
    ((0, 8), (BatchTier(1024, BIG_TOKENS, names=("h100", "h200")),)),
    # PR #17073 (v0.8.5) chose by memory, >= 70 GiB, A100s included (vLLM 0.8.5 engine/arg_utils.py: device_memory
    # >= 70 * GiB_bytes; the oracle's 0.8.5 A100 80GB, RTX PRO 6000 and B200 cases resolve 1,024 and 8,192);
    # PR #17885 (May 2025, v0.9.0) left A100s out again, as throughput fell on them.
    ((0, 8, 5), (BatchTier(1024, BIG_TOKENS, BIG_GPU_BYTES),)),
    ((0, 9), (BatchTier(1024, BIG_TOKENS, BIG_GPU_BYTES, excluded=("a100",)),)),
    # PR #51726 (Aug 2026, v0.28.0; absent from v0.27.0): a tier for >= 160 GiB devices (B200/B300, and
    # MI300X, issue #53961) serving 16,384 tokens; the LLM class keeps its 16,384.
    ((0, 28), (BatchTier(1024, {"serve": 16384, "llm": 16384}, 160 * GiB),
               BatchTier(1024, BIG_TOKENS, BIG_GPU_BYTES, excluded=("a100",)))),
    # vLLM 0.33.0 engine/arg_utils.py get_batch_defaults: is_gb10 = is_device_capability((12, 1)) keeps DGX Spark's
    # GB10 (119.6 GiB of unified memory) on the small tier; 0.28.0-0.32.0 have no such check (issue 18 section 2.12)
    (GB10_SMALL_TIER_FROM, (BatchTier(1024, {"serve": 16384, "llm": 16384}, 160 * GiB),
                            BatchTier(1024, BIG_TOKENS, BIG_GPU_BYTES, excluded=("a100",),
                                      excluded_capabilities=("12.1",)))),
)


# Speculative methods that keep async scheduling on (vLLM 0.26.0 config/vllm.py: EagleModelTypes, with the MTP
# kinds, NgramGPUTypes and dspark); any other turns it off
ASYNC_SPECULATIVE = ("eagle", "mtp", "extract_hidden_states", "dflash", "dspark", "ngram_gpu")


def in_flight_tokens(dep: Deployment, version: tuple[int, int], batched_tokens: int, v2: bool = False) -> int | None:
    """From v0.26 a sliding-window or chunked layer holds window - 1 + max_in_flight_tokens (vLLM 0.26.0
    v1/kv_cache_interface.py SlidingWindowSpec / ChunkedLocalAttentionSpec max_memory_usage_bytes): every
    concurrent batch may hold max_num_batched_tokens (config/vllm.py max_in_flight_tokens), and
    max_concurrent_batches is 2 under async scheduling (on by default unless a speculative method it does not
    support), else the pipeline size; under Model Runner V2 with async scheduling, pp + 1 (0.26.0 config/vllm.py
    max_concurrent_batches)."""
    if version < IN_FLIGHT_TOKENS_FROM:
        return None
    method = str((dep.speculative_config or {}).get("method") or "").lower()
    asynchronous = not dep.speculative_config or any(kind in method for kind in ASYNC_SPECULATIVE)
    pp = dep.pipeline_parallel_size
    if asynchronous and v2:
        return (pp + 1) * batched_tokens
    return (2 if asynchronous and pp <= 1 else pp) * batched_tokens


def batch_defaults(gpu: GpuChoice, era: Era, version: tuple[int, ...], max_model_len: int,
                   entrypoint: str = "serve") -> tuple[int, int]:
    """max_num_seqs and max_num_batched_tokens when not given."""
    if era.v0:
        # V0 profiled whole prompts up to 32K; longer contexts switched chunked prefill on, 512-token chunks.
        return 256, max(max_model_len, 2048) if max_model_len <= 32768 else 512
    tiers: tuple[BatchTier, ...] = ()
    for first, row in BATCH_TIERS:
        if version >= first:
            tiers = row
    tier = next((tier for tier in tiers if tier.takes(gpu)), SMALL_TIER)
    return tier.seqs, tier.tokens[entrypoint]


def unchunked_tokens(dep: Deployment, tokens: int, max_model_len: int) -> int:
    """--no-enable-chunked-prefill (vLLM 0.33 EngineArgs._set_default_max_num_seqs_and_batched_tokens_args and
    SchedulerConfig.verify_max_model_len): a step takes a whole prompt, so an unset max_num_batched_tokens is
    raised to max_model_len, and one given below it is refused."""
    if dep.max_num_batched_tokens is None:
        return max(max_model_len, tokens)
    if tokens < max_model_len:
        raise KvplanError(f"max_num_batched_tokens ({tokens}) is smaller than max_model_len ({max_model_len}). "
                          "This effectively limits the maximum sequence length to max_num_batched_tokens and makes "
                          "vLLM reject longer sequences. Please increase max_num_batched_tokens or decrease "
                          "max_model_len.", dep.where("enable_chunked_prefill"))
    return tokens


def rope_cache_bytes(target: PlanInput) -> int:
    """The RoPE cos/sin tables every rank builds with the model (layers/rotary_embedding/base.py: a buffer of
    positions x rotary_dim in the model dtype, one per distinct RoPE, as get_rope caches them): "Model loading
    took" counts them with the weights."""
    dtype, _ = common.model_dtype(target.spec, target.deployment, target.gpu)
    return sum(table.values() * (4 if table.float32 else dtype_bytes(dtype)) for table in target.spec.rope_tables)


class Vllm(PoolRules):
    name = "vllm"
    label = "vLLM"
    kv_log = "GPU KV cache size"
    flat_pool = False
    refused_kv_cache_dtypes = frozenset({"mxfp8", "fp4_mx_block16"})  # SGLang's; not in config/cache.py CacheDType

    def settings(self, target: PlanInput) -> EngineSettings:
        spec, dep, gpu = target.spec, target.deployment, target.gpu
        version = dep.engine_version or LATEST
        era = era_of(version, dep.where("engine_version"))
        max_model_len = common.check_max_model_len(spec, dep)
        wanted = parse_version(version, dep.where("engine_version"))
        default_seqs, default_tokens = batch_defaults(gpu, era, release_of(version), max_model_len, dep.entrypoint)
        seqs, tokens = dep.max_num_seqs or default_seqs, dep.max_num_batched_tokens or default_tokens
        if dep.enable_chunked_prefill is False and not era.v0:
            tokens = unchunked_tokens(dep, tokens, max_model_len)
        if tokens < seqs:  # SchedulerConfig._verify_args
            where = dep.where("max_num_batched_tokens" if dep.max_num_batched_tokens else "max_num_seqs")
            raise KvplanError(f"max_num_batched_tokens ({tokens}) must be greater than or equal to max_num_seqs "
                              f"({seqs}).", where)
        kv_scheme.check(spec, dep, version)  # validate_kv_cache_scheme runs whatever the dtype resolves to
        placement = expert_placement(spec, dep)
        runner = model_runner(spec, dep, gpu, wanted)
        return EngineSettings(
            "vllm", self.label, self.kv_log, version, dep.gpu_memory_utilization or era.default_utilization,
            kv_block_size(spec, dep, gpu.compute_major, wanted),
            max_model_len,
            seqs, tokens, expert_placement=placement,
            auto_kv_cache_dtype=served_kv_cache_dtype(spec.layers, dep.kv_cache_dtype, gpu.compute_major,
                                                      (dep.where("kv_cache_dtype"), dep.where("gpu")))
            or ("fp8_ds_mla" if common.kernel_block_size(spec) and wanted[:2] == SPARSE_FP8_DEFAULT_IN
                else modelopt_auto_kv(spec, wanted)) or kv_scheme.auto_kv_cache_dtype(spec, dep, wanted),
            forced_kv_cache_dtype=kv_scheme.forced_kv_cache_dtype(spec, dep, wanted),
            mxfp4_experts=mxfp4_experts(wanted, gpu.compute_capability,
                                             1 if placement is None or placement.whole else placement.ranks),
            in_flight_tokens=in_flight_tokens(dep, wanted, tokens, runner.v2), model_runner=runner.name,
            encoder_cache_tokens=None if era.v0 or spec.tower is None else _encoder_budget(
                spec, dep, max_model_len, seqs, tokens, dtype_bytes(common.model_dtype(spec, dep, gpu)[0])))

    def stage_facts(self, stage: Stage) -> dict[str, Any]:
        return {"first": stage.first}  # the vision tower and its encoder profile (multimodal.stage_tower_bytes)

    def stage_memory(self, target: PlanInput, settings: EngineSettings, weights_bytes: int, decoder_layers: int,
                     last: bool, first: bool = True) -> Memory:
        spec, dep, gpu = target.spec, target.deployment, target.gpu
        v2 = settings.model_runner == "V2"
        era = era_of(settings.version or LATEST)
        budget = int(gpu.memory_bytes * (settings.gpu_memory_utilization or era.default_utilization))
        lora = _lora(target)
        moved = _offloaded(target, decoder_layers)
        if dep.weights_memory_bytes is None:
            weights_bytes += rope_cache_bytes(target) + (lora.layer_bytes * decoder_layers if lora else 0)
            weights_bytes -= moved.moved_bytes if moved else 0
            weights_bytes += _stage_tower_bytes(target, first, v2)
        if dep.kv_cache_memory_bytes is not None:
            return Memory(gpu.memory_bytes, budget, weights_bytes, kv_cache_bytes=dep.kv_cache_memory_bytes)
        tp, pp = dep.tensor_parallel_size, dep.pipeline_parallel_size
        sampler = profile_sampler(era, dep, _release(settings), v2, gpu.compute_capability, gpu.sm_count)
        seqs = (settings.max_num_seqs or 0) if last else 0
        experts = moe_kernel(common.quantization_method(spec, dep), settings.mxfp4_experts, _release(settings))
        placement = settings.expert_placement
        act = activation_bytes(era, spec, tp, seqs, settings.max_num_batched_tokens or settings.max_model_len, sampler,
                               experts, 1 if placement is not None and placement.whole else tp)
        act += sampler.held_bytes(seqs, spec.vocab_size, 1 + common.speculative_tokens(dep))
        if sampler.counts_received and not first:  # V1 from 0.17 (sampler.DERIVED_FROM), V2 from 0.27 (sampler.py)
            act += received_bytes(spec, settings.max_num_batched_tokens or settings.max_model_len)
        if lora:  # the largest LoRA shrink buffer of the profiling run, over its batched tokens (rounded up to 8)
            act += lora.shrink_bytes_per_token * -(-(settings.max_num_batched_tokens or 0) // 8) * 8
        # V1 profiles the encoder on every stage; V2 on the first only (gpu/model_runner.py profile_run, 0.33.0)
        encoder = encoder_of(target, settings, gpu.memory_bytes - weights_bytes) if first or not v2 else None
        act = encoder.peak(act) if encoder else act
        growth = tp_growth(dep, gpu, _release(settings), spec.hidden_size,
                           dtype_bytes(common.model_dtype(spec, dep, gpu)[0]),
                           settings.max_num_batched_tokens or settings.max_model_len)
        non_torch = era.non_torch(tp, pp, growth)
        use_graphs = era.subtracts_cuda_graphs if dep.estimate_cudagraphs is None else dep.estimate_cudagraphs
        use_graphs = (use_graphs and graph_estimate_on(gpu, _release(settings))
                      and profiles_graphs(settings.model_runner == "V2", _release(settings)))
        eager = dep.enforce_eager or dep.optimization_level == 0  # -O0 captures no CUDA graphs either
        graphs = 0
        if use_graphs and not eager:
            piecewise, full = cuda_graph_sizes(settings.max_num_seqs or 1, settings.max_num_batched_tokens or 1,
                                               common.speculative_tokens(dep), spec.architecture,
                                               default_largest_capture(gpu, _release(settings)),
                                               settings.model_runner != "V2")
            sizes = (piecewise, full if captures_full_graphs(spec, dep) else 0)
            if lora:  # each size and mode captured once per LoRA case
                sizes = (sizes[0] * lora.graph_cases, sizes[1] * lora.graph_cases)
            graphs = cuda_graph_bytes(decoder_layers, sizes)
        available = budget - weights_bytes - act - non_torch - graphs
        return Memory(gpu.memory_bytes, budget, weights_bytes, act, non_torch, graphs, 0, available,
                      encoder.held_bytes if encoder else 0)

    def kv_cache_scheme_note(self, target: PlanInput, settings: EngineSettings | None, kv_name: str) -> str | None:
        return kv_scheme.note(target.spec, target.deployment, (settings.version if settings else None) or LATEST,
                              kv_name)

    def notes(self, target: PlanInput, settings: EngineSettings) -> list[str]:
        notes = []
        if sliding_as_full(target.spec, settings):
            notes.append("vLLM before 0.9 caches sliding-window layers as full attention beside full layers "
                         "(unify_hybrid_kv_cache_specs): every layer caches every token")
        elif self.unified(target, settings) and any(layer.drops_old_tokens for layer in target.spec.layers):
            notes.append("vLLM's hybrid KV cache manager is off for chunked local attention (set "
                         "VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=1 to keep it): every layer caches every "
                         "token")
        if target.deployment.kv_cache_memory_bytes is not None:
            notes.append("KV cache memory given: vLLM skips profiling and gpu_memory_utilization")
        if target.deployment.compilation_config is not None:
            notes.append("compilation_config is accepted but not modelled (its CUDA-graph capture sizes change the "
                         "graph memory)")
        notes.append(f"vLLM accounting era: {era_of(settings.version or LATEST).name}")
        notes.extend(runner_notes(target.spec, target.deployment, target.gpu, _release(settings)))
        if not settings.auto_kv_cache_dtype:  # DeepSeek's sparse fp8 and V4's formats come first
            notes.extend(modelopt_kv_warning(target.spec, target.deployment, _release(settings)))
        sampler = profile_sampler(era_of(settings.version or LATEST), target.deployment, _release(settings),
                                  settings.model_runner == "V2", target.gpu.compute_capability, target.gpu.sm_count)
        buffer_note = triton_buffer_note(sampler, min(settings.max_num_seqs or 0, settings.max_num_batched_tokens or 0))
        if buffer_note and target.deployment.kv_cache_memory_bytes is None:
            notes.append(buffer_note)
        spec, dep = target.spec, target.deployment
        lora = _lora(target)
        if lora:
            notes.append(lora.note(spec.num_layers // dep.pipeline_parallel_size))
        moved = _offloaded(target, spec.num_layers // dep.pipeline_parallel_size)
        if moved:
            notes.append(moved.note(dep.gpu_count))
        notes.extend(_multimodal_notes(target, settings))
        if (target.gpu.compute_major == 10 and dep.block_size is None and not common.kernel_block_size(spec)
                and any(layer.latent_cache for layer in spec.layers)):
            notes.append(f"MLA block size {settings.block_size} on this Blackwell GPU is read from vLLM's source "
                         "(FlashInfer MLA from v0.18, and from v0.15 where qk_nope_head_dim is 128; CUTLASS MLA "
                         "otherwise); no startup log checks it")
        rope = rope_cache_bytes(target)
        if rope >= MiB and target.deployment.weights_memory_bytes is None:
            tables = " + ".join(f"{table.positions:,} x {table.rotary_dim}" for table in target.spec.rope_tables)
            notes.append(f"weights include the RoPE cos/sin cache: {tables} values = {rope / MiB:,.0f} MiB per rank")
        if (settings.auto_kv_cache_dtype == "fp8_ds_mla" and target.deployment.kv_cache_dtype == "auto"
                and not has_compressed_attention(target.spec.layers)):
            notes.append("DeepSeek sparse attention: vLLM 0.11 turns an automatic KV cache dtype into fp8_ds_mla "
                         "(656 B latent per token, PR #25988)")
        notes.extend(state_notes(target, _release(settings)))
        return notes


    def unified(self, target: PlanInput, settings: EngineSettings) -> bool:
        return (not hybrid_kv_manager(target.spec, target.deployment, _release(settings))
                or sliding_as_full(target.spec, settings))

    def served_layers(self, target: PlanInput, settings: EngineSettings, layers: list[Layer],
                      model_bytes: int) -> list[Layer]:
        """Recurrent states in the block pool from v0.10 (MambaBase.get_kv_cache_spec, mamba_utils): the conv state
        in the served dtype (mamba_cache_dtype auto), the SSM state as ssm_dtype types it, one conv row and one block
        more per speculative token, and for the kinds that cache prefixes the mamba_cache_mode's blocks
        (hybrid.mamba_cache_mode): align one more (0.33's FlashInfer GDN a checkpoint block besides), all one per
        block_size tokens."""
        release = _release(settings)
        if release < PAGED_STATES_FROM:
            return [layer.unpaged() for layer in layers]
        ssm = ssm_dtype(target, release)
        mode = mamba_cache_mode(target.spec, target.deployment, release)
        extra = {"gdn": int(mode == "align") + int(gdn_checkpoints(target.spec, target.gpu, release, mode)),
                 "mamba2": int(mode == "align")}
        return [layer.as_served(model_bytes, ssm.forced, common.speculative_tokens(target.deployment),
                                extra.get(layer.kind, 0), ssm.fallback,
                                mode == "all" and layer.kind in PREFIX_CACHED_STATE_KINDS)
                for layer in layers]

    def pool_block_size(self, target: PlanInput, settings: EngineSettings, layers: list[Layer], kv_bytes: int,
                        tp: int) -> int:
        """A hybrid's attention block, raised to hold a state page in the release's steps (hybrid.py)."""
        release = _release(settings)
        if not is_hybrid(target.spec):
            return settings.block_size
        mode = mamba_cache_mode(target.spec, target.deployment, release)
        step = alignment_step(target.spec, target.gpu, release, settings.block_size, mode)
        return hybrid_block_size(layers, settings.block_size, kv_bytes, tp, step, mode)

    def held_back_bytes(self, settings: EngineSettings, layout: PoolLayout) -> int:
        """From v0.29 the null block (NULL_BLOCK_HELD_FROM): one block of the pool."""
        return layout.block_bytes if _release(settings) >= NULL_BLOCK_HELD_FROM and layout.groups else 0

    def capped_blocks(self, target: PlanInput, settings: EngineSettings, blocks: int) -> int:
        override = target.deployment.num_gpu_blocks_override  # this many blocks, whatever the budget
        return blocks if override is None else override

    def logged(self, target: PlanInput, settings: EngineSettings, layout: PoolLayout, num_blocks: int,
               per_request: int) -> tuple[int, float]:
        """V0 divides the pool's tokens by max_model_len; from v0.20.1 the logged tokens are int(concurrency x
        max_model_len) for every model (TOKENS_FROM_CONCURRENCY_FROM; engine-calibration Y04 for a hybrid)."""
        tokens, value = super().logged(target, settings, layout, num_blocks, per_request)
        length = settings.max_model_len
        if era_of(settings.version or LATEST).v0:
            value = num_blocks * settings.block_size / length
        if release_of(settings.version or LATEST) >= TOKENS_FROM_CONCURRENCY_FROM:
            tokens = int(num_blocks / per_request * length) if per_request else 0
        return tokens, value

    def offload_tier(self, target: PlanInput, settings: EngineSettings, layout: PoolLayout, tokens: int,
                     split: bool) -> tuple[int, list[str]]:
        if not _has_cpu_tier(target.deployment):
            return 0, []
        from kvplan.engines.vllm.kv_offload import cpu_tier

        tier = cpu_tier(target.deployment, layout)
        return tier.tokens, tier.notes

    def offload_host_bytes(self, target: PlanInput, settings: EngineSettings, layout: PoolLayout,
                           offload_tokens: int) -> int:
        if not _has_cpu_tier(target.deployment):
            return 0
        from kvplan.engines.vllm.kv_offload import cpu_tier

        return cpu_tier(target.deployment, layout).host_bytes

    def pool_notes(self, target: PlanInput, settings: EngineSettings, num_blocks: int) -> list[str]:
        override = target.deployment.num_gpu_blocks_override
        return [] if override is None else [f"num_gpu_blocks_override: {override:,} blocks, whatever the memory budget"]

    def layout_notes(self, settings: EngineSettings, layout: PoolLayout) -> list[str]:
        """vLLM's own words when state pages raised the attention block or were padded to it
        (model_executor/models/config.py HybridAttentionMambaModelConfig)."""
        notes: list[str] = []
        has_attention = any(group.layer.holds_kv for group in layout.groups)
        if has_attention and layout.block_size != settings.block_size:
            notes.append(f"Setting attention block size to {layout.block_size} tokens to ensure that attention page "
                         "size is >= mamba page size (vLLM)")
        state = next((g.layer for g in layout.groups if g.layer.paged_state), None)
        if state is not None and has_attention:
            real = state.state_page_bytes(layout.tp)
            padded = state.page_bytes(layout.block_size, layout.kv_bytes, layout.tp)
            if padded > real:
                notes.append(f"Padding mamba page size by {100 * (padded - real) / real:.2f}% to ensure that mamba "
                             "page size and attention page size are exactly equal (vLLM)")
        return notes


def encoder_of(target: PlanInput, settings: EngineSettings, free_bytes: int | None = None) -> EncoderProfile | None:
    """The multimodal encoder's profiling (engines/vllm/multimodal.py), for the V1 engine's releases; free_bytes:
    what the weights leave of the GPU when the tower runs."""
    spec, dep = target.spec, target.deployment
    if era_of(settings.version or LATEST).v0 or spec.tower is None:
        return None
    from kvplan.engines.vllm.multimodal import encoder_profile

    return encoder_profile(spec, dep, settings.max_model_len, settings.max_num_seqs or 1,
                           settings.max_num_batched_tokens or settings.max_model_len,
                           dtype_bytes(common.model_dtype(spec, dep, target.gpu)[0]), target.gpu.memory_bytes,
                           free_bytes, settings.model_runner == "V2", _release(settings))


def _tower_bytes(target: PlanInput) -> int:
    spec, dep = target.spec, target.deployment
    return spec.params.vision * dtype_bytes(common.model_dtype(spec, dep, target.gpu)[0])


def replicated_tower_bytes(target: PlanInput) -> int:
    """What --mm-encoder-tp-mode data adds to a rank of the first stage: the tower's other TP shares."""
    dep = target.deployment
    if not _tower_replicated(target):
        return 0
    return _tower_bytes(target) - _tower_bytes(target) // dep.tensor_parallel_size


def skipped_tower_bytes(target: PlanInput) -> int:
    """The towers' bytes on one rank of the first stage that vLLM does not build (multimodal.skipped_bytes)."""
    if target.spec.tower is None:  # nothing is skipped without a tower
        return 0
    from kvplan.engines.vllm.multimodal import skipped_bytes

    return skipped_bytes(target.spec, target.deployment, _tower_bytes(target))


# multimodal.py is imported only for a model with a vision tower (start-up time: tests/test_startup_imports.py)
def _tower_replicated(target: PlanInput) -> bool | None:
    """multimodal.tower_replicated, None without a tower."""
    if target.spec.tower is None:
        return None
    from kvplan.engines.vllm.multimodal import tower_replicated

    return tower_replicated(target.spec, target.deployment)


def _stage_tower_bytes(target: PlanInput, first: bool, v2: bool) -> int:
    """multimodal.stage_tower_bytes, 0 where the model has no tower's parameters."""
    tower = _tower_bytes(target)
    if not tower:
        return 0
    from kvplan.engines.vllm.multimodal import stage_tower_bytes

    return stage_tower_bytes(target.spec, target.deployment, tower, first, v2)


def _encoder_budget(spec: ModelSpec, dep: Deployment, max_model_len: int, seqs: int, tokens: int,
                    size: int) -> int | None:
    """The encoder cache's budget in tokens (multimodal.encoder_profile), for a model with a tower."""
    from kvplan.engines.vllm.multimodal import encoder_profile

    profile = encoder_profile(spec, dep, max_model_len, seqs, tokens, size)
    return profile.budget if profile else None


def state_notes(target: PlanInput, release: tuple[int, int]) -> list[str]:
    """How the release keeps a hybrid's states with prefix caching (hybrid.mamba_cache_mode)."""
    if release < PAGED_STATES_FROM or not any(cache.kind in PREFIX_CACHED_STATE_KINDS for layer in target.spec.layers
                                              for cache in layer.cache_layers()):
        return []
    mode = mamba_cache_mode(target.spec, target.deployment, release)
    return [{"none": "prefix caching off for this hybrid (vLLM before 0.26 unless --enable-prefix-caching): "
                     "mamba_cache_mode none, one state block per request",
             "align": "prefix caching on (mamba_cache_mode align): each Mamba / linear-attention group holds one "
                      "more block per request",
             "all": "prefix caching on (mamba_cache_mode all): each Mamba group holds a block per block_size tokens, "
                    "and the block is a multiple of the SSD chunk"}[mode]]


# What only some deployments turn on is imported when one does (start-up time: tests/test_startup_imports.py).
def _lora(target: PlanInput) -> Lora | None:
    """lora.py's slots on one rank, None without --enable-lora."""
    spec, dep = target.spec, target.deployment
    if not dep.enable_lora:
        return None
    from kvplan.engines.vllm.lora import lora_slots

    return lora_slots(spec, dep, common.model_dtype(spec, dep, target.gpu)[0])


def _offloaded(target: PlanInput, decoder_layers: int) -> Offload | None:
    """offload.py's parameters one rank of a stage moves, None without --cpu-offload-gb."""
    spec, dep = target.spec, target.deployment
    if not dep.cpu_offload_gb:
        return None
    from kvplan.engines.vllm.offload import offloaded

    return offloaded(spec, dep, decoder_layers, dtype_bytes(common.model_dtype(spec, dep, target.gpu)[0]))


def _has_cpu_tier(dep: Deployment) -> bool:
    """A CPU tier or a KV connector is configured; without one kv_offload.cpu_tier is empty."""
    return dep.kv_offloading_size is not None or bool((dep.kv_transfer_config or {}).get("kv_connector"))


def _release(settings: EngineSettings) -> tuple[int, int]:
    return parse_version(settings.version or LATEST)


ENGINE = Vllm()


MODELOPT_KV_FROM = (0, 14)  # the first release that resolves kv_cache_dtype auto from the checkpoint
# utils/torch_utils.py MODELOPT_TO_VLLM_KV_CACHE_DTYPE_MAP by release (read in the wheels): {"fp8": "fp8_e4m3"}
# 0.14.0-0.19.0; "nvfp4": "nvfp4" added in 0.20.0 (with a kv_cache_scheme of 4-bit floats read as nvfp4), kept
# through 0.33.0. The first release each value maps from:
MODELOPT_KV_MAP = {"FP8": ((0, 14), "fp8_e4m3"), "NVFP4": ((0, 20), "nvfp4")}


def modelopt_auto_kv(spec: ModelSpec, wanted: tuple[int, ...]) -> str | None:
    """vLLM 0.33.0 engine/arg_utils.py create_engine_config -> utils/torch_utils.py resolve_kv_cache_dtype_string:
    kv_cache_dtype auto becomes the KV cache dtype a ModelOpt quantization config's kv_cache_quant_algo maps to
    (get_kv_cache_quant_algo_string: MODELOPT_KV_MAP); any other value falls back to auto, the model dtype
    (modelopt_kv_warning). Read in the wheels: present from 0.14.0, absent in 0.13.0."""
    first, dtype = MODELOPT_KV_MAP.get(common.modelopt_kv_algo(spec) or "", ((99, 0), ""))
    return dtype if wanted[:2] >= first else None


def modelopt_kv_warning(spec: ModelSpec, dep: Deployment, wanted: tuple[int, ...]) -> list[str]:
    """The warning get_kv_cache_quant_algo_string logs (0.14.0-0.33.0 utils/torch_utils.py) where the checkpoint
    names a kv_cache_quant_algo the release's map lacks: it falls back to auto, the model dtype."""
    algo = common.modelopt_kv_algo(spec)
    if dep.kv_cache_dtype != "auto" or not algo or wanted[:2] < MODELOPT_KV_FROM or modelopt_auto_kv(spec, wanted):
        return []
    known = [name.lower() for name, (first, _) in MODELOPT_KV_MAP.items() if wanted[:2] >= first]
    source = spec.quantization.source if spec.quantization else ""
    return [f"vLLM warns: Unknown kv_cache_quant_algo '{algo}' in the checkpoint's {source} (supported: "
            f"{', '.join(known)}); it falls back to 'auto': KV cache in the model dtype"]


def _multimodal_notes(target: PlanInput, settings: EngineSettings) -> list[str]:
    """What the plan says of a multimodal model's encoder profile, processor kwargs and towers."""
    spec, dep = target.spec, target.deployment
    notes = []
    encoder = encoder_of(target, settings)
    if encoder:
        notes.append(encoder.note())
    unread: list[str] = []
    if spec.tower is not None and dep.mm_processor_kwargs:  # multimodal.py stays unimported for a text model
        from kvplan.engines.vllm.multimodal import unread_kwargs

        unread = unread_kwargs(spec, dep)
    if unread:
        notes.append(f"{dep.where('mm_processor_kwargs')} {', '.join(unread)}: not read by kvplan's model of "
                     f"{spec.architecture}'s processor; vLLM hands them to it, and where they change the "
                     "profiled item the plan does not follow")
    replicated = _tower_replicated(target)
    if replicated is not None and dep.tensor_parallel_size > 1:
        notes.append(f"--mm-encoder-tp-mode data: the vision tower whole on each rank, "
                     f"{replicated_tower_bytes(target) / GiB:.2f} GiB more weights (vLLM 0.33.0)" if replicated
                     else f"--mm-encoder-tp-mode data: {spec.architecture} does not support it; vLLM falls back "
                     "to 'weights' (the tower split over TP)")
    skipped = skipped_tower_bytes(target)
    if skipped:
        notes.append(f"tower not loaded (every modality it serves has a limit of 0): "
                     f"{skipped / GiB:.2f} GiB less weights per rank (vLLM 0.33.0 "
                     "_mark_tower_model)")
    return notes
