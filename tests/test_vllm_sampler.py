"""vLLM v0.8-v0.16's profiling sampler (issue 18 section 6, kvplan/engines/vllm/sampler.py).

Source: v1/sample/ops/topk_topp_sampler.py TopKTopPSampler.__init__ (0.11.0: FlashInfer unless
VLLM_USE_FLASHINFER_SAMPLER is 0; 0.12.0: only when it is 1) and flashinfer 0.3.1 sampling.py
top_k_top_p_sampling_from_logits (top_k_mask_logits' empty_like, then torch.softmax): the bfloat16 logits (0.5), their
float32 cast (1), the masked logits (1) and the probabilities (1) = 3.5 float32 copies; the sort path keeps the era's
9.52 (data/calibration.yaml B01-B06, V15-V16).

Qwen2.5-7B (the Qwen2 7B geometry: vocab 152,064, hidden 3,584) on an A100 80GB: vLLM's defaults there are 256
sequences and 2,048 batched tokens (A100s stay off the 1,024-sequence tier), so the dummy batch has 256 rows:
one float32 copy = 256 x 152,064 x 4 = 155,713,536 B; the prefill term 1.28 x 2,048 x 3,584 x 2 = 18,790,481.92 B;
the era's fixed int(0.025 GiB) = 26,843,545 B.
  FlashInfer: int(3.5 x 155,713,536 + 18,790,481.92) + 26,843,545 = 563,787,857 + 26,843,545 = 590,631,402 B
  sort:       int(9.52 x 155,713,536 + 18,790,481.92) + 26,843,545 = 1,501,183,344 + 26,843,545 = 1,528,026,889 B
The 937,395,487 B (0.87 GiB) between them is the "about 1 GiB" issue 18 section 6 reports for an A100 log.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from kvplan.calibration.vllm import deployment
from kvplan.engines import plan_deployment
from kvplan.models.sources import resolve

FLASHINFER, SORT = 590_631_402, 1_528_026_889


def activation(version: str, **knobs: object) -> int:
    entry = {"gpu": "a100-80gb-sxm", "version": version, "utilization": 0.9, "model": "Qwen/Qwen2.5-7B-Instruct",
             "max_model_len": 8192}
    dep, choice = deployment(entry)
    plan = plan_deployment(resolve(entry["model"]), replace(dep, **knobs), choice)
    assert (plan.engine.max_num_seqs, plan.engine.max_num_batched_tokens) == (256, 2048)
    return plan.rank_zero_memory.activation_bytes


@pytest.mark.parametrize("version", ["0.9.2", "0.10.2", "0.11.0"])
def test_flashinfer_sampler_by_default_through_011(version):
    assert activation(version) == FLASHINFER


@pytest.mark.parametrize("version", ["0.12.0", "0.16.0"])
def test_sort_path_by_default_from_012(version):
    assert activation(version) == SORT


def test_the_switch_chooses_the_path_either_way():
    assert activation("0.11.0", flashinfer_sampler=False) == SORT
    assert activation("0.15.0", flashinfer_sampler=True) == FLASHINFER


def test_v017_triton_by_default_flashinfer_when_opted_in():
    # 0.17-0.20 sample once: forward_native by default, Triton at 256 rows (engines/vllm/sampler.py, read in the
    # wheels): 3.5 x 155,713,536 = 544,997,376 B + the Triton buffer of min(next_power_of_2(min(108 SMs, 256)), 108)
    # = 108 rows x 608,256 = 65,691,648 B + the held hidden states (2,048 + 2 x 256) x 3,584 x 2 = 18,350,080 B +
    # PyTorch's cuBLAS workspace off Hopper, 4,096 KiB x 2 + 16 KiB x 8 = 8,519,680 B: 637,558,784 B, over the
    # forward's (3 x 2,048 x 3,584 + 3 x 2,048 x 18,944) x 2 = 276,824,064 B + the era's int(0.12 GiB) =
    # 405,673,082 B. VLLM_USE_FLASHINFER_SAMPLER=1 on the A100 (8.0, inside 0.19.0's FlashInferBackend 7.5-12.1):
    # FlashInfer's 3.5 copies and flashinfer 0.6.6's cached 1 MiB row states, int(3.5 x 155,713,536 + 1,048,576) =
    # 546,045,952 B, + 18,350,080 + 8,519,680 = 572,915,712 B
    assert activation("0.19.0") == 637_558_784
    assert activation("0.19.0", flashinfer_sampler=True) == 572_915_712
