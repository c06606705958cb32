"""TensorRT-LLM's budget rule (kvplan/engines/trtllm/budget.py): the fraction of the memory free after the profiling
run, in whole tokens, in whole blocks (rounded down by the PyTorch backend's KVCacheManager as stored in 2026, up by
the C++ one); derived by hand. The profiling run's terms: tests/test_trtllm_profiling.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvplan.api import estimate
from kvplan.deployment import Deployment
from kvplan.engines import plan_deployment as engines_estimate
from kvplan.engines.trtllm import budget as trtllm
from kvplan.errors import KvplanError
from kvplan.hardware import find_gpu
from kvplan.models.sources import resolve
from kvplan.plan import GpuChoice

LLAMA_FP8 = Path(__file__).parent / "fixtures" / "configs" / "frontier" / "nvidia__Llama-3.1-70B-Instruct-FP8"


def test_pool_from_the_memory_free_after_the_profiling_run():
    # Qwen2.5-7B on an H100 (85,018,877,624 B), max_seq_len 8192, bf16: weights 15,231,233,024. The profiling run
    # holds 3 x 3,584 + 3 x 18,944 = 67,584 elements per token at the MLP: 8,192 x 67,584 x 2 = 1,107,296,256,
    # more than its logits (ceil(8,192 / 8,191) = 2 dummy requests, one row each: 2 x 152,064 x (2 + 4) =
    # 1,824,768). CUDA graphs: the largest of 1-31, 32, 64, 128 within min(2,048, 8,192) is 128, and the estimation
    # pool's floor of max_batch_size = 2,048 blocks holds it; its logits 128 x 152,064 x 6 = 116,785,152 beat
    # its layers' 128 x 67,584 x 2 = 17,301,504. The CUDA context 0.61 GiB = 654,982,512.
    # Free 85,018,877,624 - 17,110,296,944 = 67,908,580,680 x 0.8999999761581421 = 61,117,720,992 B
    # -> // 57,344 = 1,065,808 tokens -> whole blocks of 32 (resource_manager.py calculate_max_num_blocks,
    # int(max_tokens // tokens_per_block), read_file id 56108752801) = 33,306 blocks = 1,065,792 tokens.
    plan = estimate("Qwen/Qwen2.5-7B", gpu="h100", engine="trtllm", max_model_len=8192)
    assert plan.memory.activation_bytes == 1_107_296_256
    assert plan.memory.cuda_graph_bytes == 116_785_152
    assert plan.memory.non_torch_bytes == 654_982_512
    assert plan.capacity.num_blocks == 33_306 and plan.capacity.tokens == 1_065_792
    assert plan.memory.kv_cache_bytes == 33_306 * 32 * 57_344


def test_max_gpu_total_bytes_does_not_cap_a_full_attention_pool_on_the_pytorch_backend():
    # KvCacheCreator.configure_kv_cache_capacity (tensorrt_llm/_torch/pyexecutor/_util.py as stored in 2026, read_file
    # id 54555926407) sets kv_cache_config.max_tokens from the memory before it applies max_gpu_total_bytes, and
    # KVCacheManager.calculate_max_num_blocks reads max_tokens and the fraction only: 10 GiB changes nothing, the
    # pool is the first test's 33,306 blocks, and a note says so.
    plan = estimate("Qwen/Qwen2.5-7B", gpu="h100", engine="trtllm", max_model_len=8192,
                    kv_cache_memory="10GiB")
    assert plan.capacity.num_blocks == 33_306
    assert any("max_gpu_total_bytes" in note and "does not cap" in note for note in plan.notes)


def test_max_gpu_total_bytes_caps_the_engine_backends_pool():
    # The C++ KVCacheManager (TensorRT engine backend) takes the smaller of the fraction and the bytes, then
    # ceilDiv: 10 GiB // 57,344 = 187,245 tokens -> 5,852 blocks of 32 = 187,264 tokens.
    plan = estimate("Qwen/Qwen2.5-7B", gpu="h100", engine="trtllm", max_model_len=8192,
                    kv_cache_memory="10GiB", backend="tensorrt")
    assert plan.capacity.num_blocks == 5_852 and plan.capacity.tokens == 187_264


def test_max_tokens_caps_the_memory_then_whole_blocks():
    # kv_cache_config.max_tokens 100,001: configure_kv_cache_capacity caps the memory at 100,001 x 57,344 B,
    # tokens_for_budget gives back 100,001 tokens, calculate_max_num_blocks rounds down: 3,125 blocks = 100,000.
    # (Deployment.max_total_tokens; tests/test_trtllm_config.py reads it from a trtllm-serve --config file)
    gpu = find_gpu("h100")
    dep = Deployment(engine="trtllm", gpu=gpu.id, max_model_len=8192, max_total_tokens=100_001)
    plan = engines_estimate(resolve("Qwen/Qwen2.5-7B"), dep, GpuChoice(gpu.id, gpu.name, gpu.memory_bytes, 1))
    assert plan.capacity.num_blocks == 3_125 and plan.capacity.tokens == 100_000


def test_blocks_round_up_in_cpp_and_before_1_2_down_after():
    # T03 (1.1.0rc3): 86,711 max tokens -> 86,720 in the pool (ceil, as resource_manager.py@d2a5560a's math.ceil);
    # the 2026 sources' int(max_tokens // tokens_per_block): 2,709 blocks
    assert trtllm.pool_blocks(86_711, 32) == 2_710
    assert trtllm.pool_blocks(86_720, 32) == 2_710
    assert trtllm.whole_blocks(86_711, 32) == 2_709
    assert trtllm.max_tokens(10 * 57_344 + 1, 57_344, cap=7) == 7  # max_tokens_in_paged_kv_cache


def test_fp8_kv_cache_under_auto_for_a_checkpoint_that_names_it():
    # Llama-3.1-70B-Instruct-FP8 (hf_quant_config.json: kv_cache_quant_algo FP8). kv_cache_dtype auto keeps the
    # checkpoint's KV quantization (validate_and_set_kv_cache_quant, tensorrt_llm/_torch/pyexecutor/
    # model_loader.py@b51992a3): 80 layers x 2 x 8 KV heads x 128 x 1 B = 163,840 B a token (327,680 in bf16).
    plan = estimate(str(LLAMA_FP8), gpu="h200", engine="trtllm", max_model_len=8192)
    assert (plan.kv_dtype, plan.layout.bytes_per_token) == ("fp8_e4m3", 163_840)
    assert plan.memory.kv_cache_bytes == plan.capacity.num_blocks * 32 * 163_840
    # fp8 given explicitly matches the checkpoint; nvfp4 is refused as model_loader.py refuses it (RuntimeError
    # "You cannot override a checkpoint with a pre-quantized KV cache that doesn't match")
    assert estimate(str(LLAMA_FP8), gpu="h200", engine="trtllm", max_model_len=8192,
                    kv_cache_dtype="fp8").layout.bytes_per_token == 163_840
    with pytest.raises(KvplanError, match="kv_cache_quant_algo FP8"):
        estimate(str(LLAMA_FP8), gpu="h200", engine="trtllm", max_model_len=8192, kv_cache_dtype="nvfp4")


def test_extra_options_keys_name_deployment_fields():
    # kv_cache_config.max_tokens (KvCacheConfig's token cap) maps onto the Deployment's max_total_tokens, as do the
    # pool keys beside it (expert_parallel_size is accepted, not a field)
    from dataclasses import fields

    from kvplan.deployment import Deployment
    from kvplan.engines.trtllm.flags import EXTRA_OPTIONS_KNOBS

    names = {f.name for f in fields(Deployment)}
    assert EXTRA_OPTIONS_KNOBS["kv_cache_config.max_tokens"] == "max_total_tokens"
    assert {v for k, v in EXTRA_OPTIONS_KNOBS.items() if k.startswith("kv_cache_config.")} <= names


def test_the_fraction_is_a_cpp_float_through_the_engine():
    # KvCacheConfig holds free_gpu_memory_fraction as a C++ float: 0.9 is 0.8999999761581421. A GPU total chosen so
    # that the two readings fall on either side of a token: 78,277,294,392 - 17,110,296,944 (weights, activations,
    # CUDA graphs and context as in the first test) = 61,166,997,448 B free;
    #   x 0.9 exactly      = 55,050,297,703.2 B -> // 57,344 = 960,001 tokens -> ceil(/ 32) = 30,001 blocks
    #   x 0.9 as a float32 = 55,050,296,244 B   -> // 57,344 = 960,000 tokens -> 30,000 blocks (TensorRT-LLM's)
    plan = estimate("Qwen/Qwen2.5-7B", gpu_memory="78277294392", engine="trtllm", max_model_len=8192)
    assert plan.capacity.num_blocks == 30_000 and plan.capacity.tokens == 960_000


NANO_BF16 = LLAMA_FP8.parent / "nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B-BF16"


def test_mamba_states_for_max_batch_size_come_out_of_the_pool():
    # Nemotron-3-Nano-30B-A3B (BF16) on an H100 at 32K, PyTorch backend. CppMambaHybridCacheManager, the default
    # hybrid manager, prices the pool as slope x tokens + intercept (kv_cache/mamba_cache_manager.py
    # _estimate_mamba_hybrid_cache_cost, read_file id 68572734154): intercept = (max_batch_size x pp + 1 dummy
    # slot) x the states per rank. One request's states: 23 Mamba-2 layers x (conv 3 x (4,096 + 2 x 8 x 128) x 2 B
    # = 36,864 + SSM 64 heads x 64 x 128 x 4 B (mamba_ssm_cache_dtype float32) = 2,097,152) = 49,082,368 B.
    # max_batch_size 64: 65 x 49,082,368 = 3,190,353,920. Free 85,018,877,624 - 63,155,886,436 (weights: the
    # 2,944 score biases in float32, DeepseekV3Gate's CUTLASS default, kvplan/weights.py ScoreBiasFloat32; the
    # index's total_size 63,155,886,464 less each layer's whole-byte rounding) - 882,900,992 (profiling)
    # - 50,331,648 (the 64-request graph) - 654,982,512 = 20,274,776,036 x 0.9f = 18,247,297,949;
    # (18,247,297,949 - 3,190,353,920) // 6,144 B a token (6 attention layers x 2 x 2 x 128 x 2)
    # = 2,450,674 tokens -> 76,583 whole blocks = 2,450,656 tokens.
    plan = estimate(str(NANO_BF16), gpu="h100", engine="trtllm", max_model_len=32768, max_num_seqs=64)
    assert plan.memory.weights_bytes == 63_155_886_436 and plan.layout.bytes_per_token == 6_144
    assert plan.capacity.num_blocks == 76_583 and plan.capacity.tokens == 2_450_656
    assert any("max_batch_size 64 x pp 1 + 1 requests, 2.97 GiB per rank" in note for note in plan.notes)
    # The default max_batch_size 2,048: 2,049 x 49,082,368 = 100,569,772,032 B (93.66 GiB), more than the whole
    # 18.2 GB left: no token fits
    default = estimate(str(NANO_BF16), gpu="h100", engine="trtllm", max_model_len=32768)
    assert default.capacity.tokens == 0 and not default.capacity.fits


def test_flash_mla_forces_64_token_blocks_on_hopper():
    # create_py_executor (_torch/pyexecutor/py_executor_creator.py, read_file ids 4285525045 and 2399938814): for an
    # MLA model whose ModelConfig.enable_flash_mla holds (_torch/model_config.py, id 224781002: the TRTLLM backend,
    # kv_lora_rank + qk_rope_head_dim = 512 + 64 = 576, compute capability 9.0) tokens_per_block becomes 64, over
    # the options file's. DeepSeek-V2-Lite: 27 layers x 576 x 2 B = 31,104 B a token. The PyTorch backend does not
    # register DeepseekV2ForCausalLM (_torch/models/_arch_index.py at 065ff9e9 has DeepseekV3 / V32 only; the
    # TensorRT engine backend's models/__init__.py MODEL_MAP has it), so its PyTorch plans are --allow-unmodelled
    # ones: the rule is on the MLA geometry, which DeepSeek-V3's latent shares.
    hopper = estimate("deepseek-ai/DeepSeek-V2-Lite", gpu="h100", engine="trtllm", max_model_len=8192,
                      allow_unmodelled=True)
    assert hopper.engine.block_size == 64 and hopper.layout.bytes_per_token == 27 * 576 * 2
    assert any(note.startswith("64-token blocks: MLA with a 576-wide latent") for note in hopper.notes)
    given = estimate("deepseek-ai/DeepSeek-V2-Lite", gpu="h100", engine="trtllm", max_model_len=8192, block_size=32,
                     allow_unmodelled=True)
    assert given.engine.block_size == 64
    # Blackwell (10.0) and the TensorRT engine backend keep the 32-token default; so does a GQA model on Hopper
    assert estimate("deepseek-ai/DeepSeek-V2-Lite", gpu="b200", engine="trtllm",
                    max_model_len=8192, allow_unmodelled=True).engine.block_size == 32
    assert estimate("deepseek-ai/DeepSeek-V2-Lite", gpu="h100", engine="trtllm", max_model_len=8192,
                    backend="tensorrt").engine.block_size == 32
    assert estimate("Qwen/Qwen2.5-7B", gpu="h100", engine="trtllm", max_model_len=8192).engine.block_size == 32
