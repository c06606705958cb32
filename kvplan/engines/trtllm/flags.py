"""The `trtllm-serve` command line (TensorRT-LLM's OpenAI server, a click command): the options kvplan ignores
and the ones that change memory without being modelled (its options for kvplan's knobs are in dialect.py).

Read from NVIDIA/TensorRT-LLM main as stored in 2026: tensorrt_llm/commands/serve.py (the `serve` click command
of the DefaultGroup `trtllm-serve`, which runs `serve` when the first word is not a subcommand, so
`trtllm-serve MODEL ...` == `trtllm-serve serve MODEL ...`) and its audited option list
tests/unittest/api_stability/references/trtllm_serve_cli.yaml (commit 029e223d, every option with its flags,
type, default, is_flag and multiple), plus KvCacheConfig / BaseLlmArgs in tensorrt_llm/llmapi/llm_args.py for
the YAML keys. The PyPI package (tensorrt-llm 1.2.1) is a stub whose wheel lives off PyPI, so no release wheel
was read.

Pure data, imported on kvplan's startup path: literals only.
"""

from __future__ import annotations

from kvplan.deployment.dialect import Catalogue

# Spelling: trtllm-serve declares its options with underscores (--max_batch_size, --tp_size) and click does no
# dash/underscore normalization (no token_normalize_func in context_settings), so `--max-batch-size` is refused
# with "No such option ... Did you mean '--max_batch_size'?". Exceptions spelled with dashes: --generation-config,
# --no-telemetry (the pair --telemetry/--no-telemetry). `--opt=value` works. Click never accepts prefixes.
UNDERSCORES_ACCEPTED: bool = True
DASHES_ACCEPTED: bool = False
ABBREVIATIONS_ALLOWED: bool = False

# Keys below are in dash form (the form a normalizing parser looks up); NATIVE gives each one as trtllm-serve
# itself spells it, so a strict reader can refuse the other spelling.
NATIVE: dict[str, str] = {
    "agent-percentage": "--agent_percentage",
    "agent-types": "--agent_types",
    "allow-request-chat-template": "--allow_request_chat_template",
    "backend": "--backend",
    "chat-template": "--chat_template",
    "cluster-size": "--cluster_size",
    "config": "--config",
    "context-parallel-size": "--context_parallel_size",
    "cp-size": "--cp_size",
    "custom-module-dirs": "--custom_module_dirs",
    "custom-tokenizer": "--custom_tokenizer",
    "disagg-cluster-uri": "--disagg_cluster_uri",
    "enable-attention-dp": "--enable_attention_dp",
    "enable-chunked-prefill": "--enable_chunked_prefill",
    "enable-visual-gen": "--enable_visual_gen",
    "ep-size": "--ep_size",
    "extra-llm-api-options": "--extra_llm_api_options",
    "fail-fast-on-attention-window-too-large": "--fail_fast_on_attention_window_too_large",
    "free-gpu-memory-fraction": "--free_gpu_memory_fraction",
    "generation-config": "--generation-config",
    "gpus-per-node": "--gpus_per_node",
    "grpc": "--grpc",
    "hf-revision": "--hf_revision",
    "host": "--host",
    "kv-cache-dtype": "--kv_cache_dtype",
    "kv-cache-free-gpu-memory-fraction": "--kv_cache_free_gpu_memory_fraction",
    "log-level": "--log_level",
    "max-batch-size": "--max_batch_size",
    "max-beam-width": "--max_beam_width",
    "max-num-tokens": "--max_num_tokens",
    "max-seq-len": "--max_seq_len",
    "media-io-kwargs": "--media_io_kwargs",
    "metadata-server-config-file": "--metadata_server_config_file",
    "middleware": "--middleware",
    "moe-cluster-parallel-size": "--moe_cluster_parallel_size",
    "moe-expert-parallel-size": "--moe_expert_parallel_size",
    "num-input-processor-workers": "--num_input_processor_workers",
    "num-media-load-workers": "--num_media_load_workers",
    "num-postprocess-workers": "--num_postprocess_workers",
    "num-serve-frontends": "--num_serve_frontends",
    "otlp-traces-endpoint": "--otlp_traces_endpoint",
    "pipeline-parallel-size": "--pipeline_parallel_size",
    "port": "--port",
    "post-processor-hook": "--post_processor_hook",
    "pp-size": "--pp_size",
    "reasoning-parser": "--reasoning_parser",
    "report-addr": "--report_addr",
    "revision": "--revision",
    "served-model-name": "--served_model_name",
    "server-role": "--server_role",
    "telemetry": "--telemetry",
    "no-telemetry": "--no-telemetry",
    "tensor-parallel-size": "--tensor_parallel_size",
    "tokenizer": "--tokenizer",
    "tool-parser": "--tool_parser",
    "tp-size": "--tp_size",
    "trust-remote-code": "--trust_remote_code",
    "video-pruning-rate": "--video_pruning_rate",
    "visual-gen-args": "--visual_gen_args",
}

# Single-dash spellings of `serve`: none (-c, -m, -t, -r, -l belong to the `disaggregated` subcommand).
SHORT: dict[str, str] = {}


# The --config / --extra_llm_api_options YAML: LLM-API arguments (TorchLlmArgs, the PyTorch backend's), nested
# mappings written with '.' (kv_cache_config.max_tokens). Read from tensorrt_llm/llmapi/llm_args.py (BaseLlmArgs,
# TorchLlmArgs, KvCacheConfig, as stored in 2026). Both models are pydantic with extra="forbid", so TensorRT-LLM
# refuses a key it does not know; kvplan does too. serve.py passes the file through
# update_llm_args_with_extra_options: an empty file is no options, a root that is not a mapping is refused;
# kv_cache_config is merged key by key over the command line's (its --free_gpu_memory_fraction), not replaced.
# Precedence: since NVIDIA/TensorRT-LLM#14812 (merged 2026-06, release 1.2) a flag typed on the command line wins
# over the file, the file over the defaults (update_llm_args_with_extra_dict's explicit_cli_keys); before it the
# file won over every flag.
# Key -> kvplan field. kv_cache_config.max_gpu_total_bytes caps the KV pool in bytes (0, its default: no cap; with
# free_gpu_memory_fraction also set, the smaller wins), like vLLM's --kv-cache-memory-bytes;
# kv_cache_config.max_tokens caps it in tokens (kvplan's max_total_tokens, SGLang's --max-total-tokens).
# A field that is not one of the Deployment's (expert_parallel_size) is accepted and noted.
EXTRA_OPTIONS_KNOBS: dict[str, str] = {
    "kv_cache_config.free_gpu_memory_fraction": "gpu_memory_utilization",
    "kv_cache_config.tokens_per_block": "block_size",
    "kv_cache_config.dtype": "kv_cache_dtype",
    "kv_cache_config.max_gpu_total_bytes": "kv_cache_memory_bytes",
    "kv_cache_config.max_tokens": "max_total_tokens",
    "kv_cache_config.mamba_ssm_cache_dtype": "mamba_ssm_cache_dtype",  # the SSM states' dtype (trtllm/mamba.py)
    # bytes of host memory per rank for the secondary (offload) pool: kvplan's kv_offloading_size, in GiB
    # (options.py converts; engines/trtllm/host_cache.py sizes it)
    "kv_cache_config.host_cache_size": "kv_offloading_size",
    # block reuse (default on) and chunked prefill (default off) decide whether KvCacheCreator reserves DeepSeek-V4's
    # FP8 context-MLA workspace on SM 90, and fp8_context_mla_kv_len_cap how much (_torch/pyexecutor/_util.py@00043967
    # get_mla_context_workspace_kv_len_cap; engines/trtllm/deepseek_v4.py Workspace); no other plan reads them
    "kv_cache_config.enable_block_reuse": "enable_prefix_caching",
    "kv_cache_config.fp8_context_mla_kv_len_cap": "fp8_context_mla_kv_len_cap",
    "enable_chunked_prefill": "enable_chunked_prefill",
    "model": "model",
    "revision": "revision",
    "hf_revision": "revision",  # renamed to revision by update_llm_args_with_extra_dict
    "max_seq_len": "max_model_len",
    "max_batch_size": "max_num_seqs",
    "max_num_tokens": "max_num_batched_tokens",
    "tensor_parallel_size": "tensor_parallel_size",
    "pipeline_parallel_size": "pipeline_parallel_size",
    "moe_expert_parallel_size": "expert_parallel_size",
    "dtype": "dtype",
    "backend": "backend",
    # LoRA (lora_helper.py LoraConfig; engines/trtllm/lora.py sizes the device cache)
    "enable_lora": "enable_lora",
    "lora_config.max_lora_rank": "max_lora_rank",
    "lora_config.max_loras": "max_loras",
    "lora_config.max_cpu_loras": "max_cpu_loras",
    "lora_config.lora_target_modules": "lora_target_modules",  # a list; options.py joins it
}

# enable_attention_dp (a bool) is read by options.py into the attention_data_parallel_size knob.
ATTENTION_DP_KEY = "enable_attention_dp"

# Keys whose value is a mapping that kvplan reads key by key; every other mapping-valued key is taken whole.
EXTRA_OPTIONS_SECTIONS: tuple[str, ...] = ("kv_cache_config", "lora_config")

# Keys that change GPU memory in ways kvplan does not model -> what changes. A mapping-valued key covers its keys.
EXTRA_OPTIONS_NOTED: dict[str, str] = {
    "kv_cache_config.max_attention_window": "per-layer attention windows: fewer tokens kept per sequence",
    "kv_cache_config.sink_token_length": "sink tokens always kept in the attention window",
    "kv_cache_config.cross_kv_cache_fraction": "a share of the pool kept for cross attention (encoder-decoder)",
    "kv_cache_config.use_uvm": "KV cache in unified memory",
    "kv_cache_config.mamba_state_config": "Mamba state snapshots for prefix reuse: extra state slots",
    "kv_cache_config.use_kv_cache_manager_v2": "the experimental KV cache manager v2",
    "kv_cache_config.max_util_for_resume": "KV cache manager v2's resume threshold",
    "cuda_graph_config": "CUDA graphs for decode batches: up to 200 MB each, says llm_args.py",
    "attention_dp_config": "attention data parallel scheduling",
    "enable_lm_head_tp_in_adp": "LM head sliced over TP under attention DP",
    "max_beam_width": "beam search: each request holds KV for every beam",
    "context_parallel_size": "context parallel: KV sharded over CP ranks",
    "cp_config": "context parallel settings",
    "moe_cluster_parallel_size": "MoE expert-cluster parallelism: expert weight placement",
    "moe_tensor_parallel_size": "MoE expert weights sliced over their own TP size",
    "moe_config": "MoE backend and load balancer: expert weight placement",
    "pp_partition": "uneven pipeline stages",
    "speculative_config": "speculative decoding: draft model weights and KV",
    "decoding_config": "speculative decoding (deprecated form)",
    "peft_cache_config": "LoRA adapter cache on the GPU",
    "sparse_attention_config": "sparse attention: KV kept per token changes",
    "cache_transceiver_config": "disaggregated serving: KV transfer buffers",
    "kv_connector_config": "KV cache connector",
    "torch_compile_config": "torch.compile and piecewise CUDA graphs",
    "gather_generation_logits": "generation logits kept on the GPU",
    "quant_config": "quantization settings",
    "force_dynamic_quantization": "weights quantized at load time",
    "model_kwargs": "values that replace the model's config.json",
    "mm_encoder_only": "only the vision encoder is loaded",
    "multimodal_config": "multimodal encoder settings",
    "load_format": "dummy weights or another loader",
    "checkpoint_format": "checkpoint format",
    "enable_min_latency": "min-latency mode (Llama 4)",
    "disable_overlap_scheduler": "no overlap scheduler: one batch's buffers fewer",
    "attn_backend": "attention backend: its workspace",
    "build_config": "TensorRT-engine build settings",
}

# Keys that do not change GPU memory for the KV cache, weights or activations (a mapping-valued key: all of it).
EXTRA_OPTIONS_INERT: tuple[str, ...] = (
    "kv_cache_config.enable_partial_reuse",
    "kv_cache_config.copy_on_partial_reuse", "kv_cache_config.onboard_blocks",
    "kv_cache_config.secondary_offload_min_priority", "kv_cache_config.event_buffer_max_size",
    "kv_cache_config.attention_dp_events_gather_period_ms", "kv_cache_config.mamba_ssm_stochastic_rounding",
    "kv_cache_config.mamba_ssm_philox_rounds",
    "lora_config.lora_dir", "lora_config.lora_ckpt_source", "lora_config.trtllm_modules_to_hf_modules",
    "lora_config.lora_weights_converters",
    "tokenizer", "tokenizer_mode", "custom_tokenizer", "skip_tokenizer_init", "trust_remote_code",
    "tokenizer_revision", "gpus_per_node", "guided_decoding_backend", "batched_logits_processor",
    "iter_stats_max_iterations", "request_stats_max_iterations", "scheduler_config", "num_postprocess_workers",
    "postprocess_tokenizer_dir", "reasoning_parser", "otlp_traces_endpoint", "return_perf_metrics",
    "perf_metrics_max_requests", "orchestrator_type", "env_overrides", "garbage_collection_gen0_threshold",
    "sampler_type", "enable_iter_perf_stats", "enable_iter_req_stats", "print_iter_log", "batch_wait_timeout_ms",
    "batch_wait_timeout_iters", "batch_wait_max_tokens_ratio", "enable_autotuner", "enable_layerwise_nvtx_marker",
    "stream_interval", "allreduce_strategy", "checkpoint_loader", "ray_worker_extension_cls", "telemetry_config",
    "max_input_len", "fail_fast_on_attention_window_too_large", "disagg_cluster",
)

# Every other `serve` option that does not change GPU memory for the KV cache, weights or activations -> arity.
INERT: dict[str, str] = {
    "agent-percentage": "value",
    "agent-types": "value",
    "allow-request-chat-template": "bool",
    "chat-template": "value",
    "custom-module-dirs": "value",  # multiple=True: repeat the option for more directories
    "custom-tokenizer": "value",
    "disagg-cluster-uri": "value",
    "fail-fast-on-attention-window-too-large": "bool",  # deprecated; default now on
    "generation-config": "value",  # spelled with a dash; choices auto, trtllm
    "gpus-per-node": "value",
    "grpc": "bool",
    "host": "value",
    "log-level": "value",
    "media-io-kwargs": "value",
    "metadata-server-config-file": "value",
    "middleware": "value",  # multiple=True
    "num-input-processor-workers": "value",
    "num-media-load-workers": "value",
    "num-postprocess-workers": "value",
    "num-serve-frontends": "value",
    "otlp-traces-endpoint": "value",
    "port": "value",
    "post-processor-hook": "value",
    "reasoning-parser": "value",
    "report-addr": "value",
    "revision": "value",
    "hf-revision": "value",  # second name of --revision
    "served-model-name": "value",
    "server-role": "value",
    "telemetry": "bool+no",  # --telemetry/--no-telemetry, default on
    "tokenizer": "value",
    "tool-parser": "value",
    "trust-remote-code": "bool",
}

# Options that change GPU memory in ways kvplan does not model: name -> (arity, what changes).
NOTED: dict[str, tuple[str, str]] = {
    "max-beam-width": ("value", "beam search: each request holds KV for every beam"),
    "context-parallel-size": ("value", "context parallel: KV sharded over CP ranks"),
    "cp-size": ("value", "context parallel: KV sharded over CP ranks"),
    "moe-cluster-parallel-size": ("value", "deprecated; MoE expert-cluster parallelism: expert weight placement"),
    "cluster-size": ("value", "deprecated; MoE expert-cluster parallelism: expert weight placement"),
    "enable-visual-gen": ("bool", "visual generation pipeline: its own weights and activations"),
    "visual-gen-args": ("value", "settings of the visual generation pipeline"),
    "video-pruning-rate": ("value", "prunes video tokens: smaller multimodal activations"),
}

# No option of today's `serve` is known to have been removed; older commands that fail are those passing
# `--backend tensorrt` / `--backend trt` (a value, not a flag) or dash spellings.
RENAMED: dict[str, tuple[str, str, bool, str]] = {}

CATALOGUE = Catalogue(short=SHORT, inert=INERT, noted=NOTED, renamed=RENAMED, native=NATIVE,
                      underscores_accepted=UNDERSCORES_ACCEPTED, dashes_accepted=DASHES_ACCEPTED,
                      abbreviations_allowed=ABBREVIATIONS_ALLOWED)
