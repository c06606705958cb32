"""SGLang's releases as kvplan knows them, and the release in which each rule kvplan models changed. The rules were
read in the wheels of 0.5.9 to 0.5.23 (each boundary below is the first release whose code has the new rule, the
release before it read too); the flag catalogue (flags.py) records each removal by the first release without it, over
the wheels from 0.4.6 on, which is where this table starts. Releases before 0.5.9 take 0.5.9's rules: 0.5.6.post2 was
read for the default fraction (server_args.py _handle_gpu_memory_settings) and the Mamba pool's memory-ratio rule
(model_runner.py profile_max_num_token, handle_max_mamba_cache), which are 0.5.9's (its speculative and
--disable-radix-cache branches differ and are not modelled); its other rules, and 0.5.7's and 0.5.8's, were not
read."""

from __future__ import annotations

from kvplan.deployment.launch import release_tuple
from kvplan.engines.releases import Change, Releases

COVERED = (
    "0.4.6", "0.4.7", "0.4.8", "0.4.9", "0.4.10", "0.5.1", "0.5.2", "0.5.3", "0.5.4", "0.5.5", "0.5.6", "0.5.7",
    "0.5.8", "0.5.9", "0.5.10", "0.5.11", "0.5.12", "0.5.13", "0.5.14", "0.5.15", "0.5.16", "0.5.17", "0.5.18",
    "0.5.19", "0.5.20", "0.5.21", "0.5.22", "0.5.23",
)

# Piecewise CUDA graphs for prefill are on by default (0.5.10 server_args.py: disable_piecewise_cuda_graph False;
# 0.5.9: enable_piecewise_cuda_graph False), and the default fraction reserves 8 MiB per captured token size, 1.5 GiB
# with an MLA backend (_handle_gpu_memory_settings). What turns them off changes release by release
# (backend.py _OFF_WHEN): speculative decoding in 0.5.10, attention DP and LoRA until 0.5.16, MLA in 0.5.15-0.5.17.
PREFILL_GRAPHS_FROM = (0, 5, 10)
# The EAGLE / MTP draft's reserve in the default fraction: 2 GiB in 0.5.9, 4 GiB in 0.5.10-0.5.13 (server_args.py
# _handle_gpu_memory_settings; STANDALONE 6 GiB, NGRAM none, in both).
EAGLE_RESERVE_4_GIB_FROM = (0, 5, 10)
# 0.5.14 model_executor/pool_configurator.py DefaultPoolConfigurator: the target's cell grows by the draft's layers
# (cell x (1 + draft layers / layers)) and the draft's weights are in the profiled memory ("draft weights are now
# counted", model_runner_kv_cache_mixin.py); the speculative reserve is gone from server_args.py. Before, the draft
# worker loads after the target's pool is sized and takes as many tokens (draft_runner_cache_size) from the reserve.
DRAFT_IN_POOL_FROM = (0, 5, 14)
# max_running_requests by default: 0.5.9 model_runner_kv_cache_mixin.py init_memory_pool clamp(tokens / context x
# 512, 2048, 4096); 0.5.10 _resolve_max_num_reqs also at most tokens // 2, a given value // attention DP and at most
# the estimate; 0.5.14 a given value // attention DP and at most tokens // 2.
HALF_POOL_REQUESTS_FROM = (0, 5, 10)
GIVEN_REQUESTS_HALF_POOL_FROM = (0, 5, 14)
# 0.5.11 model_executor/pool_configurator.py HybridSWAPoolConfigurator: the cell is F + ratio x S and its tokens are
# the full pool's, so --max-total-tokens caps the full pool directly; 0.5.9-0.5.10 cap all layers' tokens and then
# re-split them (set_num_tokens_hybrid_swa, _resolve_hybrid_swa_tokens).
SWA_FULL_POOL_CELL_FROM = (0, 5, 11)
# 0.5.14 server_args.py _handle_mamba_radix_cache: mamba_radix_cache_strategy auto is extra_buffer with the overlap
# scheduler on for the architectures that support it (0.5.9-0.5.13: auto is no_buffer).
MAMBA_EXTRA_BUFFER_FROM = (0, 5, 14)
# 0.5.17 mem_cache/kv_cache_configurator.py _handle_max_mamba_cache: the Mamba slots chosen by the memory ratio are
# int((budget - state) // state) and the rest loses (slots + 1) states, the pool's padding slot included; 0.5.6.post2
# model_runner.py and 0.5.9 model_executor/model_runner_kv_cache_mixin.py handle_max_mamba_cache, 0.5.14 and 0.5.16
# take int(budget // state) slots and slots x state from the rest, so the padding slot comes out of the held-back
# memory.
MAMBA_PADDING_SLOT_BUDGETED_FROM = (0, 5, 17)
# 0.5.20 arg_groups/memory_hook.py handle_gpu_memory_settings: 20-35 GiB cards get chunked prefill 4096 and decode
# graph batch 48 (TP < 4) or 160 (0.5.19: 2048 and 24 or 80).
LARGER_20_35_GIB_DEFAULTS_FROM = (0, 5, 20)
# mem_fraction_static where server_args finds no GPU memory size (gpu_mem None): 0.88 in 0.5.9-0.5.18 server_args.py
# _handle_gpu_memory_settings and 0.5.19 arg_groups/memory_hook.py, 0.95 from 0.5.20 (memory_hook.py
# handle_gpu_memory_settings, 0.5.20-0.5.23 read).
UNKNOWN_GPU_095_FROM = (0, 5, 20)
# What makes SGLang's ModelConfig.is_multimodal (configs/model_config.py), on which adjust_mem_fraction_for_vlm
# runs: 0.5.9 the architecture list alone; from 0.5.10 a text sub-config too (has_multimodal_subconfig); from
# 0.5.12 a MiMoV2ForCausalLM without both vision_config and audio_config is text-only; from 0.5.16
# InklingForConditionalGeneration is multimodal only with --enable-multimodal; from 0.5.18 config.json's
# language_model_only makes it text-only (is_lm_only). Each release from 0.5.9 to 0.5.23 read.
MULTIMODAL_SUBCONFIG_FROM = (0, 5, 10)
MIMO_V2_TEXT_ONLY_FROM = (0, 5, 12)
INKLING_MULTIMODAL_OFF_FROM = (0, 5, 16)
CONFIG_LANGUAGE_MODEL_ONLY_FROM = (0, 5, 18)
# The run's flags on that cut (the test before adjust_mem_fraction_for_vlm: 0.5.9-0.5.18 server_args.py
# _handle_gpu_memory_settings, 0.5.19 arg_groups/memory_hook.py, 0.5.20-0.5.23 its is_vlm): --language-only skips it
# in every release read; --disaggregation-mode decode from 0.5.17; --language-model-only from 0.5.18, the release
# that adds the flag (server_args.py _handle_language_model_only, ModelConfig's language_model_only argument, which
# also makes is_lm_only). --enable-multimodal, --language-only and --disaggregation-mode are in every release read.
DECODE_NO_VISION_CUT_FROM = (0, 5, 17)
LANGUAGE_MODEL_ONLY_FLAG_FROM = (0, 5, 18)
# srt/models/qwen3_vl.py Qwen3VLForConditionalGeneration.__init__ (and the classes built on it: qwen3_vl_moe.py,
# qwen3_5.py) sets visual None, no tower built, where hf_config.language_model_only: from 0.5.18 (0.5.9-0.5.17's
# qwen3_vl.py has no such branch; 0.5.18-0.5.23 read).
QWEN3_VL_TOWER_SKIP_FROM = (0, 5, 18)

# KV cache dtypes --kv-cache-dtype takes from a release on (0.5.16 server_args.py choices; 0.5.15: auto, fp8_e5m2,
# fp8_e4m3, bf16, bfloat16, fp4_e2m1)
KV_DTYPES_FROM = {"mxfp8": (0, 5, 16), "nvfp4": (0, 5, 16), "fp4_mx_block16": (0, 5, 16)}

RELEASES = Releases("SGLang", COVERED, changes=(
    Change(PREFILL_GRAPHS_FROM, "piecewise prefill CUDA graphs on by default; the default fraction reserves 8 MiB "
                                "a captured size, 1.5 GiB for MLA (0.5.10 server_args.py)"),
    Change(EAGLE_RESERVE_4_GIB_FROM, "the EAGLE / MTP reserve in the default fraction is 4 GiB (0.5.10 "
                                     "server_args.py)"),
    Change(HALF_POOL_REQUESTS_FROM, "max_running_requests at most tokens // 2 (0.5.10 "
                                    "model_runner_kv_cache_mixin.py _resolve_max_num_reqs)"),
    Change(GIVEN_REQUESTS_HALF_POOL_FROM, "a given max_running_requests // attention DP, at most tokens // 2 (0.5.14 "
                                          "model_runner_kv_cache_mixin.py _resolve_max_num_reqs)"),
    Change(SWA_FULL_POOL_CELL_FROM, "hybrid SWA: the cell is F + ratio x S, --max-total-tokens caps the full pool "
                                    "(0.5.11 pool_configurator.py)"),
    Change(DRAFT_IN_POOL_FROM, "the draft's KV in the target's cell and its weights in the profile, no speculative "
                               "reserve (0.5.14 pool_configurator.py, server_args.py)"),
    Change((0, 5, 11), "prefill CUDA graphs kept with speculative decoding (0.5.11 server_args.py "
                       "_handle_piecewise_cuda_graph)"),
    Change((0, 5, 15), "the breakable prefill graph backend by default on CUDA, off for MLA, LoRA, attention DP "
                       "(0.5.15 cuda_graph_config.py, server_args.py)"),
    Change((0, 5, 17), "prefill CUDA graphs kept with LoRA, attention DP and DeepSeek sparse attention (0.5.17 "
                       "server_args.py _disable_breakable_cudagraph_if_incompatible)"),
    Change((0, 5, 18), "prefill CUDA graphs kept with MLA (0.5.18 server_args.py)"),
    Change((0, 5, 19), "prefill CUDA graphs off with pipeline parallelism (0.5.19 arg_groups/cuda_graph_hook.py)"),
    Change(MAMBA_PADDING_SLOT_BUDGETED_FROM, "the Mamba pool's padding slot is budgeted out of the rest memory: "
                                             "int((budget - state) // state) slots (0.5.17 "
                                             "kv_cache_configurator.py _handle_max_mamba_cache)"),
    Change(MAMBA_EXTRA_BUFFER_FROM, "Mamba radix cache auto is extra_buffer (5 state slots a running request) "
                                    "(0.5.14 server_args.py)"),
    Change((0, 5, 16), "--kv-cache-dtype mxfp8, nvfp4 and fp4_mx_block16 (0.5.16 server_args.py)"),
    Change(LARGER_20_35_GIB_DEFAULTS_FROM, "20-35 GiB cards: chunked prefill 4096, decode graph batch 48 / 160 "
                                           "(0.5.20 arg_groups/memory_hook.py)"),
    Change(UNKNOWN_GPU_095_FROM, "mem_fraction_static 0.95 where the GPU's memory size is not known (0.88 before; "
                                 "0.5.20 arg_groups/memory_hook.py)"),
    Change(MULTIMODAL_SUBCONFIG_FROM, "a text sub-config makes a model multimodal, so its vision_config lowers the "
                                      "default fraction (0.5.10 configs/model_config.py)"),
    Change(MIMO_V2_TEXT_ONLY_FROM, "MiMoV2ForCausalLM without vision_config and audio_config is text-only (0.5.12 "
                                   "configs/model_config.py)"),
    Change(INKLING_MULTIMODAL_OFF_FROM, "InklingForConditionalGeneration multimodal only with --enable-multimodal "
                                        "(0.5.16 configs/model_config.py)"),
    Change(CONFIG_LANGUAGE_MODEL_ONLY_FROM, "config.json's language_model_only makes the model text-only: no "
                                            "vision cut of the default fraction (0.5.18 configs/model_config.py)"),
    Change(DECODE_NO_VISION_CUT_FROM, "--disaggregation-mode decode: no vision cut of the default fraction "
                                      "(0.5.17 server_args.py)"),
    Change(LANGUAGE_MODEL_ONLY_FLAG_FROM, "--language-model-only (0.5.18 server_args.py); Qwen3-VL and Qwen3.5 "
                                          "build no vision tower where config.json sets language_model_only "
                                          "(0.5.18 models/qwen3_vl.py)"),
))


def release_of(version: str | None) -> tuple[int, ...]:
    """The release a deployment runs (the newest covered where none is given), as numbers to the patch; a major.minor
    stands for its first release (0.5 -> (0, 5, 0))."""
    parts = release_tuple(version or RELEASES.newest) or (0,)
    return parts + (0,) * (3 - len(parts))
