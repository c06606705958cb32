"""The `python -m sglang.launch_server` command line: its flags for kvplan's knobs (KNOB_FLAGS, here), the others
in flags.py."""

from kvplan.deployment.dialect import BenchModule, Dialect

DP_FLAGS = ("--dp", "--dp-size", "--data-parallel-size")


def attention_dp(words: list[str]) -> list[str]:
    """`--dp N --enable-dp-attention` as SGLang reads it (server_args.py: with dp attention on, the DP ranks
    split the TP group's attention, and the GPUs are TP's): attention DP N inside TP, no data parallelism. The switch
    itself is then read (without --dp it does nothing: _handle_data_parallelism turns it off at dp_size 1)."""
    if "--enable-dp-attention" not in words:
        return words
    out: list[str] = []
    index = 0
    while index < len(words):
        word = words[index]
        if word == "--enable-dp-attention":
            index += 1
            continue
        name, equals, inline = word.partition("=")
        if name in DP_FLAGS and (equals or index + 1 < len(words)):
            size = inline if equals else words[index + 1]
            out += ["--attn-dp-size", size]
            index += 1 if equals else 2
            continue
        out.append(word)
        index += 1
    return out

# Integer parsing: --context-length, --max-total-tokens, --max-prefill-tokens and --cuda-graph-prefill-max-context
# use SGLang's own human_readable_int (sglang/srt/utils/common.py), not vLLM's: SI suffixes k, M, G, T (all
# powers of 10; decimals allowed, '25.6k' -> 25,600) and IEC suffixes Ki, Mi, Gi, Ti (powers of 2, integers only),
# case-sensitive, so '32K' and '1m' are refused. Every other integer flag (--chunked-prefill-size,
# --max-running-requests, --page-size, ...) is a plain int.
#
# Flag -> (kvplan field, named as vLLM's flag with underscores; arity). Spellings marked "prefix" are not
# declared by SGLang and work only through argparse abbreviation. kv-cache-dtype choices in 0.5.23: auto,
# fp8_e5m2, fp8_e4m3, mxfp8, bf16, bfloat16, nvfp4, fp4_mx_block16 (no bare "fp8"); dtype choices as vLLM's.
# mem-fraction-static is a share of total GPU memory for weights plus KV pool (SGLang's meaning, not vLLM's).
# json-model-override-args is SGLang's --hf-overrides; --config is a YAML file of flags (ConfigArgumentMerger).
KNOB_FLAGS: dict[str, tuple[str, str]] = {
    "model-path": ("model", "value"),
    "model": ("model", "value"),  # declared alias of --model-path
    "mem-fraction-static": ("gpu_memory_utilization", "value"),
    "context-length": ("max_model_len", "value"),
    "chunked-prefill-size": ("max_num_batched_tokens", "value"),
    "max-running-requests": ("max_num_seqs", "value"),
    "page-size": ("block_size", "value"),
    "tp-size": ("tensor_parallel_size", "value"),
    "tensor-parallel-size": ("tensor_parallel_size", "value"),
    "tp": ("tensor_parallel_size", "value"),  # prefix
    "pp-size": ("pipeline_parallel_size", "value"),
    "pipeline-parallel-size": ("pipeline_parallel_size", "value"),
    "dp-size": ("data_parallel_size", "value"),
    "data-parallel-size": ("data_parallel_size", "value"),
    "dp": ("data_parallel_size", "value"),  # prefix
    "kv-cache-dtype": ("kv_cache_dtype", "value"),
    "dtype": ("dtype", "value"),
    "quantization": ("quantization", "value"),
    "json-model-override-args": ("hf_overrides", "value"),
    "max-total-tokens": ("max_total_tokens", "value"),
    "max-mamba-cache-size": ("max_mamba_cache_size", "value"),
    "mamba-full-memory-ratio": ("mamba_full_memory_ratio", "value"),
    "swa-full-tokens-ratio": ("swa_full_tokens_ratio", "value"),
    "attn-dp-size": ("attention_data_parallel_size", "value"),
    "attention-data-parallel-size": ("attention_data_parallel_size", "value"),
    "config": ("config", "value"),
}

# SGLang 0.5.23 benchmark/one_batch.py cli_main: ServerArgs.add_cli_args then BenchArgs.add_cli_args on one
# parser; load_model builds the server's ModelRunner and alloc_memory_pool from those ServerArgs, so the KV pool is
# the server's. BenchArgs' flags, by nargs: none sets the pool; --batch-size's largest value becomes the decode
# CUDA graphs' max_bs (main's declare_resolution of cuda_graph_config), graph memory kvplan does not model. 0.5.23
# ships the module as sglang.benchmark.one_batch; sglang.bench_one_batch is the older releases' path.
ONE_BATCH_FLAGS = {
    "run-name": "value", "batch-size": "values", "input-len": "values", "output-len": "values",
    "prompt-filename": "value", "result-filename": "value", "correctness-test": "switch", "cut-len": "value",
    "log-decode-step": "value", "profile": "switch", "profile-record-shapes": "switch",
    "profile-activities": "values", "profile-stage": "value", "profile-prefix": "value",
    "profile-start-step": "value", "profile-steps": "value",
}
ONE_BATCH_NOTE = ("the benchmark's BenchArgs, which size no KV pool: the pool is the server's, from ServerArgs; "
                  "--batch-size's largest value is the decode CUDA graphs' max_bs, graph memory not modelled")

DIALECT = Dialect(
    knob_flags=KNOB_FLAGS,
    name="sglang",
    label="SGLang",
    env_prefix="SGLANG_",
    catalogue_module="kvplan.engines.sglang.flags",
    modules=("sglang.launch_server",),
    bench_modules=(BenchModule("sglang.benchmark.one_batch", ONE_BATCH_FLAGS, ONE_BATCH_NOTE),
                   BenchModule("sglang.bench_one_batch", ONE_BATCH_FLAGS,
                               ONE_BATCH_NOTE + "; SGLang 0.5.23 ships it as sglang.benchmark.one_batch")),
    images=("lmsysorg/sglang",),
    image_fragments=("sglang",),
    image_tags_are_releases=True,  # lmsysorg/sglang:v0.5.4 runs SGLang 0.5.4
    model_flag="--model-path",
    reads_words=attention_dp,
    unchunked_prefill=-1,  # server_args.py: chunked_prefill_size -1 disables chunked prefill
    flag_file=True,
    own_knobs=frozenset({"max_total_tokens", "max_mamba_cache_size", "mamba_full_memory_ratio",
                         "swa_full_tokens_ratio", "attention_data_parallel_size", "enable_hierarchical_cache",
                         "disable_radix_cache",
                         "hicache_ratio", "hicache_size", "cpu_offload_gb",
                         "enable_lora", "max_lora_rank", "lora_target_modules", "max_loras_per_batch",
                         # read by defaults.text_only_reason, towers.py and backend.py (releases.py names the
                         # release each flag appears in)
                         "enable_multimodal", "language_only", "language_model_only", "disaggregation_mode"}),
)
