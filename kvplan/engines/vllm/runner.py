"""Which model runner vLLM picks, release by release (issue 18 section 2.2), read in each release wheel's
config/vllm.py (VllmConfig.use_v2_model_runner, _is_default_v2_model_runner_model,
_get_v2_model_runner_unsupported_features): VLLM_USE_V2_MODEL_RUNNER decides where set; otherwise a release's
default architectures (DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES) and model kinds take V2, and a feature V2 does not
support sends the model back to V1. What V2 changes in the budget is in V2_PROFILES_NO_GRAPHS and budget.py."""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.deployment import Deployment
from kvplan.engines.vllm.hybrid import mamba_cache_mode
from kvplan.models.model import ModelSpec
from kvplan.plan import GpuChoice

# V2 first defaults to on in 0.22.0 (0.21.0 envs.py: VLLM_USE_V2_MODEL_RUNNER "0", off unless set).
V2_DEFAULT_FROM = (0, 22)
# V2's GPUModelRunner.profile_cudagraph_memory (v1/worker/gpu/model_runner.py) returns 0 in 0.22.0-0.28.0; from
# 0.29.0 it captures and measures (v1/worker/gpu/cudagraph_utils.py profile_cudagraph_memory: PIECEWISE in full,
# FULL extrapolated from the largest few), so the estimate is back in the budget.
V2_PROFILES_NO_GRAPHS = ((0, 22), (0, 29))
_MOE_LIST = frozenset({"DeepseekV2ForCausalLM", "Qwen2MoeForCausalLM", "GraniteMoeForCausalLM"})
_INKLING = frozenset({"InklingForCausalLM", "InklingForConditionalGeneration", "LongcatFlashNgramForCausalLM"})


@dataclass(frozen=True)
class RunnerRule:
    """One range of releases: which models default to V2 and which features send them back to V1."""

    first: tuple[int, int]
    listed: frozenset[str]  # DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES
    dense: bool = False  # every non-MoE generative model too, hybrid and attention-free ones left out (0.25+)
    everyone: bool = False  # every model (0.29+: no default-model check left)
    listed_dense_only: bool = False  # 0.22-0.23: a listed model must be neither MoE nor quantized
    listed_hybrid: bool = False  # 0.27-0.28: a listed hybrid keeps V2
    no_states: bool = False  # 0.22: V2 refuses models with inner state ("hybrid/mamba models")
    speculative_ok: frozenset[str] | None = None  # the methods V2 runs; None: all but speculative_refused
    speculative_refused: frozenset[str] = frozenset()
    eagle3_pp_refused: bool = True  # "EAGLE3 with pipeline parallelism" (through 0.29)
    rocm_v1: frozenset[str] = frozenset()  # architectures kept on V1 on ROCm
    all_mode_refused: bool = False  # 0.30-0.31: "mamba cache mode 'all'" needs V1

    def v2(self, facts: ModelFacts, dep: Deployment, rocm: bool) -> tuple[bool, str]:
        """(V2 or not, why), as this range's use_v2_model_runner decides it."""
        if rocm and facts.architecture in self.rocm_v1:
            return False, f"{facts.architecture} stays on V1 on ROCm"
        listed = facts.architecture in self.listed
        if not self.everyone:
            if self.dense and (facts.attention_free or (facts.hybrid and not (listed and self.listed_hybrid))):
                return False, "hybrid and attention-free models default to V1"
            if listed and self.listed_dense_only and (facts.moe or facts.quantized):
                return False, "a listed architecture with experts or a quantization_config stays on V1 here"
            if not (listed or (self.dense and not facts.moe)):
                return False, f"{facts.architecture} is not among this release's V2 defaults"
        refused = self.refused(facts, dep)
        if refused:
            return False, f"V2 does not support {refused} in this release"
        if self.everyone:
            return True, "the default for every model from 0.29"
        return True, (f"{facts.architecture} is in DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES" if listed else
                      "the default for models without experts from 0.25")

    def refused(self, facts: ModelFacts, dep: Deployment) -> str | None:
        if self.no_states and facts.has_state:
            return "hybrid/Mamba models"
        if self.all_mode_refused and facts.mamba_cache_mode == "all":
            return "mamba cache mode 'all'"
        method = speculative_method(dep)
        if method:
            bad = method in self.speculative_refused or (self.speculative_ok is not None
                                                          and method not in self.speculative_ok)
            if bad:
                return f"speculative method {method!r}"
            if self.eagle3_pp_refused and method == "eagle3" and dep.pipeline_parallel_size > 1:
                return "EAGLE3 with pipeline parallelism"
        return None


@dataclass(frozen=True)
class ModelFacts:
    """What use_v2_model_runner asks of the model config."""

    architecture: str
    moe: bool  # ModelConfig.is_moe: any experts
    quantized: bool  # ModelConfig.is_quantized: a quantization_config in config.json
    has_state: bool  # has_inner_state: recurrent-state layers
    hybrid: bool  # is_hybrid: state layers beside attention
    attention_free: bool  # is_attention_free: state layers only
    mamba_cache_mode: str = "none"  # CacheConfig.mamba_cache_mode as resolved (engines/vllm/hybrid.py)

    @classmethod
    def of(cls, spec: ModelSpec, dep: Deployment, version: tuple[int, int]) -> ModelFacts:
        caches = [cache for layer in spec.layers for cache in layer.cache_layers()]
        state = any(cache.paged_state for cache in caches)
        attention = any(cache.holds_kv for cache in caches)
        return cls(spec.architecture, spec.moe is not None, spec.quantization is not None, state,
                   state and attention, state and not attention, mamba_cache_mode(spec, dep, version))


_SPEC_V22 = frozenset({"eagle", "eagle3", "mtp"})
_SPEC_V25 = _SPEC_V22 | {"dflash", "dspark"}
_REFUSED_V30 = frozenset({"ngram", "ngram_gpu", "draft_model", "suffix", "medusa", "mlp_speculator",
                          "custom_class"})
_ROCM_V1_29 = frozenset({"DeepseekV32ForCausalLM", "DeepseekV4ForCausalLM"})
RULES = (
    RunnerRule((0, 22), frozenset({"Qwen3ForCausalLM"}), listed_dense_only=True, no_states=True,
               speculative_ok=_SPEC_V22),
    RunnerRule((0, 23), frozenset({"LlamaForCausalLM", "MistralForCausalLM", "Qwen3ForCausalLM"}),
               listed_dense_only=True, speculative_ok=_SPEC_V22),
    RunnerRule((0, 24), _MOE_LIST | {"Qwen3ForCausalLM", "LlamaForCausalLM", "MistralForCausalLM"},
               speculative_ok=_SPEC_V22 | {"dflash"}),
    RunnerRule((0, 25), _MOE_LIST, dense=True, speculative_ok=_SPEC_V25),
    RunnerRule((0, 26), _MOE_LIST | _INKLING, dense=True, speculative_ok=_SPEC_V25),
    RunnerRule((0, 27), _MOE_LIST | _INKLING | {"KimiK3ForConditionalGeneration"}, dense=True, listed_hybrid=True,
               speculative_ok=_SPEC_V25, rocm_v1=frozenset({"KimiK3ForConditionalGeneration"})),
    RunnerRule((0, 28), _MOE_LIST | _INKLING | {"KimiK3ForConditionalGeneration", "DeepseekV4ForCausalLM"},
               dense=True, listed_hybrid=True, speculative_ok=_SPEC_V25,
               rocm_v1=frozenset({"DeepseekV4ForCausalLM"})),
    RunnerRule((0, 29), frozenset(), everyone=True, speculative_ok=_SPEC_V25 | {"extract_hidden_states"},
               rocm_v1=_ROCM_V1_29),
    RunnerRule((0, 30), frozenset(), everyone=True, speculative_refused=_REFUSED_V30, eagle3_pp_refused=False,
               rocm_v1=_ROCM_V1_29 | {"GlmMoeDsaForCausalLM"}, all_mode_refused=True),
    RunnerRule((0, 31), frozenset(), everyone=True, speculative_refused=_REFUSED_V30 - {"draft_model"},
               eagle3_pp_refused=False, rocm_v1=_ROCM_V1_29 | {"GlmMoeDsaForCausalLM"}, all_mode_refused=True),
    RunnerRule((0, 32), frozenset(), everyone=True, eagle3_pp_refused=False,
               speculative_refused=frozenset({"suffix", "medusa", "mlp_speculator", "custom_class"})),
    RunnerRule((0, 33), frozenset(), everyone=True, eagle3_pp_refused=False,
               speculative_refused=frozenset({"suffix", "custom_class"})),
)


def speculative_method(dep: Deployment) -> str:
    """The speculative method vLLM resolves: the one named, else draft_model for a draft model
    (config/speculative.py SpeculativeConfig.__post_init__); empty without speculative decoding."""
    config = dep.speculative_config or {}
    method = str(config.get("method") or "").lower()
    return method or ("draft_model" if config.get("model") else "")


def is_rocm(gpu: GpuChoice) -> bool:
    """An AMD Instinct GPU, by its architecture in the catalogue (gfx90a, gfx942, gfx950)."""
    return (gpu.compute_capability or "").startswith("gfx")


@dataclass(frozen=True)
class Runner:
    v2: bool
    why: str

    @property
    def name(self) -> str:
        return "V2" if self.v2 else "V1"


def model_runner(spec: ModelSpec, dep: Deployment, gpu: GpuChoice, version: tuple[int, int]) -> Runner:
    """The runner the release picks for this deployment."""
    if dep.v2_model_runner is not None:
        return Runner(dep.v2_model_runner, "VLLM_USE_V2_MODEL_RUNNER given")
    rule = next((rule for rule in reversed(RULES) if version >= rule.first), None)
    if rule is None:
        return Runner(False, "V2 only with VLLM_USE_V2_MODEL_RUNNER=1 before 0.22")
    return Runner(*rule.v2(ModelFacts.of(spec, dep, version), dep, is_rocm(gpu)))


def profiles_graphs(v2: bool, version: tuple[int, int]) -> bool:
    """Whether the runner's profile_cudagraph_memory gives an estimate: V1 always, V2 from 0.29."""
    first, last = V2_PROFILES_NO_GRAPHS
    return not (v2 and first <= version < last)


# v1/worker/gpu_worker.py determine_available_memory asks for the estimate on CUDA only through 0.25.0 (0.20.0:
# "not current_platform.is_rocm()", 0.25.0: "current_platform.is_cuda()"), and on CUDA and ROCm from 0.26.0
# (current_platform.is_cuda_alike(); 0.32.0 adds XPU, which kvplan's catalogue does not hold).
ROCM_GRAPH_ESTIMATE_FROM = (0, 26)


def graph_estimate_on(gpu: GpuChoice, version: tuple[int, int]) -> bool:
    """Whether the worker asks this platform for a CUDA-graph estimate at all (issue 18 section 2.3): NVIDIA
    GPUs (and unknown ones, taken as CUDA), ROCm from 0.26; never Gaudi, whose plugin has a worker of its own."""
    capability = gpu.compute_capability or ""
    if is_rocm(gpu):
        return version >= ROCM_GRAPH_ESTIMATE_FROM
    return not capability or capability[0].isdigit()


def runner_notes(spec: ModelSpec, dep: Deployment, gpu: GpuChoice, version: tuple[int, int]) -> list[str]:
    """The runner chosen and why, from the release V2 is a default in (or where the switch is given), and a
    platform the worker asks no graph estimate of."""
    notes = []
    if version >= V2_DEFAULT_FROM or dep.v2_model_runner is not None:
        runner = model_runner(spec, dep, gpu, version)
        note = f"vLLM model runner {runner.name}: {runner.why}"
        if not profiles_graphs(runner.v2, version):
            note += " (V2's profile_cudagraph_memory returns 0 before 0.29: no CUDA-graph estimate)"
        notes.append(note)
    if not graph_estimate_on(gpu, version):
        notes.append(f"no CUDA-graph estimate on {gpu.name}: vLLM's GPU worker asks CUDA only"
                     + (" before 0.26 (ROCm from 0.26)" if is_rocm(gpu) else ""))
    return notes
