"""The `python -m sglang.launch_server` command line: its flags, kvplan's knobs among them, are in flags.py."""

from kvplan.deployment.dialect import Dialect

DIALECT = Dialect(
    name="sglang",
    label="SGLang",
    env_prefix="SGLANG_",
    catalogue_module="kvplan.engines.sglang.flags",
    modules=("sglang.launch_server",),
    model_flag="--model-path",
    flag_file=True,
    own_knobs=frozenset({"max_total_tokens", "max_mamba_cache_size", "mamba_full_memory_ratio",
                         "swa_full_tokens_ratio", "attention_data_parallel_size"}),
)
