"""Runs inside a scratch venv with one vLLM release on PYTHONPATH (tests/oracle/generate.py starts it; CI never
imports it): reads the deployments from a JSON file, asks the release's own code for each, prints one JSON object
per deployment. The planning call itself is the release range's module (vllm_v08, vllm_v011, vllm_v033); what is
shared (the engine config, the layer specs as the release's attention layer builds them, the defaults) is here.

    PYTHONPATH=SRC:tests/oracle python -m vllm_adapter VERSION DEPLOYMENTS.json
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
from typing import Any

import vllm_env

FP8 = ("fp8", "fp8_e4m3", "fp8_e5m2")
REFUSED = re.compile(r"estimated maximum model length is (\d+)")
DEFAULTS_SOURCE = "vllm.engine.arg_utils.EngineArgs.create_engine_config"


def version_tuple(version: str) -> tuple[int, int]:
    major, minor = version.split(".")[:2]
    return int(major), int(minor)


def model_dir(config: dict[str, Any], root: str) -> str:
    """A directory holding the config as config.json (no weights: load_format dummy, no tokenizer)."""
    name = config.get("_name", "model").replace("/", "__")
    path = os.path.join(root, name)
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "config.json"), "w") as handle:
        # the weights' quantization does not touch the KV cache; importing its kernels fails on CPU
        json.dump({k: v for k, v in config.items() if k not in ("_name", "quantization_config")}, handle)
    return path


def engine_config(case: dict[str, Any], root: str) -> Any:
    """EngineArgs(...).create_engine_config() for the serve entry point, as `vllm serve` builds it."""
    from vllm.engine.arg_utils import EngineArgs
    from vllm.usage.usage_lib import UsageContext

    knobs = {key: value for key, value in case.get("knobs", {}).items() if value is not None}
    args = EngineArgs(model=model_dir(case["config"], root), skip_tokenizer_init=True, load_format="dummy", **knobs)
    return args.create_engine_config(usage_context=UsageContext.OPENAI_API_SERVER)


def defaults(config: Any) -> dict[str, Any]:
    """The engine-argument and config defaults this release resolved."""
    sizes = sorted(getattr(config.compilation_config, "cudagraph_capture_sizes", None) or [])
    found = {
        "gpu_memory_utilization": config.cache_config.gpu_memory_utilization,
        "max_num_seqs": config.scheduler_config.max_num_seqs,
        "max_num_batched_tokens": config.scheduler_config.max_num_batched_tokens,
        "block_size": config.cache_config.block_size,
        "max_model_len": config.model_config.max_model_len,
        "cudagraph_capture_sizes": len(sizes),
        "max_capture_size": sizes[-1] if sizes else 0,
    }
    runner = getattr(config, "use_v2_model_runner", None)
    if runner is not None:
        found["use_v2_model_runner"] = bool(runner)
    return found


def layer_kinds(hf: dict[str, Any], config: Any = None) -> list[int | None]:
    """Each decoder layer's sliding window (None: full attention): layer_types as the release's model config holds
    it (transformers derives it from sliding_window_pattern where the file lacks it), else the file's, else Gemma
    2's alternation. Other models: full attention everywhere."""
    count = hf["num_hidden_layers"]
    window = hf.get("sliding_window")
    text = getattr(getattr(config, "model_config", None), "hf_text_config", None)
    types = getattr(text, "layer_types", None) or hf.get("layer_types")
    if types:
        return [window if kind == "sliding_attention" else None for kind in types[:count]]
    if hf.get("model_type") == "gemma2" and window:
        return [window if i % 2 == 0 else None for i in range(count)]
    return [None] * count


class Layer:
    """What an attention layer carries into get_kv_cache_spec, without building the module."""

    def __init__(self, **values: Any) -> None:
        self.__dict__.update(values)


def attention_class(version: tuple[int, int]) -> Any:
    if version >= (0, 17):
        from vllm.model_executor.layers.attention.attention import Attention
    else:
        from vllm.attention.layer import Attention
    return Attention


def layer_specs(case: dict[str, Any], config: Any, version: tuple[int, int]) -> dict[str, Any]:
    """The per-worker KV cache specs: from v0.12 by the release's own Attention.get_kv_cache_spec (with its
    FlashAttention backend class), before by the runner's rule (FullAttentionSpec / SlidingWindowSpec at the
    cache block size)."""
    import torch
    from vllm.v1.kv_cache_interface import FullAttentionSpec, SlidingWindowSpec

    hf = case["config"]
    tp = case.get("knobs", {}).get("tensor_parallel_size") or 1
    heads = hf.get("num_key_value_heads") or hf["num_attention_heads"]
    kv_heads = max(heads // tp, 1)
    head_size = hf.get("head_dim") or hf["hidden_size"] // hf["num_attention_heads"]
    kv_dtype = case.get("knobs", {}).get("kv_cache_dtype") or "auto"
    dtype = torch.uint8 if kv_dtype in FP8 else config.model_config.dtype
    block = config.cache_config.block_size
    specs = {}
    if version >= (0, 12):
        from vllm.v1.attention.backends.flash_attn import FlashAttentionBackend

        try:
            from vllm.v1.attention.backend import AttentionType
        except ImportError:
            from vllm.attention.backends.abstract import AttentionType

        attention = attention_class(version)
        for i, window in enumerate(layer_kinds(hf, config)):
            layer = Layer(sliding_window=window, num_kv_heads=kv_heads, head_size=head_size, head_size_v=head_size,
                          kv_cache_torch_dtype=dtype, kv_cache_dtype=kv_dtype, dtype=config.model_config.dtype,
                          attn_type=AttentionType.DECODER, attn_backend=FlashAttentionBackend, use_mla=False,
                          layer_name=f"model.layers.{i}.self_attn.attn")
            specs[layer.layer_name] = attention.get_kv_cache_spec(layer, config)
        return specs
    for i, window in enumerate(layer_kinds(hf, config)):
        fields: dict[str, Any] = {"block_size": block, "num_kv_heads": kv_heads, "head_size": head_size,
                                  "dtype": dtype}
        if "use_mla" in FullAttentionSpec.__dataclass_fields__:
            fields["use_mla"] = False
        name = f"model.layers.{i}.self_attn.attn"
        specs[name] = FullAttentionSpec(**fields) if window is None else SlidingWindowSpec(sliding_window=window,
                                                                                          **fields)
    return specs


def planner(version: tuple[int, int]) -> Any:
    if version >= (0, 33):
        import vllm_v033 as module
    elif version >= (0, 11):
        import vllm_v011 as module
    else:
        import vllm_v08 as module
    return module


def run_case(case: dict[str, Any], version: tuple[int, int], root: str) -> dict[str, Any]:
    vllm_env.set_gpu(case["gpu"]["name"], case["gpu"]["memory"], case["gpu"]["capability"],
                     case.get("knobs", {}).get("tensor_parallel_size") or 1)
    vllm_env.forget_once()
    vllm_env.CATCHER.take()
    config = engine_config(case, root)
    says: dict[str, Any] = {"defaults": defaults(config)}
    if case["kind"] == "kv":
        specs = layer_specs(case, config, version)
        vllm_env.CATCHER.take()
        says.update(planner(version).plan(config, specs, case["kv_memory"]))
        says.update(vllm_env.logged(vllm_env.CATCHER.take()))
    return says


def answer(case: dict[str, Any], version: tuple[int, int], root: str) -> dict[str, Any]:
    """One case's ORACLE object: what the release says, that it refuses to start, or the error it raised."""
    source = planner(version).SOURCE if case["kind"] == "kv" else DEFAULTS_SOURCE
    try:
        return {"id": case["id"], "source": source, "engine_says": run_case(case, version, root)}
    except Exception as exc:  # noqa: BLE001 - a case the release cannot run is recorded, not fatal
        refused = REFUSED.search(str(exc))
        if isinstance(exc, ValueError) and refused and case["kind"] == "kv":
            # the release refuses to start: one max_model_len request does not fit
            return {"id": case["id"], "source": source,
                    "engine_says": {"fits": False, "estimated_max_model_len": int(refused.group(1))}}
        if os.environ.get("KVPLAN_ORACLE_DEBUG"):
            import traceback

            traceback.print_exc()
        return {"id": case["id"], "error": f"{type(exc).__name__}: {str(exc)[:300]}"}


def main(argv: list[str]) -> int:
    version_text, path = argv
    version = version_tuple(version_text)
    if version < (0, 11):
        os.environ.setdefault("VLLM_USE_V1", "1")
    vllm_env.install()
    with open(path) as handle:
        cases = json.load(handle)
    root = tempfile.mkdtemp(prefix="kvplan-oracle-")
    for case in cases:
        print("ORACLE " + json.dumps(answer(case, version, root)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
