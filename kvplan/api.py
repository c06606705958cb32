"""The public Python API, and the one path from a Deployment to Plans that the CLI uses too: resolve the model
(and a speculative draft model), resolve the GPU, run the engine, find levers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kvplan.deployment import Deployment
from kvplan.deployment.rules import NO_DRAFT_LAYERS
from kvplan.errors import KvplanError
from kvplan.hardware import Gpu, catalogue, find_gpu
from kvplan.models.model import ModelSpec
from kvplan.plan import GpuChoice, Plan

if TYPE_CHECKING:
    from kvplan.levers import Lever


@dataclass(eq=False)
class Estimate:
    """One GPU's plan, with the levers that would change it most."""

    plan: Plan
    levers: tuple[Lever, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        document = self.plan.to_dict()
        if self.levers:
            document["levers"] = [asdict(lever) for lever in self.levers]
        return document


def load_model(model: str, revision: str | None = None, token: str | None = None,
               hf_overrides: dict[str, Any] | None = None, allow_unmodelled: bool = False) -> ModelSpec:
    """A model spec: bundled id, user spec, local config.json or model directory, or Hub repo id; hf_overrides
    replace keys of its config.json, as vLLM's --hf-overrides does; allow_unmodelled plans a config key kvplan
    does not model with a note instead of refusing it."""
    from kvplan.models.sources import resolve

    return resolve(model, revision, token, hf_overrides, allow_unmodelled)


def gpus() -> tuple[Gpu, ...]:
    """The GPU catalogue, memory as the CUDA runtime reports it."""
    return catalogue()


def gpu_choices(dep: Deployment) -> list[GpuChoice]:
    """The GPU(s) the deployment names: catalogue ids (comma-separated to compare) or a memory size."""
    count = dep.gpu_count
    if dep.gpu is not None:
        if dep.gpu_memory_bytes is not None:
            raise KvplanError("give a catalogue GPU or a GPU memory size, not both", dep.where("gpu_memory_bytes"))
        names = [part.strip() for part in dep.gpu.split(",") if part.strip()]
        if not names:
            raise KvplanError("no GPU named", dep.where("gpu"))
        choices = []
        for name in names:
            try:
                found = find_gpu(name, otherwise="--gpu-memory SIZE works for any device")
            except KvplanError as exc:
                raise exc.at(dep.where("gpu")) from None
            choices.append(GpuChoice.of(found, count))
        return choices
    if dep.gpu_memory_bytes is not None:
        return [GpuChoice("custom", f"custom GPU ({dep.gpu_memory_bytes / 2**30:.2f} GiB)", dep.gpu_memory_bytes,
                          count)]
    if dep.kv_cache_memory_bytes is not None:
        return [GpuChoice("custom", "unspecified GPU (KV cache memory given)", 0, count)]
    raise KvplanError("no GPU given: name a catalogue GPU (kvplan gpus lists them) or a GPU memory size",
                      dep.where("gpu"))


def draft_model(dep: Deployment, token: str | None = None) -> ModelSpec | None:
    """A separate draft model named in the speculative config, loaded as its own spec."""
    config = dep.speculative_config or {}
    name = config.get("model")
    if not isinstance(name, str) or config.get("method") in NO_DRAFT_LAYERS:
        return None
    try:
        return load_model(name, None, token)
    except KvplanError as exc:
        raise KvplanError(f"draft model {name!r}: {exc}", dep.where("speculative_config")) from None


def estimates(dep: Deployment, ladder: tuple[int, ...] = (), suggest: bool = False,
              token: str | None = None) -> list[Estimate]:
    """Plans of a deployment, one per GPU it names; levers when it does not fit (or when asked)."""
    from kvplan.engines import plan_deployment as run_engine

    if dep.model is None:
        raise KvplanError("no model given: a bundled id, a config.json path or a Hub repo id (or a pasted launch "
                          "command, or model: in a --config file)", dep.where("model"))
    choices = gpu_choices(dep)
    try:
        spec = load_model(dep.model, dep.revision, token, dep.hf_overrides, dep.allow_unmodelled)
    except KvplanError as exc:
        if not dep.hf_overrides:
            raise
        # fails the same way when the config itself is wrong
        load_model(dep.model, dep.revision, token, allow_unmodelled=dep.allow_unmodelled)
        raise exc.at(dep.where("hf_overrides")) from None  # the override is what made the config wrong
    draft = draft_model(dep, token)
    results = []
    for choice in choices:
        plan = run_engine(spec, dep, choice, ladder, draft)
        found: tuple[Lever, ...] = ()
        if suggest or not plan.capacity.fits:
            from kvplan.levers import levers

            found = tuple(levers(spec, dep, choice, plan, draft))
        results.append(Estimate(plan, found))
    return results


def estimate(model: str, gpu: str | None = None, gpu_memory: int | str | None = None, *,
             token: str | None = None, ladder: tuple[int, ...] = (), **knobs: Any) -> Plan:
    """The plan for MODEL on one GPU; knobs by vLLM's names (max_model_len=32768, tensor_parallel_size=2).

    >>> plan = estimate("Qwen/Qwen2.5-7B", gpu="h100", max_model_len=32768)
    >>> plan.capacity.tokens > 0
    True
    """
    mapping: dict[str, Any] = {"model": model, **knobs}
    if gpu is not None:
        mapping["gpu"] = gpu
    if gpu_memory is not None:
        mapping["gpu_memory"] = gpu_memory
    dep = Deployment.from_mapping(mapping, "kvplan.estimate()")
    if dep.gpu is not None and "," in dep.gpu:
        raise KvplanError("one GPU per call; call estimate() once for each", "gpu")
    return estimates(dep, ladder, token=token)[0].plan
