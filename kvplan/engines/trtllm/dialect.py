"""The `trtllm-serve` command line: its flags, kvplan's knobs among them, are in flags.py; its --config file is
an LLM-API options YAML (options.py)."""

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
            *flags.EXTRA_OPTIONS_SECTIONS)
    return frozenset(key.split(".", 1)[0] for key in keys)


DIALECT = Dialect(
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
    own_knobs=frozenset({"backend"}),
)
