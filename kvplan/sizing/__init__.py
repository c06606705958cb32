"""kvplan size: the cheapest deployments that meet every target, each as a launch command to paste.

    >>> from kvplan.sizing import size
    >>> found = size("Qwen/Qwen2.5-7B", "32@8K", gpus="l4,l40s,h100", max_gpus=2)
    >>> found.options[0].command()
    'vllm serve Qwen/Qwen2.5-7B --max-model-len 8192 --kv-cache-dtype fp8'
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from kvplan.deployment import Deployment
from kvplan.deployment.knobs import AUTO
from kvplan.errors import KvplanError
from kvplan.hardware import Gpu, catalogue, derived_memory_note, find_gpu
from kvplan.sizing.command import engine_has, launchable, unspoken
from kvplan.sizing.formats import WEIGHT_FORMATS, KvFormat, WeightFormat, kv_format, parse_list, weight_format
from kvplan.sizing.prices import parse_price_flags
from kvplan.sizing.search import Option, Sizing, Space, search
from kvplan.sizing.targets import Target, parse_targets
from kvplan.units import parse_size

__all__ = ["Option", "Sizing", "Target", "size", "size_deployment"]

MAX_SEARCH_GPUS = 64  # a bound on the search (its splits grow with the count), not a rule of any engine
DEFAULT_KV = "auto,fp8"
DEFAULT_WEIGHTS = "none"


def _gpus(names: str | Sequence[str] | None, prices: dict[str, float] | None) -> tuple[Gpu, ...]:
    if names is None:
        every = catalogue()
        return every if prices is None else tuple(gpu for gpu in every if gpu.id in prices)
    listed = [part for name in ([names] if isinstance(names, str) else names) for part in str(name).split(",")]
    found: dict[str, Gpu] = {}
    for name in (part.strip() for part in listed if part.strip()):
        try:
            gpu = find_gpu(name)
        except KvplanError as exc:
            raise exc.at("--gpus") from None
        found.setdefault(gpu.id, gpu)
    if not found:
        raise KvplanError("no GPU named", "--gpus")
    unpriced = [gpu.id for gpu in found.values() if prices is not None and gpu.id not in prices]
    if unpriced:
        raise KvplanError(f"no price for {', '.join(unpriced)}; price every GPU searched, or leave it out", "--price")
    return tuple(found.values())


def _bounded(value: int, label: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_SEARCH_GPUS:
        raise KvplanError(f"must be a whole number from 1 to {MAX_SEARCH_GPUS}, got {value!r:.20}", label)
    return value


def _formats(base: Deployment, kv_text: str | None, weights_text: str | None
             ) -> tuple[tuple[KvFormat, ...], tuple[WeightFormat, ...]]:
    """The formats to try; a deployment that fixes one (a pasted --kv-cache-dtype) is searched with it alone."""
    if base.given("kv_cache_dtype"):
        if kv_text is not None:
            raise KvplanError("the deployment fixes the KV cache dtype; drop one of them", base.where("kv_cache_dtype"))
        kvs: tuple[KvFormat, ...] = (kv_format(base.kv_cache_dtype, base.where("kv_cache_dtype")),)
    else:
        kvs = parse_list(kv_text, DEFAULT_KV, kv_format, "--kv-cache-dtype")
    if base.given("quantization"):
        if weights_text is not None:
            raise KvplanError("the deployment fixes the quantization; drop one of them", base.where("quantization"))
        method = base.quantization or "none"
        weights: tuple[WeightFormat, ...] = (WEIGHT_FORMATS.get(method, WeightFormat(method, method)),)
    else:
        weights = parse_list(weights_text, DEFAULT_WEIGHTS, weight_format, "--quantization")
    return kvs, weights


def _with_length(base: Deployment, targets: tuple[Target, ...]) -> Deployment:
    longest = max(target.context for target in targets)
    if base.max_model_len is None:
        return replace(base, max_model_len=longest)
    if base.max_model_len == AUTO:
        raise KvplanError("size needs a fixed max_model_len; leave it out to use the largest target context",
                          base.where("max_model_len"))
    if base.max_model_len < longest:
        raise KvplanError(f"max_model_len {base.max_model_len:,} is below the largest target context {longest:,}",
                          base.where("max_model_len"))
    return base


def _check_base(spec: Any, base: Deployment, draft: Any) -> None:
    """What the deployment itself gets wrong (an invalid block size, a max_model_len beyond the model's) is the
    user's mistake, not a candidate's: planned once on an unbounded device, so it fails here, once."""
    from kvplan.engines import plan_deployment
    from kvplan.plan import GpuChoice

    probe = GpuChoice("custom", "any GPU", 2**40, base.tensor_parallel_size * base.pipeline_parallel_size)
    plan_deployment(spec, base, probe, (), draft)


def size_deployment(base: Deployment, targets: tuple[Target, ...], gpus: str | Sequence[str] | None = None,
                    max_gpus: int = 8, gpus_per_node: int = 8, kv_cache_dtype: str | None = None,
                    quantization: str | None = None, prices: dict[str, float] | None = None,
                    token: str | None = None, host_memory: int | None = None) -> Sizing:
    """The search for a deployment gathered by any front door: what it names is fixed, the rest is searched.
    kv_cache_dtype and quantization: comma-separated lists (default auto,fp8 and none); host_memory: bytes a node
    has for the deployment's CPU KV tier (an option whose tier needs more meets nothing)."""
    from kvplan.api import draft_model, load_model

    if base.engine not in launchable():
        raise KvplanError(f"size prints launch commands for {', '.join(launchable())}; the {base.engine} engine has "
                          "none", base.where("engine"))
    model = base.model
    if model is None:
        raise KvplanError("no model given: a bundled id, a config.json path or a Hub repo id (or a pasted launch "
                          "command)", base.where("model"))
    max_gpus, gpus_per_node = _bounded(max_gpus, "--max-gpus"), _bounded(gpus_per_node, "--gpus-per-node")
    kvs, weights = _formats(base, kv_cache_dtype, quantization)
    notes = []
    if not engine_has(base.engine, "quantization") and any(w.quantization for w in weights):
        weights = tuple(w for w in weights if w.quantization is None) or (WEIGHT_FORMATS["none"],)
        notes.append(f"the {base.engine} command line has no --quantization: only the checkpoint as stored is "
                     "searched")
    space = Space(_gpus(gpus, prices), kvs, weights, max_gpus, gpus_per_node, host_memory)
    if base.given("tensor_parallel_size") and base.tensor_parallel_size > gpus_per_node:
        raise KvplanError(f"tensor parallelism stays within one node of {gpus_per_node} GPUs (--gpus-per-node)",
                          base.where("tensor_parallel_size"))
    base = _with_length(base, targets)
    spec = load_model(model, base.revision, token, base.hf_overrides)
    if spec.quantization is not None and not base.given("quantization") and any(w.quantization for w in weights):
        # Another format would be another checkpoint; the engine refuses a --quantization that contradicts this one.
        space = replace(space, weight_formats=(WEIGHT_FORMATS["none"],))
        notes.append(f"the checkpoint is quantized ({spec.quantization.method}): searched as stored")
    if prices is not None and gpus is None:
        notes.append("only the priced GPUs were searched")
    draft = draft_model(base, token)
    _check_base(spec, base, draft)
    sizing = search(spec, base, targets, space, prices, draft)
    sizing.notes.extend(notes)
    shown = sizing.options + sizing.best_per_gpu + sizing.closest
    sizing.notes += [n for n in dict.fromkeys(derived_memory_note(option.gpu) for option in shown) if n]
    if any(option.weights.checkpoint for option in sizing.options + sizing.closest):
        sizing.notes.append("an awq or gptq option loads a 4-bit checkpoint of the model in its place: put that "
                            "checkpoint's id where the command names the model")
    if any(option.count > gpus_per_node for option in sizing.options[:1] + sizing.best_per_gpu + sizing.closest):
        sizing.notes.append(f"an option of more than {gpus_per_node} GPUs spans nodes: start the engine's multi-node "
                            "setup first (a Ray cluster for vLLM)")
    if host_memory is not None and not any(option.host_bytes for option in sizing.options + sizing.closest):
        sizing.notes.append("--host-memory: the deployment keeps no CPU KV tier (--kv-offloading-size, an LMCache "
                            "--kv-transfer-config or SGLang's --enable-hierarchical-cache), so it limits nothing")
    silent = unspoken(base)
    if silent:
        sizing.notes.append(f"{', '.join(silent)}: the {base.engine} command line has no flag for "
                            f"{'it' if len(silent) == 1 else 'them'}; set {'it' if len(silent) == 1 else 'them'} "
                            "in the engine's own config")
    return sizing


def size(model: str, target: str | Sequence[str], *, gpus: str | Sequence[str] | None = None, max_gpus: int = 8,
         gpus_per_node: int = 8, kv_cache_dtype: str | None = None, quantization: str | None = None,
         prices: Mapping[str, float] | str | None = None, token: str | None = None,
         host_memory: int | str | None = None, **knobs: Any) -> Sizing:
    """The cheapest deployments of MODEL that meet every target ("32@8K": 32 requests of 8,192 tokens at once).
    prices: per GPU-hour, {"h100": 2.9} or "h100=2.9,l40s=1.1"; host_memory: what a node has for a CPU KV tier
    (bytes, or "512GiB"); knobs by vLLM's names fix what they name."""
    targets = parse_targets([target] if isinstance(target, str) else list(target), "target")
    if isinstance(prices, str):
        priced: dict[str, float] | None = parse_price_flags([prices], "prices")
    elif prices is not None:
        priced = parse_price_flags([f"{name}={value}" for name, value in prices.items()], "prices")
    else:
        priced = None
    base = Deployment.from_mapping({"model": model, **knobs}, "kvplan.size()")
    host = parse_size(host_memory, "host_memory") if isinstance(host_memory, str) else host_memory
    return size_deployment(base, targets, gpus, max_gpus, gpus_per_node, kv_cache_dtype, quantization, priced, token,
                           host)
