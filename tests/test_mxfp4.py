"""MXFP4 experts as vLLM holds them once loaded, by backend (kvplan/weights.py, Mxfp4Experts).

gpt-oss shapes (bundled configs): hidden = expert intermediate = 2880; 20b: 24 layers x 32 experts, 120b: 36 x 128.
One expert as stored: w13 (2 x 2880 rows x 2880) + w2 (2880 x 2880) = 24,883,200 weights:
12,441,600 B of 4-bit values + 777,600 B of scales (one byte per 32) + 8,640 bf16 biases (17,280 B)
= 13,236,480 B. Outside the experts, at bf16: 20b 3,595,648,128 B, 120b 4,255,115,904 B (attention with its
biases and sinks, norms, router, embeddings and lm_head).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from kvplan.engines.vllm.mxfp4 import (
    MXFP4_FLASHINFER_SM100,
    MXFP4_MARLIN,
    MXFP4_TRITON,
    MXFP4_TRITON_HOPPER,
    MXFP4_TRITON_ROCM,
)
from kvplan.engines.vllm.mxfp4 import mxfp4_experts as vllm_mxfp4_experts
from kvplan.hardware import find_gpu
from kvplan.models.sources import resolve
from kvplan.units import GiB
from kvplan.weights import Mxfp4Experts, weight_layout

V0_11 = (0, 11)


def total(model: str, rule: Mxfp4Experts | None, **spec_changes) -> int:
    spec = resolve(model)
    if spec_changes:
        spec = replace(spec, **spec_changes)
    layout = weight_layout(spec, 2, "mxfp4", rule)
    return layout.embeddings + layout.lm_head + layout.vision + layout.per_layer * spec.num_layers


def hopper() -> Mxfp4Experts | None:
    return vllm_mxfp4_experts(V0_11, find_gpu("h100").compute_capability)


def test_checkpoint_bytes_are_the_stored_safetensors():
    # 768 experts x 13,236,480 + 3,595,648,128 = 13,761,264,768 B: the safetensors headers of the gpt-oss-20b
    # checkpoint (1,804,459,584 BF16 + 10,152,345,600 U8 elements, as tests/test_hub.py serves them).
    assert total("openai/gpt-oss-20b", None) == 13_761_264_768


def test_b01_gpt_oss_20b_on_h100():
    # Triton on Hopper, per expert: the stored 13,236,480 B, biases in float32 (+17,280 B), and the swizzled
    # scale copies with rows padded to 256: w13 5,760 -> 5,888 rows x 90 + w2 2,880 -> 3,072 rows x 90
    # = 806,400 B; 14,060,160 B x 768 + 3,595,648,128 = 14,393,851,008 B (13.405 GiB).
    held = total("openai/gpt-oss-20b", hopper())
    assert held == 14_393_851_008
    # B01 (llm-d-benchmark empirical-vllm-memory-results.md, vLLM 0.11.0, H100) logged "Model loading took
    # 13.47 GiB"; what is left is buffers outside the weights (the fp32 YaRN cos/sin cache: 131,072 x 64 x 4 B
    # = 32 MiB).
    assert 0 < 13.47 * GiB - held < 0.08 * GiB


def test_b02_gpt_oss_120b_on_h100():
    # 4,608 experts x 14,060,160 B + 4,255,115,904 = 69,044,333,184 B (64.30 GiB); B02 logged 64.38 GiB.
    held = total("openai/gpt-oss-120b", hopper())
    assert held == 69_044_333_184
    assert 0 < 64.38 * GiB - held < 0.08 * GiB


def test_the_rule_replaces_stored_bytes():
    # The safetensors size is what is stored, not what the Triton backend holds.
    assert total("openai/gpt-oss-20b", None, stored_weight_bytes=13_761_264_768) == 13_761_264_768
    assert total("openai/gpt-oss-20b", hopper(), stored_weight_bytes=13_761_264_768) == 14_393_851_008


def test_marlin_pads_both_sizes():
    # Marlin: intermediate 2880 -> 2944 (128), hidden 2880 -> 3072 (256): values 3 x 2944 x 3072 / 2 = 13,565,952,
    # scales 5,888 x 96 + 3,072 x 92 = 847,872, bf16 biases (5,888 + 3,072) x 2 = 17,920: 14,431,744 B an
    # expert; x 768 + 3,595,648,128 = 14,679,227,520 B (13.67 GiB).
    assert total("openai/gpt-oss-20b", vllm_mxfp4_experts(V0_11, find_gpu("a100-80gb-sxm").compute_capability)) \
        == 14_679_227_520


def test_padding_is_per_slice():
    # At TP 2 vLLM pads each rank's 1,440 intermediate columns: Marlin 1440 -> 1536, so one expert holds
    # 2 x (3 x 1536 x 3072 / 2 + 3,072 x 96 + 3,072 x 48 + (3,072 + 3,072) x 2) = 2 x 7,532,544 = 15,065,088 B,
    # not the 14,431,744 B of padding the whole 2,880.
    assert MXFP4_MARLIN.expert_bytes(2880, 2880, biased=True) == 14_431_744
    assert MXFP4_MARLIN.sliced(2).expert_bytes(2880, 2880, biased=True) == 15_065_088
    # Triton at TP 2: 1440 -> 1472 (64) per slice; scale copies 2,944 -> 3,072 and 2,880 -> 3,072 rows.
    # 2 x (3 x 1472 x 2880 / 2 + 2,944 x 90 + 2,880 x 46 + (2,944 + 2,880) x 4 + 3,072 x 90 + 3,072 x 46)
    # = 2 x (6,359,040 + 264,960 + 132,480 + 23,296 + 276,480 + 141,312) = 2 x 7,197,568 = 14,395,136 B
    assert MXFP4_TRITON_HOPPER.sliced(2).expert_bytes(2880, 2880, biased=True) == 14_395_136


@pytest.mark.parametrize(("gpu", "version", "backend"), [
    ("a100-80gb-sxm", V0_11, MXFP4_MARLIN),  # 8.0: below 9, Marlin
    ("l40s", V0_11, MXFP4_MARLIN),  # 8.9
    ("h100", V0_11, MXFP4_TRITON_HOPPER),  # 9.0: Triton
    ("h200", None, MXFP4_TRITON_HOPPER),
    ("b200", V0_11, MXFP4_FLASHINFER_SM100),  # 10.0: FlashInfer's SM100 kernels
    ("rtx5090", V0_11, MXFP4_TRITON),  # 12.0 in v0.11: Triton, no Hopper swizzle
    ("rtx5090", (0, 12), MXFP4_MARLIN),  # later: Triton only for 9.0 <= capability < 11.0
    ("rtx5090", None, MXFP4_MARLIN),
    ("mi300x", V0_11, MXFP4_TRITON_ROCM),  # gfx942
])
def test_backend_by_compute_capability(gpu, version, backend):
    assert vllm_mxfp4_experts(version, find_gpu(gpu).compute_capability) == backend


def test_no_rule_for_devices_not_modelled():
    assert vllm_mxfp4_experts(V0_11, find_gpu("gaudi2").compute_capability) is None
    assert vllm_mxfp4_experts(V0_11, None) is None


def test_backends_differ_by_their_padding():
    # 20b per expert: FlashInfer SM100 and ROCm round both sizes to 3072: values 3 x 3072^2 / 2 = 14,155,776,
    # scales 6,144 x 96 + 3,072 x 96 = 884,736, fp32 biases (6,144 + 3,072) x 4 = 36,864: 15,077,376 B.
    # Triton off Hopper: stored + fp32 biases = 13,253,760 B.
    assert MXFP4_FLASHINFER_SM100.expert_bytes(2880, 2880, biased=True) == 15_077_376
    assert MXFP4_TRITON_ROCM.expert_bytes(2880, 2880, biased=True) == 15_077_376
    assert MXFP4_TRITON.expert_bytes(2880, 2880, biased=True) == 13_253_760
    assert MXFP4_TRITON_HOPPER.expert_bytes(2880, 2880, biased=True) == 14_060_160


def test_vllm_slices_the_experts_over_tensor_parallel_ranks_before_padding():
    # gpt-oss-20b (hidden = intermediate = 2,880, 24 layers x 32 experts = 768) on H100s (Triton, Hopper swizzle) at
    # TP 2: each slice has 1,440 rows, padded to 1,472 (a multiple of 64). Per slice: values 1,472 x 2,880 (w13, half
    # of 2 x) + 2,880 x 1,472 / 2 = 6,359,040 B; scales 2,944 x 90 + 2,880 x 46 = 397,440; fp32 biases
    # (2,944 + 2,880) x 4 = 23,296; scale copies 3,072 x 90 + 3,072 x 46 = 417,792: 7,197,568 B, two slices
    # 14,395,136 B per expert against 14,060,160 unsliced. So a rank at TP 2 holds half of TP 1's weights plus
    # 768 x (14,395,136 - 14,060,160) / 2 = 128,630,784 B; and each rank holds the whole RoPE table, which
    # gpt_oss.py builds in float32: 131,072 positions (4,096 x yarn factor 32) x 64 x 4 B = 33,554,432 B.
    from kvplan.api import estimate
    one = estimate("openai/gpt-oss-20b", gpu="h100").memory.weights_bytes
    two = estimate("openai/gpt-oss-20b", gpu="h100", tensor_parallel_size=2).memory.weights_bytes
    assert 2 * two - one == 2 * 128_630_784 + 33_554_432
