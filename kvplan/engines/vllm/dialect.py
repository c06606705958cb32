"""The `vllm serve` command line: launchers, its server image, and its catalogue of other flags (flags.py)."""

from kvplan.deployment.dialect import Dialect, Program

DIALECT = Dialect(
    name="vllm",
    label="vLLM",
    env_prefix="VLLM_",
    catalogue_module="kvplan.engines.vllm.flags",
    programs=(Program("vllm", "serve"),),
    modules=("vllm.entrypoints.openai.api_server", "vllm.entrypoints.api_server"),
    images=("vllm/vllm-openai", "vllm-openai"),
    image_tags_are_releases=True,
    image_fragments=("vllm",),
    positional_model=True,
    flag_file=True,
    own_knobs=frozenset({"entrypoint", "mamba_ssm_cache_dtype", "enable_expert_parallel", "enable_eplb",
                         "eplb_config", "optimization_level", "num_gpu_blocks_override",
                         "enable_lora", "max_loras", "max_lora_rank", "max_cpu_loras", "lora_dtype",
                         "fully_sharded_loras", "lora_target_modules", "specialize_active_lora",
                         "limit_mm_per_prompt", "mm_processor_kwargs", "language_model_only", "skip_mm_profiling",
                         "mm_encoder_tp_mode",
                         "cpu_offload_gb", "enable_chunked_prefill", "enable_prefix_caching", "mamba_cache_mode",
                         "kv_offloading_size", "kv_offloading_backend", "kv_transfer_config"}),
    raises_utilization=True,
)
