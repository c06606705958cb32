"""TensorRT-LLM's LoRA device cache (lora_config): the PEFT cache manager's GPU pages, allocated before the KV
cache is sized, so they come out of the memory the fraction takes.

tensorrt_llm/_torch/pyexecutor/_util.py create_py_executor_instance (read_file id 843526953): with max_loras set,
peft_cache_config.num_device_module_layer = max_lora_rank x num_hidden_layers x (target modules + the missing ones
of q/k/v, lora_helper.py get_missing_qkv_modules_from_lora_modules) x max_loras; without it PeftCacheConfig's
device_cache_percent (0.02, llmapi/llm_args.py) of the free memory. cpp/tensorrt_llm/batch_manager/
peftCacheManager.cpp getPageManagerConfig / getMaxNumSlots (read_file id 407796994): each module's one-rank size
is local in + local out dims (runtime/loraModule.cpp createLoraModules: q, k, v, gate and up split their output
over TP, dense and down their input), the page width the smallest of them; device slots = module layers x
ceil(largest / width); a page holds max(optimal adapter size 8 x each module's ceil(size / width) x layers,
ceil(max adapter size 64 x largest / width)) slots (both sizes capped at max_lora_rank); pages = ceil(slots /
slots per page), each slot width x the model dtype's bytes. The host cache (max_cpu_loras) is pinned CPU memory."""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.deployment import Deployment
from kvplan.errors import KvplanError
from kvplan.models.model import ModelSpec
from kvplan.units import cdiv

DEFAULT_RANK = 64  # LoraConfig.max_lora_rank (lora_helper.py)
OPTIMAL_ADAPTER_SIZE = 8  # PeftCacheConfig.optimal_adapter_size
MAX_ADAPTER_SIZE = 64  # PeftCacheConfig.max_adapter_size
DEVICE_CACHE_PERCENT = 0.02  # PeftCacheConfig.device_cache_percent
# the Hugging Face names TensorRT-LLM maps onto its modules (get_default_trtllm_modules_to_hf_modules)
HF_NAMES = {"q_proj": "attn_q", "k_proj": "attn_k", "v_proj": "attn_v", "o_proj": "attn_dense",
            "gate_proj": "mlp_h_to_4h", "up_proj": "mlp_gate", "down_proj": "mlp_4h_to_h"}
QKV = ("attn_q", "attn_k", "attn_v")


@dataclass(frozen=True)
class Module:
    name: str
    in_dim: int
    out_dim: int
    splits_input: bool  # row parallel (attn_dense, mlp_4h_to_h): the input dimension is split over TP

    def one_rank(self, tp: int) -> int:
        return (self.in_dim // tp + self.out_dim) if self.splits_input else (self.in_dim + self.out_dim // tp)


def target_modules(dep: Deployment) -> list[str]:
    if not dep.lora_target_modules:
        raise KvplanError("TensorRT-LLM takes the LoRA target modules from the adapters in lora_dir: name them "
                          "(lora_config.lora_target_modules)", dep.where("enable_lora"))
    names = [HF_NAMES.get(word, word) for word in dep.lora_target_modules.replace(",", " ").split()]
    unknown = [name for name in names if name not in (*HF_NAMES.values(), "attn_qkv", "mlp_gate_up")]
    if unknown:
        raise KvplanError(f"LoRA target module {unknown[0]!r} is not one kvplan sizes for TensorRT-LLM (attn_q, "
                          "attn_k, attn_v, attn_qkv, attn_dense, mlp_h_to_4h, mlp_gate, mlp_gate_up, mlp_4h_to_h)",
                          dep.where("lora_target_modules"))
    missing = [name for name in QKV if name not in names] if any(name in names for name in QKV) else []
    return names + missing


def modules(spec: ModelSpec, names: list[str]) -> list[Module]:
    hidden, mlp, head = spec.hidden_size, spec.intermediate_size, spec.head_dim
    q, kv = spec.num_attention_heads * head, spec.num_kv_heads * head
    dims = {"attn_q": (hidden, q, False), "attn_k": (hidden, kv, False), "attn_v": (hidden, kv, False),
            "attn_qkv": (hidden, q + 2 * kv, False), "attn_dense": (hidden, hidden, True),
            "mlp_h_to_4h": (hidden, mlp, False), "mlp_gate": (hidden, mlp, False),
            "mlp_gate_up": (hidden, 2 * mlp, False), "mlp_4h_to_h": (mlp, hidden, True)}
    return [Module(name, *dims[name]) for name in names]


def device_cache_bytes(spec: ModelSpec, dep: Deployment, element_bytes: int, free_bytes: int) -> int:
    """The LoRA device cache of one rank; 0 without LoRA."""
    if not (dep.enable_lora or dep.lora_target_modules):
        return 0
    if spec.moe is not None:
        raise KvplanError("TensorRT-LLM's LoRA cache is modelled for dense models (MoE LoRA modules are not)",
                          dep.where("enable_lora"))
    names = target_modules(dep)
    tp, rank = dep.tensor_parallel_size, dep.max_lora_rank or DEFAULT_RANK
    sizes = [module.one_rank(tp) for module in modules(spec, names)]
    width, largest, layers = min(sizes), max(sizes), spec.num_layers // dep.pipeline_parallel_size
    per_page = max(min(OPTIMAL_ADAPTER_SIZE, rank) * sum(cdiv(size, width) for size in sizes) * layers,
                   cdiv(min(MAX_ADAPTER_SIZE, rank) * largest, width))
    if dep.max_loras is not None:
        slots = rank * spec.num_layers * len(names) * dep.max_loras * cdiv(largest, width)
    else:
        slots = int(DEVICE_CACHE_PERCENT * max(free_bytes, 0) / (width * element_bytes))
    return cdiv(slots, per_page) * per_page * width * element_bytes
