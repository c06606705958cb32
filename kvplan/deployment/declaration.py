"""The Deployment: GPU, parallelism and engine knobs, one field per knob, each declared with its Knob. It is
the only thing engines read; every front door (flags, a pasted launch command, a vLLM --config file, a
mapping) builds one through deployment.values, which validates against these declarations."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from functools import lru_cache
from typing import Any

from kvplan import registry
from kvplan.deployment.knobs import (
    KV_CACHE_DTYPES,
    MAX_GPUS,
    MAX_TOKENS,
    MODEL_DTYPES,
    QUANTIZATION_METHODS,
    Knob,
    knob,
)
from kvplan.errors import KvplanError

DOOR = "*"  # origins key: how the door that built the Deployment names knobs it was not given ("fleet.yaml")
FLAGS_DOOR = "--"  # that door is a command line: knobs are named by their flags


@dataclass(frozen=True)
class Deployment:
    """One deployment: the GPU, parallelism and engine knobs, each field declared with its Knob."""

    # what to plan for (kvplan's own fields, and vLLM's model and revision)
    model: str | None = knob("str", "Model: bundled id, local config.json or directory, or Hub repo id.")
    revision: str | None = knob("str", "Hub branch, tag or commit of the model.")
    allow_unmodelled: bool = knob("bool", "Plan a model whose config has a key kvplan does not model (a note names "
                                  "it) instead of refusing it.", False, engine_flag=False)
    engine: str = knob("str", "Serving engine whose budget rules apply.", registry.DEFAULT, choices=registry.names,
                       engine_flag=False)
    engine_version: str | None = knob("str", "Engine version; picks the era of vLLM's accounting.",
                                      default_rule="the newest modelled version", aliases=("vllm-version",),
                                      engine_flag=False)
    entrypoint: str = knob("str", "vLLM entry point whose batch defaults apply: serve (vllm serve, the OpenAI "
                           "server) or llm (the offline LLM class).", "serve", choices=("serve", "llm"),
                           engine_flag=False, engine_only=True)
    gpu: str | None = knob("str", "GPU catalogue id or alias (kvplan gpus lists them).", engine_flag=False)
    gpu_memory_bytes: int | None = knob("size", "Device memory, instead of a catalogue GPU.", minimum=2**20,
                                        maximum=2**50, default_rule="the catalogue GPU's CUDA total",
                                        aliases=("gpu-memory",), engine_flag=False)
    weights_memory_bytes: int | None = knob("size", "Measured weights per rank, instead of the derived size.",
                                            minimum=0, maximum=2**50, aliases=("weights-memory",), engine_flag=False)
    reserve_bytes: int | None = knob("size", "simple engine: memory held back besides the weights.", minimum=0,
                                     maximum=2**50, default_rule="1 GB", aliases=("reserve",), engine_flag=False)
    estimate_cudagraphs: bool | None = knob("bool", "vLLM's VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS switch.",
                                            default_rule="the era's default (on from v0.20)", engine_flag=False,
                                            env="VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS")
    chunked_hybrid_kv: bool | None = knob("bool", "vLLM's VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE switch: "
                                          "chunked local attention keeps its own KV groups.",
                                          default_rule="on from v0.14 (its envs.py); off: every layer caches every token",
                                          engine_flag=False,
                                          env="VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE")
    flashinfer_sampler: bool | None = knob("bool", "vLLM's VLLM_USE_FLASHINFER_SAMPLER switch: FlashInfer's top-k / "
                                           "top-p sampler in the profiling run (v0.8-v0.16: 3.5 float32 copies of "
                                           "the logits, not the sort's 9.52).",
                                           default_rule="on through 0.11 (FlashInfer taken as installed), opt-in "
                                           "0.12-0.20 (its topk_topp_sampler.py), on from 0.21 (envs.py)",
                                           engine_flag=False,
                                           env="VLLM_USE_FLASHINFER_SAMPLER")
    v2_model_runner: bool | None = knob("bool", "vLLM's VLLM_USE_V2_MODEL_RUNNER switch: Model Runner V2 (before "
                                        "0.29 it subtracts no CUDA-graph estimate).",
                                        default_rule="by release and architecture (vLLM config/vllm.py "
                                        "use_v2_model_runner, from 0.22)", engine_flag=False,
                                        env="VLLM_USE_V2_MODEL_RUNNER")
    # engine knobs, by vLLM's names
    dtype: str = knob("str", "Weights and activations dtype.", "auto", choices=MODEL_DTYPES)
    kv_cache_dtype: str = knob("str", "KV cache dtype.", "auto", choices=KV_CACHE_DTYPES)
    mamba_ssm_cache_dtype: str = knob("str", "vLLM: dtype of the Mamba / linear-attention SSM state alone (its "
                                      "page size).", "auto", default_rule="the config's mamba_ssm_dtype, else the "
                                      "conv state's dtype; NemotronH by vLLM version (0.13+: the config's, else "
                                      "float16; 0.20+: else float32)", choices=("auto", "float32", "float16", "bfloat16"),
                                      engine_only=True)
    quantization: str | None = knob("str", "Weight quantization method.", default_rule="the checkpoint's own",
                                    choices=QUANTIZATION_METHODS, short=("q",))
    block_size: int | None = knob(
        "int", "Tokens per KV block (page).", minimum=1, maximum=4096,
        default_rule="vLLM 16 (MLA: 64 on Hopper, 128 on Blackwell), SGLang 1, TensorRT-LLM 32")
    tensor_parallel_size: int = knob("int", "Tensor-parallel ranks.", 1, minimum=1, maximum=MAX_GPUS,
                                     short=("tp",))
    pipeline_parallel_size: int = knob("int", "Pipeline stages.", 1, minimum=1, maximum=MAX_GPUS, short=("pp",))
    data_parallel_size: int = knob("int", "Data-parallel replicas, each with its own weights and KV pool.", 1,
                                   minimum=1, maximum=MAX_GPUS, short=("dp",))
    enable_expert_parallel: bool = knob("bool", "vLLM: MoE experts placed whole on the TP x DP ranks instead of "
                                        "sliced over them.", False, short=("ep",), engine_only=True)
    enable_eplb: bool = knob("bool", "vLLM: expert load balancing (needs expert parallel); adds the redundant "
                             "experts of eplb_config.", False, engine_only=True)
    eplb_config: dict[str, Any] | None = knob("json", "vLLM: expert load balancing settings (JSON); "
                                              "num_redundant_experts adds physical experts.", engine_only=True)
    gpu_memory_utilization: float | None = knob(
        "float", "Share of GPU memory the engine may use.", minimum=0, maximum=1, exclusive_minimum=True,
        default_rule="vLLM 0.92 from v0.20 (0.9 before); SGLang its mem_fraction_static heuristic; "
                     "TensorRT-LLM 0.9 of the memory free after the weights", aliases=("device-memory-utilization",))
    max_model_len: int | None = knob("int", "Longest request, prompt plus output, in tokens; auto (or -1): the "
                                     "longest that fits in the KV cache.", minimum=1, maximum=MAX_TOKENS, auto=True,
                                     default_rule="the model's own maximum")
    max_num_seqs: int | None = knob("int", "Most requests in one batch.", minimum=1, maximum=MAX_TOKENS,
                                    default_rule="vLLM 1024 on >= 70 GiB GPUs other than A100, else 256")
    max_num_batched_tokens: int | None = knob(
        "int", "Most tokens in one scheduler step (the prefill chunk); SGLang: -1 turns chunked prefill off.",
        minimum=-1, maximum=MAX_TOKENS,
        default_rule="vLLM 8192 on >= 70 GiB GPUs other than A100, else 2048")
    enable_chunked_prefill: bool | None = knob("bool", "vLLM: prefills chunked by max_num_batched_tokens; off, "
                                               "a step takes a whole prompt (max_num_batched_tokens at least "
                                               "max_model_len: a bigger activation peak). TensorRT-LLM: "
                                               "enable_chunked_prefill (off by default).",
                                               default_rule="on (V1); V0 by context length", engine_only=True)
    enable_prefix_caching: bool | None = knob("bool", "vLLM: prefix caching; for hybrid (Mamba / linear-attention) "
                                              "models it decides how many state blocks a request holds. "
                                              "TensorRT-LLM: kv_cache_config.enable_block_reuse (on by default).",
                                              default_rule="on; hybrid models from v0.26 only (config/model.py "
                                              "is_prefix_caching_supported)", engine_only=True)
    mamba_cache_mode: str | None = knob("str", "vLLM 0.18-0.32: how prefix caching keeps Mamba states (none, align: "
                                        "one more block, all: a block per block_size tokens).",
                                        default_rule="none without prefix caching; else align, or all for "
                                        "Mamba-2 families before v0.28", choices=("none", "align", "all"),
                                        engine_only=True)
    kv_cache_memory_bytes: int | None = knob("size", "KV pool per rank; vLLM then skips memory profiling.",
                                             minimum=0, maximum=2**50, aliases=("kv-cache-memory",))
    enforce_eager: bool = knob("bool", "No CUDA graphs.", False)
    backend: str | None = knob("str", "TensorRT-LLM: pytorch (default) or tensorrt (alias trt), a TensorRT engine "
                               "run by the C++ executor.", default_rule="pytorch", choices=("pytorch", "tensorrt", "trt"),
                               unmodelled={"_autodeploy": "kvplan does not model TensorRT-LLM's _autodeploy backend"},
                               engine_only=True)
    fp8_context_mla_kv_len_cap: int | None = knob(
        "int", "TensorRT-LLM: kv_cache_config.fp8_context_mla_kv_len_cap, the summed context KV tokens the FP8 "
        "context-MLA workspace is reserved for (floored at max_seq_len, capped at its worst case).", minimum=0,
        maximum=2**50, default_rule="min(max_batch_size, max_num_tokens) x max_seq_len",
        engine_only=True)
    optimization_level: int | None = knob("int", "vLLM 0.12+ -O level: 0 compiles nothing and captures no CUDA "
                                          "graphs; 1 captures PIECEWISE graphs only; 2-3 FULL and PIECEWISE.",
                                          minimum=0, maximum=3,
                                          short=("O",), engine_only=True)
    num_gpu_blocks_override: int | None = knob("int", "vLLM: this many KV blocks, whatever the memory budget says.",
                                               minimum=1, maximum=2**40, engine_only=True)
    enable_lora: bool = knob("bool", "vLLM, SGLang: LoRA slots on the GPU (A and B buffers per wrapped layer).",
                             False, engine_only=True)
    max_loras: int | None = knob("int", "vLLM: LoRA slots (adapters in one batch).", minimum=1, maximum=2**16,
                                 default_rule="1", engine_only=True)
    max_lora_rank: int | None = knob("int", "vLLM, SGLang: the rank every LoRA slot is sized for.", minimum=1, maximum=512,
                                     default_rule="16", engine_only=True)
    max_cpu_loras: int | None = knob("int", "vLLM: adapters cached in CPU memory (at least max_loras).", minimum=1,
                                     maximum=2**20, default_rule="max_loras", engine_only=True)
    lora_dtype: str | None = knob("str", "vLLM: dtype of the LoRA slots.", default_rule="the model's dtype",
                                  choices=("auto", "float16", "bfloat16"), engine_only=True)
    max_loras_per_batch: int | None = knob("int", "SGLang: LoRA slots on the GPU (adapters in one batch, the base "
                                           "model's included).", minimum=1, maximum=2**16, default_rule="8",
                                           engine_only=True)
    fully_sharded_loras: bool = knob("bool", "vLLM: LoRA slots sharded over TP in both A and B.", False,
                                     engine_only=True)
    lora_target_modules: str | None = knob("str", "vLLM, SGLang: the modules that get LoRA slots (names separated by commas "
                                           "or spaces: qkv_proj, o_proj, gate_up_proj, down_proj, or q_proj, ...).",
                                           default_rule="every linear layer the model's LoRA support wraps",
                                           engine_only=True)
    specialize_active_lora: bool = knob("bool", "vLLM: CUDA graphs captured for each power of two of active LoRAs.",
                                        False, engine_only=True)
    limit_mm_per_prompt: dict[str, Any] | None = knob("json", "vLLM: items per prompt of each modality (JSON, "
                                                      "e.g. {\"image\": 4, \"video\": 0}); sizes the encoder's "
                                                      "profiling run.", default_rule="999 for each modality",
                                                      engine_only=True)
    mm_processor_kwargs: dict[str, Any] | None = knob("json", "vLLM: the multimodal processor's settings (JSON, e.g. "
                                                      "{\"max_pixels\": 1003520}); sizes the largest item.",
                                                      engine_only=True)
    language_model_only: bool = knob("bool", "vLLM: every modality off (no encoder profiling). SGLang (0.5.18+): "
                                      "the model served text-only, for the architectures SGLang takes it for.",
                                      False, engine_only=True)
    enable_multimodal: bool = knob("bool", "SGLang: serve Gemma 3, Llama 4, Step3-VL (and Inkling) as multimodal "
                                   "models; its default serves them text-only.", False, engine_only=True)
    language_only: bool = knob("bool", "SGLang: the language side of encoder disaggregation (the encoder runs "
                               "elsewhere).", False, engine_only=True)
    disaggregation_mode: str = knob("str", "SGLang: the role in prefill/decode disaggregation ('null': none).",
                                    "null", choices=("null", "prefill", "decode"), engine_only=True)
    skip_mm_profiling: bool = knob("bool", "vLLM: no encoder run in the memory profile.", False, engine_only=True)
    mm_encoder_tp_mode: str = knob("str", "vLLM: 'data' keeps the whole vision tower on every TP rank and splits its "
                                   "batch instead (where the model supports it).", "weights",
                                   choices=("weights", "data"), engine_only=True)
    cpu_offload_gb: float | None = knob("float", "vLLM, SGLang: GiB of weights per GPU moved to pinned CPU memory "
                                        "(whole parameters of the first decoder layers, until the amount is "
                                        "reached).",
                                        minimum=0, maximum=2**20, default_rule="0: none", engine_only=True)
    kv_offloading_size: float | None = knob("float", "vLLM: GiB of pinned host memory for a CPU KV tier (summed "
                                            "over the TP ranks); the GPU pool is unchanged.", minimum=0,
                                            maximum=2**20, exclusive_minimum=True, default_rule="none",
                                            engine_only=True)
    kv_offloading_backend: str = knob("str", "vLLM: the CPU KV tier's backend.", "native",
                                      choices=("native", "lmcache"), engine_only=True)
    kv_transfer_config: dict[str, Any] | None = knob("json", "vLLM: the KV connector (JSON); LMCacheConnectorV1 "
                                                     "sizes a CPU KV tier in each worker.", engine_only=True)
    lmcache_max_local_cpu_size: float | None = knob("float", "LMCache: GiB of pinned host memory per worker for "
                                                    "its CPU tier.", minimum=0, maximum=2**20,
                                                    default_rule="5.0 (lmcache 0.5.6 v1/config.py)",
                                                    engine_flag=False, env="LMCACHE_MAX_LOCAL_CPU_SIZE")
    lmcache_chunk_size: int | None = knob("int", "LMCache: tokens per stored chunk.", minimum=1, maximum=2**20,
                                          default_rule="256 (lmcache 0.5.6 v1/config.py)", engine_flag=False,
                                          env="LMCACHE_CHUNK_SIZE")
    enable_hierarchical_cache: bool = knob("bool", "SGLang: a host-memory KV pool beside the GPU pool (HiCache).",
                                           False, aliases=("enable-hicache",), engine_only=True)
    hicache_ratio: float | None = knob("float", "SGLang: host KV pool tokens per GPU pool token.", minimum=0,
                                       maximum=1000, exclusive_minimum=True, default_rule="2.0", engine_only=True)
    hicache_size: int | None = knob("int", "SGLang: host KV pool size in GB (10^9 B) per rank; overrides the ratio.",
                                    minimum=0, maximum=2**20, default_rule="0: the ratio decides", engine_only=True)
    max_total_tokens: int | None = knob("int", "SGLang: a cap on the KV pool, in tokens.", minimum=1,
                                        maximum=2**40, engine_only=True)
    max_mamba_cache_size: int | None = knob("int", "SGLang: Mamba / linear-attention state slots (the states then "
                                            "take these, the KV pool the rest).", minimum=1, maximum=2**31,
                                            default_rule="as many as mamba_full_memory_ratio gives",
                                            engine_only=True)
    mamba_full_memory_ratio: float | None = knob("float", "SGLang: Mamba states' memory per unit of full-attention "
                                                 "KV memory.", minimum=0, maximum=1000, exclusive_minimum=True,
                                                 default_rule="0.9", engine_only=True)
    swa_full_tokens_ratio: float | None = knob("float", "SGLang: sliding-window pool tokens per full-attention "
                                               "pool token.", minimum=0, maximum=1000, exclusive_minimum=True,
                                               default_rule="0.8", engine_only=True)
    disable_radix_cache: bool = knob("bool", "SGLang: no prefix (radix) cache; a Mamba hybrid's running request then "
                                     "takes one state slot, and --max-running-requests sizes its state pool.", False,
                                     engine_only=True)
    attention_data_parallel_size: int | None = knob("int", "SGLang: attention data-parallel ranks within TP (each "
                                                    "keeps the KV heads of tp / attn_dp ranks).", minimum=1,
                                                    maximum=MAX_GPUS,
                                                    engine_only=True)
    speculative_config: dict[str, Any] | None = knob("json", "Speculative decoding, as vLLM takes it (JSON).",
                                                     short=("sc",))
    hf_overrides: dict[str, Any] | None = knob("json", "Keys that replace those of the model's config.json (JSON).")
    compilation_config: dict[str, Any] | int | None = knob(
        "json", "torch.compile and CUDA-graph settings (JSON, or a level); accepted, not modelled.", short=("cc",),
        json_level=True)
    # How each field was given, as the user wrote it ("--max_model_len", "serve.yaml:3: max-model-len"), so that
    # an error names what the user typed. Not part of the deployment's identity.
    origins: dict[str, str] = field(default_factory=dict, compare=False, repr=False)
    # What the front door noticed (flags accepted but not memory-relevant, renamed flags); shown with the plan.
    notes: tuple[str, ...] = field(default=(), compare=False, repr=False)

    def __post_init__(self) -> None:
        from kvplan.deployment.values import check_value

        for knob_ in knobs():
            value = getattr(self, knob_.name)
            if value is not None and value != knob_.default:
                check_value(knob_, value, self.where(knob_.name))

    def where(self, name: str) -> str:
        """The knob as the user gave it; else as the door that built this Deployment spells knobs (a flag on a
        command line, a key in a mapping), else by its field name."""
        if name in self.origins:
            return self.origins[name]
        door = self.origins.get(DOOR)
        if door == FLAGS_DOOR:
            return BY_NAME()[name].flag
        return f"{door}: {name}" if door else name

    def given(self, name: str) -> bool:
        return name in self.origins and name != DOOR

    @property
    def gpu_count(self) -> int:
        return self.tensor_parallel_size * self.pipeline_parallel_size * self.data_parallel_size

    @classmethod
    def from_mapping(cls, mapping: dict[str, Any], where: str = "deployment") -> Deployment:
        from kvplan.deployment.values import from_mapping

        return from_mapping(mapping, where)

    @classmethod
    def from_vllm_args(cls, args: list[str], where: str = "command line") -> Deployment:
        """vLLM serve arguments (["--max-model-len", "32K", "-tp", "2"]) or a whole launch command."""
        from kvplan.deployment.launch import parse_command

        return parse_command(args, where).deployment()

    def to_dict(self) -> dict[str, Any]:
        return {k.name: getattr(self, k.name) for k in knobs()}


@lru_cache(maxsize=1)
def knobs() -> tuple[Knob, ...]:
    from dataclasses import replace

    return tuple(replace(f.metadata["knob"], name=f.name) for f in fields(Deployment) if "knob" in f.metadata)


@lru_cache(maxsize=1)
def env_knobs() -> dict[str, str]:
    """Environment variable -> the knob it sets (vLLM's own switches that change memory)."""
    return {k.env: k.name for k in knobs() if k.env}


def env_switch(variable: str, value: str) -> bool | str:
    """An environment variable's value for its knob. vLLM reads each of its switches as bool(int(value)) (envs.py,
    0.33.0; maybe_convert_bool for VLLM_USE_V2_MODEL_RUNNER): any integer is one, nonzero on, and a word such as
    'true' stops it at start-up. Set but empty is no integer either: int('') raises, and enable_envs_cache
    (envs.py, called once the engine core starts) reads every variable, so vLLM stops whichever the empty one is.
    Other variables (LMCache's) are read by their knob's kind."""
    if BY_NAME()[env_knobs()[variable]].kind != "bool":
        return value
    if value.strip() == "":
        raise KvplanError("set but empty: vLLM reads it as bool(int(value)) (envs.py), and int('') stops it at "
                          "start-up; unset it, or give 0 or 1", variable)
    try:
        return bool(int(value))
    except ValueError:
        raise KvplanError(f"vLLM reads it as an integer (0 off, 1 on), got {value!r:.40}", variable) from None


@lru_cache(maxsize=1)
def BY_NAME() -> dict[str, Knob]:  # noqa: N802 - reads as the constant it caches
    return {k.name: k for k in knobs()}
