"""Hybrid (attention + Mamba / Gated DeltaNet) models in vLLM by release (issue 18 sections 2.8 and 2.11), read in
the release wheels on PyPI: config/model.py is_prefix_caching_supported, model_executor/models/config.py
MambaModelConfig, platforms/interface.py _align_hybrid_block_size and v1/kv_cache_interface.py MambaSpec. The same
deployments are "read" cases in tests/oracle/read_cases.jsonl.

Nemotron-3-Nano-30B-A3B (NemotronHForCausalLM, SupportsMambaPrefixCaching) on one H100, 4 GiB of KV cache at 8,192
tokens, by hand: attention 2 KV heads x 128 x 2 (K, V) x 2 B = 1,024 B a token; a Mamba-2 state is conv 3 x (4,096
+ 2 x 8 x 128) x 2 B = 36,864 B plus SSM 64 x 64 x 128 x 4 B (float32) = 2,097,152 B: 2,134,016 B = 2,084 tokens of
attention. 6 attention and 23 Mamba layers: groups of 6, 1 attention + 4 state groups, a block spans 6 layers."""

from __future__ import annotations

import kvplan
from kvplan.engines.vllm.hybrid import alignment_step

GiB = 2**30
NANO = "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16"


def plan(model: str, version: str, gpu: str = "h100-sxm", **knobs: object) -> kvplan.Plan:
    return kvplan.estimate(model, gpu=gpu, engine_version=version, max_model_len=8192, kv_cache_memory_bytes=4 * GiB,
                           **knobs)


def figures(found: kvplan.Plan) -> tuple[int, int, int, int, float]:
    cap = found.capacity
    return found.engine.block_size, cap.num_blocks, cap.blocks_per_request, cap.tokens, cap.max_concurrency


def test_prefix_caching_is_off_for_hybrids_until_v0_26_and_the_flag_is_read():
    # 0.25.0 is_prefix_caching_supported: False for a hybrid, so mamba_cache_mode stays "none" (1 block a request):
    # block 16 x cdiv(2,134,016, 16 x 1,024) = 2,096 tokens, 6 x 2,096 x 1,024 = 12,877,824 B, 4 GiB // that = 333;
    # a request: cdiv(8,192, 2,096) = 4 + 4 x 1 = 8; 333 / 8 = 41.62x, int(333 / 8 x 8,192) = 340,992 tokens.
    assert figures(plan(NANO, "0.25.0")) == (2096, 333, 8, 340992, 41.62)
    # 0.26.0 True: prefix caching on, and MambaModelConfig takes "all" for NemotronH: the block is the smallest
    # multiple of lcm(256, 16) = 256 holding 2,084 tokens, 2,304; 6 x 2,304 x 1,024 = 14,155,776 B -> 303 blocks; a
    # state group holds cdiv(8,192, 2,304) = 4 blocks like attention: 4 + 4 x 4 = 20; 15.15x, 124,108 tokens.
    assert figures(plan(NANO, "0.26.0")) == (2304, 303, 20, 124108, 15.15)
    assert figures(plan(NANO, "0.25.0", enable_prefix_caching=True)) == (2304, 303, 20, 124108, 15.15)
    assert figures(plan(NANO, "0.26.0", enable_prefix_caching=False)) == (2096, 333, 8, 340992, 41.62)
    # --mamba-cache-mode align (0.18-0.32): 2 blocks a state group, 4 + 4 x 2 = 12
    assert figures(plan(NANO, "0.26.0", mamba_cache_mode="align"))[2] == 12


def test_align_for_every_model_from_v0_28():
    # 0.28.0 MambaModelConfig: mode "align" whatever the model: 2,096-token blocks, 333 of them, 4 + 4 x 2 = 12 a
    # request, 27.75x, int(333 / 12 x 8,192) = 227,328 tokens; 0.33.0 ignores --mamba-cache-mode all.
    assert figures(plan(NANO, "0.28.0")) == (2096, 333, 12, 227328, 27.75)
    assert figures(plan(NANO, "0.33.0", mamba_cache_mode="all")) == (2096, 333, 12, 227328, 27.75)


def test_the_alignment_step_takes_the_user_s_block_size_from_v0_20():
    # 18 §2.11. 0.20.0+ _align_hybrid_block_size: step = max(the backend's smallest kernel block, block_size), so
    # --block-size 64 gives 64 x cdiv(2,134,016, 64 x 1,024) = 64 x 33 = 2,112; 0.19.0's HybridAttentionMambaModel-
    # Config steps by 16 whatever the user asks: 2,096.
    assert plan(NANO, "0.28.0", block_size=64).engine.block_size == 2112
    assert plan(NANO, "0.19.0", block_size=64).engine.block_size == 2096


def test_flashinfer_gdn_checkpoints_in_v0_33():
    # 18 §2.11. 0.33.0: on Hopper, align mode, a GDN layer on FlashInfer's prefill exports checkpoints every 64
    # tokens (gdn_attn.py FLASHINFER_GDN_CHECKPOINT_ALIGNMENT) and holds one checkpoint block
    # (num_prefill_checkpoint_blocks=1). Qwen3-Next-80B at TP 4: attention 1 KV head x 256 x 2 x 2 B = 1,024 B a
    # token; GDN state conv 3 x (2 x 16 x 128 + 32 x 128) / 4 x 2 B = 12,288 B + 8 x 128 x 128 x 2 B = 262,144 B:
    # 274,432 B. Step lcm(16, 64) = 64: 64 x cdiv(274,432, 65,536) = 320 (16 x 17 = 272 before); 12 full and 36 GDN
    # layers, groups of 12, block 12 x 320 x 1,024 = 3,932,160 B, 4 GiB // that = 1,092; a request cdiv(8,192, 320)
    # = 26 + 3 x (1 + 1 + 1) = 35; 31.2x. 0.32.0: 272, 12 x 272 x 1,024 = 3,342,336 B -> 1,285; 31 + 3 x 2 = 37.
    model = "Qwen/Qwen3-Next-80B-A3B-Instruct"
    assert figures(plan(model, "0.33.0", tensor_parallel_size=4))[:3] == (320, 1092, 35)
    assert plan(model, "0.33.0", tensor_parallel_size=4).capacity.max_concurrency == 31.2
    assert figures(plan(model, "0.32.0", tensor_parallel_size=4))[:3] == (272, 1285, 37)
    # Blackwell's FlashInfer GDN needs CUDA 13, which kvplan does not know: Triton, no checkpoints
    assert figures(plan(model, "0.33.0", gpu="b200", tensor_parallel_size=4))[:3] == (272, 1285, 37)


def test_mla_hybrids_align_to_128_from_v0_33():
    # 0.33.0 _align_hybrid_block_size: "make the manager block size a multiple of 128" for MLA hybrids; 0.32.0
    # steps by the MLA backend's smallest kernel block (FlashInfer MLA 32 on SM100, 16 elsewhere).
    mla = kvplan.estimate("deepseek-ai/DeepSeek-V2-Lite", gpu="h100-sxm")
    b200 = kvplan.estimate("deepseek-ai/DeepSeek-V2-Lite", gpu="b200")
    assert alignment_step(mla.model, mla.gpu, (0, 33), 16, "align") == 128
    assert alignment_step(mla.model, mla.gpu, (0, 32), 16, "align") == 16
    assert alignment_step(b200.model, b200.gpu, (0, 32), 16, "align") == 32
    assert alignment_step(mla.model, mla.gpu, (0, 19), 16, "align") == 64


def test_a_given_all_mode_stays_where_supported_and_sends_0_30_0_31_to_v1():
    # 0.28.0 MambaModelConfig: only a mode of "none" becomes align; a given "all" stays for a SupportsMambaPrefixCaching
    # model (2,304-token blocks, 20 a request, as in 0.26). 0.30.0 and 0.31.0 _get_v2_model_runner_unsupported_features:
    # "mamba cache mode 'all'" -> Model Runner V1; 0.32.0 drops the check.
    runners = {}
    for version in ("0.29.0", "0.30.0", "0.31.0", "0.32.0"):
        found = plan(NANO, version, mamba_cache_mode="all")
        assert figures(found)[:3] == (2304, 303, 20)
        runners[version] = found.engine.model_runner
    assert runners == {"0.29.0": "V2", "0.30.0": "V1", "0.31.0": "V1", "0.32.0": "V2"}
