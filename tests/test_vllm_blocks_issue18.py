"""vLLM's KV block size by release (issue 18 sections 2.9 and 2.10), read in the release wheels on PyPI:
platforms/cuda.py (CudaPlatform.check_and_update_config through 0.17), config/cache.py (block_size's type) and
v1/attention/backend.py (AttentionBackend.supports_block_size). Each number is derived by hand below; the same
deployments are "read" cases in tests/oracle/read_cases.jsonl."""

from __future__ import annotations

import pytest

import kvplan
from kvplan.errors import KvplanError

GiB = 2**30


def plan(model: str, version: str, gpu: str, **knobs: object) -> kvplan.Plan:
    return kvplan.estimate(model, gpu=gpu, engine_version=version, max_model_len=32768, kv_cache_memory_bytes=4 * GiB,
                           **knobs)


def test_sm100_mla_takes_flashinfer_64_token_blocks_in_v0_15_to_v0_17():
    # 18 §2.9. 0.15.0 platforms/cuda.py: SM100, not sparse, qk_nope_head_dim == 128 -> FlashInfer MLA, "Forcing kv
    # cache block size to 64" (16 is neither 32 nor a multiple of 64); 0.14.0 -> CUTLASS MLA, 128. DeepSeek-V2-Lite:
    # 27 layers x (512 + 64) latent x 2 B = 31,104 B a token; a 64-token page per layer 73,728 B, 4 GiB // 73,728 //
    # 27 = 2,157 blocks, logged 2,157 x 64 = 138,048 tokens, 2,157 / (32,768 / 64) = 4.21x. At 128: 4 GiB // 147,456
    # // 27 = 1,078 blocks, 137,984 tokens, 4.21x.
    for version, block, blocks, tokens in (("0.15.0", 64, 2157, 138048), ("0.17.0", 64, 2157, 138048),
                                           ("0.14.0", 128, 1078, 137984)):
        found = plan("deepseek-ai/DeepSeek-V2-Lite", version, "b200")
        assert (found.engine.block_size, found.capacity.num_blocks, found.capacity.tokens) == (block, blocks, tokens)
        assert found.capacity.max_concurrency == 4.21
    # another qk_nope_head_dim keeps CUTLASS MLA in 0.17
    other = plan("deepseek-ai/DeepSeek-V2-Lite", "0.17.0", "b200", hf_overrides={"qk_nope_head_dim": 64})
    assert other.engine.block_size == 128


def test_any_block_size_a_kernel_divides_from_v0_18():
    # 18 §2.10. 0.18.0 config/cache.py: block_size SkipValidation[int] (0.17.0: Literal[1, 8, 16, 32, 64, 128, 256]);
    # supports_block_size keeps any multiple of a backend's kernel block (FlashAttention MultipleOf(16)). Qwen2.5-7B,
    # 48-token blocks: 28 layers x 4 KV heads x 128 x 2 (K, V) x 2 B = 2,048 B a token per layer, 4 GiB // 98,304 //
    # 28 = 1,560 blocks, 1,560 x 48 = 74,880 tokens logged, 1,560 / ceil(32,768 / 48) = 1,560 / 683 = 2.28x.
    found = plan("Qwen/Qwen2.5-7B", "0.18.0", "h100-sxm", block_size=48)
    assert (found.engine.block_size, found.capacity.num_blocks, found.capacity.tokens) == (48, 1560, 74880)
    assert found.capacity.max_concurrency == 2.28
    with pytest.raises(KvplanError, match="invalid choice 48"):
        plan("Qwen/Qwen2.5-7B", "0.17.0", "h100-sxm", block_size=48)
    with pytest.raises(KvplanError, match="multiple of 16"):
        plan("Qwen/Qwen2.5-7B", "0.18.0", "h100-sxm", block_size=8)
    assert plan("Qwen/Qwen2.5-7B", "0.17.0", "h100-sxm", block_size=8).engine.block_size == 8


def test_sparse_mla_keeps_a_larger_user_size_from_v0_18():
    # 18 §2.10. Through 0.17 platforms/cuda.py forces 64 for FlashMLASparse whatever --block-size says; from 0.18 the
    # user's 128 is kept (FlashMLASparse's kernel block 64 divides it). DeepSeek-V3.2 at TP 8: 61 layers x (576 x 2 B
    # latent + 128 + 128 // 128 x 4 = 132 B indexer key) = 1,284 B a token per layer; 128-token pages of 164,352 B:
    # 4 GiB // 164,352 // 61 = 428 blocks, 54,784 tokens, 428 / 256 = 1.67x.
    found = plan("deepseek-ai/DeepSeek-V3.2", "0.18.0", "h200", block_size=128, tensor_parallel_size=8)
    assert (found.engine.block_size, found.capacity.num_blocks, found.capacity.tokens) == (128, 428, 54784)
    assert plan("deepseek-ai/DeepSeek-V3.2", "0.17.0", "h200", block_size=128,
                tensor_parallel_size=8).engine.block_size == 64
    assert plan("deepseek-ai/DeepSeek-V3.2", "0.18.0", "h200", block_size=32,
                tensor_parallel_size=8).engine.block_size == 64


def test_mla_user_sizes_before_v0_18_are_forced_to_the_backend_s():
    # 0.17.0 platforms/cuda.py: FlashMLA on Hopper forces 64 unless the size is a multiple of 64 (0.12+; "!= 64"
    # before); the user's 16 becomes 64, 128 stays; 0.11.0 makes 128 into 64.
    assert plan("deepseek-ai/DeepSeek-V2-Lite", "0.17.0", "h100-sxm", block_size=16).engine.block_size == 64
    assert plan("deepseek-ai/DeepSeek-V2-Lite", "0.17.0", "h100-sxm", block_size=128).engine.block_size == 128
    assert plan("deepseek-ai/DeepSeek-V2-Lite", "0.11.0", "h100-sxm", block_size=128).engine.block_size == 64
