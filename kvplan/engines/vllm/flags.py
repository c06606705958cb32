"""The `vllm serve` command line as vLLM 0.33.0 parses it: which flags kvplan ignores, which change memory
without being modelled, which were renamed or removed, and the short spellings.

Read from the vLLM 0.33.0 release (PyPI wheel, commit g4ba787ec9): the serve parser assembled by
vllm/entrypoints/cli/serve.py -> vllm/entrypoints/common/cli_args.py (make_arg_parser, frontend flags) ->
vllm/engine/arg_utils.py (EngineArgs.add_cli_args; flag names, types and help come from the config dataclasses
in vllm/config/*.py), parsed by FlexibleArgumentParser (vllm/utils/argparse_utils.py). The parser was built and
enumerated, and every RENAMED entry checked against it. The versions in RENAMED come from the same files in the
release wheels 0.8.0-0.32.0 ("last in X" = the newest release checked that still registers the flag).

Pure data, imported on kvplan's startup path: literals only.
"""

from __future__ import annotations

from kvplan.deployment.dialect import Catalogue

# Arities as kvplan.deployment.dialect.ARITIES has them. In 0.33.0 vLLM registers BooleanOptionalAction as
# EnableDisableAction (argparse_utils.py): `--enable-X` also gets `--disable-X` and `--disable-X` gets `--enable-X`,
# each listed below as its own "bool" entry (no `--no-` form); the hidden `--no-enable-X` / `--no-disable-X` still
# parse. Before 0.33.0 only `--no-X` existed. `--X=true` is refused ("ignored explicit argument").

# FlexibleArgumentParser subclasses argparse.ArgumentParser and never passes allow_abbrev, and no vLLM
# entry point does (grep of the whole 0.33.0 package, and of 0.8.0-0.32.0's parser files): argparse's default
# allow_abbrev=True applies, so any unambiguous prefix of a long flag works (`--kv-cache-memory 8G`,
# `--max-num-batched-token 4096`, `--gpu 0.8`) and an ambiguous one is an error (`--max-num`, `--device`).
# An exact name always wins over a longer flag it prefixes (`--enable-eplb` vs `--enable-eplb-...`).
ABBREVIATIONS_ALLOWED: bool = True

# FlexibleArgumentParser.parse_args rewrites each `--` argument before argparse sees it: underscores become
# dashes in the name up to the first '.' or '=' (`--max_model_len=4096` == `--max-model-len=4096`); values and
# single-dash flags are untouched. `--flag=value` and `--flag value` are both accepted.
UNDERSCORES_ACCEPTED: bool = True

# Dotted JSON sub-keys (FlexibleArgumentParser): `--compilation-config.mode 3`, `--speculative-config.method ngram`,
# `--eplb-config.num_redundant_experts 8`, `--x.key+ a,b` (append to a list). Each takes exactly one value (or
# `=value`); all uses of one flag merge into a single JSON object, the value parsed as JSON, else as a
# human-readable integer, else kept as a string (launch.parse_flags, for every engine).

# Single-dash spellings -> long flag (dash form, no leading dashes). `-O` is special-cased by
# FlexibleArgumentParser: `-O3`, `-O=3` and `-O 3` (0-3 only) all mean `--optimization-level 3` since v0.12.0;
# up to v0.11.2 `-O` was an alias of `--compilation-config` (so `-O3` meant compilation level 3).
SHORT: dict[str, str] = {
    "O": "optimization-level",
    "asc": "api-server-count",
    "q": "quantization",
    "pp": "pipeline-parallel-size",
    "tp": "tensor-parallel-size",
    "n": "nnodes",
    "r": "node-rank",
    "dcp": "decode-context-parallel-size",
    "pcp": "prefill-context-parallel-size",
    "dp": "data-parallel-size",
    "dpn": "data-parallel-rank",
    "dpr": "data-parallel-start-rank",
    "dpl": "data-parallel-size-local",
    "dpa": "data-parallel-address",
    "dpp": "data-parallel-rpc-port",
    "dpb": "data-parallel-backend",
    "dph": "data-parallel-hybrid-lb",
    "dpe": "data-parallel-external-lb",
    "dpm": "data-parallel-multi-port-external-lb",
    "ep": "enable-expert-parallel",
    "sc": "speculative-config",
    "cc": "compilation-config",
    "ac": "attention-config",
    "dc": "diffusion-config",
}

# Second long spellings of one flag -> the flag (both registered on the same argparse action).
ALIASES: dict[str, str] = {
    "device-memory-utilization": "gpu-memory-utilization",
}

# Every other current `vllm serve` flag that does not change GPU memory for the KV cache, weights or
# activations: name -> arity. Grouped as `vllm serve --help` groups them.
INERT: dict[str, str] = {
    # options
    "headless": "bool",
    "api-server-count": "value",
    "grpc": "bool",
    # Frontend
    "lora-modules": "list",
    "chat-template": "value",
    "chat-template-content-format": "value",
    "trust-request-chat-template": "bool+no",
    "trust-request-mm-kwargs": "bool+no",
    "default-chat-template-kwargs": "value",
    "reasoning-effort-map": "value",
    "response-role": "value",
    "return-tokens-as-token-ids": "bool+no",
    "enable-auto-tool-choice": "bool+no",
    "disable-auto-tool-choice": "bool",  # inverse of --enable-auto-tool-choice
    "exclude-tools-when-tool-choice-none": "bool+no",
    "tool-call-parser": "value",
    "tool-parser-plugin": "value",
    "tool-strict-level": "value",
    "tool-server": "value",
    "max-log-len": "value",
    "enable-prompt-tokens-details": "bool+no",
    "disable-prompt-tokens-details": "bool",  # inverse of --enable-prompt-tokens-details
    "enable-per-request-metrics": "bool+no",
    "disable-per-request-metrics": "bool",  # inverse of --enable-per-request-metrics
    "enable-server-load-tracking": "bool+no",
    "disable-server-load-tracking": "bool",  # inverse of --enable-server-load-tracking
    "enable-force-include-usage": "bool+no",
    "disable-force-include-usage": "bool",  # inverse of --enable-force-include-usage
    "sse-keep-alive-interval": "value",
    "enable-tokenizer-info-endpoint": "bool+no",
    "disable-tokenizer-info-endpoint": "bool",  # inverse of --enable-tokenizer-info-endpoint
    "enable-log-outputs": "bool+no",
    "disable-log-outputs": "bool",  # inverse of --enable-log-outputs
    "enable-log-deltas": "bool+no",
    "disable-log-deltas": "bool",  # inverse of --enable-log-deltas
    "cohere-is-reasoning-model": "bool+no",
    "cohere-format": "value",
    "anthropic-disabled-thinking-effort": "value",
    "log-error-stack": "bool+no",
    "tokens-only": "bool+no",
    "enable-scale-out": "bool+no",
    "disable-scale-out": "bool",  # inverse of --enable-scale-out
    "fingerprint-mode": "value",
    "fingerprint-value": "value",
    "host": "value",
    "port": "value",
    "grpc-port": "value",
    "data-parallel-supervisor-port": "value",
    "dp-supervisor-probe-interval-s": "value",
    "dp-supervisor-probe-timeout-s": "value",
    "dp-supervisor-probe-failure-threshold": "value",
    "uds": "value",
    "uvicorn-log-level": "value",
    "disable-uvicorn-access-log": "bool+no",
    "enable-uvicorn-access-log": "bool",  # inverse of --disable-uvicorn-access-log
    "disable-access-log-for-endpoints": "value",
    "allow-credentials": "bool+no",
    "allowed-origins": "value",
    "allowed-methods": "value",
    "allowed-headers": "value",
    "api-key": "list",  # nargs='+'
    "ssl-keyfile": "value",
    "ssl-certfile": "value",
    "ssl-ca-certs": "value",
    "enable-ssl-refresh": "bool+no",
    "disable-ssl-refresh": "bool",  # inverse of --enable-ssl-refresh
    "ssl-cert-reqs": "value",
    "ssl-ciphers": "value",
    "root-path": "value",
    "middleware": "value",  # action='append': one value per occurrence, may repeat
    "enable-request-id-headers": "bool+no",
    "disable-request-id-headers": "bool",  # inverse of --enable-request-id-headers
    "disable-fastapi-docs": "bool+no",
    "enable-fastapi-docs": "bool",  # inverse of --disable-fastapi-docs
    "h11-max-incomplete-event-size": "value",
    "h11-max-header-count": "value",
    "enable-offline-docs": "bool+no",
    "disable-offline-docs": "bool",  # inverse of --enable-offline-docs
    "enable-flash-late-interaction": "bool+no",
    "disable-flash-late-interaction": "bool",  # inverse of --enable-flash-late-interaction
    # ModelConfig
    "tokenizer": "value",
    "tokenizer-mode": "value",
    "trust-remote-code": "bool+no",
    "seed": "value",
    "allowed-local-media-path": "value",
    "allowed-media-domains": "list",
    "revision": "value",
    "code-revision": "value",
    "tokenizer-revision": "value",
    "allow-deprecated-quantization": "bool+no",
    "return-sampling-mask": "bool+no",
    "max-logprobs": "value",
    "logprobs-mode": "value",
    "use-fp64-gumbel": "bool+no",
    "disable-cascade-attn": "bool+no",
    "enable-cascade-attn": "bool",  # inverse of --disable-cascade-attn
    "skip-tokenizer-init": "bool+no",
    "enable-prompt-embeds": "bool+no",
    "disable-prompt-embeds": "bool",  # inverse of --enable-prompt-embeds
    "served-model-name": "list",  # nargs='+'
    "config-format": "value",
    "hf-token": "optional",  # nargs='?': bare --hf-token uses the cached login
    "pooler-config": "value",
    "generation-config": "value",
    "override-generation-config": "value",
    "enable-sleep-mode": "bool+no",
    "disable-sleep-mode": "bool",  # inverse of --enable-sleep-mode
    "sleep-mode-backend": "value",
    "sleep-mode-offload-cudagraph": "bool+no",
    "sleep-preserve-parameter-names": "list",
    "enable-cumem-allocator": "bool+no",
    "disable-cumem-allocator": "bool",  # inverse of --enable-cumem-allocator
    "enable-nccl-comm-suspend": "bool+no",
    "disable-nccl-comm-suspend": "bool",  # inverse of --enable-nccl-comm-suspend
    "logits-processors": "list",
    "io-processor-plugin": "value",
    "renderer-num-workers": "value",
    # LoadConfig
    "load-format": "value",
    "download-dir": "value",
    "safetensors-load-strategy": "value",
    "safetensors-prefetch-num-threads": "value",
    "safetensors-prefetch-block-size": "value",
    "model-loader-extra-config": "value",
    "ignore-patterns": "list",
    "use-tqdm-on-load": "bool+no",
    "pt-load-map-location": "value",
    # MambaConfig
    "mamba-backend": "value",
    "mamba-ssu-algorithm": "value",
    "enable-mamba-cache-stochastic-rounding": "bool+no",
    "disable-mamba-cache-stochastic-rounding": "bool",  # inverse of --enable-mamba-cache-stochastic-rounding
    "mamba-cache-philox-rounds": "value",
    # StructuredOutputsConfig
    "reasoning-parser": "value",
    "reasoning-parser-plugin": "value",
    # ParallelConfig
    "distributed-executor-backend": "value",
    "master-addr": "value",
    "master-port": "value",
    "nnodes": "value",
    "node-rank": "value",
    "distributed-timeout-seconds": "value",
    "cpu-distributed-timeout-seconds": "value",
    "numa-bind": "bool+no",
    "numa-bind-nodes": "list",
    "numa-bind-cpus": "list",
    "device-ids": "value",
    "dcp-comm-backend": "value",
    "dcp-kv-cache-interleave-size": "value",
    "cp-kv-cache-interleave-size": "value",
    "data-parallel-rank": "value",
    "data-parallel-start-rank": "value",
    "data-parallel-size-local": "value",
    "data-parallel-address": "value",
    "data-parallel-rpc-port": "value",
    "data-parallel-backend": "value",
    "data-parallel-hybrid-lb": "bool+no",
    "data-parallel-external-lb": "bool+no",
    "data-parallel-multi-port-external-lb": "bool",
    "enable-hc-sp": "bool+no",
    "disable-hc-sp": "bool",  # inverse of --enable-hc-sp
    "enable-batch-sharded-sampling": "bool+no",
    "disable-batch-sharded-sampling": "bool",  # inverse of --enable-batch-sharded-sampling
    "enable-ep-weight-filter": "bool+no",
    "disable-ep-weight-filter": "bool",  # inverse of --enable-ep-weight-filter
    "enable-shm-tensor-arena": "bool+no",
    "disable-shm-tensor-arena": "bool",  # inverse of --enable-shm-tensor-arena
    "dbo-decode-token-threshold": "value",
    "dp-sync-interval": "value",
    "dbo-prefill-token-threshold": "value",
    "disable-nccl-for-dp-synchronization": "bool+no",
    "enable-nccl-for-dp-synchronization": "bool",  # inverse of --disable-nccl-for-dp-synchronization
    "expert-placement-strategy": "value",
    "max-parallel-loading-workers": "value",
    "ray-workers-use-nsight": "bool+no",
    "worker-cls": "value",
    "worker-extension-cls": "value",
    "enable-fault-tolerance": "bool+no",
    "disable-fault-tolerance": "bool",  # inverse of --enable-fault-tolerance
    "fault-tolerance-config": "value",
    # CacheConfig
    # --enable-prefix-caching and --mamba-cache-mode are modelled (Deployment knobs: a hybrid's state blocks)
    "prefix-caching-hash-algo": "value",
    "prefix-cache-retention-interval": "value",
    "kv-sharing-fast-prefill": "bool+no",
    "swa-bounded-replay": "bool+no",
    "prefix-match-unit": "value",
    "enable-mamba-shared-prefix-checkpoint": "bool+no",
    "disable-mamba-shared-prefix-checkpoint": "bool",  # inverse of --enable-mamba-shared-prefix-checkpoint
    # MultiModalConfig
    "enable-mm-embeds": "bool+no",
    "disable-mm-embeds": "bool",  # inverse of --enable-mm-embeds
    "media-io-kwargs": "value",
    "mm-processor-cache-type": "value",
    "mm-hasher-algorithm": "value",
    "mm-shm-cache-max-object-size-mb": "value",
    "mm-encoder-attn-backend": "value",
    "mm-encoder-attn-dtype": "value",
    "mm-encoder-fp8-scale-path": "value",
    "mm-encoder-fp8-scale-save-path": "value",
    "mm-encoder-fp8-scale-save-margin": "value",
    "interleave-mm-strings": "bool+no",
    "video-pruning-method": "value",
    "mm-tensor-ipc": "value",
    "mm-device-do-normalize": "bool+no",
    # LoRAConfig
    "default-mm-loras": "value",
    # LoggingConfig
    "logging-config": "value",
    "log-level": "value",
    "log-config-file": "value",  # deprecated (use --logging-config)
    # ObservabilityConfig
    "show-hidden-metrics-for-version": "value",
    "otlp-traces-endpoint": "value",
    "collect-detailed-traces": "list",
    "per-request-spec-decode-metrics": "value",
    "kv-cache-metrics": "bool+no",
    "kv-cache-metrics-sample": "value",
    "custom-histogram-buckets": "value",
    "cudagraph-metrics": "bool+no",
    "enable-layerwise-nvtx-tracing": "bool+no",
    "disable-layerwise-nvtx-tracing": "bool",  # inverse of --enable-layerwise-nvtx-tracing
    "enable-mfu-metrics": "bool+no",
    "disable-mfu-metrics": "bool",  # inverse of --enable-mfu-metrics
    "enable-logging-iteration-details": "bool+no",
    "disable-logging-iteration-details": "bool",  # inverse of --enable-logging-iteration-details
    "jit-monitor-mode": "value",
    "jit-monitor-verbose": "bool+no",
    # SchedulerConfig
    "max-num-scheduled-tokens": "value",
    "max-num-active-seqs": "value",
    "max-num-queued-reqs": "value",
    "max-num-queued-tokens": "value",
    "long-prefill-token-threshold": "value",
    "long-prefill-token-threshold-adaptive": "bool+no",
    "scheduling-policy": "value",
    "disable-chunked-mm-input": "bool+no",
    "enable-chunked-mm-input": "bool",  # inverse of --disable-chunked-mm-input
    "scheduler-cls": "value",
    "scheduler-reserve-full-isl": "bool+no",
    "watermark": "value",
    "prefill-schedule-interval": "value",
    "async-scheduling": "bool+no",
    "stream-interval": "value",
    # KernelConfig
    "ir-op-priority": "value",
    "enable-flashinfer-autotune": "bool+no",
    "disable-flashinfer-autotune": "bool",  # inverse of --enable-flashinfer-autotune
    "monokernel": "bool+no",
    "linear-backend": "value",
    "sparse-indexer-topk-backend": "value",
    # VllmConfig
    "watermark-config": "value",
    "kv-events-config": "value",
    "reasoning-config": "value",
    "additional-config": "value",
    "structured-outputs-config": "value",
    "profiler-config": "value",
    "watchdog-config": "value",
    "weight-transfer-config": "value",
    # options
    "disable-log-stats": "bool",
    "aggregate-engine-logging": "bool",
    "fail-on-environ-validation": "bool+no",
    "shutdown-timeout": "value",
    "gdn-prefill-backend": "value",
    "kda-prefill-backend": "value",
    "kda-decode-backend": "value",
    "enable-log-requests": "bool+no",  # --disable-log-requests is its inverse again in v0.33.0
    "disable-log-requests": "bool",  # inverse of --enable-log-requests
}

# Current flags that change GPU (or host) memory in ways kvplan does not model: name -> (arity, what changes).
NOTED: dict[str, tuple[str, str]] = {
    # ModelConfig
    "runner": ("value", "pooling/draft runners skip the sampler and, for encoder-only models, the KV cache"),
    "convert": ("value", "turns a generative checkpoint into a pooling model (embed/classify/reward)"),
    "hf-config-path": ("value", "architecture read from another config than the model's"),
    "quantization-config": ("value", "online quantization settings: weight bytes change"),
    "enable-return-routed-experts": ("bool+no", "keeps a per-token routed-expert buffer on the GPU"),
    "disable-return-routed-experts": ("bool", "inverse of --enable-return-routed-experts, which see"),
    "enable-trace-replay": ("bool+no", "reserves a per-request trace buffer"),
    "disable-trace-replay": ("bool", "inverse of --enable-trace-replay, which see"),
    "disable-sliding-window": (
        "bool+no",
        "sliding-window layers keep full-length KV; max_model_len is capped to the window",
    ),
    "enable-sliding-window": ("bool", "inverse of --disable-sliding-window, which see"),
    "model-class-overrides": ("value", "swaps the model class: weights and activations may differ"),
    "model-impl": ("value", "another implementation (e.g. transformers backend): footprint can differ"),
    # AttentionConfig
    "attention-backend": ("value", "backend can force a block size (MLA backends) and adds workspace"),
    # ParallelConfig
    "decode-context-parallel-size": ("value", "shards the KV cache over DCP ranks: more tokens per GPU"),
    "dcp-q-replicate": ("bool+no", "replicates the MLA query projection on every DCP rank (more weight bytes)"),
    "prefill-context-parallel-size": ("value", "context parallelism: more ranks, KV sharded across them"),
    "data-parallel-size": (
        "value",
        "independent replicas: multiplies GPUs; with expert parallel, MoE experts spread over DP x TP",
    ),
    # --enable-expert-parallel, --enable-eplb and --eplb-config are modelled (Deployment knobs); their inverses
    # only restore the default here.
    "disable-expert-parallel": ("bool", "inverse of --enable-expert-parallel, which see"),
    "all2all-backend": ("value", "expert-parallel all-to-all buffers (DeepEP and others) take GPU memory"),
    "enable-dbo": ("bool+no", "dual-batch overlap splits batches into micro-batches: activation peak changes"),
    "disable-dbo": ("bool", "inverse of --enable-dbo, which see"),
    "ubatch-size": ("value", "micro-batch count for dual-batch overlap"),
    "enable-elastic-ep": ("bool+no", "elastic expert parallel reserves room for scaling"),
    "disable-elastic-ep": ("bool", "inverse of --enable-elastic-ep, which see"),
    "elastic-ep-max-dp-size": ("value", "upper bound that elastic EP sizes its buffers for"),
    "disable-eplb": ("bool", "inverse of --enable-eplb, which see"),
    "disable-custom-all-reduce": ("bool+no", "drops the custom all-reduce IPC buffers (tens of MiB)"),
    "enable-custom-all-reduce": ("bool", "inverse of --disable-custom-all-reduce, which see"),
    # CacheConfig
    "num-gpu-blocks-override": ("value", "fixes the number of KV blocks regardless of the memory budget"),
    "kv-cache-dtype-skip-layers": ("list", "listed layers keep unquantized KV"),
    "mamba-cache-dtype": ("value", "dtype of Mamba/SSM state (hybrid models' state bytes)"),
    "mamba-block-size": ("value", "granularity of cached Mamba states"),
    "replayssm-buffer-len": ("value", "length of the ReplaySSM input buffer"),
    "use-replayssm": ("bool+no", "ReplaySSM keeps a buffer of recent SSM inputs per request"),
    # --kv-offloading-size and --kv-offloading-backend are modelled (Deployment knobs; engines/vllm/kv_offload.py)
    # OffloadConfig
    "offload-backend": ("value", "weight offloading backend"),
    # --cpu-offload-gb is modelled (a Deployment knob; engines/vllm/offload.py)
    "cpu-offload-params": ("list", "which parameters the CPU offload may move"),
    "offload-group-size": ("value", "layer-group weight offloading (fewer resident weights)"),
    "offload-num-in-group": ("value", "layers offloaded per group"),
    "offload-prefetch-step": ("value", "how far ahead offloaded weights are prefetched (GPU staging)"),
    "offload-params": ("list", "which parameters group offloading moves"),
    # MultiModalConfig
    # --language-model-only, --limit-mm-per-prompt, --mm-processor-kwargs, --skip-mm-profiling and
    # --mm-encoder-tp-mode are modelled
    # (Deployment knobs; engines/vllm/multimodal.py)
    "mm-processor-cache-gb": ("value", "multimodal processor cache in host RAM (per API process); 0 disables it"),
    "mm-encoder-only": ("bool+no", "encoder-only instance: no language-model KV cache"),
    "video-pruning-rate": ("value", "prunes video tokens: smaller encoder cache and profiling"),
    "mm-processor-device": ("value", "running the processor on the GPU uses GPU memory outside the budget"),
    "mm-ipc-gpu-memory-gb": ("value", "GPU memory set aside for multimodal tensor IPC"),
    # LoRAConfig: --enable-lora, --max-loras, --max-lora-rank, --max-cpu-loras, --lora-dtype, --fully-sharded-loras,
    # --lora-target-modules and --specialize-active-lora are modelled (Deployment knobs; engines/vllm/lora.py)
    "disable-lora": ("bool", "inverse of --enable-lora, which see"),
    "enable-tower-connector-lora": ("bool+no", "LoRA slots for the vision tower and connector too"),
    "disable-tower-connector-lora": ("bool", "inverse of --enable-tower-connector-lora, which see"),
    "enable-mixed-moe-lora-format": ("bool+no", "universal MoE LoRA wrapper: slot layout changes"),
    "disable-mixed-moe-lora-format": ("bool", "inverse of --enable-mixed-moe-lora-format, which see"),
    "enable-moe-shared-loras": ("bool+no", "shared-outer MoE LoRA layout (smaller expert slots)"),
    "disable-moe-shared-loras": ("bool", "inverse of --enable-moe-shared-loras, which see"),
    "max-lora-cls-labels": ("value", "size of LoRA classification heads"),
    # SchedulerConfig
    # --enable-chunked-prefill is modelled (a Deployment knob: off, max_num_batched_tokens >= max_model_len)
    "disable-chunked-prefill": ("bool", "inverse of --enable-chunked-prefill, which see"),
    "disable-prefix-caching": ("bool", "inverse of --enable-prefix-caching, which see"),
    "disable-hybrid-kv-cache-manager": (
        "bool+no",
        "hybrid (sliding-window/Mamba) models then allocate full KV for every layer",
    ),
    "enable-hybrid-kv-cache-manager": ("bool", "inverse of --disable-hybrid-kv-cache-manager, which see"),
    # CompilationConfig
    "cudagraph-capture-sizes": ("list", "batch sizes captured as CUDA graphs: graph memory"),
    "max-cudagraph-capture-size": ("value", "largest CUDA-graph batch: graph memory"),
    # KernelConfig
    "moe-backend": ("value", "MoE kernel choice changes workspace memory"),
    # VllmConfig
    "spec-method": ("value", "shorthand for --speculative-config '{\"method\": ...}'"),
    "spec-model": ("value", "shorthand for --speculative-config '{\"model\": ...}' (draft weights and KV)"),
    "spec-tokens": ("value", "shorthand for --speculative-config '{\"num_speculative_tokens\": N}'"),
    "diffusion-config": ("value", "diffusion-LM decoding settings"),
    # --kv-transfer-config is modelled (a Deployment knob; engines/vllm/lmcache.py, kv_offload.py)
    "ec-transfer-config": ("value", "encoder-cache transfer connector"),
    "ec-manager-config": ("value", "custom encoder-cache manager"),
    "attention-config": ("value", "attention backend settings (like --attention-backend)"),
    "engram-config": ("value", "where n-gram embedding weights live and how they are sharded"),
    "kernel-config": ("value", "kernel choices (MoE/linear backends) change workspace"),
    "aux-output-config": ("value", "routed-experts output buffer (max_bytes)"),
    "optimization-level": (
        "value",
        "-O0 turns off compilation and CUDA graphs (like --enforce-eager), -O1 captures PIECEWISE graphs only "
        "(both modelled); the fusions and compile ranges of -O2/-O3 are not",
    ),
    "performance-mode": ("value", "interactivity/throughput change CUDA-graph sizes and batching defaults"),
}

# Removed or renamed flags: name -> (what replaced it today, when, refused, arity). refused: vLLM 0.33.0 stops with
# 'unrecognized arguments' or 'ambiguous option' (checked on the 0.33.0 parser); arity: as the flag was last
# registered. Covers the shared reference list of renamed flags (vllm-flags.yaml) and every flag registered in
# 0.8.0-0.32.0 but not in 0.33.0.
RENAMED: dict[str, tuple[str, str, bool, str]] = {
    "disable-log-requests": (
        "--enable-log-requests (request logging is off by default; v0.33.0 accepts --disable-log-requests as its inverse)",
        "deprecated v0.10.1 (PR #21739); last in v0.16.0; refused v0.17.0-v0.32.0 (PR #35723); accepted again in v0.33.0",
        False, "bool",
    ),
    "max-seq-len-to-capture": (
        "--max-cudagraph-capture-size (or --compilation-config)",
        "last in v0.10.2, unrecognized from v0.11.0 (PR #25543)",
        True, "value",
    ),
    "cuda-graph-sizes": (
        "--cudagraph-capture-sizes (list) or --max-cudagraph-capture-size (int)",
        "deprecated 2025-10 (PR #26016); last in v0.12.0, unrecognized from v0.13.0",
        True, "list",
    ),
    "guided-decoding-backend": (
        "--structured-outputs-config.backend NAME",
        "removed without deprecation (PR #22772); last in v0.10.2, unrecognized from v0.11.0",
        True, "value",
    ),
    "guided-decoding-disable-fallback": (
        "nothing today (structured-outputs-config.disable_fallback existed v0.11-v0.16)",
        "removed without deprecation (PR #22772); last in v0.10.2, unrecognized from v0.11.0",
        True, "bool+no",
    ),
    "guided-decoding-disable-any-whitespace": (
        "--structured-outputs-config.disable_any_whitespace true",
        "removed without deprecation (PR #22772); last in v0.10.2, unrecognized from v0.11.0",
        True, "bool+no",
    ),
    "guided-decoding-disable-additional-properties": (
        "--structured-outputs-config.disable_additional_properties true",
        "removed without deprecation (PR #22772); last in v0.10.2, unrecognized from v0.11.0",
        True, "bool+no",
    ),
    "task": (
        "--runner {auto,generate,pooling,draft} and --convert {embed,classify,reward,...}",
        "deprecated ~v0.10.1 (PR #21470); last in v0.12.0, unrecognized from v0.13.0",
        True, "value",
    ),
    "rope-scaling": (
        "--hf-overrides '{\"rope_scaling\": {...}}'",
        "deprecated 2024 (PR #5836); last in v0.11.0, unrecognized from v0.11.1 (PR #28006)",
        True, "value",
    ),
    "rope-theta": (
        "--hf-overrides '{\"rope_theta\": ...}'",
        "deprecated 2024 (PR #5836); last in v0.11.0, unrecognized from v0.11.1 (PR #28006)",
        True, "value",
    ),
    "enable-reasoning": (
        "nothing: --reasoning-parser NAME alone enables it",
        "deprecated v0.9.0 (PR #17452); last in v0.9.2, unrecognized from v0.10.0",
        True, "bool+no",
    ),
    "disable-mm-preprocessor-cache": (
        "--mm-processor-cache-gb 0",
        "deprecated; last in v0.12.0, unrecognized from v0.13.0",
        True, "bool",
    ),
    "swap-space": (
        "nothing (unused by the V1 engine)",
        "last in v0.17.1, unrecognized from v0.18.0 (PR #36216)",
        True, "value",
    ),
    "num-scheduler-steps": (
        "nothing (multi-step scheduling is gone)",
        "multi-step scheduling dropped with V0 (PRs #22138, #22779); last in v0.10.0, unrecognized from v0.10.1",
        True, "value",
    ),
    "multi-step-stream-outputs": (
        "nothing (multi-step scheduling is gone)",
        "multi-step scheduling dropped with V0 (PRs #22138, #22779); last in v0.10.0, unrecognized from v0.10.1",
        True, "bool+no",
    ),
    "num-redundant-experts": (
        "--eplb-config.num_redundant_experts N (with --enable-eplb)",
        "flat EPLB flags deprecated when --eplb-config came (PR #20562); last in v0.11.2, unrecognized from v0.12.0",
        True, "value",
    ),
    "eplb-window-size": (
        "--eplb-config.window_size N",
        "flat EPLB flags deprecated when --eplb-config came (PR #20562); last in v0.11.2, unrecognized from v0.12.0",
        True, "value",
    ),
    "eplb-step-interval": (
        "--eplb-config.step_interval N",
        "flat EPLB flags deprecated when --eplb-config came (PR #20562); last in v0.11.2, unrecognized from v0.12.0",
        True, "value",
    ),
    "eplb-log-balancedness": (
        "--eplb-config.log_balancedness true",
        "flat EPLB flags deprecated when --eplb-config came (PR #20562); last in v0.11.2, unrecognized from v0.12.0",
        True, "bool+no",
    ),
    "enable-multimodal-encoder-data-parallel": (
        "--mm-encoder-tp-mode data",
        "renamed v0.10.2 (PR #23190); a deprecated alias last in v0.12.0, unrecognized from v0.13.0",
        True, "bool",
    ),
    "override-pooler-config": (
        "--pooler-config",
        "deprecated PR #25181; last in v0.11.2, unrecognized from v0.12.0 (PR #29402)",
        True, "value",
    ),
    "speculative-model": (
        "--speculative-config '{\"model\": ...}' (or --spec-model)",
        "deprecated by PR #14434; last in v0.8.2, unrecognized from v0.8.3 (PR #15466)",
        True, "value",
    ),
    "num-speculative-tokens": (
        "--speculative-config '{\"num_speculative_tokens\": N}' (or --spec-tokens)",
        "deprecated by PR #14434; last in v0.8.2, unrecognized from v0.8.3 (PR #15466)",
        True, "value",
    ),
    "speculative-draft-tensor-parallel-size": (
        "--speculative-config '{\"draft_tensor_parallel_size\": N}'",
        "deprecated by PR #14434; last in v0.8.2, unrecognized from v0.8.3 (PR #15466)",
        True, "value",
    ),
    "speculative-max-model-len": (
        "--speculative-config '{\"max_model_len\": N}'",
        "deprecated by PR #14434; last in v0.8.2, unrecognized from v0.8.3 (PR #15466)",
        True, "value",
    ),
    "speculative-disable-by-batch-size": (
        "nothing in current --speculative-config",
        "deprecated by PR #14434; last in v0.8.2, unrecognized from v0.8.3 (PR #15466)",
        True, "value",
    ),
    "speculative-model-quantization": (
        "--speculative-config '{\"quantization\": ...}'",
        "deprecated by PR #14434; last in v0.8.2, unrecognized from v0.8.3 (PR #15466)",
        True, "value",
    ),
    "ngram-prompt-lookup-max": (
        "--speculative-config '{\"method\": \"ngram\", \"prompt_lookup_max\": N}'",
        "deprecated by PR #14434; last in v0.8.2, unrecognized from v0.8.3 (PR #15466)",
        True, "value",
    ),
    "ngram-prompt-lookup-min": (
        "--speculative-config '{\"method\": \"ngram\", \"prompt_lookup_min\": N}'",
        "deprecated by PR #14434; last in v0.8.2, unrecognized from v0.8.3 (PR #15466)",
        True, "value",
    ),
    "spec-decoding-acceptance-method": (
        "nothing (V0 sampler choice)",
        "deprecated by PR #14434; last in v0.8.2, unrecognized from v0.8.3 (PR #15466)",
        True, "value",
    ),
    "typical-acceptance-sampler-posterior-threshold": (
        "nothing (V0 sampler)",
        "deprecated by PR #14434; last in v0.8.2, unrecognized from v0.8.3 (PR #15466)",
        True, "value",
    ),
    "typical-acceptance-sampler-posterior-alpha": (
        "nothing (V0 sampler)",
        "deprecated by PR #14434; last in v0.8.2, unrecognized from v0.8.3 (PR #15466)",
        True, "value",
    ),
    "disable-logprobs-during-spec-decoding": (
        "nothing",
        "deprecated by PR #14434; last in v0.8.2, unrecognized from v0.8.3 (PR #15466)",
        True, "optional",
    ),
    "speculative-disable-mqa-scorer": (
        "nothing",
        "deprecated by PR #14434; last in v0.8.2, unrecognized from v0.8.3 (PR #15466)",
        True, "bool",
    ),
    "tokenizer-pool-size": (
        "nothing",
        "deprecated since PR #16790; last in v0.9.2, unrecognized from v0.10.0 (PR #20968)",
        True, "value",
    ),
    "tokenizer-pool-type": (
        "nothing",
        "deprecated since PR #16790; last in v0.9.2, unrecognized from v0.10.0 (PR #20968)",
        True, "value",
    ),
    "tokenizer-pool-extra-config": (
        "nothing",
        "deprecated since PR #16790; last in v0.9.2, unrecognized from v0.10.0 (PR #20968)",
        True, "value",
    ),
    "device": (
        "nothing: the platform is detected; choose GPUs with CUDA_VISIBLE_DEVICES or --device-ids",
        "deprecated v0.9.0 (PR #18399); last in v0.9.2, gone from v0.10.0 (PR #21349); now an ambiguous prefix",
        True, "value",
    ),
    "disable-async-output-proc": (
        "nothing (V0 only)",
        "last in v0.10.2, unrecognized from v0.11.0 (V0 removal, PR #25334)",
        True, "bool",
    ),
    "preemption-mode": (
        "nothing (V0 only)",
        "last in v0.10.2, unrecognized from v0.11.0 (V0 removal, PR #25334)",
        True, "value",
    ),
    "scheduler-delay-factor": (
        "nothing (V0 only)",
        "last in v0.10.2, unrecognized from v0.11.0 (V0 removal, PR #25334)",
        True, "value",
    ),
    "use-v2-block-manager": (
        "nothing (the v2 block manager was the only one; the flag was a no-op)",
        "no-op since PR #8704 (2024-10); last in v0.9.2, unrecognized from v0.10.0",
        True, "bool",
    ),
    "enable-prompt-adapter": (
        "nothing (prompt adapters dropped)",
        "no effect since ~v0.10; last in v0.10.1, unrecognized from v0.10.2",
        True, "bool",
    ),
    "max-prompt-adapters": (
        "nothing (prompt adapters dropped)",
        "prompt adapters dropped; last in v0.9.2, unrecognized from v0.10.0",
        True, "value",
    ),
    "max-prompt-adapter-token": (
        "nothing (prompt adapters dropped)",
        "prompt adapters dropped; last in v0.9.2, unrecognized from v0.10.0",
        True, "value",
    ),
    "prompt-adapters": (
        "nothing (prompt adapters dropped)",
        "prompt adapters dropped; last in v0.9.2, unrecognized from v0.10.0",
        True, "list",
    ),
    "kv-cache-memory": (
        "--kv-cache-memory-bytes",
        "never a registered name: works only as an argparse prefix of --kv-cache-memory-bytes (present from v0.10.2)",
        False, "value",
    ),
    "max-num-batched-token": (
        "--max-num-batched-tokens",
        "never a registered name: works only as an argparse prefix",
        False, "value",
    ),
    "calculate-kv-scales": (
        "nothing",
        "last in v0.27.0, unrecognized from v0.28.0",
        True, "bool+no",
    ),
    "disable-frontend-multiprocessing": (
        "nothing",
        "last in v0.18.0, unrecognized from v0.19.0",
        True, "bool+no",
    ),
    "enable-lora-bias": (
        "nothing (LoRA bias support dropped)",
        "last in v0.11.0, unrecognized from v0.11.1",
        True, "bool+no",
    ),
    "lora-extra-vocab-size": (
        "nothing",
        "last in v0.11.2, unrecognized from v0.12.0",
        True, "value",
    ),
    "long-lora-scaling-factors": (
        "nothing",
        "last in v0.9.2, unrecognized from v0.10.0",
        True, "list",
    ),
    "qlora-adapter-name-or-path": (
        "nothing",
        "last in v0.9.2, unrecognized from v0.10.0",
        True, "value",
    ),
    "max-num-partial-prefills": (
        "nothing",
        "last in v0.26.0, unrecognized from v0.27.0",
        True, "value",
    ),
    "max-long-partial-prefills": (
        "nothing",
        "last in v0.26.0, unrecognized from v0.27.0",
        True, "value",
    ),
    "num-lookahead-slots": (
        "nothing",
        "last in v0.11.2, unrecognized from v0.12.0",
        True, "value",
    ),
    "logits-processor-pattern": (
        "--logits-processors",
        "last in v0.16.0, unrecognized from v0.17.0",
        True, "value",
    ),
    "override-attention-dtype": (
        "nothing (--mm-encoder-attn-dtype covers encoders)",
        "last in v0.27.0, unrecognized from v0.28.0",
        True, "value",
    ),
    "override-neuron-config": (
        "nothing (Neuron support dropped)",
        "last in v0.10.1, unrecognized from v0.10.2",
        True, "value",
    ),
    "expand-tools-even-if-tool-choice-none": (
        "nothing (see --exclude-tools-when-tool-choice-none)",
        "deprecated; last in v0.9.2, unrecognized from v0.10.0",
        True, "bool",
    ),
    "use-gpu-for-pooling-score": (
        "nothing",
        "added v0.17.0, last in v0.17, unrecognized from v0.18.0",
        True, "bool+no",
    ),
    "enable-bf16x3-router-gemm": (
        "nothing",
        "added v0.26.0, last in v0.29, unrecognized from v0.30.0",
        True, "bool+no",
    ),
    "enable-mamba-fine-grained-prefix-cache": (
        "nothing",
        "added v0.30.0, last in v0.30, unrecognized from v0.31.0",
        True, "bool+no",
    ),
}

# Environment variables that were removed (vLLM 0.33.0 only warns "Unknown vLLM environment variable detected"
# for an unknown VLLM_* name, or refuses to start with --fail-on-environ-validation): name -> (today, when).
RENAMED_ENV: dict[str, tuple[str, str]] = {
    "VLLM_ATTENTION_BACKEND": (
        "--attention-backend NAME (or --attention-config.backend NAME)",
        "flag added, variable deprecated 2025-10 (PR #26315); read up to v0.14.0, gone from vllm/envs.py in v0.15.0",
    ),
    "VLLM_USE_V1": (
        "nothing (V1 is the only engine)",
        "read up to v0.11.0, gone from vllm/envs.py in v0.11.1",
    ),
}

CATALOGUE = Catalogue(short=SHORT, aliases=ALIASES, inert=INERT, noted=NOTED, renamed=RENAMED,
                      renamed_env=RENAMED_ENV, underscores_accepted=UNDERSCORES_ACCEPTED,
                      abbreviations_allowed=ABBREVIATIONS_ALLOWED)
