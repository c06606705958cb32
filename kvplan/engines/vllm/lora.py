"""vLLM's LoRA slots (--enable-lora), as the 0.33.0 wheel sizes them.

At model load (v1/worker/gpu_model_runner.py load_model, inside the profiler "Model loading took" reads) every
linear layer the model's LoRA support wraps gets, per slot (LoRAConfig.max_loras) and per packed slice, a stacked
A of max_lora_rank x input and a stacked B of output x max_lora_rank in lora_dtype (lora/layers/base_linear.py
BaseLinearLayerWithLoRA.create_lora_weights; column_parallel_linear.py MergedColumnParallelLinearWithLoRA for
the packed gate_up and q/k/v slices). Over TP a column-parallel layer keeps A whole and B's output sharded, a
row-parallel one A's input sharded and B whole; --fully-sharded-loras also shards the column layers' A over the
rank and the row layers' B over the output (the S-LoRA layers of the same files). The profiling run activates
max_loras dummy adapters (v1/worker/lora_model_runner_mixin.py maybe_setup_dummy_loras: built on the CPU by
model_manager.create_dummy_lora and copied into the slots, so no GPU memory beyond them); each wrapped layer's
shrink writes a float32 buffer of slices x tokens x rank (punica_wrapper/punica_gpu.py add_lora_linear), the
largest of which adds to the peak. CUDA graphs are captured for each LoRA case (v1/cudagraph_dispatcher.py
_get_lora_cases, cudagraph_specialize_lora on by default: without LoRA and with max_loras + 1 active; with
--specialize-active-lora every power of two up to max_loras + 1 too, lora/utils.py get_captured_lora_counts)."""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.deployment import Deployment
from kvplan.errors import KvplanError
from kvplan.models.layers import ChunkedLocal, FullAttention, SlidingWindow
from kvplan.models.model import ModelSpec
from kvplan.units import GiB, dtype_bytes

RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)  # config/lora.py MaxLoRARanks
# the modules a dense decoder layer's LoRA support wraps (vLLM's packed names), and the adapter names each takes
MODULES = {"qkv_proj": ("qkv_proj", "q_proj", "k_proj", "v_proj"), "o_proj": ("o_proj",),
           "gate_up_proj": ("gate_up_proj", "gate_proj", "up_proj"), "down_proj": ("down_proj",)}
SHRINK_BYTES = 4  # the shrink buffer is float32


@dataclass(frozen=True)
class Lora:
    """What the slots cost one rank: per decoder layer, and the largest shrink buffer per batched token."""

    slots: int
    rank: int
    dtype: str
    modules: tuple[str, ...]
    layer_bytes: int
    shrink_bytes_per_token: int
    graph_cases: int  # CUDA graphs captured per size and mode

    def note(self, layers: int) -> str:
        return (f"LoRA: {self.slots} slots of rank {self.rank} ({self.dtype}) on {', '.join(self.modules)}: "
                f"{self.layer_bytes * layers / GiB:.2f} GiB of stacked A and B per rank in the weights "
                f"(vLLM 0.33.0 create_lora_weights); CUDA graphs captured {self.graph_cases}x (each LoRA case)")


def validated(dep: Deployment) -> tuple[int, int]:
    """max_loras and max_lora_rank, with vLLM's own checks (config/lora.py LoRAConfig)."""
    slots, rank = dep.max_loras or 1, dep.max_lora_rank or 16
    if rank not in RANKS:
        raise KvplanError(f"invalid choice {rank} (choose from {', '.join(map(str, RANKS))})",
                          dep.where("max_lora_rank"))
    if dep.max_cpu_loras is not None and dep.max_cpu_loras < slots:
        raise KvplanError(f"max_cpu_loras ({dep.max_cpu_loras}) must be >= max_loras ({slots}).",
                          dep.where("max_cpu_loras"))
    if dep.fully_sharded_loras and rank % dep.tensor_parallel_size:
        raise KvplanError(f"{rank} is not divisible by {dep.tensor_parallel_size}", dep.where("max_lora_rank"))
    return slots, rank


def targets(dep: Deployment) -> tuple[str, ...]:
    """The wrapped modules: all of them, or those --lora-target-modules names (a packed module is wrapped when
    any of its adapter names is named, lora/utils.py is_in_target_modules)."""
    if not dep.lora_target_modules:
        return tuple(MODULES)
    named = {part for part in dep.lora_target_modules.replace(",", " ").split() if part}
    known = {name for names in MODULES.values() for name in names}
    if named - known:
        raise KvplanError(f"not a LoRA module of a dense decoder layer: {', '.join(sorted(named - known))} "
                          f"(choose from {', '.join(sorted(known))})", dep.where("lora_target_modules"))
    return tuple(module for module, names in MODULES.items() if named & set(names))


def layer_shapes(spec: ModelSpec, tp: int) -> dict[str, tuple[tuple[int, ...], tuple[int, ...], bool]]:
    """Per module: the input width of each slice's A, the output width of each slice's B, column-parallel or
    not; one rank's share. KV heads are replicated where TP exceeds them (at least one per rank)."""
    kinds = {(layer.kv_heads, layer.head_dim) for layer in spec.layers
             if isinstance(layer, (FullAttention, SlidingWindow, ChunkedLocal))}
    if spec.moe is not None or len(kinds) != 1 or len(spec.layers) != spec.num_layers:
        raise KvplanError("LoRA slots are modelled for dense attention decoders with one KV shape (not MoE "
                          "experts, MLA, state layers or mixed head sizes)", "--enable-lora")
    (kv_heads, head_dim), = kinds
    hidden, inter = spec.hidden_size, spec.intermediate_size
    q_out, kv_out = spec.num_attention_heads // tp * head_dim, max(kv_heads // tp, 1) * head_dim
    return {"qkv_proj": ((hidden,) * 3, (q_out, kv_out, kv_out), True),
            "o_proj": ((spec.num_attention_heads * head_dim // tp,), (hidden,), False),
            "gate_up_proj": ((hidden,) * 2, (inter // tp,) * 2, True),
            "down_proj": ((inter // tp,), (hidden,), False)}


def lora_slots(spec: ModelSpec, dep: Deployment, model_dtype: str) -> Lora | None:
    """The slots of an --enable-lora deployment on one rank, None without LoRA."""
    if not dep.enable_lora:
        return None
    slots, rank = validated(dep)
    tp, sharded = dep.tensor_parallel_size, dep.fully_sharded_loras
    dtype = model_dtype if dep.lora_dtype in (None, "auto") else dep.lora_dtype
    size = dtype_bytes(dtype, dep.where("lora_dtype"))
    modules = targets(dep)
    elements, shrink = 0, 0
    for module, (inputs, outputs, column) in layer_shapes(spec, tp).items():
        if module not in modules:
            continue
        a_rank = rank // tp if sharded and column else rank
        b_outputs = [out // tp if sharded and not column else out for out in outputs]
        elements += slots * (a_rank * sum(inputs) + rank * sum(b_outputs))
        shrink = max(shrink, len(inputs) * a_rank * SHRINK_BYTES)
    cases = 2  # without LoRA, and with max_loras + 1 active
    if dep.specialize_active_lora:
        cases = 1 + sum(1 for n in range(1, slots + 2) if n & (n - 1) == 0 or n == slots + 1)
    return Lora(slots, rank, dtype, modules, elements * size, shrink, cases)
