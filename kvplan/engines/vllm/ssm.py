"""vLLM's dtype for the SSM state while --mamba-ssm-cache-dtype is auto, by version.

The general rule (mamba_utils.MambaStateDtypeCalculator): the SSM state as the conv state, in the served dtype,
unless the config names an SSM dtype (Qwen3.5's mamba_ssm_dtype). NemotronH has a config hook of its own
(model_executor/models/config.py, NemotronHForCausalLMConfig, keyed by the config's architecture):
- vllm#29978 (merged 2025-12-03): the config's mamba_ssm_cache_dtype, else float16. v0.12.0 was out by
  2025-12-04, cut before the merge, so v0.13.0 is taken as the first release with it.
- vllm#39032 (merged 2026-04-05): the fallback becomes float32, and the Nano VL V2 wrapper gets the same hook.
  v0.19.0 (released with Gemma 4's day-one support, early April 2026) was cut before it; no 0.19.x backport was
  found, so v0.20.0 is taken as the first release with it.
Before v0.13 NemotronH followed the general rule and did not read mamba_ssm_cache_dtype from its config."""

from __future__ import annotations

from dataclasses import dataclass

CONFIG_HOOK_FROM = (0, 13)
FLOAT32_FALLBACK_FROM = (0, 20)
NEMOTRON_H = frozenset({"NemotronHForCausalLM", "NemotronHPuzzleForCausalLM"})
NEMOTRON_H_VL = frozenset({"NemotronH_Nano_VL_V2"})  # hooked from vllm#39032 on
FLOAT16_BYTES = 2
FLOAT32_BYTES = 4


@dataclass(frozen=True)
class SsmDtype:
    """What an auto SSM dtype comes to: bytes every state takes whatever the config says (None: the config's),
    and bytes where the config names none (None: as the conv state)."""

    forced: int | None = None
    fallback: int | None = None


def auto_ssm_dtype(architecture: str, version: tuple[int, int], model_bytes: int) -> SsmDtype:
    hooked = architecture in NEMOTRON_H or (architecture in NEMOTRON_H_VL and version >= FLOAT32_FALLBACK_FROM)
    if not hooked:
        return SsmDtype()
    if version < CONFIG_HOOK_FROM:
        return SsmDtype(forced=model_bytes)
    return SsmDtype(fallback=FLOAT32_BYTES if version >= FLOAT32_FALLBACK_FROM else FLOAT16_BYTES)
