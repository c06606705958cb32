"""SGLang's server_args defaults that size the memory: chunked_prefill_size and the decode CUDA-graph batch by GPU
size, and mem_fraction_static from the MiB it reserves for activations, CUDA graphs and parallel buffers, each by
release (releases.py names the release of every change).

Sources (the sglang wheels on PyPI): python/sglang/srt/server_args.py _handle_gpu_memory_settings (0.5.9-0.5.18),
arg_groups/memory_hook.py handle_gpu_memory_settings and reserve_for_graph_mb (0.5.19-0.5.23),
arg_groups/cuda_graph_hook.py generate_prefill_cuda_graph_batch_sizes (0.5.10 server_args.py
_generate_piecewise_cuda_graph_tokens: the same sizes), arg_groups/attention_hook.py (aiter).
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.engines.sglang.releases import (
    CONFIG_LANGUAGE_MODEL_ONLY_FROM,
    DECODE_NO_VISION_CUT_FROM,
    EAGLE_RESERVE_4_GIB_FROM,
    INKLING_MULTIMODAL_OFF_FROM,
    LANGUAGE_MODEL_ONLY_FLAG_FROM,
    LARGER_20_35_GIB_DEFAULTS_FROM,
    MIMO_V2_TEXT_ONLY_FROM,
    MULTIMODAL_SUBCONFIG_FROM,
    PREFILL_GRAPHS_FROM,
    UNKNOWN_GPU_095_FROM,
    release_of,
)
from kvplan.models.towers import VisionTower

NEWEST = release_of(None)
# (GPU memory below this many MiB, chunked_prefill_size, cuda_graph_max_bs at TP < 4, at TP >= 4)
_GPU_BUCKETS = (
    (20 * 1024, 2048, 8, 8),  # T4, 4080
    (35 * 1024, 2048, 24, 80),  # A10, 4090, 5090 (0.5.9-0.5.19)
    (60 * 1024, 4096, 32, 160),  # A100 40GB, L40
    (90 * 1024, 8192, 256, 512),  # H100, A100 80GB
    (160 * 1024, 8192, 256, 512),  # H20, H200
)
_20_35_GIB_FROM_0_5_20 = (35 * 1024, 4096, 48, 160)  # memory_hook.py: 32 GB Blackwell holds graphs past 24
_LARGEST_GPU = (16384, 512)  # B200, MI300: one choice at every TP
MLA_PREFILL_GRAPHS_MIB = 1536  # reserve_for_graph_mb: an MLA backend's prefill graphs, whatever their sizes
PREFILL_GRAPH_MIB = 8  # per captured prefill size (non-torch memory only: the capture reuses torch's)
MAX_PREFILL_TOKENS = 16384  # server_args' max_prefill_tokens: the activation's tokens with chunked prefill off (-1)
# arg_groups/attention_hook.py (and 0.5.9 server_args.py _handle_attention_backend_compatibility): the aiter backend
# scales mem_fraction_static, given or not, by 0.85 above 8K of context, for its non-static workspace
AITER_FRACTION = 0.85
AITER_ABOVE_CONTEXT = 8192


def gpu_defaults(gpu_mib: float, tp: int, release: tuple[int, ...] = NEWEST) -> tuple[int, int]:
    """server_args' chunked_prefill_size and decode cuda_graph_max_bs for a GPU of gpu_mib MiB."""
    for below, chunked, small_tp, large_tp in _GPU_BUCKETS:
        if below == 35 * 1024 and release >= LARGER_20_35_GIB_DEFAULTS_FROM:
            below, chunked, small_tp, large_tp = _20_35_GIB_FROM_0_5_20
        if gpu_mib < below:
            return chunked, small_tp if tp < 4 else large_tp
    return _LARGEST_GPU


def prefill_graph_sizes(max_tokens: int) -> int:
    """How many token counts the prefill CUDA graphs capture up to max_tokens (generate_prefill_cuda_graph_batch_sizes:
    4 to 32 by 4, 48 to 256 by 16, 288 to 512 by 32, 576 to 1024 by 64, 1280 to 4096 by 256, then by 512)."""
    steps = ((4, 32, 4), (48, 256, 16), (288, 512, 32), (576, 1024, 64), (1280, 4096, 256), (4608, max_tokens, 512))
    return sum(len(range(first, min(last, max_tokens) + 1, step)) for first, last, step in steps)


def prefill_graph_mib(chunked: int, mla: bool, captured: bool = True) -> float:
    """reserve_for_graph_mb's prefill term: 8 MiB a captured size (sizes up to the chunked prefill size; none with
    chunking off), 1.5 GiB with an MLA backend; nothing where no prefill graph is captured."""
    if not captured:
        return 0.0
    return float(MLA_PREFILL_GRAPHS_MIB) if mla else float(prefill_graph_sizes(chunked) * PREFILL_GRAPH_MIB)


def speculative_mib(speculative: str | None, release: tuple[int, ...] = NEWEST) -> int:
    """The draft's reserve in the default fraction until 0.5.13: a standalone draft model 6 GiB, EAGLE / MTP heads 2 GiB
    (4 GiB from 0.5.10), n-gram lookup none; from 0.5.14 the draft is in the profiled memory instead (releases.py)."""
    from kvplan.engines.sglang.releases import DRAFT_IN_POOL_FROM

    if speculative is None or release >= DRAFT_IN_POOL_FROM or speculative.upper() == "NGRAM":
        return 0
    if speculative.upper() == "STANDALONE":
        return 6 * 1024
    return 4 * 1024 if release >= EAGLE_RESERVE_4_GIB_FROM else 2 * 1024


def default_mem_fraction(gpu_mib: float, tp: int, pp: int, chunked: int, graph_bs: int,
                         attention_dp: int = 1, speculative: str | None = None, release: tuple[int, ...] = NEWEST,
                         prefill_mib: float = 0.0) -> float:
    """server_args' mem_fraction_static when none is given: reserve MiB for activations (1.5 a token of the chunked
    prefill, at least 2048 tokens), decode CUDA graphs (2 a batch entry, more under attention DP), prefill CUDA
    graphs (prefill_mib, from 0.5.10) and parallel buffers; at least 10 GiB on GPUs above 60 GiB; then the draft's
    reserve (until 0.5.13)."""
    reserved = 512 + max(chunked, 2048) * 1.5 + graph_bs * 2 + tp * pp / 8 * 1024
    if attention_dp > 1:
        reserved += graph_bs * attention_dp * 3 + (graph_bs * attention_dp * 1.5 if graph_bs > 300 else 0)
    if release >= PREFILL_GRAPHS_FROM:
        reserved += prefill_mib
    if gpu_mib > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    reserved += speculative_mib(speculative, release)
    return round((gpu_mib - reserved) / gpu_mib, 3)


# adjust_mem_fraction_for_vlm reads getattr(vision_config, "num_hidden_layers", 24) and getattr(vision_config,
# "hidden_size", 1024) on the transformers config SGLang loads: a key the config.json gives, else the default of the
# vision config class where the class declares that attribute, else SGLang's own 24 and 1024.
VIT_L_LAYERS, VIT_L_HIDDEN = 24, 1024


@dataclass(frozen=True)
class ClassSizes:
    """What one transformers vision config class answers for the two attributes when config.json leaves them out:
    its declared default, or None where it declares no such attribute (so SGLang's default is read)."""

    name: str
    layers: int | None
    hidden: int | None


# By the wrapper's model_type, as read in transformers 5.19.0 (SGLang 0.5.23's pin; 5.6.0 for 0.5.11 and 4.57.1 for
# 0.5.9 have the same fields): the Qwen-VL towers name their depth `depth`, so num_hidden_layers is not an attribute.
VISION_CLASS_SIZES = {
    "qwen2_vl": ClassSizes("Qwen2VLVisionConfig", None, 3584),  # configuration_qwen2_vl.py: depth 32, embed_dim 1280
    "qwen2_5_vl": ClassSizes("Qwen2_5_VLVisionConfig", None, 3584),  # configuration_qwen2_5_vl.py: depth 32
    "qwen3_vl": ClassSizes("Qwen3VLVisionConfig", None, 1152),  # configuration_qwen3_vl.py: depth 27
    "gemma3": ClassSizes("SiglipVisionConfig", 12, 768),  # configuration_siglip.py
    "gemma4": ClassSizes("Gemma4VisionConfig", 16, 768),  # configuration_gemma4.py
}


@dataclass(frozen=True)
class VisionFractionCut:
    """adjust_mem_fraction_for_vlm, applied to the default mem_fraction_static only (never to a given one) of a
    model SGLang treats as multimodal with a vision_config: the same rule in 0.5.9 and 0.5.11 (server_args.py
    ServerArgs.adjust_mem_fraction_for_vlm), 0.5.19 and 0.5.23 (arg_groups/memory_hook.py). 0.5.23's branch that
    takes a flat 8 GiB instead runs only under post-capture KV sizing, off by default
    (SGLANG_ENABLE_POST_CAPTURE_KV_SIZING False, environ.py)."""

    layers: int
    hidden: int
    layers_from: str  # where each figure comes from: the config, the class's default, or SGLang's
    hidden_from: str

    @property
    def complexity(self) -> float:
        """The tower's layers x hidden^2 over ViT-L/14's 24 x 1024^2."""
        return self.layers * self.hidden ** 2 / (VIT_L_LAYERS * VIT_L_HIDDEN ** 2)

    def apply(self, fraction: float) -> float:
        return vlm_mem_fraction(fraction, self.layers, self.hidden)

    def note(self, before: float) -> str:
        return (f"vision tower: SGLang lowers its default mem_fraction_static {before} to {self.apply(before)} "
                f"(adjust_mem_fraction_for_vlm: {self.layers} layers ({self.layers_from}) x hidden "
                f"{self.hidden:,}^2 ({self.hidden_from}) = {self.complexity:.4f} x ViT-L/14's 24 x 1024^2; x 0.95 x "
                "(1 - 0.1 x (that - 1)), kept within 0.8-1.05)")


def vision_fraction_cut(named_layers: int | None, named_hidden: int | None, wrapper: str) -> VisionFractionCut:
    """The two figures adjust_mem_fraction_for_vlm reads for a tower: config.json's keys, else the class's."""
    sizes = VISION_CLASS_SIZES.get(wrapper)

    def figure(given: int | None, key: str, declared: int | None, sglang: int) -> tuple[int, str]:
        if given is not None:
            return given, f"vision_config {key}"
        if sizes is None:
            return sglang, f"SGLang's default; vision_config has no {key} and the {wrapper!r} class's default is not read"
        if declared is None:
            return sglang, f"SGLang's default: {sizes.name} has no {key}"
        return declared, f"{sizes.name}'s default"

    layers, layers_from = figure(named_layers, "num_hidden_layers", sizes.layers if sizes else None, VIT_L_LAYERS)
    hidden, hidden_from = figure(named_hidden, "hidden_size", sizes.hidden if sizes else None, VIT_L_HIDDEN)
    return VisionFractionCut(layers, hidden, layers_from, hidden_from)


def vlm_mem_fraction(fraction: float, vit_layers: int = 24, vit_hidden_size: int = 1024) -> float:
    """server_args' adjust_mem_fraction_for_vlm: a default fraction lowered for a vision tower, by 5% and by 10% per
    doubling of its layers x hidden^2 over a ViT-L/14's (24 x 1024^2), the second factor kept within 0.8-1.05."""
    complexity = vit_layers * vit_hidden_size ** 2 / (24 * 1024 ** 2)
    factor = 0.95 * max(0.8, min(1.05, 1.0 - 0.1 * (complexity - 1.0)))
    return fraction * factor  # in SGLang's order of operations: the logs print this float exactly


def unknown_gpu_fraction(release: tuple[int, ...] = NEWEST) -> float:
    """mem_fraction_static where server_args has no GPU memory size (gpu_mem None): 0.88 until 0.5.19, 0.95 from
    0.5.20 (releases.py UNKNOWN_GPU_095_FROM)."""
    return 0.95 if release >= UNKNOWN_GPU_095_FROM else 0.88


# SGLang 0.5.23 configs/model_config.py multimodal_model_archs (MIMO_V2_MULTIMODAL_ARCHS included). Each earlier
# release's list (0.5.9 to 0.5.22, each compared) holds a subset of these names, and none of the names it lacks is an
# architecture kvplan's architectures.json gives that release, so one list serves them all.
MULTIMODAL_ARCHS = frozenset({
    "BailingMM2NativeForConditionalGeneration", "BailingMMNativeForConditionalGeneration",
    "BailingMoeV3VLForConditionalGeneration", "CLIPModel", "Cohere2VisionForConditionalGeneration",
    "Cosmos3EdgeForConditionalGeneration", "DeepseekOCRForCausalLM", "DeepseekVL2ForCausalLM",
    "DiffusionGemmaForBlockDiffusion", "Dots3NoteForCausalLM", "DotsOCRForCausalLM", "DotsVLMForCausalLM",
    "EmbeddingGemma2Model", "Ernie4_5_VLMoeForConditionalGeneration", "Gemma3ForConditionalGeneration",
    "Gemma3nForConditionalGeneration", "Gemma4ForConditionalGeneration", "Gemma4UnifiedForConditionalGeneration",
    "Glm4vForConditionalGeneration", "Glm4vMoeForConditionalGeneration", "Glm5NextForConditionalGeneration",
    "GlmAsrForConditionalGeneration", "GlmImageForConditionalGeneration", "GlmOcrForConditionalGeneration",
    "Grok1AForCausalLM", "Grok1VForCausalLM", "InternS1ForConditionalGeneration",
    "InternS1ProForConditionalGeneration", "InternS2MobiusForConditionalGeneration",
    "InternS2PreviewForConditionalGeneration", "InternVLChatModel", "JetVLMForConditionalGeneration",
    "KimiK25ForConditionalGeneration", "KimiVLForConditionalGeneration", "Lfm2VlForConditionalGeneration",
    "LightOnOCRForConditionalGeneration", "Llama4ForConditionalGeneration", "LlavaForConditionalGeneration",
    "LlavaLlamaForCausalLM", "LlavaMistralForCausalLM", "LlavaQwenForCausalLM", "LlavaVidForCausalLM",
    "LocateAnythingForConditionalGeneration", "MiDashengLMModel", "MiMoV2ASRForCausalLM", "MiMoV2ForCausalLM",
    "MiniCPMO", "MiniCPMV", "MiniMaxM3SparseForConditionalGeneration", "Mistral3ForConditionalGeneration",
    "MllamaForConditionalGeneration", "MossVLForConditionalGeneration", "MultiModalityCausalLM",
    "MuseGlimmerForConditionalGeneration", "MuseSparkForConditionalGeneration", "NVILAForConditionalGeneration",
    "NVILALiteForConditionalGeneration", "NemotronH_Nano_Omni_Reasoning_V3", "NemotronH_Nano_VL_V2",
    "NemotronH_Omni_Reasoning_V3", "POINTSV15ChatModel", "PaddleOCRVLForConditionalGeneration", "Phi4MMForCausalLM",
    "PixtralForConditionalGeneration", "Qwen2AudioForConditionalGeneration", "Qwen2VLForConditionalGeneration",
    "Qwen2_5_VLForConditionalGeneration", "Qwen3ASRForConditionalGeneration", "Qwen3OmniMoeForConditionalGeneration",
    "Qwen3VLForConditionalGeneration", "Qwen3VLMoeForConditionalGeneration", "Qwen3_5ForConditionalGeneration",
    "Qwen3_5MoeForConditionalGeneration", "Qwen4ExpForConditionalGeneration", "Sarashina2VisionForCausalLM",
    "Step3VLForConditionalGeneration", "Step3p7ForConditionalGeneration", "StepVLForConditionalGeneration",
    "UnlimitedOCRForCausalLM", "VoxtralForConditionalGeneration", "WhisperForConditionalGeneration",
})
# ModelConfig.__init__'s mm_disabled_models: with --enable-multimodal left unset (and the default model_impl) these
# are served text-only, so their vision_config lowers no fraction; by the first release that lists each
MULTIMODAL_OFF_BY_DEFAULT = {
    "Gemma3ForConditionalGeneration": (0, 0, 0), "Llama4ForConditionalGeneration": (0, 0, 0),
    "Step3VLForConditionalGeneration": (0, 0, 0), "InklingForConditionalGeneration": INKLING_MULTIMODAL_OFF_FROM,
}
MIMO_V2_ARCHS = frozenset({"MiMoV2ForCausalLM"})  # model_config.py MIMO_V2_MULTIMODAL_ARCHS


@dataclass(frozen=True)
class MultimodalSwitches:
    """The run's flags SGLang reads in deciding whether a model is multimodal and whether its default fraction takes
    the vision cut (releases.py names the release each is read from)."""

    enable_multimodal: bool = False  # --enable-multimodal (store_true: SGLang's None when not given)
    language_model_only: bool = False  # --language-model-only, from 0.5.18
    language_only: bool = False  # --language-only: the language side of encoder disaggregation
    disaggregation_mode: str = "null"  # --disaggregation-mode


NO_SWITCHES = MultimodalSwitches()


def not_multimodal_reason(architecture: str, tower: VisionTower, release: tuple[int, ...] = NEWEST,
                          switches: MultimodalSwitches = NO_SWITCHES) -> str | None:
    """Why SGLang's ModelConfig.is_multimodal (configs/model_config.py __init__) is False for a config with a tower,
    None where it is True: enable_multimodal (given: on; left unset: off for MULTIMODAL_OFF_BY_DEFAULT and, from
    0.5.12, for a MiMoV2ForCausalLM without both vision_config and audio_config), not is_lm_only (from 0.5.18
    config.json's language_model_only or --language-model-only), and the architecture in multimodal_model_archs
    or (from 0.5.10) a text sub-config (hf_config is not hf_text_config)."""
    if not switches.enable_multimodal:
        off_from = MULTIMODAL_OFF_BY_DEFAULT.get(architecture)
        if off_from is not None and release >= off_from:
            return f"{architecture} is served text-only unless --enable-multimodal is given (model_config.py)"
        if (architecture in MIMO_V2_ARCHS and release >= MIMO_V2_TEXT_ONLY_FROM
                and not (tower.has_vision and tower.has_audio)):
            return (f"{architecture} without both vision_config and audio_config is served text-only "
                    "(model_config.py)")
    if tower.language_model_only and release >= CONFIG_LANGUAGE_MODEL_ONLY_FROM:
        return "config.json sets language_model_only (model_config.py is_lm_only)"
    if switches.language_model_only and release >= LANGUAGE_MODEL_ONLY_FLAG_FROM:
        return "--language-model-only (model_config.py is_lm_only)"
    if architecture in MULTIMODAL_ARCHS:
        return None
    if tower.text_subconfig and release >= MULTIMODAL_SUBCONFIG_FROM:
        return None
    return (f"{architecture or 'the architecture'} is not in SGLang's multimodal_model_archs"
            + ("" if tower.text_subconfig else " and the config nests no text sub-config")
            + " (model_config.py is_multimodal)")


def text_only_reason(architecture: str, tower: VisionTower, release: tuple[int, ...] = NEWEST,
                     switches: MultimodalSwitches = NO_SWITCHES) -> str | None:
    """Why SGLang does not run adjust_mem_fraction_for_vlm for a config with a vision_config (None where it does):
    the model is not multimodal (not_multimodal_reason), or the run is --language-only (every release read),
    --disaggregation-mode decode (from 0.5.17: the encoder runs on the prefill side) or --language-model-only (from
    0.5.18; releases.py DECODE_NO_VISION_CUT_FROM, LANGUAGE_MODEL_ONLY_FLAG_FROM)."""
    reason = not_multimodal_reason(architecture, tower, release, switches)
    if reason is not None:
        return reason
    if switches.language_only:
        return "--language-only: the encoder runs on another server (server_args.py)"
    if switches.disaggregation_mode == "decode" and release >= DECODE_NO_VISION_CUT_FROM:
        return "--disaggregation-mode decode: the encoder runs on the prefill side (server_args.py)"
    return None


# server_args.py LANGUAGE_MODEL_ONLY_ARCHITECTURES, the architectures --language-model-only is taken for
# (_handle_language_model_only, 0.5.18; arg_groups/model_hook.py handle_language_model_only from 0.5.19): by the
# first release that lists each (0.5.18-0.5.23 read). Any other architecture is refused.
LANGUAGE_MODEL_ONLY_ARCHITECTURES = {
    "MuseGlimmerForConditionalGeneration": LANGUAGE_MODEL_ONLY_FLAG_FROM,
    "Cosmos3ForConditionalGeneration": (0, 5, 20), "Cosmos3EdgeForConditionalGeneration": (0, 5, 20),
    "DeepseekV4ForCausalLM": (0, 5, 22),
}


def language_model_only_refusal(architecture: str, release: tuple[int, ...], switches: MultimodalSwitches) -> str | None:
    """Why SGLang refuses --language-model-only for this run (None where it takes it): no such flag before 0.5.18;
    then _handle_language_model_only's checks: not with --language-only, not with --disaggregation-mode prefill or
    decode (0.5.23 lets deepseek_v41 through: not a model_type kvplan plans), and only for
    LANGUAGE_MODEL_ONLY_ARCHITECTURES."""
    if release < LANGUAGE_MODEL_ONLY_FLAG_FROM:
        return "SGLang has this flag from 0.5.18 (server_args.py)"
    if switches.language_only:
        return "SGLang refuses it with --language-only (server_args.py _handle_language_model_only)"
    if switches.disaggregation_mode != "null":
        return ("SGLang refuses it with --disaggregation-mode prefill/decode (server_args.py "
                "_handle_language_model_only)")
    first = LANGUAGE_MODEL_ONLY_ARCHITECTURES.get(architecture)
    if first is None or release < first:
        taken = sorted(name for name, since in LANGUAGE_MODEL_ONLY_ARCHITECTURES.items() if release >= since)
        return (f"SGLang {'.'.join(map(str, release))} does not take it for {architecture or 'this model'} "
                f"(LANGUAGE_MODEL_ONLY_ARCHITECTURES: {', '.join(taken)})")
    return None


# The architectures --language-only (and --encoder-only) is taken for, by the first release that lists each
# (_handle_encoder_disaggregation: 0.5.10-0.5.18 server_args.py, 0.5.19-0.5.23 arg_groups/pd_disaggregation_hook.py
# handle_encoder_disaggregation, each release read); 0.5.9 has no such check. Any other architecture is refused.
ENCODER_DISAGGREGATION_FROM = (0, 5, 10)
ENCODER_DISAGGREGATION_ARCHITECTURES = {
    **dict.fromkeys(("Qwen2VLForConditionalGeneration", "Qwen3VLForConditionalGeneration",
                     "Qwen2_5_VLForConditionalGeneration", "Qwen3VLMoeForConditionalGeneration",
                     "Qwen3OmniMoeForConditionalGeneration", "Qwen2AudioForConditionalGeneration",
                     "Qwen2_5OmniForConditionalGeneration"), ENCODER_DISAGGREGATION_FROM),
    **dict.fromkeys(("Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration",
                     "KimiVLForConditionalGeneration", "KimiK25ForConditionalGeneration"), (0, 5, 11)),
    "InternS2PreviewForConditionalGeneration": (0, 5, 12), "MiMoV2ForCausalLM": (0, 5, 13),
    "KimiK3ForConditionalGeneration": (0, 5, 17), "Dots3NoteForCausalLM": (0, 5, 19),
    "Glm5NextForConditionalGeneration": (0, 5, 20), "MiniMaxM3SparseForConditionalGeneration": (0, 5, 23),
    "MuseSparkForConditionalGeneration": (0, 5, 23),
}


def language_only_refusal(architecture: str, release: tuple[int, ...]) -> str | None:
    """Why SGLang refuses --language-only for this architecture (None where it takes it): from 0.5.10, any
    architecture outside ENCODER_DISAGGREGATION_ARCHITECTURES ("is not supported for encoder disaggregation")."""
    first = ENCODER_DISAGGREGATION_ARCHITECTURES.get(architecture)
    if release < ENCODER_DISAGGREGATION_FROM or (first is not None and release >= first):
        return None
    return (f"SGLang {'.'.join(map(str, release))} does not support encoder disaggregation for "
            f"{architecture or 'this model'} (server_args.py _handle_encoder_disaggregation)")
