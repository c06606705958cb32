"""What a knob of a deployment is: its type, range, default rule, spellings and help. Each Deployment field
carries one (deployment.declaration); the fast validator (deployment.values) and the pydantic model of the file
formats (deployment.schema) each apply it in their own code, and tests/test_deployment.py checks that they agree."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

# The kinds of value a knob holds, and how text is read into them.
#   int: vLLM's human-readable integer (32K = 32,768, 25.6k = 25,600); float; str; bool;
#   size: bytes, as an integer, a human-readable integer (24G = 24 GiB) or with a unit (24GB, 24GiB);
#   json: a JSON object (a dict in a mapping, a JSON string on a command line).
KINDS = ("int", "float", "str", "bool", "size", "json")

AUTO = -1  # an int knob given as "auto" / -1
MAX_GPUS = 4096  # more ranks than any deployment has; a bound against absurd input, not a rule of an engine
MAX_TOKENS = 2**31 - 1  # a context or batch longer than this is not a real setting


@dataclass(eq=False)
class Knob:
    """One knob of a deployment, as declared on its Deployment field."""

    kind: str
    help: str
    default: Any = None  # None: the engine decides (default_rule says how)
    default_rule: str = ""
    choices: tuple[Any, ...] | Callable[[], tuple[Any, ...]] = ()  # a callable: choices known only when asked
    unmodelled: dict[Any, str] = field(default_factory=dict)  # values the engine takes that kvplan refuses: why
    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: bool = False  # minimum itself is refused (utilization must be > 0)
    aliases: tuple[str, ...] = ()  # other spellings on any engine, dash form without the leading dashes
    short: tuple[str, ...] = ()  # single-dash spellings, e.g. "tp"
    engine_flag: bool = True  # a real flag of the engines that have it (False: kvplan's own, e.g. engine, gpu)
    json_level: bool = False  # json knob that also takes a bare integer level (-cc 3)
    auto: bool = False  # also takes "auto" (or -1), stored as AUTO: the engine picks the value
    engine_only: bool = False  # only the engines whose dialect lists it in own_knobs have it
    env: str | None = None  # the engine's environment variable that sets it, where it has one

    @property
    def allowed(self) -> tuple[Any, ...]:
        """The choices, where the knob has a fixed set (empty: any value of its kind)."""
        return self.choices() if callable(self.choices) else self.choices

    name: str = ""  # the Deployment field it declares, filled in from the field: vLLM's flag with underscores

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")


MODEL_DTYPES = ("auto", "half", "float16", "bfloat16", "float", "float32")
KV_CACHE_DTYPES = ("auto", "float16", "bfloat16", "float32", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc",
                   # packed formats, their scales inside the page (vllm/config/cache.py CacheDType; kvplan.units KV_FORMATS)
                   "fp8_ds_mla", "int8_per_token_head", "fp8_per_token_head", "nvfp4",
                   # SGLang's (0.5.23 arg_groups/choices.py; kvplan.units Mxfp8Kv, Fp4MxBlock16Kv)
                   "mxfp8", "fp4_mx_block16")
# vLLM's QUANTIZATION_METHODS (vllm/model_executor/layers/quantization/__init__.py); methods of other
# engines are spelled the same where they exist.
QUANTIZATION_METHODS = (
    "awq", "awq_marlin", "gptq", "gptq_marlin", "gptq_marlin_24", "gptq_bitblas", "bitblas", "marlin",
    "fp8", "fbgemm_fp8", "ptpc_fp8", "modelopt", "modelopt_fp4", "compressed-tensors", "bitsandbytes",
    "gguf", "experts_int8", "moe_wna16", "mxfp4", "hqq", "quark", "torchao", "auto-round", "auto_round", "inc", "rtn",
    "petit_nvfp4", "fp_quant", "tpu_int8", "ipex", "deepspeedfp",
)



def knob(kind: str, help: str, default: Any = None, **details: Any) -> Any:
    """A Deployment field declared with its Knob."""
    return field(default=default, metadata={"knob": Knob(kind, help, default, **details)})
