"""The fused-MoE workspace vLLM's profiling run keeps (kvplan/engines/vllm/moe_workspace.py), by hand from the source.

vLLM 0.19.0 model_executor/layers/fused_moe/fused_moe.py TritonExperts.workspace_shapes: workspace13 = (M, top-k,
max(N / 2, K)), workspace2 = (M, top-k, max(N, K)), output (M, K); modular_kernel.py _allocate_buffers puts the output
in workspace13's storage (one chunk) and asks v1/worker/workspace.py get_simultaneous for both, each rounded up to 256
bytes, in the activations' dtype (bfloat16: 2 B). N = w13's width = 2 x the expert's intermediate size on the rank.
0.17.0 chunks M at VLLM_FUSED_MOE_CHUNK_SIZE = 16,384 (envs.py; _chunk_info), the output then apart.

The logged peaks ("torch peak memory increase", llm-d-planner's v0.19.0 H100 logs, data/calibration.yaml): L01
DeepSeek-V2-Lite 1.93 GiB, L16 Mixtral-8x7B TP 2 1.21 GiB, L22 Qwen3-30B-A3B 2.68 GiB, each +-0.005.
"""

from __future__ import annotations

from kvplan.calibration import vllm as calibration
from kvplan.engines.vllm.moe_workspace import (
    InKernelScratch,
    MoeShape,
    SharedWorkspace,
    moe_kernel,
    moe_shape,
)
from kvplan.engines.vllm.mxfp4 import MXFP4_MARLIN, MXFP4_TRITON_HOPPER
from kvplan.models.sources import resolve
from kvplan.units import GiB

BY_ID = {entry["id"]: entry for entry in calibration.entries()}


def test_qwen3_30b_a3b_workspace_at_8192_tokens():
    # Qwen3-30B-A3B: hidden K = 2,048, moe_intermediate_size 768 (N = 1,536), 8 of 128 experts per token; TP 1.
    #   workspace13 = 8,192 x 8 x max(768, 2,048) = 134,217,728 elements (the output, 8,192 x 2,048 = 16,777,216,
    #   fits in it) x 2 B = 268,435,456 B
    #   workspace2  = 8,192 x 8 x max(1,536, 2,048) = 134,217,728 x 2 B = 268,435,456 B
    #   held: 536,870,912 B (0.5 GiB), both multiples of 256
    shape = moe_shape(resolve("Qwen/Qwen3-30B-A3B"), 8192, 1)
    assert shape == MoeShape(8192, 8, 2048, 768, True, 128)
    assert SharedWorkspace().held_bytes(shape) == 536_870_912


def test_mixtral_workspace_at_tp2():
    # Mixtral-8x7B at TP 2: intermediate 14,336 / 2 = 7,168 per rank (N = 14,336), hidden 4,096, top-2.
    #   workspace13 = 8,192 x 2 x max(7,168, 4,096) x 2 B = 234,881,024 B
    #   workspace2  = 8,192 x 2 x max(14,336, 4,096) x 2 B = 469,762,048 B
    shape = moe_shape(resolve("mistralai/Mixtral-8x7B-v0.1"), 8192, 2)
    assert SharedWorkspace().held_bytes(shape) == 234_881_024 + 469_762_048 == 704_643_072


def test_chunked_in_0_17_whole_from_0_18():
    # Qwen3-30B-A3B at 32,768 batched tokens.
    #   0.17: chunks of 16,384: workspace13 16,384 x 8 x 2,048 x 2 = 536,870,912, workspace2 the same, the output
    #         apart: 32,768 x 2,048 x 2 = 134,217,728 -> 1,207,959,552 B
    #   0.18: M whole: 2 x 32,768 x 8 x 2,048 x 2 = 2,147,483,648 B
    shape = moe_shape(resolve("Qwen/Qwen3-30B-A3B"), 32768, 1)
    assert moe_kernel(None, None, (0, 17)).held_bytes(shape) == 1_207_959_552
    assert moe_kernel(None, None, (0, 18)).held_bytes(shape) == 2_147_483_648
    # at or under one chunk the two releases agree
    assert moe_kernel(None, None, (0, 17)).held_bytes(moe_shape(resolve("Qwen/Qwen3-30B-A3B"), 8192, 1)) == 536_870_912


def test_ungated_experts_and_alignment():
    # relu2_no_mul (Nemotron-H's experts, up projection only): N = the intermediate size, adjust_N_for_activation
    # gives N. 100 tokens, top-6, K 2,688, intermediate 1,856:
    #   workspace13 = 100 x 6 x max(1,856, 2,688) x 2 = 3,225,600 B (a multiple of 256: 12,600 x 256)
    #   workspace2  = 100 x 6 x max(1,856, 2,688) x 2 = 3,225,600 B
    assert SharedWorkspace().held_bytes(MoeShape(100, 6, 2688, 1856, False, 128)) == 6_451_200
    # 3 tokens, top-1, K 100: 3 x 100 x 2 = 600 B -> 768; workspace2 3 x max(2 x 60, 100) x 2 = 720 -> 768
    assert SharedWorkspace().held_bytes(MoeShape(3, 1, 100, 60, True, 4)) == 768 + 768


def test_mxfp4_kernels():
    # 0.18.0-0.33.0: MXFP4's Triton path is monolithic (buffers inside each call): nothing held; Marlin is modular
    assert isinstance(moe_kernel("mxfp4", MXFP4_TRITON_HOPPER, (0, 19)), InKernelScratch)
    assert moe_kernel("mxfp4", MXFP4_TRITON_HOPPER, (0, 19)).held_bytes(MoeShape(8192, 4, 2880, 1440, True, 32)) == 0
    assert moe_kernel("mxfp4", MXFP4_MARLIN, (0, 19)) == SharedWorkspace()
    assert moe_kernel(None, MXFP4_TRITON_HOPPER, (0, 19)) == SharedWorkspace()  # not an MXFP4 model


def test_logged_moe_peaks_v019_h100():
    # V1's sampler side at 1,024 rows (sampler.py, tests/test_vllm_sampler_v1.py): 3.5 x 1,024 x vocab x 4 + the
    # Triton buffer of 132 rows (H100 SMs) x vocab x 4 + the held hidden states (8,192 + 2 x 1,024) x hidden x 2 +
    # the cuBLAS workspace 33,554,432; the forward is smaller, the workspace beside both.
    # L22 Qwen3-30B-A3B (vocab 151,936, hidden 2,048): 2,178,154,496 + 80,222,208 + 41,943,040 + 33,554,432
    #   = 2,333,874,176 + 536,870,912 = 2,870,745,088 B = 2.674 GiB (logged 2.68)
    # L16 Mixtral TP 2 (vocab 32,000, hidden 4,096): 458,752,000 + 16,896,000 + 83,886,080 + 33,554,432
    #   = 593,088,512 + 704,643,072 = 1,297,731,584 B = 1.209 GiB (logged 1.21)
    # L01 DeepSeek-V2-Lite (vocab 102,400, hidden 2,048, 6 of 64 experts of 1,408): workspace13 8,192 x 6 x 2,048
    #   x 2 = 201,326,592, workspace2 8,192 x 6 x 2,816 x 2 = 276,824,064; 1,468,006,400 + 54,067,200 + 41,943,040
    #   + 33,554,432 = 1,597,571,072 + 478,150,656 = 2,075,721,728 B = 1.933 GiB (logged 1.93)
    for entry, expected, logged in (("L22", 2_870_745_088, 2.68), ("L16", 1_297_731_584, 1.21),
                                    ("L01", 2_075_721_728, 1.93)):
        activation = calibration.plan_for(BY_ID[entry]).rank_zero_memory.activation_bytes
        assert activation == expected, entry
        assert abs(activation / GiB - logged) < 0.01, entry


def test_gpt_oss_mxfp4_holds_no_workspace():
    # L17 gpt-oss-20b at TP 2 on H100s (MXFP4 experts, Triton's monolithic kernel): the peak is the sampler's side
    # alone (vocab 201,088, hidden 2,880): 3.5 x 1,024 x 201,088 x 4 + 132 x 201,088 x 4 + (8,192 + 2,048) x 2,880
    # x 2 + 33,554,432 = 2,882,797,568 + 106,174,464 + 58,982,400 + 33,554,432 = 3,081,508,864 B = 2.870 GiB, the
    # logged 2.87 GiB
    activation = calibration.plan_for(BY_ID["L17"]).rank_zero_memory.activation_bytes
    assert activation == 3_081_508_864


def test_expert_parallel_holds_whole_experts():
    # --enable-expert-parallel at TP 2 (FusedMoEParallelConfig.make: use_ep): each rank runs whole experts, so the
    # workspace takes Mixtral's full 14,336 (N = 28,672): 8,192 x 2 x 14,336 x 2 + 8,192 x 2 x 28,672 x 2
    # = 469,762,048 + 939,524,096 = 1,409,286,144 B, 704,643,072 more than the sliced 704,643,072 (the tokens are
    # not dispatched without DP).
    from dataclasses import replace

    from kvplan.engines import plan_deployment

    dep, gpu = calibration.deployment(BY_ID["L16"])
    spec = resolve(BY_ID["L16"]["model"])
    sliced = plan_deployment(spec, dep, gpu).rank_zero_memory.activation_bytes
    whole = plan_deployment(spec, replace(dep, enable_expert_parallel=True), gpu).rank_zero_memory.activation_bytes
    assert whole - sliced == 1_409_286_144 - 704_643_072
