"""The `python -m sglang.launch_server` command line: its flags, kvplan's knobs among them, are in flags.py."""

from kvplan.deployment.dialect import Dialect

DP_FLAGS = ("--dp", "--dp-size", "--data-parallel-size")


def attention_dp(words: list[str]) -> list[str]:
    """`--dp N --enable-dp-attention` as SGLang reads it (server_args.py: with dp attention on, the DP ranks
    split the TP group's attention, and the GPUs are TP's): attention DP N inside TP, no data parallelism."""
    if "--enable-dp-attention" not in words:
        return words
    out: list[str] = []
    index = 0
    while index < len(words):
        word = words[index]
        name, equals, inline = word.partition("=")
        if name in DP_FLAGS and (equals or index + 1 < len(words)):
            size = inline if equals else words[index + 1]
            out += ["--attn-dp-size", size]
            index += 1 if equals else 2
            continue
        out.append(word)
        index += 1
    return out

DIALECT = Dialect(
    name="sglang",
    label="SGLang",
    env_prefix="SGLANG_",
    catalogue_module="kvplan.engines.sglang.flags",
    modules=("sglang.launch_server",),
    images=("lmsysorg/sglang",),
    image_fragments=("sglang",),
    image_tags_are_releases=True,  # lmsysorg/sglang:v0.5.4 runs SGLang 0.5.4
    model_flag="--model-path",
    reads_words=attention_dp,
    flag_file=True,
    own_knobs=frozenset({"max_total_tokens", "max_mamba_cache_size", "mamba_full_memory_ratio",
                         "swa_full_tokens_ratio", "attention_data_parallel_size"}),
)
