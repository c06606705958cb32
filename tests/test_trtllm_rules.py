"""TensorRT-LLM's budget rule (kvplan/engines/trtllm.py): the fraction of the memory free after the profiling run,
in whole tokens, rounded up to blocks; derived by hand."""

from __future__ import annotations

from kvplan.api import estimate
from kvplan.deployment import Deployment
from kvplan.engines import estimate as engines_estimate
from kvplan.engines import trtllm
from kvplan.hardware import find_gpu
from kvplan.models.sources import resolve
from kvplan.plan import GpuChoice


def test_pool_from_the_memory_free_after_the_profiling_run():
    # Qwen2.5-7B on an H100 (85,018,877,624 B): weights 15,231,233,024; the profiling run's activations
    # int(3.79 x min(2048, 1024) x 152,064 x 4) + int(0.12 GiB) = 2,489,466,223; the CUDA context 0.61 GiB
    # = 654,982,512. Free 66,643,195,865 x 0.8999999761581421 = 59,978,874,689 B
    # -> // 57,344 = 1,045,948 tokens -> ceilDiv by 32 = 32,686 blocks = 1,045,952 tokens.
    plan = estimate("Qwen/Qwen2.5-7B", gpu="h100", engine="trtllm", max_model_len=8192)
    assert plan.memory.activation_bytes == 2_489_466_223
    assert plan.memory.non_torch_bytes == 654_982_512
    assert plan.capacity.num_blocks == 32_686 and plan.capacity.tokens == 1_045_952
    assert plan.memory.kv_cache_bytes == 32_686 * 32 * 57_344


def test_max_gpu_total_bytes_caps_the_pool():
    # kv_cache_config.max_gpu_total_bytes 10 GiB, below the fraction's 55.9 GiB: the smaller wins.
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
    from kvplan.deployment.flags_trtllm import EXTRA_OPTIONS_KNOBS

    names = {f.name for f in fields(Deployment)}
    assert EXTRA_OPTIONS_KNOBS["kv_cache_config.max_tokens"] == "max_total_tokens"
    assert {v for k, v in EXTRA_OPTIONS_KNOBS.items() if k.startswith("kv_cache_config.")} <= names


def test_the_fraction_is_a_cpp_float_through_the_engine():
    # KvCacheConfig holds free_gpu_memory_fraction as a C++ float: 0.9 is 0.8999999761581421. A GPU total chosen so
    # that the two readings fall on either side of a token: free after load 79,542,678,808 - 15,231,233,024
    # (weights) - 2,489,466,223 (runtime buffers) - 654,982,512 (CUDA context) = 61,166,997,049 B;
    #   x 0.9 exactly      = 55,050,297,344.1 B -> // 57,344 = 960,001 tokens -> ceil(/ 32) = 30,001 blocks
    #   x 0.9 as a float32 = 55,050,295,885.8 B -> // 57,344 = 960,000 tokens -> 30,000 blocks (TensorRT-LLM's)
    plan = estimate("Qwen/Qwen2.5-7B", gpu_memory="79542678808", engine="trtllm", max_model_len=8192)
    assert plan.capacity.num_blocks == 30_000 and plan.capacity.tokens == 960_000
