"""Rules that need the model and the GPU besides the Deployment: what the engine refuses at startup, worded as
the engine words it, each error naming the knob as the user gave it."""

from __future__ import annotations

from kvplan.deployment.declaration import Deployment
from kvplan.errors import PARALLEL_SPLIT, KvplanError
from kvplan.models.model import ModelSpec
from kvplan.plan import GpuChoice

# Speculative methods of vLLM's SpeculativeConfig (vllm/config/speculative.py), besides the per-model "*_mtp".
SPECULATIVE_METHODS = ("ngram", "ngram_gpu", "eagle", "eagle3", "medusa", "mlp_speculator", "draft_model", "mtp",
                       "suffix", "extract_hidden_states", "dflash")
# Methods whose drafter adds no KV-cache layers: n-gram and suffix lookup, and heads on the target's own states.
NO_DRAFT_LAYERS = ("ngram", "ngram_gpu", "suffix", "medusa", "mlp_speculator")
NEEDS_DRAFT_MODEL = ("eagle", "eagle3", "medusa", "mlp_speculator", "draft_model", "dflash")
SPECULATIVE_KEYS = ("method", "model", "num_speculative_tokens", "draft_tensor_parallel_size", "quantization",
                    "moe_backend", "attention_backend", "max_model_len", "revision", "code_revision",
                    "disable_by_batch_size", "disable_padded_drafter_batch", "use_local_argmax_reduction",
                    "prompt_lookup_max", "prompt_lookup_min", "speculative_token_tree", "parallel_drafting",
                    "suffix_decoding_max_tree_depth", "suffix_decoding_max_cached_requests",
                    "suffix_decoding_max_spec_factor", "suffix_decoding_min_token_prob", "rejection_sample_method",
                    "draft_sample_method", "enforce_eager", "draft_load_config")
MAX_SPECULATIVE_TOKENS = 1024  # far beyond any tree or chain in use; a bound on absurd input
# --quantization values that load a checkpoint of the given method with another kernel, as vLLM allows.
COMPATIBLE_OVERRIDES = {"awq": ("awq_marlin", "marlin", "moe_wna16"), "gptq": ("gptq_marlin", "gptq_bitblas", "marlin",
                                                                            "gptq_marlin_24", "moe_wna16"),
                        "fp8": ("fbgemm_fp8",), "compressed-tensors": (), "modelopt": ("modelopt_fp4",)}

# --quantization methods whose settings come from the checkpoint (AutoAWQConfig, GPTQConfig and their Marlin
# kernels: get_config_filenames quantize_config.json / quant_config.json); fp8 and the other online methods
# quantize a full-precision checkpoint themselves.
CHECKPOINT_METHODS = ("awq", "awq_marlin", "gptq", "gptq_marlin", "marlin", "gptq_marlin_24", "gptq_bitblas")


def check(dep: Deployment, spec: ModelSpec, gpu: GpuChoice) -> list[str]:
    """Refuses what the engine refuses; returns notes on what it accepts but kvplan does not read."""
    _parallel(dep, spec)
    _chunk(dep)
    _quantization(dep, spec)
    _fp8_capability(dep, gpu)
    _dtype(dep, gpu)
    return _speculative(dep)


def _chunk(dep: Deployment) -> None:
    """A step of at least one token, or the value the engine's dialect takes for chunked prefill off (SGLang's
    --chunked-prefill-size -1)."""
    from kvplan import registry

    value, off = dep.max_num_batched_tokens, registry.dialect(dep.engine).unchunked_prefill
    if value is not None and value < 1 and value != off:
        allowed = "at least 1" + (f", or {off} for no chunked prefill" if off is not None else "")
        raise KvplanError(f"must be {allowed}, got {value}", dep.where("max_num_batched_tokens"))


def _parallel(dep: Deployment, spec: ModelSpec) -> None:
    """vLLM's ModelConfig.verify_with_parallel_config, and the divisions its parallel linear layers assert."""
    tp, where = dep.tensor_parallel_size, dep.where("tensor_parallel_size")
    heads = spec.num_attention_heads
    if heads and heads % tp:
        raise KvplanError(f"Total number of attention heads ({heads}) must be divisible by tensor parallel size "
                          f"({tp}).", where, PARALLEL_SPLIT)
    kv_heads = max((layer.kv_heads for layer in spec.kv_layers if not layer.latent_cache), default=0)
    if kv_heads and (tp % kv_heads if tp >= kv_heads else kv_heads % tp):
        raise KvplanError(f"the {kv_heads} KV heads and tensor parallel size {tp} must divide one another (vLLM's "
                          "QKVParallelLinear shards or replicates whole KV heads)", where, PARALLEL_SPLIT)
    widths = [("intermediate size", spec.intermediate_size)]
    if spec.moe is not None:
        widths = [("expert intermediate size", spec.moe.expert_intermediate_size)]
    for label, width in widths:
        if width and width % tp:
            raise KvplanError(f"{width} is not divisible by {tp}: the model's {label} must split evenly over "
                              "the tensor-parallel ranks", where, PARALLEL_SPLIT)
    if dep.pipeline_parallel_size > spec.num_layers:
        raise KvplanError(f"pipeline parallel size ({dep.pipeline_parallel_size}) exceeds the model's "
                          f"{spec.num_layers} layers", dep.where("pipeline_parallel_size"), PARALLEL_SPLIT)


def _quantization(dep: Deployment, spec: ModelSpec) -> None:
    """vLLM ModelConfig._verify_quantization: a --quantization that contradicts the checkpoint is refused; one
    that reads its settings from the checkpoint refuses a checkpoint that has none (vLLM 0.33
    weight_utils.get_quant_config: no quantization_config in config.json and no quantize_config.json)."""
    if dep.quantization is None:
        return
    if spec.quantization is None and dep.quantization.lower() in CHECKPOINT_METHODS:
        raise KvplanError(f"Cannot find the config file for {dep.quantization.lower()}: the checkpoint is not "
                          "quantized (its config.json has no quantization_config); serve a checkpoint quantized "
                          "with it, or leave --quantization out",
                          dep.where("quantization"))
    if spec.quantization is None:
        return
    stored = spec.quantization.method.lower()
    wanted = dep.quantization.lower()
    if wanted == stored or wanted in COMPATIBLE_OVERRIDES.get(stored, ()):
        return
    raise KvplanError(f"Quantization method specified in the model config ({stored}) does not match the "
                      f"quantization method specified in the `quantization` argument ({wanted}).",
                      dep.where("quantization"))


def _speculative(dep: Deployment) -> list[str]:
    """SpeculativeConfig's own checks; returns notes for keys it does not know."""
    import difflib

    config = dep.speculative_config
    if config is None:
        return []
    where = dep.where("speculative_config")
    notes = []
    for key in config:
        if key in SPECULATIVE_KEYS:
            continue
        close = difflib.get_close_matches(str(key), SPECULATIVE_KEYS, n=1, cutoff=0.75)
        if close:
            raise KvplanError(f"unknown key {key!r:.40}; did you mean {close[0]!r}?", where)
        notes.append(f"speculative_config key {key!r:.40} is not one kvplan knows; ignored")
    method = config.get("method")
    model = config.get("model")
    if method is None and model is None:
        raise KvplanError("needs a 'method' (or a draft 'model'): e.g. {\"method\": \"eagle\", \"model\": ..., "
                          "\"num_speculative_tokens\": 3}", where)
    known = isinstance(method, str) and (method in SPECULATIVE_METHODS or method.endswith("_mtp"))
    if method is not None and not known:
        raise KvplanError(f"unknown method {method!r:.40}; choose from {', '.join(SPECULATIVE_METHODS)} or a "
                          "model's *_mtp", where)
    if model is not None and (not isinstance(model, str) or not model.strip()):
        raise KvplanError(f"'model' must be a model id or path, got {model!r:.40}", where)
    if method in NEEDS_DRAFT_MODEL and model is None:
        raise KvplanError(f"method {method!r} needs a draft 'model' (its weights and layers)", where)
    tokens = config.get("num_speculative_tokens")
    if tokens is not None and (isinstance(tokens, bool) or not isinstance(tokens, int)
                               or not 1 <= tokens <= MAX_SPECULATIVE_TOKENS):
        raise KvplanError(f"'num_speculative_tokens' must be a positive integer up to {MAX_SPECULATIVE_TOKENS}, got "
                          f"{tokens!r:.40}", where)
    if tokens is None and method in ("ngram", "ngram_gpu", "suffix"):
        # Other methods may take the count from the draft model's config; n-gram lookup has no config.
        raise KvplanError(f"'num_speculative_tokens' is required for the {method} method", where)
    return notes


# vLLM's Fp8Config.get_min_capability (and is_fp8_marlin_supported, its weight-only fallback): 80 through v0.13.0,
# 75 from v0.14.0 (read in each release wheel: 0.10.1, 0.11.0-0.11.2, 0.12.0, 0.13.0 return 80; 0.14.0, 0.15.0,
# 0.20.0, 0.25.0, 0.30.0, 0.33.0 return 75).
FP8_MIN_CAPABILITY = (((0, 0), 80), ((0, 14), 75))


def _fp8_capability(dep: Deployment, gpu: GpuChoice) -> None:
    """vLLM VllmConfig._get_quantization_config: --quantization fp8 below the method's minimum capability."""
    from kvplan import registry
    from kvplan.deployment.launch import version_tuple

    if dep.engine != registry.DEFAULT or (dep.quantization or "").lower() != "fp8" or not gpu.compute_capability:
        return
    version = version_tuple(dep.engine_version) if dep.engine_version else None
    needed = [minimum for first, minimum in FP8_MIN_CAPABILITY if version is None or version[:2] >= first][-1]
    major, _, minor = gpu.compute_capability.partition(".")
    have = int(major) * 10 + int(minor or 0) if major.isdigit() and (minor or "0").isdigit() else None
    if have is not None and have < needed:
        raise KvplanError(f"The quantization method fp8 is not supported for the current GPU. Minimum capability: "
                          f"{needed}. Current capability: {have}.", dep.where("quantization"))


def _dtype(dep: Deployment, gpu: GpuChoice) -> None:
    """vLLM refuses bfloat16 asked for by name on GPUs older than compute capability 8.0."""
    major = gpu.compute_major
    if dep.dtype == "bfloat16" and major is not None and major < 8:
        raise KvplanError(f"Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your "
                          f"{gpu.name} GPU has compute capability {gpu.compute_capability}. You can use float16 "
                          "instead by explicitly setting the `dtype` flag in CLI, for example: --dtype=half.",
                          dep.where("dtype"))
