"""SGLang's LoRA memory pool (--enable-lora), as the 0.5.23 wheel sizes it.

lora/mem_pool.py LoRAMemoryPool: per target module and decoder layer an A buffer of (max_loras_per_batch,
rank x stacked slices, input) and a B buffer of (max_loras_per_batch, output, rank) in the model dtype
(get_lora_A_shape, get_lora_B_shape; get_stacked_multiply: qkv_proj 3, gate_up_proj 2); row-parallel inputs and
column-parallel outputs split over TP, q/k/v's KV part one head per rank where TP exceeds the KV heads
(_column_parallel_lora_b_per_rank_dim). The pool is built after the weights and before the KV cache is sized
(model_runner.py maybe_init_lora_manager), so it comes out of the KV pool as the weights do. max_loras_per_batch
defaults to 8 (arg_groups/fields/lora.py); without --lora-paths SGLang needs --max-lora-rank and
--lora-target-modules (arg_groups/lora_hook.py). These are the shapes vLLM's layers give without full sharding,
so kvplan.engines.vllm.lora computes them; 'all', embed_tokens and lm_head (embedding LoRA buffers) are not
modelled."""

from __future__ import annotations

from dataclasses import replace

from kvplan.deployment import Deployment
from kvplan.engines.vllm.lora import Lora, layer_shapes, targets
from kvplan.errors import KvplanError
from kvplan.models.model import ModelSpec
from kvplan.units import GiB, dtype_bytes

DEFAULT_SLOTS = 8  # --max-loras-per-batch


def lora_pool(spec: ModelSpec, dep: Deployment, model_dtype: str) -> Lora | None:
    """SGLang's LoRA buffers on one rank, per decoder layer; None without --enable-lora."""
    if not dep.enable_lora:
        return None
    if not dep.max_lora_rank or not dep.lora_target_modules:
        raise KvplanError("When no initial --lora-paths is provided, you need to specify both --max-lora-rank and "
                          "--lora-target-modules for LoRA initialization.", dep.where("enable_lora"))
    named = set(dep.lora_target_modules.replace(",", " ").split())
    if named & {"all", "embed_tokens", "lm_head"}:
        raise KvplanError("SGLang's embedding LoRA buffers ('all', embed_tokens, lm_head) are not modelled",
                          dep.where("lora_target_modules"))
    slots, rank = dep.max_loras_per_batch or DEFAULT_SLOTS, dep.max_lora_rank
    modules = targets(replace(dep, fully_sharded_loras=False))
    elements = sum(slots * (rank * sum(inputs) + rank * sum(outputs))
                   for module, (inputs, outputs, _) in layer_shapes(spec, dep.tensor_parallel_size).items()
                   if module in modules)
    return Lora(slots, rank, model_dtype, modules, elements * dtype_bytes(model_dtype), 0, 1)


def note(lora: Lora, layers: int) -> str:
    return (f"LoRA: {lora.slots} slots (--max-loras-per-batch) of rank {lora.rank} ({lora.dtype}) on "
            f"{', '.join(lora.modules)}: {lora.layer_bytes * layers / GiB:.2f} GiB per rank, taken before the KV "
            "pool is sized (SGLang 0.5.23 LoRAMemoryPool)")
