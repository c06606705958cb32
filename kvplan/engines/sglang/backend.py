"""What SGLang picks for a deployment before it sizes memory: the default attention backend on ROCm (aiter, which lowers
mem_fraction_static above 8K of context) and whether prefill CUDA graphs are captured (their reserve), by release."""

from __future__ import annotations

from collections.abc import Callable

from kvplan.engines.base import PlanInput
from kvplan.engines.sglang.multimodal import is_multimodal
from kvplan.engines.sglang.releases import PREFILL_GRAPHS_FROM, release_of
from kvplan.models.layers import has_compressed_attention
from kvplan.models.model import ModelSpec
from kvplan.plan import GpuChoice

# The KV heads per rank aiter's MLA kernels take (model_override_base.py _default_attention_backend, 0.5.23; 0.5.9
# server_args.py _handle_attention_backend the same): at any other count an MLA model on ROCm runs triton.
AITER_MLA_HEADS = (16, 128)


def is_rocm(gpu: GpuChoice) -> bool:
    """An AMD Instinct GPU, by its architecture in the catalogue (gfx90a, gfx942, gfx950)."""
    return (gpu.compute_capability or "").startswith("gfx")


def uses_mla(spec: ModelSpec) -> bool:
    """ModelConfig's use_mla_backend: the model caches one latent a token (MLA, DeepSeek sparse attention)."""
    return any(layer.latent_cache for layer in spec.layers)


def aiter_default(target: PlanInput) -> bool:
    """Whether SGLang's default attention backend is aiter: on ROCm for every MHA model, and for MLA where
    get_num_kv_heads(tp) is 16 or 128. For MLA, SGLang reads the config's num_key_value_heads, which DeepSeek's MLA
    configs set to num_attention_heads (the spec keeps the latter). A --attention-backend given is not read."""
    if not is_rocm(target.gpu):
        return False
    if not uses_mla(target.spec):
        return True
    return max(1, target.spec.num_attention_heads // target.deployment.tensor_parallel_size) in AITER_MLA_HEADS


# The multimodal architectures whose prefill graphs the release's default backend keeps all the same (the rule's
# "and not is_multimodal_*_cuda_graph_supported", configs/model_config.py), by the first release of each list:
# 0.5.10-0.5.13 none (_handle_piecewise_cuda_graph tests is_multimodal alone); 0.5.14 the piecewise default's
# multimodal_piecewise_cuda_graph_supported_model_archs; 0.5.15 none (the breakable default's rule tests
# is_multimodal alone); from 0.5.16 multimodal_breakable_cuda_graph_supported_model_archs (0.5.16-0.5.23 each read),
# each release's list the one before's with the names it adds
_BREAKABLE_0516 = frozenset({"Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration"})
_BREAKABLE_0518 = _BREAKABLE_0516 | {"InternS2MobiusForConditionalGeneration", "MuseGlimmerForConditionalGeneration",
                                     "KimiK3ForConditionalGeneration", "KimiK25ForConditionalGeneration"}
_BREAKABLE_0519 = _BREAKABLE_0518 | {"Cohere2VisionForConditionalGeneration", "PaddleOCRVLForConditionalGeneration"}
_BREAKABLE_0520 = _BREAKABLE_0519 | {"Glm5NextForConditionalGeneration"}
_BREAKABLE_0522 = _BREAKABLE_0520 | {"Qwen4ExpForConditionalGeneration", "MiniMaxM3SparseForCausalLM",
                                     "MiniMaxM3SparseForConditionalGeneration"}
_GRAPHS_KEPT_FOR: tuple[tuple[tuple[int, ...], frozenset[str]], ...] = (
    ((0, 5, 10), frozenset()),
    ((0, 5, 14), frozenset({"Cohere2VisionForConditionalGeneration"})),
    ((0, 5, 15), frozenset()),
    ((0, 5, 16), _BREAKABLE_0516),
    ((0, 5, 18), _BREAKABLE_0518),
    ((0, 5, 19), _BREAKABLE_0519),
    ((0, 5, 20), _BREAKABLE_0520),
    ((0, 5, 22), _BREAKABLE_0522),
    ((0, 5, 23), _BREAKABLE_0522 | {"MuseSparkForConditionalGeneration"}),
)


def _multimodal_without_graphs(target: PlanInput) -> bool:
    """The rule's "multimodal model": ModelConfig.is_multimodal for this run (multimodal.is_multimodal: the
    architecture list, --enable-multimodal, is_lm_only), unless the release keeps the architecture's graphs."""
    if not is_multimodal(target):
        return False
    release = release_of(target.deployment.engine_version)
    kept = next(names for first, names in reversed(_GRAPHS_KEPT_FOR) if release >= first)
    return target.spec.architecture not in kept


def _offloads(target: PlanInput) -> bool:
    return bool(target.deployment.cpu_offload_gb) or target.deployment.enable_hierarchical_cache


_CONDITIONS: dict[str, Callable[[PlanInput], bool]] = {
    "speculative decoding": lambda target: bool(target.deployment.speculative_config),
    "attention DP": lambda target: (target.deployment.attention_data_parallel_size or 1) > 1,
    "pipeline parallelism": lambda target: target.deployment.pipeline_parallel_size > 1,
    "LoRA": lambda target: target.deployment.enable_lora,
    "multimodal model": _multimodal_without_graphs,
    "CPU offload or HiCache": _offloads,
    "MLA": lambda target: uses_mla(target.spec),
    "MLA without DeepSeek sparse attention": lambda target: uses_mla(target.spec) and not any(
        layer.kernel_block_size for layer in target.spec.layers),
    "DeepSeek-V4": lambda target: has_compressed_attention(target.spec.layers),
}
# What turns the default prefill CUDA graphs off, from each release to the next (ROCm: always, below):
# 0.5.10 server_args.py _handle_piecewise_cuda_graph; 0.5.11-0.5.14 the same list without speculative decoding
# (0.5.14 _disable_tc_piecewise_cudagraph_if_incompatible); 0.5.15 the breakable backend by default on CUDA
# (model_executor/cuda_graph_config.py default_prefill_backend) with _disable_breakable_cudagraph_if_incompatible's
# rules; 0.5.17 MLA only without DSA; 0.5.18 multimodal only; 0.5.19 pipeline parallelism again
# (arg_groups/cuda_graph_hook.py apply_cuda_graph_compatibility; 0.5.23 the same).
_OFF_WHEN = (
    ((0, 5, 10), ("speculative decoding", "attention DP", "pipeline parallelism", "LoRA", "multimodal model",
                  "CPU offload or HiCache")),
    ((0, 5, 11), ("attention DP", "pipeline parallelism", "LoRA", "multimodal model", "CPU offload or HiCache")),
    ((0, 5, 15), ("MLA", "LoRA", "attention DP", "multimodal model")),
    ((0, 5, 17), ("MLA without DeepSeek sparse attention", "multimodal model")),
    ((0, 5, 18), ("multimodal model",)),
    ((0, 5, 19), ("multimodal model", "pipeline parallelism")),
    # 0.5.23 disable_breakable_cudagraph_if_incompatible: DeepSeek-V4 too ("heavy capture-pool memory pressure");
    # kvplan plans DeepSeek-V4 on SGLang 0.5.23 only (compressed.py), so the releases before were not read for it
    ((0, 5, 23), ("multimodal model", "pipeline parallelism", "DeepSeek-V4")),
)


def prefill_graphs_captured(target: PlanInput, release: tuple[int, ...]) -> bool:
    """Whether the default fraction reserves prefill CUDA graphs: from 0.5.10 on CUDA unless one of the release's
    conditions (_OFF_WHEN) holds. ROCm captures none the reserve counts (0.5.10-0.5.21 turn piecewise graphs off on
    HIP; 0.5.22+ default_prefill_backend is disabled off CUDA). 0.5.23's rarer rules (decode context parallel,
    two-batch overlap, DeepSeek-V3 on trtllm_mla, 0.5.17's NemotronH) are not modelled; its DeepSeek-V4 rule is."""
    if release < PREFILL_GRAPHS_FROM or is_rocm(target.gpu):
        return False
    conditions = next(names for first, names in reversed(_OFF_WHEN) if release >= first)
    return not any(_CONDITIONS[name](target) for name in conditions)
