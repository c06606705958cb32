"""TensorRT-LLM's budget rule (kvplan/engines/trtllm.py): the fraction of the memory free after the profiling run,
in whole tokens, rounded up to blocks; derived by hand. The profiling run's terms: tests/test_trtllm_profiling.py."""

from __future__ import annotations

from kvplan.api import estimate
from kvplan.deployment import Deployment
from kvplan.engines import plan_deployment as engines_estimate
from kvplan.engines.trtllm import budget as trtllm
from kvplan.hardware import find_gpu
from kvplan.models.sources import resolve
from kvplan.plan import GpuChoice


def test_pool_from_the_memory_free_after_the_profiling_run():
    # Qwen2.5-7B on an H100 (85,018,877,624 B), max_seq_len 8192, bf16: weights 15,231,233,024. The profiling run
    # holds 3 x 3,584 + 3 x 18,944 = 67,584 elements per token at the MLP: 8,192 x 67,584 x 2 = 1,107,296,256,
    # more than its logits (ceil(8,192 / 8,191) = 2 dummy requests, one row each: 2 x 152,064 x (2 + 4) =
    # 1,824,768). CUDA graphs: the largest of 1-31, 32, 64, 128 within min(2,048, 8,192) is 128, and the estimation
    # pool's ceil(8,193 / 32) + ceil(3 / 32) = 258 blocks hold it; its logits 128 x 152,064 x 6 = 116,785,152 beat
    # its layers' 128 x 67,584 x 2 = 17,301,504. The CUDA context 0.61 GiB = 654,982,512.
    # Free 85,018,877,624 - 17,110,296,944 = 67,908,580,680 x 0.8999999761581421 = 61,117,720,992 B
    # -> // 57,344 = 1,065,808 tokens -> ceilDiv by 32 = 33,307 blocks = 1,065,824 tokens.
    plan = estimate("Qwen/Qwen2.5-7B", gpu="h100", engine="trtllm", max_model_len=8192)
    assert plan.memory.activation_bytes == 1_107_296_256
    assert plan.memory.cuda_graph_bytes == 116_785_152
    assert plan.memory.non_torch_bytes == 654_982_512
    assert plan.capacity.num_blocks == 33_307 and plan.capacity.tokens == 1_065_824
    assert plan.memory.kv_cache_bytes == 33_307 * 32 * 57_344


def test_max_gpu_total_bytes_caps_the_pool():
    # kv_cache_config.max_gpu_total_bytes 10 GiB, below the fraction's 56.92 GiB (61,117,720,992 B): the smaller wins.
    # 10 GiB // 57,344 = 187,245 tokens -> 5,852 blocks of 32 = 187,264 tokens.
    plan = estimate("Qwen/Qwen2.5-7B", gpu="h100", engine="trtllm", max_model_len=8192,
                    kv_cache_memory="10GiB")
    assert plan.capacity.num_blocks == 5_852 and plan.capacity.tokens == 187_264


def test_max_tokens_caps_before_rounding_up():
    # kv_cache_config.max_tokens 100,001: the cap applies to tokens, then ceilDiv by 32 = 3,126 blocks = 100,032.
    # (Deployment.max_total_tokens; tests/test_trtllm_config.py reads it from a trtllm-serve --config file)
    gpu = find_gpu("h100")
    dep = Deployment(engine="trtllm", gpu=gpu.id, max_model_len=8192, max_total_tokens=100_001)
    plan = engines_estimate(resolve("Qwen/Qwen2.5-7B"), dep, GpuChoice(gpu.id, gpu.name, gpu.memory_bytes, 1))
    assert plan.capacity.num_blocks == 3_126 and plan.capacity.tokens == 100_032


def test_blocks_round_up():
    assert trtllm.pool_blocks(86_711, 32) == 2_710  # T03: 86,711 max tokens -> 86,720 in the pool
    assert trtllm.pool_blocks(86_720, 32) == 2_710
    assert trtllm.max_tokens(10 * 57_344 + 1, 57_344, cap=7) == 7  # max_tokens_in_paged_kv_cache


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
