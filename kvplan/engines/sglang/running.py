"""SGLang's max_running_requests once the pool is sized, by release: the requests one attention-DP rank runs at once,
and, for a Mamba hybrid, the state slots each running request takes.

Sources (the sglang wheels): 0.5.9 model_executor/model_runner_kv_cache_mixin.py init_memory_pool and its
MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO; 0.5.10 _resolve_max_num_reqs; 0.5.23 mem_cache/kv_cache_configurator.py
resolve_max_num_reqs and _calculate_mamba_ratio, mem_cache/allocation_sizing.py get_mamba_tracking_slots,
arg_groups/overrides.py _mamba_radix_cache_resolution and _MAMBA_EXTRA_BUFFER_ARCHS.
"""

from __future__ import annotations

from kvplan.engines.sglang.releases import (
    GIVEN_REQUESTS_HALF_POOL_FROM,
    HALF_POOL_REQUESTS_FROM,
    MAMBA_EXTRA_BUFFER_FROM,
)

# Requests a pool of `tokens` tokens runs by default: tokens / context_len x 512, within 2,048-4,096
ESTIMATE_PER_CONTEXT, ESTIMATE_FLOOR, ESTIMATE_CEILING = 512, 2048, 4096
# State slots per running request with the radix cache on (no extra buffer); 1 with --disable-radix-cache
MAMBA_SLOTS_NO_BUFFER = 3
# the extra_buffer strategy's tracking slots with the overlap scheduler on (its default)
MAMBA_EXTRA_BUFFER_SLOTS = 2
# The architectures whose mamba_radix_cache_strategy auto resolves to extra_buffer (with the triton linear-attention
# backend, the default): 0.5.14 server_args.py _support_mamba_cache_extra_buffer; 0.5.23 _MAMBA_EXTRA_BUFFER_ARCHS
# adds the rest (0.5.15-0.5.22 were not read for it: they take 0.5.14's list).
EXTRA_BUFFER_0_5_14 = frozenset({
    "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration", "Qwen3NextForCausalLM",
    "InternS2PreviewForConditionalGeneration", "MiniCPMV4_6ForConditionalGeneration", "BailingMoeV2_5ForCausalLM",
    "FalconH1ForCausalLM", "GraniteMoeHybridForCausalLM", "NemotronHForCausalLM", "NemotronHPuzzleForCausalLM"})
EXTRA_BUFFER_0_5_23 = EXTRA_BUFFER_0_5_14 | {
    "KimiLinearForCausalLM", "Qwen3_5MoeForCausalLM", "Qwen3_5ForCausalLM", "Qwen4ExpForConditionalGeneration",
    "MiniCPMV4_7ForConditionalGeneration", "BailingMoeV3ForCausalLM", "BailingMoeV3VLForConditionalGeneration",
    "Glm5NextForConditionalGeneration", "NemotronH_Omni_Reasoning_V3", "KimiK3ForConditionalGeneration",
    "InklingForConditionalGeneration", "InklingForConditionalGenerationMTP"}


def extra_buffer(architecture: str, release: tuple[int, ...], radix_cache: bool = True) -> bool:
    """Whether the radix cache's Mamba strategy resolves to extra_buffer (0.5.9-0.5.13: auto is no_buffer; none
    without the radix cache, model_override_base.py mamba_extra_buffer_of)."""
    if release < MAMBA_EXTRA_BUFFER_FROM or not radix_cache:
        return False
    return architecture in (EXTRA_BUFFER_0_5_23 if release >= (0, 5, 23) else EXTRA_BUFFER_0_5_14)


def mamba_slots_per_request(architecture: str, release: tuple[int, ...], radix_cache: bool = True) -> int:
    """_calculate_mamba_ratio: 3 state slots a running request, 2 more with the extra buffer; 1 with
    --disable-radix-cache."""
    if not radix_cache:
        return 1
    return MAMBA_SLOTS_NO_BUFFER + (MAMBA_EXTRA_BUFFER_SLOTS if extra_buffer(architecture, release) else 0)


def running_requests(tokens: int, context_len: int, given: int | None, attention_dp: int,
                     release: tuple[int, ...]) -> int:
    """max_running_requests per attention-DP rank for a pool of `tokens`: by default clamp(tokens / context x 512,
    2048, 4096), from 0.5.10 also at most tokens // 2; a given value as is in 0.5.9, from 0.5.10 divided by attention
    DP and at most the estimate, from 0.5.14 at most tokens // 2 instead."""
    estimate = int(tokens / context_len * ESTIMATE_PER_CONTEXT) if context_len else ESTIMATE_CEILING
    estimate = max(min(estimate, ESTIMATE_CEILING), ESTIMATE_FLOOR)
    if release < HALF_POOL_REQUESTS_FROM:
        return given if given is not None else estimate
    if given is None:
        return min(estimate, tokens // 2)
    per_rank = max(1, given // attention_dp)
    return min(per_rank, tokens // 2) if release >= GIVEN_REQUESTS_HALF_POOL_FROM else min(per_rank, estimate)
