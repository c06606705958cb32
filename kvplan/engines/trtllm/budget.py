"""TensorRT-LLM: free_gpu_memory_fraction (0.9) of the memory still free before the KV cache, cut into whole
tokens, then rounded up to blocks of tokens_per_block (32). What "still free" means depends on the backend.

Sources (NVIDIA/TensorRT-LLM, read in stored copies of 1.0-1.2):
- PyTorch backend (trtllm-serve's default), tensorrt_llm/_torch/pyexecutor/py_executor_creator.py
  (create_py_executor) and _util.py (KvCacheCreator): try_prepare_estimation sizes a small KV cache for the
  dummy requests (_get_token_num_for_estimation); PyExecutor.__init__ runs model_engine.warmup (torch.compile,
  autotuning, CUDA-graph capture); configure_kv_cache_capacity then empties the caching allocator, runs the dummy
  requests (_create_dummy_context_requests: max_num_tokens prompt tokens in requests of at most max_seq_len - 1,
  one output token each), and takes peak = torch's allocated peak + what is used outside torch afterwards (CUDA
  context, the C++ estimation pool, CUDA-graph pools, NCCL). _cal_max_memory: available = (device total - peak +
  the estimation pool) x fraction; max_tokens = available // bytes per token (capped by kv_cache_config.max_tokens).
- TensorRT-engine backend, cpp/tensorrt_llm/batch_manager (trtGptModelInflightBatching, kvCacheManager.cpp):
  max tokens = fraction x the free memory after the engine (weights), its execution context (TensorRT's
  activation memory for the build's max shapes), the runtime buffers and the decoder are allocated; the engine
  prints each ("[MemUsageChange]") and "Memory usage when calculating max tokens in paged kv cache".
- Both: blocks in the primary pool = ceilDiv(max tokens, tokens per block); max_tokens or max_gpu_total_bytes cap
  it, the smaller wins. KvCacheConfig stores the fraction as a C++ float: 0.9 is 0.8999999761581421.

The dummy forward's activations are sized from the model's layer structure: what one decoder layer holds at once
for every prompt token, or the logits if they are larger. The CUDA graphs are captured in the warmup, before the
profiling run, into one pool that stays: the largest graph's forward (model_engine._capture_generation_cuda_graphs).
Workspaces (cuBLAS, attention, MoE kernels), NCCL buffers and the caching allocator's
fragmentation are chosen at run time and are not modelled: the plan's notes say what each GiB of them costs.
"""

from __future__ import annotations

import struct
from dataclasses import replace
from typing import Protocol

from kvplan.capacity import PoolLayout, SplitPools, pool_layout
from kvplan.deployment import Deployment
from kvplan.engines import common
from kvplan.engines.base import CUDA_CONTEXT_BYTES, PlanInput, PoolRules
from kvplan.engines.trtllm import deepseek_v4, engine_buffers
from kvplan.engines.trtllm.host_cache import host_tier
from kvplan.engines.trtllm.lora import device_cache_bytes
from kvplan.engines.trtllm.mamba import state_bytes_per_rank, state_intercept
from kvplan.engines.trtllm.releases import RELEASES
from kvplan.errors import KvplanError
from kvplan.models.compressed_attention import flat_pool_layer
from kvplan.models.families import family_of
from kvplan.models.layers import Layer
from kvplan.models.model import ModelSpec
from kvplan.plan import EngineSettings, Memory
from kvplan.units import GiB, cdiv, dtype_bytes

TOKENS_PER_BLOCK = 32
FREE_FRACTION = 0.9
MAX_NUM_TOKENS = 8192
MAX_BATCH_SIZE = 2048
# The decode batch sizes CudaGraphConfig captures when none are given: validate_cuda_graph_config takes
# max_batch_size 128 (T03's log prints cuda_graph_max_batch_size=128) and _generate_cuda_graph_batch_sizes without
# padding gives 1-31, 32, 64 and 128 (tensorrt_llm/llmapi/llm_args.py). cuda_graph_config is on by default.
CUDA_GRAPH_BATCH_SIZES = (*range(1, 32), 32, 64, 128)
# LogitsProcessor.forward (tensorrt_llm/_torch/modules/logits_processor.py) runs lm_head in the model's dtype and
# returns logits.float(): both copies are alive at the upcast, in the eager forward and in a captured graph alike.
LOGITS_UPCAST_BYTES = 4


def as_float32(value: float) -> float:
    """The value a C++ float holds: KvCacheConfig's fraction."""
    return float(struct.unpack("f", struct.pack("f", value))[0])


def pytorch_available_bytes(total: float, peak: float, estimation_pool: float, fraction: float) -> int:
    """_cal_max_memory: the memory for KV after the profiling run. The estimation pool was part of the peak and
    is freed before the real pool is made, so it is counted back."""
    return int((total - peak + estimation_pool) * fraction)


def engine_available_bytes(free: float, fraction: float) -> int:
    """The C++ KV cache manager: the fraction of the memory free after the engine, execution context, runtime
    buffers and decoder."""
    return int(free * fraction)


def max_tokens(available: int, bytes_per_token: int, cap: int | None = None) -> int:
    tokens = max(available, 0) // bytes_per_token
    return min(tokens, cap) if cap is not None else tokens


def pool_blocks(tokens: int, tokens_per_block: int) -> int:
    """Blocks in the primary pool of the C++ KV cache manager and of the Python one up to 1.1: the max tokens
    rounded up to whole blocks (ceilDiv; resource_manager.py@d2a5560a calculate_max_num_blocks math.ceil, and the
    1.1.0rc3 log T03: 86,711 max tokens -> 86,720)."""
    return -(-tokens // tokens_per_block)


def whole_blocks(tokens: int, tokens_per_block: int) -> int:
    """Blocks in the primary pool of the PyTorch backend's KVCacheManager as stored in 2026: the max tokens rounded
    down (resource_manager.py calculate_max_num_blocks, int(max_tokens // tokens_per_block))."""
    return tokens // tokens_per_block


def dummy_requests(max_num_tokens: int, max_seq_len: int) -> int:
    """_create_dummy_context_requests: max_num_tokens prompt tokens cut into requests of at most
    max_seq_len - 1 (at least 1) tokens; the last request takes what is left."""
    return cdiv(max_num_tokens, max(1, min(max_num_tokens, max_seq_len - 1)))


def estimation_tokens(max_num_tokens: int, max_seq_len: int, tokens_per_block: int, max_batch_size: int,
                      graph_batch: int) -> int:
    """_get_token_num_for_estimation (tensorrt_llm/_torch/pyexecutor/_util.py as stored in 2026): the estimation
    pool's size. Each dummy request's prompt plus its one generated token in whole blocks of its own (the overlap
    scheduler adds tokens only with speculative decoding), at least the CUDA-graph warmup's ceil((max_seq_len + 1)
    / tokens_per_block) + graph_batch - 1 blocks (graph_batch: the largest graph batch within max_batch_size) and
    at least max_batch_size blocks. (The fraction of the free memory can cut it further; not modelled: the pool is
    counted back and cancels out of the prediction.)"""
    longest = max(1, min(max_num_tokens, max_seq_len - 1))
    full, rest = divmod(max_num_tokens, longest)
    blocks = full * cdiv(longest + 1, tokens_per_block) + (cdiv(rest + 1, tokens_per_block) if rest else 0)
    warmup = cdiv(max_seq_len + 1, tokens_per_block) + graph_batch - 1
    return max(blocks, warmup, max_batch_size) * tokens_per_block


def mlp_width_copies(spec: ModelSpec) -> int:
    """Copies of an MLP's (or expert's) intermediate width alive per token while down_proj writes its output.
    GatedMLP.forward (tensorrt_llm/_torch/modules/gated_mlp.py) keeps the fused gate/up output (2 copies) while the
    SwiGLU makes the third; MLP.forward (modules/mlp.py), the non-gated families' (GPT-2, Phi-2, BLOOM, Falcon,
    Nemotron-H's ReLU^2), keeps up_proj's output while the activation makes the second."""
    return 3 if family_of(spec.model_type).gated_mlp else 2


def token_activation_elements(spec: ModelSpec, tp: int) -> int:
    """What one decoder layer holds at its MLP for each token it runs, in elements: the residual, the MLP's normed
    input and its output (3 x hidden) beside the intermediate-width copies of mlp_width_copies, split over TP. A
    routed-expert layer holds each token once per chosen expert (its copy of the hidden state and the expert's
    intermediate copies); shared experts run beside them. A model whose expert layers alternate with dense-MLP
    layers peaks at the wider of the two; layers with neither (Nemotron-H's Mamba and attention blocks) are not
    counted. Attention's buffers come and go before the MLP's (the peak is one phase, not their sum) and are
    narrower wherever the MLP is the usual 3-4 x hidden wide, so they are not counted."""
    copies = mlp_width_copies(spec)
    hidden = 3 * spec.hidden_size
    dense = copies * spec.intermediate_size // tp
    if spec.moe is None:
        return hidden + dense
    moe = spec.moe
    routed = moe.experts_per_token * (spec.hidden_size + copies * moe.expert_intermediate_size // tp)
    expert_layer = routed + copies * moe.shared_intermediate_size // tp  # all shared experts' width together
    return hidden + (max(dense, expert_layer) if moe.dense_layers else expert_layer)


def forward_activation_bytes(spec: ModelSpec, tp: int, tokens: int, logit_rows: int, element_bytes: int) -> int:
    """The peak of one forward pass of `tokens` tokens on one rank: the larger of a decoder layer's MLP (every
    token) and the logits, one row per request at its last position (the model engine gathers those unless context
    logits are asked for), in the model's dtype and in float32 at once. The layers' buffers are freed before
    lm_head runs, so the two do not add up."""
    layers = tokens * token_activation_elements(spec, tp) * element_bytes
    logits = logit_rows * spec.vocab_size * (element_bytes + LOGITS_UPCAST_BYTES)
    return max(layers, logits)


def graph_batches(max_batch_size: int, max_num_tokens: int) -> list[int]:
    """_filter_cuda_graph_batch_sizes: the default sizes up to min(max_batch_size, max_num_tokens)."""
    return [size for size in CUDA_GRAPH_BATCH_SIZES if size <= min(max_batch_size, max_num_tokens)]


def largest_graph(max_batch_size: int, max_num_tokens: int, estimation_blocks: int) -> int:
    """The batch of the largest CUDA graph the warmup captures, one token per request. _capture_generation_cuda_graphs
    captures the kept sizes largest first, each needing a free KV block per request, and stops at the first the
    estimation pool cannot hold; the pool's floor of max_batch_size blocks (estimation_tokens) always holds it."""
    kept = graph_batches(max_batch_size, max_num_tokens)
    return kept[-1] if kept and kept[-1] <= estimation_blocks else 0


def kv_ranks(target: PlanInput) -> int:
    """The ranks a layer's KV heads are divided over: none under attention DP, where every rank holds all of them
    (KVCacheManager.get_cache_size_per_token, resource_manager.py: tp_size 1 if mapping.enable_attention_dp)."""
    dep = target.deployment
    return 1 if dep.attention_data_parallel_size is not None else dep.tensor_parallel_size


def _block_bytes(target: PlanInput, settings: EngineSettings, decoder_layers: int, last: bool) -> int:
    """One block's bytes on the rank of this pipeline stage (every layer keeps every token: one flat pool)."""
    prepared = common.prepare(target, flat_pool=True, settings=settings, rules=ENGINE)
    stage = next((s for s in prepared.stages if s.decoder_layers == decoder_layers and s.last == last),
                 prepared.stages[-1])
    return pool_layout(stage.layers, settings.block_size, prepared.kv_bytes, kv_ranks(target)).block_bytes


def _element_bytes(target: PlanInput) -> int:
    return dtype_bytes(common.model_dtype(target.spec, target.deployment, target.gpu)[0])


def engine_shape(target: PlanInput, settings: EngineSettings, last: bool) -> engine_buffers.EngineShape:
    """The limits a TensorRT engine's C++ executor sizes its buffers by: the build's max_batch_size, max_seq_len
    and max_num_tokens (kvplan's defaults where the deployment gives none), the vocabulary padded over all ranks."""
    dep = target.deployment
    return engine_buffers.EngineShape(
        settings.max_num_seqs or MAX_BATCH_SIZE, settings.max_model_len,
        settings.max_num_batched_tokens or MAX_NUM_TOKENS, target.spec.vocab_size,
        dep.tensor_parallel_size * dep.pipeline_parallel_size, dep.pipeline_parallel_size, last,
        target.spec.hidden_size, _element_bytes(target))


class Backend(Protocol):
    name: str
    rounding: str  # how the max tokens become blocks, for the plan's note
    runs_flash_mla: bool  # 64-token blocks for a FlashMLA latent on compute capability 9.0 (flash_mla_block)

    def before_kv(self, target: PlanInput, settings: EngineSettings, last: bool) -> tuple[int, int]:
        """Activation bytes and CUDA-graph bytes in use on one rank when the free memory is measured."""
        ...

    def runtime_bytes(self, target: PlanInput, settings: EngineSettings, last: bool) -> int:
        """What the runtime allocates outside torch before the KV cache is sized, beyond the CUDA context."""
        ...

    def available(self, total: int, used: int, fraction: float) -> int: ...

    def blocks(self, available: int, per_token: int, tokens_per_block: int, dep: Deployment, fixed: int) -> int:
        """Blocks in the primary pool from the KV memory the fraction leaves, with the kv_cache_config caps;
        fixed: the pool's bytes that hold no tokens (recurrent states)."""
        ...

    def measured_after(self, settings: EngineSettings) -> str:
        """What has been allocated when the free memory is measured, for the plan's note."""
        ...

    def fixed_pool_bytes(self, target: PlanInput, settings: EngineSettings, decoder_layers: int, last: bool) -> int:
        """The pool's bytes on one rank that hold no tokens (a hybrid's recurrent states); 0 where none."""
        ...

    def memory_cap_note(self, dep: Deployment) -> str | None:
        """What the backend does with kv_cache_config.max_gpu_total_bytes, where the plan needs saying so."""
        ...


class PyTorchBackend:
    """trtllm-serve's default: the profiling run of the dummy requests, CUDA graphs captured before it."""

    name = "pytorch"
    rounding = "rounded down to whole blocks"
    runs_flash_mla = True  # create_py_executor's tokens_per_block change (flash_mla_block)

    def before_kv(self, target: PlanInput, settings: EngineSettings, last: bool) -> tuple[int, int]:
        spec, tp, size = target.spec, target.deployment.tensor_parallel_size, _element_bytes(target)
        tokens = settings.max_num_batched_tokens or MAX_NUM_TOKENS
        requests = dummy_requests(tokens, settings.max_model_len)
        activation = forward_activation_bytes(spec, tp, tokens, requests if last else 0, size)
        if target.deployment.enforce_eager:
            return activation, 0
        # The graphs share one private pool (CUDAGraphRunner.capture keeps only weak references to their outputs,
        # smaller graphs reuse the larger's memory): the largest graph's forward. empty_cache cannot release the
        # pool, so it is in the measured peak.
        max_batch = settings.max_num_seqs or MAX_BATCH_SIZE
        kept = graph_batches(max_batch, tokens)
        blocks = estimation_tokens(tokens, settings.max_model_len, settings.block_size, max_batch,
                                   kept[-1] if kept else 0) // settings.block_size
        batch = largest_graph(max_batch, tokens, blocks)
        return activation, forward_activation_bytes(spec, tp, batch, batch if last else 0, size)

    def runtime_bytes(self, target: PlanInput, settings: EngineSettings, last: bool) -> int:
        return 0  # the C++ decoder and runtime buffers belong to the engine backend; torch's are in the peak

    def available(self, total: int, used: int, fraction: float) -> int:
        # the estimation pool is in the measured peak and counted back: it cancels out of a prediction
        return pytorch_available_bytes(total, used, 0, fraction)

    def blocks(self, available: int, per_token: int, tokens_per_block: int, dep: Deployment, fixed: int) -> int:
        """KvCacheCreator.configure_kv_cache_capacity (tensorrt_llm/_torch/pyexecutor/_util.py as stored in 2026):
        max_tokens caps the memory (bytes_for_tokens), which is cut into tokens (CacheCost.tokens_for_budget) and
        handed to KVCacheManager as kv_cache_config.max_tokens, whose calculate_max_num_blocks rounds it down to
        blocks. max_gpu_total_bytes is applied after max_tokens is set, so a full-attention pool ignores it (the
        order NVIDIA/TensorRT-LLM#5933's review flagged; the bytes reach only the VSWA and linear-attention
        managers)."""
        memory = max(available, 0)
        if dep.max_total_tokens is not None:
            memory = min(memory, dep.max_total_tokens * per_token + fixed)
        return whole_blocks(max(memory - fixed, 0) // per_token, tokens_per_block)

    def measured_after(self, settings: EngineSettings) -> str:
        return f"the weights, the CUDA graphs and a profiling forward of {settings.max_num_batched_tokens:,} tokens"

    def fixed_pool_bytes(self, target: PlanInput, settings: EngineSettings, decoder_layers: int, last: bool) -> int:
        return mamba_state(target, settings, decoder_layers, last)

    def memory_cap_note(self, dep: Deployment) -> str | None:
        if dep.kv_cache_memory_bytes is None:
            return None
        return (f"{dep.where('kv_cache_memory_bytes')}: kv_cache_config.max_gpu_total_bytes does not cap this pool: "
                "KvCacheCreator sets max_tokens before it applies the bytes, and a full-attention KVCacheManager "
                "sizes itself from max_tokens (tensorrt_llm/_torch/pyexecutor/_util.py, resource_manager.py); "
                "kv_cache_config.max_tokens does")


class TensorRtEngine:
    """A prebuilt TensorRT engine (the C++ executor, Triton's tensorrtllm backend): no profiling run. Its
    execution context is the activation memory TensorRT computed at build time for the max shapes
    (docs/source/reference/memory.md: close to max_num_tokens x a factor of the network); kvplan's layer estimate
    for max_num_tokens stands in for it. The runtime buffers and the decoder, allocated before the KV cache is
    sized (trtGptModelInflightBatching.cpp: createBuffers, then createDecoder, each printed as "[MemUsageChange]"),
    are engine_buffers.py's, term by term from the stored C++ sources: per slot the logits and the decoder state
    over max_seq_len, and batch x vocabulary for the embedding bias, the penalty workspace, the sampling
    workspace's logits and the top-k scratch. With the 2024 executor's DecoderBuffers they give the 2.66 + 5.76 GB
    NVIDIA/TensorRT-LLM#1188 prints for a default build (max_batch_size 2,048); T05's 0.12 engine prints 5.49 GiB
    against 3.32 derived (tests/test_trtllm_engine_buffers.py). They are counted outside torch, beside the CUDA
    context."""

    name = "tensorrt"
    rounding = "rounded up to whole blocks"
    runs_flash_mla = False

    def before_kv(self, target: PlanInput, settings: EngineSettings, last: bool) -> tuple[int, int]:
        tokens = settings.max_num_batched_tokens or MAX_NUM_TOKENS
        return forward_activation_bytes(target.spec, target.deployment.tensor_parallel_size, tokens, 0,
                                        _element_bytes(target)), 0

    def runtime_bytes(self, target: PlanInput, settings: EngineSettings, last: bool) -> int:
        return engine_buffers.before_kv_bytes(engine_shape(target, settings, last))

    def available(self, total: int, used: int, fraction: float) -> int:
        return engine_available_bytes(total - used, fraction)

    def blocks(self, available: int, per_token: int, tokens_per_block: int, dep: Deployment, fixed: int) -> int:
        """The C++ KVCacheManager::calculateMaxNumBlocks: max_gpu_total_bytes and the fraction, the smaller wins;
        max_tokens caps the tokens; then ceilDiv to blocks."""
        if dep.kv_cache_memory_bytes is not None:
            available = min(available, dep.kv_cache_memory_bytes)
        return pool_blocks(max_tokens(available, per_token, dep.max_total_tokens), tokens_per_block)

    def measured_after(self, settings: EngineSettings) -> str:
        return "the TensorRT engine, its execution context, the runtime buffers and the decoder"

    def fixed_pool_bytes(self, target: PlanInput, settings: EngineSettings, decoder_layers: int, last: bool) -> int:
        return 0  # kvplan prices the states for the PyTorch backend's CppMambaHybridCacheManager only (mamba.py)

    def memory_cap_note(self, dep: Deployment) -> str | None:
        return None  # calculateMaxNumBlocks takes the smaller of the bytes and the fraction: the plan shows it


_ENGINE_BACKEND = TensorRtEngine()
BACKENDS: dict[str, Backend] = {"pytorch": PyTorchBackend(), "tensorrt": _ENGINE_BACKEND, "trt": _ENGINE_BACKEND}


def backend(target: PlanInput) -> Backend:
    """The deployment's backend (trtllm-serve --backend; the PyTorch one when none is declared)."""
    return BACKENDS[target.deployment.backend or "pytorch"]


FLASH_MLA_LATENT = 576  # kv_lora_rank 512 + qk_rope_head_dim 64, the DeepSeek-V2/V3 shape FlashMLA runs
FLASH_MLA_BLOCK = 64


def flash_mla_block(target: PlanInput) -> int | None:
    """64-token blocks where the PyTorch backend runs MLA on FlashMLA: ModelConfig.enable_flash_mla
    (tensorrt_llm/_torch/model_config.py: the TRTLLM attention backend, kv_lora_rank + qk_rope_head_dim 576, a
    compute capability 9.0 device) makes create_py_executor set tokens_per_block to 64, over the options file's
    ("Change tokens_per_block to: 64 for using FlashMLA", _torch/pyexecutor/py_executor_creator.py)."""
    if not backend(target).runs_flash_mla or target.gpu.compute_capability != "9.0":
        return None
    latent = any(getattr(layer, "latent_cache", False) and getattr(layer, "latent_dim", 0) == FLASH_MLA_LATENT
                 for layer in target.spec.layers)
    return FLASH_MLA_BLOCK if latent else None


def mamba_state(target: PlanInput, settings: EngineSettings, decoder_layers: int, last: bool) -> int:
    """The PyTorch pool's fixed cost for a hybrid model (engines/trtllm/mamba.py); 0 without recurrent layers."""
    state = state_bytes_per_rank(target, decoder_layers, last, _element_bytes(target))
    return state_intercept(target, settings.max_num_seqs or MAX_BATCH_SIZE, state) if state else 0


def checkpoint_kv_dtype(target: PlanInput) -> str | None:
    """kv_cache_dtype auto keeps the checkpoint's KV quantization: validate_and_set_kv_cache_quant
    (tensorrt_llm/_torch/pyexecutor/model_loader.py@b51992a3; model_engine.py before it) returns without touching
    the kv_cache_quant_algo ModelConfig read from hf_quant_config.json, so FP8 there is an FP8 pool (one byte an
    element, KVCacheManager.get_cache_size_per_token). An explicit dtype that differs from the checkpoint's is
    refused there ("You cannot override a checkpoint with a pre-quantized KV cache that doesn't match").
    NVFP4 is an NVFP4 pool alike. Any other value: ModelConfig._build_modelopt_quant_config
    (tensorrt_llm/_torch/model_config.py@008e0af8) reads it as QuantAlgo(value), which raises for a name
    outside tensorrt_llm/quantization/mode.py QuantAlgo; kvplan refuses it in one line (INT8, a member, is not
    modelled either)."""
    algo = common.modelopt_kv_algo(target.spec)
    if not algo:
        return None
    source = target.spec.quantization.source if target.spec.quantization else "quantization"
    if algo not in CHECKPOINT_KV:
        raise KvplanError(f"kv_cache_quant_algo {algo!r}: TensorRT-LLM reads it as a QuantAlgo "
                          "(_torch/model_config.py), and kvplan plans only FP8 and NVFP4 KV caches there",
                          common.modelopt_where(target.spec))
    dtype, flags = CHECKPOINT_KV[algo]
    dep = target.deployment
    if dep.kv_cache_dtype not in ("auto", *flags):
        raise KvplanError(f"TensorRT-LLM refuses kv_cache_dtype {dep.kv_cache_dtype} for a checkpoint whose "
                          f"{source} names an {algo} KV cache (kv_cache_quant_algo {algo}): use auto or {flags[0]}",
                          dep.where("kv_cache_dtype"))
    return dtype


# kv_cache_quant_algo -> the pool's dtype and the --kv_cache_dtype values that match it
CHECKPOINT_KV = {"FP8": ("fp8_e4m3", ("fp8", "fp8_e4m3")), "NVFP4": ("nvfp4", ("nvfp4",))}


class TensorRtLlm(PoolRules):
    name = "trtllm"
    label = "TensorRT-LLM"
    kv_log = "Allocated ... GiB for max tokens in paged KV cache (N)"
    flat_pool = True
    refused_kv_cache_dtypes = frozenset({"mxfp8", "fp4_mx_block16"})  # SGLang's; --kv_cache_dtype: auto, fp8, nvfp4

    def settings(self, target: PlanInput) -> EngineSettings:
        dep = target.deployment
        deepseek_v4.check_ratios(target.spec.layers)
        return EngineSettings(
            "trtllm", self.label, self.kv_log, dep.engine_version or RELEASES.newest,
            dep.gpu_memory_utilization or FREE_FRACTION,
            flash_mla_block(target) or dep.block_size or deepseek_v4.default_block(target.spec.layers)
            or TOKENS_PER_BLOCK, common.check_max_model_len(target.spec, dep),
            dep.max_num_seqs or MAX_BATCH_SIZE, dep.max_num_batched_tokens or MAX_NUM_TOKENS,
            utilization_knob="free_gpu_memory_fraction", length_knob="max_seq_len",
            auto_kv_cache_dtype=checkpoint_kv_dtype(target))

    def _before_kv(self, target: PlanInput, settings: EngineSettings, weights_bytes: int,
                   last: bool) -> tuple[Memory, int]:
        """What one rank holds before its KV cache (kv_cache_bytes 0 here), and the free memory's share left."""
        dep, gpu, rules = target.deployment, target.gpu, backend(target)
        activation, graphs = rules.before_kv(target, settings, last)
        outside_torch = CUDA_CONTEXT_BYTES + rules.runtime_bytes(target, settings, last)
        lora = device_cache_bytes(target.spec, dep, _element_bytes(target),
                                  gpu.memory_bytes - weights_bytes - CUDA_CONTEXT_BYTES)
        weights_bytes += lora  # the LoRA device cache is allocated before the KV cache is sized
        used = weights_bytes + activation + graphs + outside_torch
        fraction = as_float32(settings.gpu_memory_utilization or FREE_FRACTION)
        available = max(rules.available(gpu.memory_bytes, used, fraction), 0)
        if dep.kv_cache_memory_bytes is not None and gpu.memory_bytes == 0:
            available = dep.kv_cache_memory_bytes  # no GPU given: the bytes alone size the pool
        return Memory(gpu.memory_bytes, gpu.memory_bytes, weights_bytes, activation_bytes=activation,
                      non_torch_bytes=outside_torch, cuda_graph_bytes=graphs), available

    def stage_memory(self, target: PlanInput, settings: EngineSettings, weights_bytes: int, decoder_layers: int,
                     last: bool) -> Memory:
        dep, rules = target.deployment, backend(target)
        memory, available = self._before_kv(target, settings, weights_bytes, last)
        block = _block_bytes(target, settings, decoder_layers, last)
        pool = available
        states = rules.fixed_pool_bytes(target, settings, decoder_layers, last)
        if block and available > 0:
            pool = rules.blocks(available, block // settings.block_size, settings.block_size, dep, states) * block
        if deepseek_v4.applies(target.spec.layers):  # KVCacheManagerV2's byte quota (trtllm/deepseek_v4.py),
            dsv4 = self._dsv4(target, settings)  # or what its pools hold where StorageManager raised it
            pool = dsv4.total if dsv4.raised else dsv4.quota
        used = memory.weights_bytes + memory.activation_bytes + memory.cuda_graph_bytes + memory.non_torch_bytes
        return replace(memory, reserve_bytes=max(0, memory.total_bytes - used - pool), kv_cache_bytes=pool)

    def kv_tensor_parallel(self, target: PlanInput) -> int:
        return kv_ranks(target)

    def flat_layer(self, layer: Layer) -> Layer:
        return flat_pool_layer(layer)

    def capped_blocks(self, target: PlanInput, settings: EngineSettings, blocks: int) -> int:
        if deepseek_v4.applies(target.spec.layers):  # the compressed life cycle's blocks
            pools = self._dsv4(target, settings)
            return pools.slots[[cycle.window for cycle in pools.cycles].index(None)]
        return blocks

    def pools(self, target: PlanInput, settings: EngineSettings, stage: int, tokens: int, kv_bytes: int,
              kv_tp: int) -> SplitPools | None:
        if not deepseek_v4.applies(target.spec.layers):
            return None
        chunk = settings.max_num_batched_tokens or MAX_NUM_TOKENS
        return deepseek_v4.split_pools(self._dsv4(target, settings), chunk)

    def pool_notes(self, target: PlanInput, settings: EngineSettings, num_blocks: int) -> list[str]:
        return [deepseek_v4.note(self._dsv4(target, settings))] if deepseek_v4.applies(target.spec.layers) else []

    def _dsv4(self, target: PlanInput, settings: EngineSettings) -> deepseek_v4.Dsv4Pools:
        """DeepSeek-V4's pool groups on one rank (deepseek_v4.py), from KVCacheManagerV2's byte quota: the free
        memory's share after what the rank holds before its KV cache (or the bytes given)."""
        deepseek_v4.check_deployment(target)
        prepared = common.prepare(target, flat_pool=True, settings=settings, rules=self)
        stage = prepared.stages[-1]
        available = self._before_kv(target, settings, stage.weights_bytes, stage.last)[1]
        kv_quota = deepseek_v4.quota(target, settings, available)
        return deepseek_v4.plan_pools(target, kv_quota, settings.block_size, prepared.kv_bytes,
                                      settings.max_num_seqs or MAX_BATCH_SIZE, settings.max_model_len,
                                      settings.max_num_batched_tokens or MAX_NUM_TOKENS)

    def offload_tier(self, target: PlanInput, settings: EngineSettings, layout: PoolLayout, tokens: int,
                     split: bool) -> tuple[int, list[str]]:
        return host_tier(target.deployment, layout, split)

    def notes(self, target: PlanInput, settings: EngineSettings) -> list[str]:
        fraction = settings.gpu_memory_utilization
        stages = common.prepare(target, flat_pool=True, settings=settings, rules=self).stages
        block = _block_bytes(target, settings, stages[-1].decoder_layers, True)
        per_gib = int(as_float32(fraction or FREE_FRACTION) * GiB) // max(1, block // settings.block_size)
        rules, dsv4 = backend(target), deepseek_v4.applies(target.spec.layers)
        share = f"free_gpu_memory_fraction {fraction} of the memory free after {rules.measured_after(settings)}"
        notes = [f"{share}, {rules.rounding}; kernel workspaces, NCCL buffers and allocator fragmentation are not "
                 f"modelled: each GiB of them is {per_gib:,} tokens fewer"]
        if dsv4:  # the quota KVCacheManagerV2 takes (deepseek_v4.quota)
            notes = [deepseek_v4.quota_note(target, settings, self._dsv4(target, settings), share)]
        dep = target.deployment
        states = rules.fixed_pool_bytes(target, settings, stages[-1].decoder_layers, True)
        if states:
            seqs = settings.max_num_seqs or MAX_BATCH_SIZE
            notes.append(f"Mamba / linear-attention states for max_batch_size {seqs} x pp "
                         f"{dep.pipeline_parallel_size} + 1 requests, {states / GiB:.2f} GiB per rank, are taken "
                         "from the KV memory before any token (CppMambaHybridCacheManager's fixed cost, in the "
                         "reserve here): a smaller max_batch_size leaves more tokens")
        buffers = rules.runtime_bytes(target, settings, True)
        if buffers:
            notes.append(f"runtime buffers and decoder for max_batch_size {settings.max_num_seqs or MAX_BATCH_SIZE} "
                         f"and max_seq_len {settings.max_model_len:,}: {buffers / GiB:.2f} GiB per rank, allocated "
                         "before the KV cache (logits, decoder state and sampling workspaces per request slot, "
                         "engines/trtllm/engine_buffers.py): a smaller max_batch_size leaves more tokens")
        lora = device_cache_bytes(target.spec, dep, _element_bytes(target),
                                  target.gpu.memory_bytes - stages[-1].weights_bytes - CUDA_CONTEXT_BYTES)
        if lora:
            notes.append(f"LoRA device cache (lora_config, max_lora_rank {dep.max_lora_rank or 64}"
                         + (f", max_loras {dep.max_loras}" if dep.max_loras is not None else
                            ", 2% of the free memory without max_loras")
                         + f"): {lora:,} B per rank, counted with the weights")
        if flash_mla_block(target):
            given = f" (not {dep.where('block_size')}'s {dep.block_size})" if dep.block_size not in (None, 64) else ""
            notes.append(f"64-token blocks{given}: MLA with a 576-wide latent runs FlashMLA on compute capability "
                         "9.0, and TensorRT-LLM changes tokens_per_block for it")
        if dep.attention_data_parallel_size is not None:
            notes.append(f"{dep.where('attention_data_parallel_size')}: attention DP: each of the "
                         f"{dep.tensor_parallel_size} ranks holds every KV head of its own requests; its attention "
                         "weights, replicated on every rank, are counted split over TP (not modelled)")
        if dep.enable_chunked_prefill is not None and not dsv4:
            # read for DeepSeek-V4's context-MLA workspace alone (deepseek_v4.no_workspace_cap)
            notes.append(f"{dep.where('enable_chunked_prefill')} is accepted but not modelled here (chunked "
                         "context: prefill activations bounded by max_num_tokens)")
        if dep.fp8_context_mla_kv_len_cap is not None and not dsv4:
            # read for DeepSeek-V4's context-MLA workspace alone (deepseek_v4.workspace_kv_len_cap)
            notes.append(f"{dep.where('fp8_context_mla_kv_len_cap')} is not read here: kvplan models the FP8 "
                         "context-MLA workspace reserve it caps for DeepSeek-V4 alone")
        cap_note = rules.memory_cap_note(dep)
        if cap_note and target.gpu.memory_bytes and not dsv4:
            notes.append(cap_note)
        return notes


ENGINE = TensorRtLlm()
