"""vLLM V1's profiling sampler from 0.17 on, and PyTorch's sort below 128 rows (issue 18 sections 2 and 6;
kvplan/engines/vllm/sampler.py v1_sampler, sort_sampler).

Source, read in the release wheels: envs.py VLLM_USE_FLASHINFER_SAMPLER (0.20.2: None, opt-in; 0.21.0: True),
v1/worker/gpu_model_runner.py _dummy_sampler_run (0.21.0-0.33.0: a second pass with a seeded generator, which
forward_cuda sends to forward_native), v1/sample/ops/topk_topp_sampler.py (FlashInfer on CUDA only, within
FlashInferBackend.supports_compute_capability: 7.5-12.1 through 0.23.0, 8.0-12.1 from 0.24.0; apply_top_k_top_p:
Triton from 8 rows in 0.17.0-0.29.0, every row count from 0.30.0), flashinfer 0.6.8.post1-0.6.18 sampling.py
top_k_top_p_sampling_from_logits (masked logits and their softmax, 1 MiB of cached row states); and PyTorch's
aten/src/ATen/native/cuda/SortStable.cu with cub's radix-sort temporaries (the sort's scratch: 5 float32 copies of
rows x vocab at one row and at 128 rows or more, 8 from 2 to 127 rows).

Qwen3-8B (vocab 151,936, hidden 4,096, intermediate 12,288) on an H100 80GB (9.0), V1, kvplan's defaults there:
1,024 sequences and 8,192 batched tokens, 1,024 rows.
  one float32 copy C = 1,024 x 151,936 x 4 = 622,329,856 B; the dummy forward (3 x 8,192 x 4,096 + 3 x 8,192 x
  12,288) x 2 = 805,306,368 B; the era's fixed int(0.12 GiB) = 128,849,018 B
  0.20.1, one pass (forward_native, Triton):  int(3.79 x C) = 2,358,630,154 > forward; + fixed = 2,487,479,172 B
  0.21.0, two passes: FlashInfer's 3.5 C, then forward_native's 3.79 C; the larger with the 1 MiB row states:
                      int(3.79 x C + 1,048,576) = 2,359,678,730; + fixed                       = 2,488,527,748 B
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from kvplan.calibration.vllm import deployment
from kvplan.deployment import Deployment
from kvplan.engines import plan_deployment
from kvplan.engines.vllm.releases import era_of
from kvplan.engines.vllm.sampler import profile_sampler
from kvplan.errors import KvplanError
from kvplan.models.sources import resolve

ONE_PASS, TWO_PASS = 2_487_479_172, 2_488_527_748
VOCAB = 151_936
ROW = VOCAB * 4  # one float32 row: 607,744 B


def activation(entry: dict[str, object], seqs_tokens: tuple[int, int], **knobs: object) -> int:
    dep, choice = deployment({"utilization": 0.9, "max_model_len": 8192, **entry})
    plan = plan_deployment(resolve(str(entry["model"])), replace(dep, **knobs), choice)
    assert (plan.engine.max_num_seqs, plan.engine.max_num_batched_tokens) == seqs_tokens
    return plan.rank_zero_memory.activation_bytes


def qwen3(version: str, **knobs: object) -> int:
    entry = {"gpu": "h100", "version": version, "model": "Qwen/Qwen3-8B"}
    return activation(entry, (1024, 8192), v2_model_runner=False, **knobs)


def test_flashinfer_default_and_second_pass_from_021():
    assert qwen3("0.20.1") == ONE_PASS
    assert qwen3("0.21.0") == TWO_PASS
    assert qwen3("0.21.0", flashinfer_sampler=False) == ONE_PASS


def peak(version: tuple[int, int], rows: int, capability: str | None = "9.0", **knobs: object) -> float:
    dep = replace(Deployment.from_mapping({"gpu": "h100"}), **knobs)
    era = era_of(".".join(map(str, version)))
    return profile_sampler(era, dep, version, False, capability).peak_bytes(rows, VOCAB)


@pytest.mark.parametrize(("version", "capability", "flashinfer"), [
    ((0, 23), "7.5", True), ((0, 24), "7.5", False), ((0, 24), "8.0", True), ((0, 29), "12.1", True),
    ((0, 29), "12.0", True), ((0, 29), "10.0", True), ((0, 29), "gfx942", False), ((0, 29), None, True),
])
def test_flashinfer_pass_by_platform(version, capability, flashinfer):
    # FlashInfer's pass adds only its cached 1 MiB at 1,024 rows (3.5 C < 3.79 C): 2,359,678,730 B, else
    # int(3.79 x C) = 2,358,630,154 B (ROCm and capabilities outside the release's range fall back quietly)
    assert int(peak(version, 1024, capability)) == (2_359_678_730 if flashinfer else 2_358_630_154)


def test_sort_below_8_rows_until_030():
    # forward_native below 8 rows, 0.17-0.29: the sort, 9.5 copies at one row (1 x 607,744 x 9.5 = 5,773,568 B),
    # 12.5 from 2 rows (by_full_sort: 4 x 607,744 x 12.5 = 30,387,200 B); Triton from 8 rows, the era's 3.79:
    # 8 x 607,744 x 3.79 = 18,426,798.08 B; from 0.30 Triton at 4 rows too: 2,430,976 x 3.79 = 9,213,399.04 B
    off = {"flashinfer_sampler": False}
    assert peak((0, 19), 1, **off) == pytest.approx(5_773_568)
    assert peak((0, 19), 4, **off) == pytest.approx(30_387_200)
    assert peak((0, 19), 8, **off) == pytest.approx(18_426_798.08)
    assert peak((0, 30), 4, **off) == pytest.approx(9_213_399.04)
    # with FlashInfer's pass beside (0.21+): the larger of 3.5 and the native copies, + 1,048,576 B
    assert peak((0, 21), 4) == pytest.approx(30_387_200 + 1_048_576)
    assert peak((0, 30), 4) == pytest.approx(9_213_399.04 + 1_048_576)


@pytest.mark.parametrize(("seqs", "expected"), [
    (1, 51_424_624), (64, 533_017_394), (127, 1_012_785_397), (128, 786_830_458),
])
def test_sort_by_full_sort_below_128_rows_in_016(seqs, expected):
    # Qwen2.5-7B (vocab 152,064, hidden 3,584) on an A100 80GB, 0.16.0 (the sort by default), 2,048 batched tokens:
    # a row is 152,064 x 4 = 608,256 B; the era's 9.52 copies at 1 and 128+ rows, 9.52 + 3 = 12.52 between; the
    # prefill term 1.28 x 2,048 x 3,584 x 2 = 18,790,481.92 B and the fixed int(0.025 GiB) = 26,843,545 B:
    #   1 row:    int(9.52 x 608,256 + 18,790,481.92) = 24,581,079;              + fixed = 51,424,624 B
    #   64 rows:  int(12.52 x 38,928,384 + 18,790,481.92) = 506,173,849;         + fixed = 533,017,394 B
    #   127 rows: int(12.52 x 77,248,512 + 18,790,481.92) = 985,941,852;         + fixed = 1,012,785,397 B
    #   128 rows: int(9.52 x 77,856,768 + 18,790,481.92) = 759,986,913;          + fixed = 786,830,458 B
    entry = {"gpu": "a100-80gb-sxm", "version": "0.16.0", "model": "Qwen/Qwen2.5-7B-Instruct"}
    assert activation(entry, (seqs, 2048), max_num_seqs=seqs) == expected


@pytest.mark.parametrize(("version", "capability"), [((0, 17), "7.0"), ((0, 24), "7.5"), ((0, 33), "7.5")])
def test_an_explicit_flashinfer_sampler_on_an_unsupported_cuda_gpu_is_refused(version, capability):
    # 0.17.0-0.23.0 TopKTopPSampler.__init__ and 0.24.0-0.33.0 flashinfer_sampler_supported raise a RuntimeError
    # where VLLM_USE_FLASHINFER_SAMPLER is set and the compute capability is outside the release's range
    with pytest.raises(KvplanError, match=f"compute capability .* not {capability}"):
        peak(version, 1024, capability, flashinfer_sampler=True)
    assert peak(version, 1024, "gfx942", flashinfer_sampler=True) > 0  # not CUDA: forward_native, no error
