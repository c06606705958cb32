"""The `trtllm-serve` command line: its options for kvplan's knobs (KNOB_FLAGS, here), the others in flags.py;
its --config file is an LLM-API options YAML (options.py)."""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

from kvplan.deployment.dialect import Dialect, Program

if TYPE_CHECKING:
    from kvplan.deployment.values import Draft


def _read_options(path: str) -> Draft:
    from kvplan.engines.trtllm.options import read_options

    return read_options(path)


@cache
def _option_keys() -> frozenset[str]:
    from kvplan.engines.trtllm import flags

    keys = (*flags.EXTRA_OPTIONS_KNOBS, *flags.EXTRA_OPTIONS_NOTED, *flags.EXTRA_OPTIONS_INERT,
            *flags.EXTRA_OPTIONS_SECTIONS, flags.ATTENTION_DP_KEY)
    return frozenset(key.split(".", 1)[0] for key in keys)


# Option -> (kvplan field, named as vLLM's flag with underscores; arity). Defaults in serve: max_batch_size
# 2048, max_num_tokens 8192, max_seq_len None (from the model config), free_gpu_memory_fraction 0.9,
# kv_cache_dtype auto (choices auto, fp8, nvfp4), tp/pp 1, ep None. All integers are plain click ints (no
# suffixes). The memory fraction is TensorRT-LLM's: a share of the GPU memory still free after the weights and
# activations are in place, not of the total as in vLLM. The block size (tokens_per_block, default 32) has no
# trtllm-serve option: only the YAML (see EXTRA_OPTIONS_KNOBS).
KNOB_FLAGS: dict[str, tuple[str, str]] = {
    "free-gpu-memory-fraction": ("gpu_memory_utilization", "value"),
    "kv-cache-free-gpu-memory-fraction": ("gpu_memory_utilization", "value"),  # second name of the same option
    "max-seq-len": ("max_model_len", "value"),
    "max-batch-size": ("max_num_seqs", "value"),
    "max-num-tokens": ("max_num_batched_tokens", "value"),
    "tensor-parallel-size": ("tensor_parallel_size", "value"),
    "tp-size": ("tensor_parallel_size", "value"),
    "pipeline-parallel-size": ("pipeline_parallel_size", "value"),
    "pp-size": ("pipeline_parallel_size", "value"),
    # vLLM has no EP size (it derives EP = TP x DP from --enable-expert-parallel); TensorRT-LLM sets it directly.
    "moe-expert-parallel-size": ("expert_parallel_size", "value"),
    "ep-size": ("expert_parallel_size", "value"),
    "kv-cache-dtype": ("kv_cache_dtype", "value"),
    # a click flag (is_flag): attention_dp_words gives it the TP size, every rank being its own attention DP rank
    "enable-attention-dp": ("attention_data_parallel_size", "value"),
    # choices pytorch (default), tensorrt (alias trt: serve.py's ChoiceWithAlias) and _autodeploy; kvplan models
    # pytorch and tensorrt (the `backend` knob).
    "backend": ("backend", "value"),
    # a click flag (is_flag); read for DeepSeek-V4's FP8 context-MLA workspace reserve (deepseek_v4.Workspace)
    "enable-chunked-prefill": ("enable_chunked_prefill", "value"),
    # A YAML file of LLM-API arguments merged over the command line (update_llm_args_with_extra_dict); one option
    # with two names.
    "config": ("config", "value"),
    "extra-llm-api-options": ("config", "value"),
}

TP_FLAGS = ("--tp_size", "--tensor_parallel_size")


def attention_dp_words(words: list[str]) -> list[str]:
    """`--enable_attention_dp` as the attention DP size it means: under attention DP every rank of the TP group
    runs its own requests' attention (tensorrt_llm/mapping.py: attention DP spans tp_size), so the size is the
    TP size of the same line (1 without one)."""
    if "--enable_attention_dp" not in words:
        return words
    tp = "1"
    for index, word in enumerate(words):
        name, equals, inline = word.partition("=")
        if name in TP_FLAGS:
            tp = inline if equals else (words[index + 1] if index + 1 < len(words) else tp)
    if not (tp.isdigit() and int(tp) > 0):
        tp = "1"  # a bad TP size is refused under its own flag, not under --enable_attention_dp
    at = words.index("--enable_attention_dp")
    return [*words[:at + 1], tp, *words[at + 1:]]


DIALECT = Dialect(
    knob_flags=KNOB_FLAGS,
    name="trtllm",
    label="TensorRT-LLM",
    env_prefix="TRTLLM_",
    catalogue_module="kvplan.engines.trtllm.flags",
    # a DefaultGroup: `trtllm-serve MODEL ...` runs its `serve` subcommand
    programs=(Program("trtllm-serve", "serve", subcommand_optional=True),),
    positional_model=True,
    image_fragments=("tensorrt-llm", "tensorrt_llm"),  # nvcr.io/nvidia/tensorrt-llm/release
    options_reader=_read_options,
    option_keys=_option_keys,
    # kvplan's own command line takes these for TensorRT-LLM too (trtllm-serve has no such option: the block
    # size is the options file's kv_cache_config.tokens_per_block)
    extra_spellings={"block_size": ("tokens-per-block",), "model": ("model-path",),
                     "gpu_memory_utilization": ("kv-cache-free-gpu-mem-fraction",)},
    # kv_offloading_size: kv_cache_config.host_cache_size; attention_data_parallel_size: --enable_attention_dp
    own_knobs=frozenset({"backend", "kv_offloading_size", "attention_data_parallel_size", "enable_lora",
                         "max_lora_rank", "max_loras", "max_cpu_loras", "lora_target_modules",
                         "mamba_ssm_cache_dtype", "enable_chunked_prefill", "enable_prefix_caching",
                         "fp8_context_mla_kv_len_cap"}),
    reads_words=attention_dp_words,
)
