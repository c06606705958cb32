"""What SGLang's multimodal switches do to a deployment: --enable-multimodal, --language-only, --language-model-only
and --disaggregation-mode, read with the checkpoint's own config (defaults.py not_multimodal_reason, text_only_reason;
releases.py names the release each rule is read from). Three places read the result: the vision cut of the default
mem_fraction_static (budget.py), the prefill CUDA graphs' reserve (backend.py "multimodal model") and the towers a
rank builds (towers.py)."""

from __future__ import annotations

from kvplan.engines.base import PlanInput
from kvplan.engines.sglang.defaults import (
    MultimodalSwitches,
    language_model_only_refusal,
    language_only_refusal,
    not_multimodal_reason,
    text_only_reason,
)
from kvplan.engines.sglang.releases import QWEN3_VL_TOWER_SKIP_FROM, release_of
from kvplan.errors import KvplanError

# srt/models/qwen3_vl.py Qwen3VLForConditionalGeneration and the EntryClass names built on its __init__
# (qwen3_vl_moe.py Qwen3VLMoeForConditionalGeneration; qwen3_5.py Qwen3_5ForConditionalGeneration,
# Qwen3_5MoeForConditionalGeneration): self.visual is None where hf_config.language_model_only, which ModelConfig
# sets from is_lm_only (0.5.18-0.5.23 read; releases.py QWEN3_VL_TOWER_SKIP_FROM). srt/models/qwen2_5_vl.py builds
# its tower whatever the flags say (--language-only only skips checkpoint names it has no parameter for), and so
# does qwen3_vl.py under --language-only.
LM_ONLY_SKIPS_TOWER = frozenset({
    "Qwen3VLForConditionalGeneration", "Qwen3VLMoeForConditionalGeneration", "Qwen3_5ForConditionalGeneration",
    "Qwen3_5MoeForConditionalGeneration",
})


def switches(target: PlanInput) -> MultimodalSwitches:
    dep = target.deployment
    return MultimodalSwitches(enable_multimodal=dep.enable_multimodal, language_model_only=dep.language_model_only,
                              language_only=dep.language_only, disaggregation_mode=dep.disaggregation_mode)


def check(target: PlanInput) -> None:
    """SGLang's own refusals of --language-model-only and --language-only (defaults.language_model_only_refusal,
    language_only_refusal), as a KvplanError naming the flag."""
    dep, release = target.deployment, release_of(target.deployment.engine_version)
    if dep.language_model_only:
        why = language_model_only_refusal(target.spec.architecture, release, switches(target))
        if why is not None:
            raise KvplanError(why, dep.where("language_model_only"))
    if dep.language_only:
        why = language_only_refusal(target.spec.architecture, release)
        if why is not None:
            raise KvplanError(why, dep.where("language_only"))


def is_multimodal(target: PlanInput) -> bool:
    """ModelConfig.is_multimodal for this run, where the config has a tower (vision or audio); a model without one
    is taken as text-only (kvplan reads no tower to serve)."""
    tower = target.spec.tower
    if tower is None:
        return False
    return not_multimodal_reason(target.spec.architecture, tower, release_of(target.deployment.engine_version),
                                 switches(target)) is None


def text_only(target: PlanInput) -> str | None:
    """Why a model with a vision_config gets no vision cut of the default fraction in this run, or None."""
    tower = target.spec.tower
    if tower is None or tower.named_sizes is None:
        return None
    return text_only_reason(target.spec.architecture, tower, release_of(target.deployment.engine_version),
                            switches(target))


def tower_skipped(target: PlanInput) -> str | None:
    """Why no rank builds the towers in this run (LM_ONLY_SKIPS_TOWER under hf_config.language_model_only), or
    None where they are built."""
    tower, release = target.spec.tower, release_of(target.deployment.engine_version)
    if tower is None or target.spec.architecture not in LM_ONLY_SKIPS_TOWER or release < QWEN3_VL_TOWER_SKIP_FROM:
        return None
    if tower.language_model_only:
        return "config.json sets language_model_only"
    if target.deployment.language_model_only:
        return "--language-model-only"
    return None


def notes(target: PlanInput, fraction_given: bool) -> list[str]:
    """What the switches did, and what of them kvplan does not model."""
    dep, found = target.deployment, []
    reason = text_only(target)
    if not fraction_given and reason is not None:
        found.append(f"vision tower: SGLang keeps its default mem_fraction_static (no adjust_mem_fraction_for_vlm): "
                     f"{reason}")
    skipped = tower_skipped(target)
    if skipped is not None and target.spec.params.vision:
        found.append(f"towers: not built ({skipped}: {target.spec.architecture} sets visual None, qwen3_vl.py), "
                     f"so none of their {target.spec.params.vision:,} parameters is loaded")
    if dep.language_only and target.spec.params.vision:
        found.append("--language-only: the towers are loaded as without it (qwen2_5_vl.py and qwen3_vl.py build "
                     "them; other model files not read)")
    if dep.disaggregation_mode != "null":
        found.append(f"--disaggregation-mode {dep.disaggregation_mode}: read for the vision cut only; the role's "
                     "other changes to the default fraction (its activation and CUDA-graph reserves) and its KV "
                     "transfer buffers are not modelled")
    return found
