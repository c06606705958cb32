"""Model Runner V2's sampler in vLLM's profiling run (issue 18 section 2.12; kvplan/engines/vllm/sampler.py V2_SAMPLERS).

Source, read in the release wheels: v1/worker/gpu/model_runner.py _dummy_sampler_run and sample/sampler.py
(0.22.0, 0.26.0, 0.27.0, 0.29.0, 0.32.0, 0.33.0), sample/gumbel.py gumbel_sample, sample/penalties.py and
structured_outputs.py (the buffers load_model makes), utils/mem_utils.py memory_profiling (0.26.0 / 0.27.0), and
flashinfer 0.7.2.post1 sampling.py top_k_top_p_sampling_from_logits (0.33.0's pin). No V2 startup log printing its
peak is stored, so every figure below is derived by hand from that source.

Qwen3-8B (vocab 151,936, hidden 4,096, intermediate 12,288) on an H100 80GB (compute capability 9.0), kvplan's defaults
there: 1,024 sequences, 8,192 batched tokens, so the dummy batch has min(1,024, 8,192) = 1,024 rows.
  one float32 copy C = 1,024 x 151,936 x 4 = 622,329,856 B
  gumbel_sample's partial maxima: 1,024 x ceil(151,936 / 1,024) = 149 blocks x (8 + 4) B = 1,830,912 B
  the dummy forward (era "V1, v0.20+"): (3 x 8,192 x 4,096 + 3 x 8,192 x 12,288) x 2 = 805,306,368 B
  the era's fixed int(0.12 GiB) = 128,849,018 B, beside the forward only
  beside V2's sampler, in its place (v1/worker/gpu/model_runner.py profile_run, 0.22.0-0.33.0, keeps _dummy_run's
    hidden_states and sample_hidden_states = hidden_states[logits_indices] through _dummy_sampler_run):
    the held hidden states (8,192 + 1 x 1,024) x 4,096 x 2 = 75,497,472 B, one sampled copy (V1 holds two)
    and PyTorch's cuBLAS workspace on compute capability 9.0, 4,096 KiB x 8 = 33,554,432 B: 109,051,904 B
  V2's held buffers (0.27+): 1,024 x (151,936 + 4,748 + 1 x 4,748) x 4 = 661,225,472 B (output_bin_counts,
    prompt_bin_mask, grammar_bitmask; ceil(151,936 / 32) = 4,748 words a row)
The profile's peak is the larger of the forward and the sampler (peak_of_larger), the held buffers beside it:
  V1 (0.29, 0.33):        FlashInfer's pass (3.5 C) and forward_native's (3.5 C + the Triton buffer, 132 x
                          151,936 x 4 = 80,222,208), the larger with FlashInfer's cached 1 MiB row states
                          (sampler.py V1_TWO_PASS_FROM), the held hidden states (8,192 + 2,048) x 4,096 x 2 =
                          83,886,080 and the cuBLAS workspace 33,554,432 in place of the fixed bytes
                          (tests/test_vllm_sampler_v1.py)                                       = 2,376,865,792 B
  V2 0.22-0.26 (1.5 C):   933,494,784 + 1,830,912 = 935,325,696, + 109,051,904 = 1,044,377,600 > the forward
                          805,306,368 + fixed = 934,155,386                                     = 1,044,377,600 B
  V2 0.27-0.32 (0.5 C):   311,164,928 + 1,830,912 = 312,995,840, + 109,051,904 = 422,047,744 < forward:
                          934,155,386 + held                                                    = 1,595,380,858 B
  V2 0.33, FlashInfer:    3.5 C + 1 MiB row states = 2,178,154,496 + 1,048,576 = 2,179,203,072; + 109,051,904
                          + held                                                                = 2,949,480,448 B
  V2 0.33, no FlashInfer: 1.5 C + gumbel = 935,325,696, + the Triton buffer (apply_top_k_top_p_triton for the
                          warm-up's top-k 50 / top-p 0.9 rows: min(next_power_of_2(min(132 SMs, 1,024)), 132) =
                          132 rows x 151,936 x 4 = 80,222,208) = 1,015,547,904; + 109,051,904 + held = 1,785,825,280 B
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from kvplan.calibration.vllm import deployment
from kvplan.deployment import Deployment
from kvplan.engines import plan_deployment
from kvplan.engines.vllm.sampler import v2_flashinfer
from kvplan.models.sources import resolve

V1 = 2_376_865_792
V2_FP32_COPY, V2_NO_PROCESSING, V2_TWO_PASS_FLASHINFER, V2_TWO_PASS_TRITON = (
    1_044_377_600, 1_595_380_858, 2_949_480_448, 1_785_825_280)


def activation(version: str, gpu: str = "h100", **knobs: object) -> tuple[str, int]:
    entry = {"gpu": gpu, "version": version, "utilization": 0.9, "model": "Qwen/Qwen3-8B", "max_model_len": 8192}
    dep, choice = deployment(entry)
    plan = plan_deployment(resolve(entry["model"]), replace(dep, **knobs), choice)
    assert (plan.engine.max_num_seqs, plan.engine.max_num_batched_tokens) == (1024, 8192)
    return plan.engine.model_runner, plan.rank_zero_memory.activation_bytes


@pytest.mark.parametrize("version", ["0.29.0", "0.33.0"])
def test_v1_keeps_its_calibrated_sampler(version):
    assert activation(version, v2_model_runner=False) == ("V1", V1)


@pytest.mark.parametrize("version", ["0.22.0", "0.26.0"])
def test_v2_copies_the_logits_to_float32_through_026(version):
    assert activation(version) == ("V2", V2_FP32_COPY)


@pytest.mark.parametrize("version", ["0.27.0", "0.29.0", "0.32.0"])
def test_v2_samples_the_model_dtype_logits_from_027(version):
    assert activation(version) == ("V2", V2_NO_PROCESSING)


def test_v2_two_pass_sampler_in_033():
    assert activation("0.33.0") == ("V2", V2_TWO_PASS_FLASHINFER)
    assert activation("0.33.0", flashinfer_sampler=False) == ("V2", V2_TWO_PASS_TRITON)


def test_flashinfer_takes_compute_capability_8_0_to_12_1_on_cuda():
    # 0.33.0 flashinfer_sampler_supported: CUDA only (ROCm's gfx archs are not), and FlashInferBackend's
    # supports_compute_capability: 8.0 <= capability <= 12.1 (SM75 left out for flashinfer issue 3620)
    dep = Deployment.from_mapping({"gpu": "h100"})
    taken = {capability: v2_flashinfer(dep, capability) for capability in ("7.5", "8.0", "9.0", "12.1", "gfx942")}
    assert taken == {"7.5": False, "8.0": True, "9.0": True, "12.1": True, "gfx942": False}
    assert not v2_flashinfer(replace(dep, flashinfer_sampler=False), "9.0")


def test_v2_holds_one_sampled_copy_and_the_cublas_workspace_off_hopper():
    # An A100 80GB (compute capability 8.0) at 0.26.0 with the H100's batch (1,024 sequences, 8,192 tokens given):
    # PyTorch's cuBLAS workspace off Hopper is :4096:2:16:8, 4,096 KiB x 2 + 16 KiB x 8 = 8,519,680 B, so beside
    # V2's 1.5 C + gumbel (935,325,696) the held hidden states (8,192 + 1 x 1,024) x 4,096 x 2 = 75,497,472 and
    # 8,519,680: 1,019,342,848 B, above the forward's 934,155,386. (V1's two sampled copies would add 1,024 x
    # 4,096 x 2 = 8,388,608 more; the era's fixed bytes in their place would give 1,064,174,714.)
    assert activation("0.26.0", "a100-80gb-sxm", max_num_seqs=1024, max_num_batched_tokens=8192) == (
        "V2", 1_019_342_848)


def stage_activations(version: str) -> tuple[str, list[int]]:
    entry = {"gpu": "h100", "version": version, "utilization": 0.9, "model": "Qwen/Qwen3-8B", "max_model_len": 8192,
             "pp": 2}
    dep, choice = deployment(entry)
    plan = plan_deployment(resolve(entry["model"]), dep, choice)
    return plan.engine.model_runner, [memory.activation_bytes for memory in plan.stage_memories]


def test_v2_later_stage_counts_its_received_buffers_from_027():
    # PP 2: the first stage runs no sampler (its dummy batch has no rows), its forward 805,306,368 + fixed =
    # 934,155,386. The last stage samples, and V2's load_model (v1/worker/gpu/model_runner.py) has made its
    # intermediate_tensors (hidden_states and residual, 8,192 x 4,096 x 2 B each: 134,217,728 B) after the weights
    # are measured: 0.26.0's memory_profiling (weights + torch peak increase + non-torch) leaves them out, 0.27.0's
    # total_consumed counts them, as it counts the held buffers (661,225,472):
    #   0.26.0: 1,044,377,600 (as at PP 1)
    #   0.27.0: 934,155,386 + 661,225,472 + 134,217,728 = 1,729,598,586
    assert stage_activations("0.26.0") == ("V2", [934_155_386, 1_044_377_600])
    assert stage_activations("0.27.0") == ("V2", [934_155_386, 1_729_598_586])


def test_blackwell_takes_the_32_mib_cublas_workspace_under_torch_2_14():
    # Qwen2.5-7B (vocab 152,064, hidden 3,584) on a B200 1g.23gb slice (compute capability 10.0), 16K, vLLM 0.33.0
    # (torch 2.14.0: parseChosenWorkspaceSize gives majors 9-12 the 32 MiB), 256 sequences x 2,048 tokens:
    #   3.5 x 256 x 152,064 x 4 + 1 MiB = 546,045,952, the held hidden states (2,048 + 256) x 3,584 x 2 = 16,515,072,
    #   the cuBLAS workspace 33,554,432 (8,519,680 under torch 2.11), the held buffers 256 x (152,064 + 2 x 4,752)
    #   x 4 = 165,445,632: 761,561,088 (the forward 405,673,082 is smaller)
    #   pool 20,250,770,800 - 15,264,787,456 (weights and RoPE) - 761,561,088 - 268,435,456 - 730,857,472 (graphs)
    #   = 3,225,129,328 // 917,504 = 3,515 blocks -> 56,240 tokens
    plan = plan_deployment(resolve("Qwen/Qwen2.5-7B"), Deployment.from_mapping(
        {"gpu": "b200:1g.23gb", "max_model_len": 16384, "engine_version": "0.33.0"}),
        deployment({"gpu": "b200:1g.23gb", "version": "0.33.0", "utilization": 0.92})[1])
    assert plan.engine.model_runner == "V2"
    assert plan.memory.activation_bytes == 761_561_088
    assert (plan.memory.kv_cache_bytes, plan.capacity.tokens) == (3_225_129_328, 56_240)
