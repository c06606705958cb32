"""What one rank is to hold: the plan for this device (estimate's own engine code), and from it this rank's
pool shape and the non-KV memory the plan counts beside the pool."""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.capacity import PoolLayout, pool_layouts
from kvplan.deployment import Deployment
from kvplan.errors import KvplanError
from kvplan.plan import GpuChoice, Plan
from kvplan.verify.device import Device
from kvplan.verify.shape import PoolShape, pool_shape


@dataclass(eq=False)
class RankTarget:
    rank: int
    world: int
    tp_rank: int
    pp_rank: int
    plan: Plan
    layout: PoolLayout  # this rank's stage
    shape: PoolShape
    weights_bytes: int  # this rank's weights, held through the run
    working_bytes: int  # activations, non-torch memory, CUDA graphs: released for the decode step
    attention_tp: int  # the ranks attention heads are split over (TP; TP / attention-DP for SGLang)

    @property
    def num_blocks(self) -> int:
        return self.plan.capacity.num_blocks

    def planned_bytes(self, num_blocks: int) -> int:
        """What the plan's arithmetic (page_bytes) says num_blocks cost on this rank."""
        return num_blocks * self.layout.block_bytes


def gpu_choice(dep: Deployment, device: Device) -> GpuChoice:
    """A GPU plans for its own total; the CPU dry run for the --gpu / --gpu-memory given, else for its cap."""
    if not device.is_cpu:
        if dep.gpu is not None or dep.gpu_memory_bytes is not None:
            raise KvplanError("verify plans for the GPU it runs on; drop --gpu / --gpu-memory (they serve "
                              "--device cpu dry runs)", dep.where("gpu" if dep.gpu is not None else "gpu_memory_bytes"))
        found = device.catalogue
        return GpuChoice(found.id if found else "custom", device.name, device.total_bytes, dep.gpu_count,
                         device.compute_capability, found.fp8 if found else True,
                         sm_count=found.sm_count if found else None)
    if dep.gpu is not None or dep.gpu_memory_bytes is not None:
        from kvplan.api import gpu_choices

        choices = gpu_choices(dep)
        if len(choices) > 1:
            raise KvplanError("verify plans for one GPU; name one", dep.where("gpu"))
        return choices[0]
    return GpuChoice("cpu", "cpu", device.total_bytes, dep.gpu_count)


def rank_target(dep: Deployment, device: Device, rank: int, world: int, token: str | None = None) -> RankTarget:
    from kvplan.api import draft_model, load_model
    from kvplan.engines import plan_deployment
    from kvplan.engines.base import PlanInput, pool_rules
    from kvplan.engines.common import prepare
    from kvplan.registry import engine

    tp, pp = dep.tensor_parallel_size, dep.pipeline_parallel_size
    if world > 1 and world != tp * pp:
        raise KvplanError(f"{world} ranks for tensor parallel {tp} x pipeline parallel {pp}; run {tp * pp}",
                          "--nproc")
    if dep.model is None:
        raise KvplanError("no model given: a bundled id, a config.json path or a Hub repo id (or a pasted launch "
                          "command, or model: in a --config file)", dep.where("model"))
    spec = load_model(dep.model, dep.revision, token, dep.hf_overrides)
    draft = draft_model(dep, token)
    choice = gpu_choice(dep, device)
    plan = plan_deployment(spec, dep, choice, (), draft)
    # vLLM numbers ranks tp-fastest: rank = pp_rank * tp + tp_rank
    pp_rank, tp_rank = divmod(rank, tp)
    settings = plan.engine
    target = PlanInput(spec, dep, choice, (), draft)
    chosen = engine(dep.engine)
    stages = prepare(target, flat_pool=chosen.flat_pool, settings=settings, rules=pool_rules(chosen)).stages
    kv_tp = pool_rules(chosen).kv_tensor_parallel(target)  # SGLang's attention DP keeps more KV heads per rank
    layouts = pool_layouts([stage.layers for stage in stages], settings.block_size, plan.kv_bytes, kv_tp,
                           settings.max_model_len)
    if layouts[plan.limiting_stage].block_bytes != plan.layout.block_bytes:
        raise RuntimeError("verify's stage layouts drifted from the plan's: "
                           f"{layouts[plan.limiting_stage].block_bytes} != {plan.layout.block_bytes} B per block")
    layout, stage = layouts[pp_rank], stages[pp_rank]
    memory = plan.memory
    working = memory.activation_bytes + memory.non_torch_bytes + memory.cuda_graph_bytes + memory.reserve_bytes
    return RankTarget(rank, world, tp_rank, pp_rank, plan, layout, pool_shape(layout, stage.layers),
                      stage.weights_bytes, max(0, working), kv_tp)
