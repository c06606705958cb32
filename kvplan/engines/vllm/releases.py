"""vLLM's rules by release: the newest release modelled, the versions at which a rule changed, and the eras of its
memory accounting (each era's figures from the calibration logs in data/calibration.yaml)."""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.engines.releases import Change, Releases
from kvplan.engines.vllm.hybrid import (
    ALIGN_FOR_ALL_FROM,
    GDN_CHECKPOINT_FROM,
    HYBRID_PREFIX_CACHING_FROM,
    MAMBA_CACHE_MODES_FROM,
    PLATFORM_ALIGNMENT_FROM,
)
from kvplan.engines.vllm.runner import ROCM_GRAPH_ESTIMATE_FROM, V2_DEFAULT_FROM, V2_PROFILES_NO_GRAPHS
from kvplan.engines.vllm.sampler import (
    DERIVED_FROM,
    NATIVE_COPIES,
    TRITON_ALL_ROWS_FROM,
    V1_TWO_PASS_FROM,
    V2_TWO_PASS_FROM,
    V2_UNPROCESSED_LOGITS_FROM,
)
from kvplan.errors import KvplanError
from kvplan.units import GiB

# The releases on PyPI whose accounting kvplan models, from the first its calibration logs reach (0.6.4, the V0
# era) to the newest when this table was last extended (benchmarks/releases.py lists newer ones).
COVERED = (
    "0.6.0", "0.6.1", "0.6.2", "0.6.3", "0.6.4", "0.6.5", "0.6.6", "0.7.0", "0.7.1", "0.7.2", "0.7.3", "0.8.0",
    "0.8.1", "0.8.2", "0.8.3", "0.8.4", "0.8.5", "0.9.0", "0.9.1", "0.9.2", "0.10.0", "0.10.1", "0.10.2", "0.11.0",
    "0.11.1", "0.11.2", "0.12.0", "0.13.0", "0.14.0", "0.14.1", "0.15.0", "0.15.1", "0.16.0", "0.17.0", "0.17.1",
    "0.18.0", "0.18.1", "0.19.0", "0.19.1", "0.20.0", "0.20.1", "0.20.2", "0.21.0", "0.22.0", "0.22.1", "0.23.0",
    "0.24.0", "0.25.0", "0.25.1", "0.26.0", "0.27.0", "0.27.1", "0.28.0", "0.29.0", "0.30.0", "0.31.0", "0.32.0",
    "0.33.0",
)
LATEST = COVERED[-1]
# Recurrent-state (Mamba / linear attention) layers in the v1 block pool, with the attention block raised to the
# state page (model_executor/models/config.py HybridAttentionMambaModelConfig): from v0.10. Before, V0 kept the
# states in a cache of their own.
PAGED_STATES_FROM = (0, 10)
# A hybrid's prefix caching and Mamba cache mode by release (off until 0.26, then none / align / all) are in
# engines/vllm/hybrid.py (issue 18 section 2.8); engine-calibration Y04's v0.20.1 log (619,479 tokens = 423 blocks /
# 179 per request x 262,144) shows align's extra block, which that release gives only with --enable-prefix-caching.
# vllm#35122 (merged 2026-03-09; the release is inferred as v0.18): the KV block size follows the attention backend
# chosen, so Hopper's FLASH_ATTN_MLA (first since vllm#27363) pages MLA in 16-token blocks, not FlashMLA's 64, as the
# v0.19 H100 log of DeepSeek-V2-Lite shows (data/calibration.yaml L01: 94,097 blocks x 16 = 1,505,552 tokens).
MLA_BLOCK_FROM_BACKEND = (0, 18)
# vLLM 0.18.0 config/cache.py: block_size SkipValidation[int] (0.17.0: Literal[1, 8, 16, 32, 64, 128, 256]); the
# attention backend keeps any multiple of its kernel block (v1/attention/backend.py supports_block_size;
# engines/vllm/blocks.py, issue 18 section 2.10)
ANY_BLOCK_SIZE_FROM = (0, 18)
# vLLM 0.15.0 platforms/cuda.py check_and_update_config: FlashInfer MLA, 64-token blocks, on SM100 where
# qk_nope_head_dim is 128 (0.14.0: CUTLASS MLA, 128; issue 18 section 2.9)
FLASHINFER_MLA_FROM = (0, 15)
# DeepseekV32ForCausalLM.verify_and_update_config (model_executor/models/config.py) turned "auto" into fp8_ds_mla in
# v0.11.0 (PR #25988); later code turns only fp8* into it. The first release without it is not known; 0.12 is taken.
SPARSE_FP8_DEFAULT_IN = (0, 11)
# vLLM 0.20.1 v1/core/kv_cache_utils.py _report_kv_cache_config: "GPU KV cache size" is int(max_concurrency x
# max_model_len) for every model (sliding-window and chunked groups hold fewer blocks a request than the pool's
# tokens suggest); 0.20.0 still logs num_blocks // groups x the smallest block size (issue 18 section 2.7; the
# oracle's 0.20.0 and 0.20.1 cases of gemma-2, gemma-3 and gpt-oss, tests/oracle/cases.jsonl).
TOKENS_FROM_CONCURRENCY_FROM = (0, 20, 1)
# vLLM 0.28.0 config/vllm.py _set_cudagraph_sizes: the largest default capture size is 1024 on SM100 (budget.py
# default_largest_capture; issue 18 section 2.4).
SM100_CAPTURE_1024_FROM = (0, 28)
# vLLM 0.26.0 v1/kv_cache_interface.py: window and chunked layers hold window - 1 + max_in_flight_tokens
# (budget.in_flight_tokens; issue 18 section 2.6); 0.25.0 holds window - 1 + max_num_batched_tokens.
IN_FLIGHT_TOKENS_FROM = (0, 26)
# vLLM 0.29.0 v1/core/kv_cache_utils.py get_kv_cache_configs: "Reserve the null block BlockPool permanently holds
# back, so auto-fit and the capacity check both plan against usable blocks" (available - one block's bytes; absent
# from 0.28.0; 0.33.0 kv_cache_planning.py keeps it): a request of max_model_len needs one block more than the pool
# minus it (the oracle's 0.29+ refusals of Llama-3.1-8B and Qwen3-8B at 4 GiB).
NULL_BLOCK_HELD_FROM = (0, 29)
# V1's hybrid allocator: sliding-window and full layers in groups of their own. vLLM 0.8.5 turns sliding windows into
# full attention when both are present (v1/core/kv_cache_utils.py unify_hybrid_kv_cache_specs); 0.9.2 groups them
# (the oracle's gemma-2, gemma-3 and gpt-oss cases); 0.9.0 and 0.9.1 are not checked, so 0.9 is taken.
HYBRID_ALLOCATOR_FROM = (0, 9)
# VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE defaults to "1" from vLLM 0.14.0 (envs.py; 0.13.0: "0"):
# chunked local attention keeps its own KV groups unless the variable turns it off (issue 18 section 2.5).
CHUNKED_HYBRID_KV_ON_FROM = (0, 14)
# vLLM 0.33.0 engine/arg_utils.py get_batch_defaults: GB10 (compute capability 12.1) stays on the small batch tier
# (budget.BATCH_TIERS; issue 18 section 2.12).
GB10_SMALL_TIER_FROM = (0, 33)
# vLLM v1/worker/gpu_model_runner.py profile_run: 0.11.0-0.11.2 copy each dummy encoder output with fewer rows than
# the encoder budget into a zeroed budget x width tensor and cache that through the decoder's dummy run; 0.12.0 pads
# to the modality's maximum tokens per item instead; 0.10.2 and 0.13.0-0.33.0 cache the outputs as returned
# (engines/vllm/multimodal.py held_rows).
OUTPUTS_PADDED_TO_BUDGET_FROM = (0, 11)
OUTPUTS_PADDED_TO_ITEM_FROM = (0, 12)
OUTPUTS_UNPADDED_FROM = (0, 13)
# Read and not a term of its own (issue 18 section 2.12): vLLM 0.27.0 utils/mem_utils.py memory_profiling takes
# the non-KV memory as total_consumed (the free memory lost since the worker's snapshot) + the transient peak headroom
# (torch peak - allocated after the profile) instead of weights + non-torch increase + torch peak increase; both are
# the weights, what grows outside torch and the profile's peak, so the v0.20+ era's terms stay, but what Model Runner
# V2 allocates after the weights are measured (its penalty and grammar buffers) now counts. V2's profiling sampler,
# its two passes in 0.33.0 included, is engines/vllm/sampler.py's V2_SAMPLERS (derived from the source: no V2 log
# prints its peak).


@dataclass(eq=False)
class Era:
    """The accounting rules of a range of vLLM versions. Constants were calibrated once on the public
    startup logs in docs/calibration.md, era by era, never per model."""

    name: str
    v0: bool  # V0 engine: prefill profiled at max_model_len, no chunking below 32K
    logits_copies: float  # sampler / logits peak, in fp32 copies of max_num_seqs x vocab (V1 from 0.17: sampler.py's)
    hidden_copies: float  # profile-run activations, in copies of max_num_batched_tokens x hidden (16-bit)
    mlp_copies: float  # copies of max_num_batched_tokens x intermediate (16-bit), per TP rank
    # fitted bytes beside the peak (V0, v0.8-v0.16); from v0.17 beside the dummy forward only, and not derived: what
    # the compiled forward holds beyond its counted shapes, the cuBLAS workspace included (budget.activation_bytes)
    fixed_bytes: int
    non_torch_single: int
    # tensor parallel (with or without pipeline stages); None: one GPU's figure plus what the interconnect adds
    # (engines/vllm/interconnect.py tp_growth)
    non_torch_multi: int | None
    subtracts_cuda_graphs: bool
    default_utilization: float
    # The peak is the larger of the dummy forward's transients and the sampler's, not their sum: profile_run
    # (v1/worker/gpu_model_runner.py) frees the forward's intermediates before _dummy_sampler_run; the MoE
    # workspaces stay allocated across both (they are reused, not freed: moe_workspace.SharedWorkspace).
    peak_of_larger: bool = False
    # pipeline stages on one GPU each (TP 1); None: as non_torch_multi
    non_torch_pipeline: int | None = None

    def non_torch(self, tp: int, pp: int, growth: int = 0) -> int:
        """What grows outside torch during profiling on one rank: one GPU, pipeline stages alone, or TP (growth:
        what the interconnect adds beyond one GPU, where non_torch_multi is None)."""
        multi = self.non_torch_single + growth if self.non_torch_multi is None else self.non_torch_multi
        if tp > 1:
            return multi
        if pp > 1:
            return multi if self.non_torch_pipeline is None else self.non_torch_pipeline
        return self.non_torch_single


ERAS = (
    # (first version, era)
    ((0, 0), Era("V0 engine", True, 1.0, 0.0, 3.75, 0, int(0.35 * GiB), int(0.55 * GiB), False, 0.9)),
    # TP (and pipeline stages before v0.17): one GPU's figure plus NCCL's growth by interconnect (interconnect.py:
    # 0.13 + 0.42 = 0.55 GiB over NVLink, B03's v0.11 H100 TP 2; 0.13 + 0.08 = 0.21 GiB over PCIe, an L40S TP 4 log).
    ((0, 8), Era("V1, v0.8-v0.16", False, 9.52, 1.28, 0.0, int(0.025 * GiB), int(0.13 * GiB),
                 None, False, 0.9)),
    # Non-torch at TP > 1 from v0.17: one GPU's figure, NCCL's growth and, on NVSwitch Hopper and Blackwell, the
    # FlashInfer all-reduce fusion workspace the v0.17 compile pass creates (interconnect.py): 0.25 + 0.42 + 1.5 =
    # 2.17 GiB on the llm-d-planner v0.19 H100 sweep ("non-torch forward increase memory", data/calibration.yaml
    # L02-L03, L12-L14, L16-L18, L20-L21: 2.06-2.21 GiB at TP 2 and 4), 0.25 + 0.08 = 0.33 GiB over PCIe (L40S).
    # What vLLM counts (utils/mem_utils.py memory_profiling): what is allocated outside torch after the worker's
    # init snapshot, which gpu_worker.init_device takes after init_worker_distributed_environment (by v0.11
    # already): what the communicators allocate at start-up is not charged (it comes out of the 1 - utilization
    # margin), only what grows later.
    # v0.17+: the dummy forward over max_num_batched_tokens holds, at its widest (the MLP), the gate/up output
    # (2 x intermediate) and its activation (1 x), beside the residual, the normed input and the layer output
    # (3 x hidden), all 16-bit: derived from the shapes, not fitted. At the default 8,192 tokens it stays under
    # the sampler's peak on every v0.19 log (Llama-3.1-8B: 0.84 GiB against 1.88 GiB), which the logs measure.
    # Pipeline stages alone (TP 1) grow 0.07 GiB outside torch, not TP's figure: both llm-d-planner v0.19 PP logs
    # print "non-torch forward increase memory: 0.07GiB" on every stage (L10, L11: Llama-3.1-8B at PP 2 and 4).
    # One GPU: 0.13 GiB outside torch through v0.17, 0.25 GiB from v0.18, as llm-d-planner's version sweep prints it
    # (data/calibration.yaml V15-V18: "non-torch forward increase memory" 0.13, 0.13, 0.13, 0.25 GiB for
    # Qwen3-14B; every v0.19 log prints 0.24-0.27).
    # From v0.17 V1's sampler side is read in the source whole (sampler.py v1_sampler: NATIVE_COPIES, the Triton
    # buffer, the held hidden states, PyTorch's cuBLAS workspace), where the era had 3.79 copies fitted on the v0.19
    # H100 logs, and so is what MoE models hold beside both sides (budget.activation_bytes): the fused-MoE
    # workspace (moe_workspace.py: TritonExperts' workspace13 and workspace2 at max_num_batched_tokens, chunked at
    # 16,384 tokens in 0.17), in place of the copies of tokens x top-k x (hidden + expert width) fitted before.
    # Against the "torch peak memory increase" of the v0.19 H100 MoE logs: DeepSeek-V2-Lite 1.93 GiB (L01),
    # Llama-4-Scout TP 4 3.19 (L14), Mixtral-8x7B TP 2 1.21 (L16), Qwen3-30B-A3B 2.68 (L22); gpt-oss-20b's MXFP4
    # experts run a monolithic kernel that keeps nothing (L17: 2.87). The forward's 0.12 GiB beside its shapes is
    # kept, not derived (budget.activation_bytes says why): the logs whose peak is the forward's hold 0.05-0.23 GiB
    # more than its shapes and the cuBLAS workspace. Model Runner V2's sampler side keeps it too, standing for the
    # held hidden states and cuBLAS workspace its ProfileSampler does not count.
    ((0, 17), Era("V1, v0.17", False, NATIVE_COPIES, 3.0, 3.0, int(0.12 * GiB), int(0.13 * GiB),
                  None, False, 0.9, peak_of_larger=True, non_torch_pipeline=int(0.07 * GiB))),
    ((0, 18), Era("V1, v0.18-v0.19", False, NATIVE_COPIES, 3.0, 3.0, int(0.12 * GiB), int(0.25 * GiB),
                  None, False, 0.9, peak_of_larger=True, non_torch_pipeline=int(0.07 * GiB))),
    # v0.20+: VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS defaults to "1" and gpu_memory_utilization to 0.92 (vLLM 0.20.0
    # envs.py and config/cache.py; 0.19.0 has "0" and 0.9; the log's "default since v0.21.0" in gpu_worker.py is
    # wrong, issue 18 section 2.1; the oracle's 0.20.0 cases, tests/oracle/cases.jsonl, resolve 0.92), and
    # determine_available_memory subtracts the estimate from the budget (opt-in since PR #30515). The "consumed
    # memory" startup line folds it into its "peak activation" (transient peak + estimate), so engine-calibration
    # Y12's 28.88 - 15.03 - 1.59 = 12.26 GiB includes its 0.13 GiB estimate; its "0.09 GiB for CUDAGraph memory"
    # is the graphs' actual pool, captured after the KV cache and not subtracted.
    ((0, 20), Era("V1, v0.20+ (CUDA graphs profiled)", False, NATIVE_COPIES, 3.0, 3.0, int(0.12 * GiB),
                  int(0.25 * GiB), None, True, 0.92, peak_of_larger=True,
                  non_torch_pipeline=int(0.07 * GiB))),
)


def parse_version(text: str, where: str = "--vllm-version") -> tuple[int, int]:
    from kvplan.deployment.launch import version_tuple

    version = version_tuple(text)
    if version is None:
        raise KvplanError(f"cannot read {text!r} as a vLLM version; write e.g. 0.19 or 0.11.0", where)
    return version


def release_of(text: str) -> tuple[int, int, int]:
    """A release to its patch (0.20.1 -> (0, 20, 1)); without one, its first (0.20 -> (0, 20, 0))."""
    import re

    major, minor = parse_version(text)
    match = re.match(r"^v?\d+\.\d+\.(\d+)", text.strip())
    return major, minor, int(match.group(1)) if match else 0


def era_of(version: str, where: str = "--vllm-version") -> Era:
    wanted = parse_version(version, where)
    chosen = ERAS[0][1]
    for first, era in ERAS:
        if wanted >= first:
            chosen = era
    return chosen


RELEASES = Releases("vLLM", COVERED, changes=(
    Change((0, 8), "V1 engine: chunked prefill at max_num_batched_tokens, the sampler's peak (era 'V1, v0.8-v0.16')"),
    Change(PAGED_STATES_FROM, "recurrent states paged in the block pool (HybridAttentionMambaModelConfig)"),
    Change(SPARSE_FP8_DEFAULT_IN, "DeepSeek sparse attention turns kv_cache_dtype auto into fp8_ds_mla (PR #25988)"),
    Change((0, 17), "FlashInfer's all-reduce fusion workspace in the TP non-torch memory on NVSwitch Hopper / "
                    "Blackwell (0.17.0 config/vllm.py enable_allreduce_rms_fusion), MLP-width activation "
                    "(llm-d-planner's v0.19 sweep)"),
    Change(MLA_BLOCK_FROM_BACKEND, "MLA block size follows the attention backend (vllm#35122)"),
    Change(MAMBA_CACHE_MODES_FROM, "mamba_cache_mode none / align / all with --enable-prefix-caching on a hybrid "
                                   "(0.18.0 config/cache.py, models/config.py MambaModelConfig)"),
    Change(HYBRID_PREFIX_CACHING_FROM, "prefix caching on by default for hybrids: align, all for Mamba-2 families "
                                       "(0.26.0 config/model.py is_prefix_caching_supported)"),
    Change(ALIGN_FOR_ALL_FROM, "mamba_cache_mode align for every model (0.28.0 models/config.py)"),
    Change(PLATFORM_ALIGNMENT_FROM, "a hybrid's block aligns in max(kernel block, block size) steps (0.20.0 "
                                    "platforms/interface.py _align_hybrid_block_size)"),
    Change(GDN_CHECKPOINT_FROM, "FlashInfer GDN's 64-token checkpoints and checkpoint block; MLA hybrids in 128s "
                                "(0.33.0 platforms/interface.py, gdn_attn.py)"),
    Change((0, 20), "the CUDA-graph estimate comes out of the budget; utilization 0.92 (0.20.0 envs.py, "
                    "config/cache.py)"),
    Change((0, 9), "the 1,024-sequence batch defaults chosen by memory (>= 70 GiB), A100s left out (PR #17885)"),
    Change((0, 28), "a batch tier of 16,384 tokens on >= 160 GiB devices (PR #51726)"),
    Change(TOKENS_FROM_CONCURRENCY_FROM, "every model logs int(concurrency x max_model_len) as its KV cache size "
                                         "(0.20.1 v1/core/kv_cache_utils.py _report_kv_cache_config)"),
    Change(IN_FLIGHT_TOKENS_FROM, "window and chunked layers hold window - 1 + max_in_flight_tokens (0.26.0 "
                                  "v1/kv_cache_interface.py)"),
    Change(NULL_BLOCK_HELD_FROM, "the capacity check leaves the null block out (0.29.0 v1/core/kv_cache_utils.py)"),
    Change(CHUNKED_HYBRID_KV_ON_FROM, "VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE on by default (0.14.0 "
                                      "envs.py)"),
    Change(HYBRID_ALLOCATOR_FROM, "sliding-window and full layers in groups of their own (0.9.2; 0.8.5 "
                                  "unify_hybrid_kv_cache_specs makes them full)"),
    Change(SM100_CAPTURE_1024_FROM, "the largest default capture size is 1,024 on SM100 (0.28.0 config/vllm.py)"),
    Change(FLASHINFER_MLA_FROM, "FlashInfer MLA and 64-token blocks on SM100 for qk_nope_head_dim 128 (0.15.0 "
                                "platforms/cuda.py)"),
    Change(ANY_BLOCK_SIZE_FROM, "any --block-size > 0 that a backend's kernel block divides (0.18.0 "
                                "config/cache.py, v1/attention/backend.py supports_block_size)"),
    Change(GB10_SMALL_TIER_FROM, "GB10 (compute capability 12.1) keeps the small batch tier (0.33.0 "
                                 "engine/arg_utils.py get_batch_defaults)"),
    Change(V2_DEFAULT_FROM, "Model Runner V2 by default for DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES (0.22.0 "
                            "config/vllm.py; 0.25: every model without experts, 0.29: every model; runner.py), "
                            "and V2's profile_cudagraph_memory returns 0 (v1/worker/gpu/model_runner.py)"),
    Change(V2_PROFILES_NO_GRAPHS[1], "Model Runner V2 measures its CUDA-graph memory (0.29.0 "
                                     "v1/worker/gpu/cudagraph_utils.py profile_cudagraph_memory)"),
    Change(ROCM_GRAPH_ESTIMATE_FROM, "ROCm gets the CUDA-graph estimate too (0.26.0 v1/worker/gpu_worker.py: "
                                     "is_cuda_alike, 0.25.0 is_cuda)"),
    Change(V2_UNPROCESSED_LOGITS_FROM, "Model Runner V2's dummy sampler keeps the logits in the model dtype (0.27.0 "
                                       "v1/worker/gpu/sample/sampler.py), and memory_profiling counts its penalty and "
                                       "grammar buffers (utils/mem_utils.py total_consumed)"),
    Change(V1_TWO_PASS_FROM, "V1's dummy sampler: FlashInfer by default again (0.21.0 envs.py "
                             "VLLM_USE_FLASHINFER_SAMPLER), and a second pass through forward_native "
                             "(v1/worker/gpu_model_runner.py _dummy_sampler_run); sampler.py v1_sampler"),
    Change(DERIVED_FROM, "V1's profiled peak read in the source: the Triton top-k / top-p sampler's 3.5 float32 "
                         "copies and cached buffer of up to one row per SM (v1/sample/ops/topk_topp_triton.py), the "
                         "dummy run's hidden states held beside it, PyTorch's cuBLAS workspace, a later pipeline "
                         "stage's intermediate-tensor buffers (v1/worker/gpu_model_runner.py profile_run)"),
    Change(TRITON_ALL_ROWS_FROM, "V1's Triton top-k / top-p for every row count, not from 8 rows (0.30.0 "
                                 "v1/sample/ops/topk_topp_sampler.py apply_top_k_top_p)"),
    Change(OUTPUTS_PADDED_TO_BUDGET_FROM, "the encoder profile caches each dummy output padded to the encoder "
                                          "budget's rows (0.11.0 v1/worker/gpu_model_runner.py profile_run)"),
    Change(OUTPUTS_PADDED_TO_ITEM_FROM, "padded to the modality's maximum tokens per item instead (0.12.0 "
                                        "profile_run)"),
    Change(OUTPUTS_UNPADDED_FROM, "the dummy outputs cached as the encoder returns them (0.13.0 profile_run)"),
    Change(V2_TWO_PASS_FROM, "Model Runner V2's dummy sampler runs again with warm-up sampling parameters: "
                             "FlashInfer's top-k / top-p on float32 logits (0.33.0 v1/worker/gpu/model_runner.py "
                             "_dummy_sampler_run)"),
))

