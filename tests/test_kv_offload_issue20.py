"""Issue 20, the CPU KV tier (vLLM --kv-offloading-size): the GPU pool as the release computes it, plus the CPU
tier's tokens as vLLM 0.33.0's OffloadingConnector sizes it (config/vllm.py _post_init_kv_transfer_config:
cpu_bytes_to_use = GiB x 2^30 over the TP ranks; v1/kv_offload/cpu/spec.py: num_chunks = cpu_bytes_to_use //
round_up(block bytes per worker x workers, 4,096)). Derived by hand for Qwen2.5-7B (28 layers, 4 KV heads of 128,
bfloat16, 16-token blocks)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from kvplan.api import estimate

BLOCK = 2 * 28 * 4 * 128 * 16 * 2  # 917,504 B: one block on one rank, all layers (a multiple of 4,096)


def test_sixty_four_gib_of_host_memory_holds_1_2m_tokens_beside_an_unchanged_gpu_pool():
    base = estimate("Qwen/Qwen2.5-7B", gpu="h100", max_model_len=32768)
    tier = estimate("Qwen/Qwen2.5-7B", gpu="h100", max_model_len=32768, kv_offloading_size=64)
    chunks = 64 * 2**30 // BLOCK
    assert chunks == 74_898 and tier.capacity.offload_tokens == chunks * 16 == 1_198_368
    assert (tier.capacity.num_blocks, tier.capacity.tokens) == (base.capacity.num_blocks, base.capacity.tokens)
    assert base.capacity.offload_tokens == 0
    assert any("the host needs 64.00 GiB free" in note for note in tier.notes)


def test_the_size_is_summed_over_tp_ranks():
    # TP 2: each block is 2 KV heads per rank, 458,752 B, times 2 workers per chunk: the same 917,504 B
    tier = estimate("Qwen/Qwen2.5-7B", gpu="h100", max_model_len=32768, kv_offloading_size=64,
                    tensor_parallel_size=2)
    assert tier.capacity.offload_tokens == 64 * 2**30 // (2 * BLOCK // 2) * 16


def test_lmcache_sizes_its_own_tier_and_json_carries_offload_tokens():
    result = subprocess.run([sys.executable, "-m", "kvplan.cli.app", "estimate", "--gpu", "h100", "--json", "--",
                             "vllm", "serve", "Qwen/Qwen2.5-7B", "--max-model-len", "32768", "--kv-offloading-size",
                             "64", "--kv-offloading-backend", "lmcache"], capture_output=True, text=True, timeout=60)
    document = json.loads(result.stdout)
    assert document["capacity"]["offload_tokens"] == 0
    assert any("LMCache server process" in note for note in document["notes"])


@pytest.mark.parametrize(("flags", "message"), [
    (["--kv-offloading-backend", "mooncake"], "--kv-offloading-backend: invalid choice 'mooncake'"),
    (["--kv-offloading-size", "8", "-pp", "2"], "--kv-offloading-size: the CPU KV tier is modelled without pipeline"),
])
def test_bad_offloading_input_is_one_line(flags, message):
    result = subprocess.run([sys.executable, "-m", "kvplan.cli.app", "estimate", "-m", "Qwen/Qwen2.5-7B", "--gpu",
                             "h100", *flags], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and message in result.stderr, result.stderr


def test_an_mla_latent_over_tp_is_kept_once():
    # vLLM 0.33.0 distributed/kv_transfer/kv_connector/v1/offloading/config.py replicated_layout: MLA, TP > 1,
    # every rank holding the whole latent -> one copy per chunk. DeepSeek-V2-Lite: 27 layers x (512 + 64) x 2 B =
    # 31,104 B a token, 497,664 B a block, rounded up to 122 pages of 4,096 = 499,712 B, at TP 1 and TP 2 alike
    # (two copies would be 995,328 B a chunk)
    for tp in (1, 2):
        tier = estimate("deepseek-ai/DeepSeek-V2-Lite", gpu="h100", max_model_len=8192, kv_offloading_size=16,
                        tensor_parallel_size=tp)
        assert tier.capacity.offload_tokens == 16 * 2**30 // 499_712 * 16 == 550_064
        assert tier.capacity.offload_host_bytes == 34_379 * 499_712
