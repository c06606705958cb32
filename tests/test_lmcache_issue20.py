"""Issue 20, LMCache inside vLLM's workers (--kv-transfer-config with LMCacheConnectorV1): the CPU tier as the
lmcache 0.5.6 wheel sizes it. v1/config.py: max_local_cpu_size 5.0 (GiB: local_cpu_backend.py multiplies by
1024**3) and chunk_size 256 by default, LMCACHE_MAX_LOCAL_CPU_SIZE / LMCACHE_CHUNK_SIZE from the environment, the
connector's "lmcache.<key>" extra config over both (vllm_v1_adapter.py _apply_extra_config); one chunk is
(layers, 2, chunk_size, KV heads per rank, head size) in the KV dtype (vllm_service_factory.py), aligned to 4,096 B
(memory_management.py AddressManager.ALIGN_BYTES); every worker pins its own max_local_cpu_size.
Qwen2.5-7B by hand: 28 layers x 2 x 4 KV heads x 128 x 2 B = 57,344 B a token on one rank."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from kvplan.api import estimate

TOKEN = 28 * 2 * 4 * 128 * 2  # 57,344 B
LMCACHE = {"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}


def test_the_default_five_gib_hold_365_chunks_of_256_tokens_beside_an_unchanged_gpu_pool():
    base = estimate("Qwen/Qwen2.5-7B", gpu="h100", max_model_len=32768)
    tier = estimate("Qwen/Qwen2.5-7B", gpu="h100", max_model_len=32768, kv_transfer_config=LMCACHE)
    chunk = TOKEN * 256  # 14,680,064 B, already a multiple of 4,096
    assert 5 * 2**30 // chunk == 365
    assert tier.capacity.offload_tokens == 365 * 256 == 93_440
    assert tier.capacity.offload_host_bytes == 5 * 2**30
    assert (tier.capacity.num_blocks, tier.capacity.tokens) == (base.capacity.num_blocks, base.capacity.tokens)
    assert base.capacity.offload_host_bytes == 0


def test_the_extra_config_overrides_the_environment_and_each_tp_worker_pins_its_own():
    # TP 2: 2 KV heads per rank, 28,672 B a token; chunk_size 512 from the extra config: 14,680,064 B a chunk;
    # max_local_cpu_size 40 from LMCACHE_MAX_LOCAL_CPU_SIZE: 40 x 2^30 // 14,680,064 = 2,925 chunks
    config = {**LMCACHE, "kv_connector_extra_config": {"lmcache.chunk_size": "512"}}
    tier = estimate("Qwen/Qwen2.5-7B", gpu="h100", max_model_len=32768, tensor_parallel_size=2,
                    kv_transfer_config=config, lmcache_max_local_cpu_size=40, lmcache_chunk_size=128)
    assert tier.capacity.offload_tokens == 2_925 * 512 == 1_497_600
    assert tier.capacity.offload_host_bytes == 2 * 40 * 2**30
    over = {**LMCACHE, "kv_connector_extra_config": {"lmcache.max_local_cpu_size": 1}}
    small = estimate("Qwen/Qwen2.5-7B", gpu="h100", max_model_len=32768, kv_transfer_config=over,
                     lmcache_max_local_cpu_size=40)
    assert small.capacity.offload_tokens == 2**30 // (TOKEN * 256) * 256 == 73 * 256


def test_a_chunk_is_aligned_to_4096_bytes():
    # Qwen2.5-0.5B with an fp8 KV cache: 24 layers x 2 x 2 KV heads x 64 x 1 B = 6,144 B a token; a chunk of one
    # token rounds up to 8,192 B
    tier = estimate("Qwen/Qwen2.5-0.5B", gpu="h100", max_model_len=4096, kv_cache_dtype="fp8",
                    kv_transfer_config={**LMCACHE, "kv_connector_extra_config": {"lmcache.chunk_size": 1}},
                    lmcache_max_local_cpu_size=1)
    assert tier.capacity.offload_tokens == 2**30 // 8192 == 131_072


def test_the_environment_and_the_command_line_reach_the_plan():
    env = {"LMCACHE_MAX_LOCAL_CPU_SIZE": "10", "PATH": "/usr/bin:/bin"}
    result = subprocess.run([sys.executable, "-m", "kvplan.cli.app", "estimate", "--gpu", "h100", "--json", "--",
                             "vllm", "serve", "Qwen/Qwen2.5-7B", "--max-model-len", "32768", "--kv-transfer-config",
                             json.dumps(LMCACHE)], capture_output=True, text=True, timeout=60, env=env)
    document = json.loads(result.stdout)
    assert document["capacity"]["offload_tokens"] == 10 * 2**30 // (TOKEN * 256) * 256 == 731 * 256
    assert document["capacity"]["offload_host_bytes"] == 10 * 2**30


def test_kv_offloading_size_replaces_the_connector():
    # config/vllm.py _post_init_kv_transfer_config: --kv-offloading-size sets the connector itself
    tier = estimate("Qwen/Qwen2.5-7B", gpu="h100", max_model_len=32768, kv_transfer_config=LMCACHE,
                    kv_offloading_size=64)
    assert tier.capacity.offload_tokens == 1_198_368  # the native tier of test_kv_offload_issue20


def test_other_connectors_count_no_tier_and_say_so():
    tier = estimate("Qwen/Qwen2.5-7B", gpu="h100", max_model_len=32768,
                    kv_transfer_config={"kv_connector": "NixlConnector", "kv_role": "kv_both"})
    assert tier.capacity.offload_tokens == 0
    assert any("NixlConnector" in note for note in tier.notes)


@pytest.mark.parametrize(("extra", "message"), [
    (["-pp", "2"], "modelled without pipeline parallelism"),
    (["--kv-transfer-config", '{"kv_connector": "LMCacheConnectorV1", "kv_connector_extra_config": '
      '{"lmcache.max_local_cpu_size": "lots"}}'], 'expected a number, got \'lots\''),
    (["--kv-transfer-config", '{"kv_connector": "LMCacheConnectorV1", "kv_connector_extra_config": '
      '{"lmcache.chunk_size": 0}}'], '"lmcache.chunk_size" must be an integer from 1'),
    (["--kv-transfer-config", '{"kv_connector": "LMCacheConnectorV1", "kv_connector_extra_config": '
      '{"lmcache.max_local_cpu_size": 1e300}}'], '"lmcache.max_local_cpu_size" must be a number from 0'),
    (["--kv-transfer-config", '{"kv_connector": "LMCacheConnectorV1", "kv_connector_extra_config": 5}'],
     "kv_connector_extra_config: expected a JSON object, got 5"),
])
def test_bad_lmcache_input_is_one_line(extra, message):
    config = ["--kv-transfer-config", json.dumps(LMCACHE)] if extra[0] != "--kv-transfer-config" else []
    result = subprocess.run([sys.executable, "-m", "kvplan.cli.app", "estimate", "--gpu", "h100", "--",
                             "vllm", "serve", "Qwen/Qwen2.5-7B", *config, *extra], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and message in result.stderr, result.stderr
