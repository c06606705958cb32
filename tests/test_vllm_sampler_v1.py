"""vLLM V1's profiling sampler from 0.17 on, and PyTorch's sort below 128 rows (issue 18 sections 2 and 6;
kvplan/engines/vllm/sampler.py v1_sampler, sort_sampler).

Source, read in the release wheels: envs.py VLLM_USE_FLASHINFER_SAMPLER (0.20.2: None, opt-in; 0.21.0: True),
v1/worker/gpu_model_runner.py _dummy_sampler_run (0.21.0-0.33.0: a second pass with a seeded generator, which
forward_cuda sends to forward_native), v1/sample/ops/topk_topp_sampler.py (FlashInfer on CUDA only, within
FlashInferBackend.supports_compute_capability: 7.5-12.1 through 0.23.0, 8.0-12.1 from 0.24.0; apply_top_k_top_p:
Triton from 8 rows in 0.17.0-0.29.0, every row count from 0.30.0; forward_native: the softmax and random_sample's q),
v1/sample/ops/topk_topp_triton.py apply_top_k_top_p_triton (its cached buffer of min(next_power_of_2(min(SMs, rows)),
SMs) rows x vocab float32), flashinfer 0.6.8.post1-0.6.18 sampling.py
top_k_top_p_sampling_from_logits (masked logits and their softmax, 1 MiB of cached row states); and PyTorch's
aten/src/ATen/native/cuda/SortStable.cu with cub's radix-sort temporaries (the sort's scratch: 5 float32 copies of
rows x vocab at one row and at 128 rows or more, 8 from 2 to 127 rows). Beside the sampler, profile_run keeps the dummy
run's hidden states (max_num_batched_tokens rows) and the sampled rows with their rand_like copy (2 x rows), 16-bit;
and PyTorch's cuBLAS workspace, 32 MiB on compute capability 9.0 (aten/src/ATen/cuda/CublasHandlePool.cpp
parseChosenWorkspaceSize), replaces the era's fitted fixed bytes on that side.

Qwen3-8B (vocab 151,936, hidden 4,096, intermediate 12,288) on an H100 80GB (9.0, 132 SMs), V1, kvplan's defaults
there: 1,024 sequences and 8,192 batched tokens, 1,024 rows.
  one float32 copy C = 1,024 x 151,936 x 4 = 622,329,856 B; the Triton buffer B = 132 x 151,936 x 4 = 80,222,208 B;
  the held hidden states H = (8,192 + 2 x 1,024) x 4,096 x 2 = 83,886,080 B; the cuBLAS workspace W = 33,554,432 B;
  the dummy forward (3 x 8,192 x 4,096 + 3 x 8,192 x 12,288) x 2 = 805,306,368 B + the era's fixed int(0.12 GiB)
  128,849,018 B = 934,155,386 B, the smaller side
  0.20.1, one pass (forward_native, Triton): 3.5 C + B + H + W = 2,178,154,496 + 80,222,208 + 83,886,080
                                             + 33,554,432                                      = 2,375,817,216 B
  0.21.0, two passes: FlashInfer's 3.5 C, then forward_native's 3.5 C + B; the larger with the 1 MiB row states:
                                             2,375,817,216 + 1,048,576                         = 2,376,865,792 B
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from kvplan.calibration.vllm import deployment
from kvplan.deployment import Deployment
from kvplan.engines import plan_deployment
from kvplan.engines.vllm.releases import era_of
from kvplan.engines.vllm.sampler import TritonBuffer, cublas_workspace_bytes, profile_sampler
from kvplan.errors import KvplanError
from kvplan.models.sources import resolve

ONE_PASS, TWO_PASS = 2_375_817_216, 2_376_865_792
VOCAB = 151_936
CATALOGUE = Path(__file__).parents[1] / "kvplan" / "data" / "gpus.json"
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


def peak(version: tuple[int, int], rows: int, capability: str | None = "9.0", sms: int | None = 132,
         **knobs: object) -> float:
    dep = replace(Deployment.from_mapping({"gpu": "h100"}), **knobs)
    era = era_of(".".join(map(str, version)))
    return profile_sampler(era, dep, version, False, capability, sms).peak_bytes(rows, VOCAB)


@pytest.mark.parametrize(("version", "capability", "flashinfer"), [
    ((0, 23), "7.5", True), ((0, 24), "7.5", False), ((0, 24), "8.0", True), ((0, 29), "12.1", True),
    ((0, 29), "12.0", True), ((0, 29), "10.0", True), ((0, 29), "gfx942", False), ((0, 29), None, True),
])
def test_flashinfer_pass_by_platform(version, capability, flashinfer):
    # FlashInfer's pass adds only its cached 1 MiB at 1,024 rows (3.5 C < 3.5 C + B): 3.5 C + B = 2,178,154,496 +
    # 80,222,208 = 2,258,376,704 B, + 1,048,576 = 2,259,425,280 B with it (ROCm and capabilities outside the
    # release's range fall back quietly)
    assert int(peak(version, 1024, capability)) == (2_259_425_280 if flashinfer else 2_258_376_704)


def test_sort_below_8_rows_until_030():
    # forward_native below 8 rows, 0.17-0.29: the sort, 9.5 copies at one row (1 x 607,744 x 9.5 = 5,773,568 B),
    # 12.5 from 2 rows (by_full_sort: 4 x 607,744 x 12.5 = 30,387,200 B), no Triton buffer; Triton from 8 rows:
    # 3.5 x 8 x 607,744 = 17,016,832 B + its buffer of min(next_power_of_2(8), 132) = 8 rows, 4,861,952 B =
    # 21,878,784 B; from 0.30 Triton at 4 rows too: 3.5 x 2,430,976 + 4 x 607,744 = 10,939,392 B
    off = {"flashinfer_sampler": False}
    assert peak((0, 19), 1, **off) == pytest.approx(5_773_568)
    assert peak((0, 19), 4, **off) == pytest.approx(30_387_200)
    assert peak((0, 19), 8, **off) == pytest.approx(21_878_784)
    assert peak((0, 30), 4, **off) == pytest.approx(10_939_392)
    # with FlashInfer's pass beside (0.21+): the larger of 3.5 and the native copies, + 1,048,576 B
    assert peak((0, 21), 4) == pytest.approx(30_387_200 + 1_048_576)
    assert peak((0, 30), 4) == pytest.approx(10_939_392 + 1_048_576)


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


@pytest.mark.parametrize(("sms", "rows", "buffer_rows"), [
    # apply_top_k_top_p_triton: NUM_PROGRAMS = min(SMs, rows), buffer min(next_power_of_2(NUM_PROGRAMS), SMs) rows
    (132, 1024, 132), (132, 100, 128), (132, 8, 8), (114, 100, 114), (108, 64, 64), (58, 1024, 58),
    # an unknown SM count: the largest buffer the rows allow, next_power_of_2(rows) (SMs at least that many)
    (None, 100, 128), (None, 1024, 1024), (132, 0, 0),
])
def test_triton_buffer_rows(sms, rows, buffer_rows):
    assert TritonBuffer(sms, 0).rows(rows) == buffer_rows


@pytest.mark.parametrize(("capability", "release", "workspace"), [
    # CublasHandlePool.cpp parseChosenWorkspaceSize: 4,096 x 8 KiB = 33,554,432 B where the torch release gives 32 MiB,
    # :4096:2:16:8 = 8,519,680 B on other CUDA GPUs; ROCm 32 MiB, 128 MiB on gfx94x / gfx95x. The CUDA rule as the
    # pinned torch wheels' libtorch_cuda.so compiles it: torch 2.10.0 / 2.11.0 (vLLM 0.17-0.26) 9.0 alone, 2.13.0
    # (0.27-0.32) majors 9, 10 and 12, 2.14.0 (0.33) 9 to 12.
    ("9.0", (0, 19), 33_554_432), ("8.0", (0, 19), 8_519_680), ("10.0", (0, 26), 8_519_680),
    ("12.0", (0, 26), 8_519_680), (None, (0, 33), 8_519_680),
    ("10.0", (0, 27), 33_554_432), ("12.0", (0, 27), 33_554_432), ("12.1", (0, 32), 33_554_432),
    ("11.0", (0, 32), 8_519_680), ("11.0", (0, 33), 33_554_432), ("8.9", (0, 33), 8_519_680),
    ("9.0", (0, 33), 33_554_432),
    ("gfx942", (0, 33), 134_217_728), ("gfx950", (0, 19), 134_217_728), ("gfx90a", (0, 33), 33_554_432),
])
def test_cublas_workspace(capability, release, workspace):
    assert cublas_workspace_bytes(capability, release) == workspace


@pytest.mark.parametrize(("entry", "expected", "logged"), [
    # Qwen2.5-7B-Instruct (vocab 152,064, hidden 3,584) on an H100, 0.19.0 (data/calibration.yaml C12; llm-d-planner
    # v0.19.0 log "2.21 GiB for peak activation"): 3.5 x 1,024 x 152,064 x 4 = 2,179,989,504 + Triton buffer
    # 132 x 152,064 x 4 = 80,289,792 + held hidden (8,192 + 2,048) x 3,584 x 2 = 73,400,320 + cuBLAS 33,554,432
    ("C12", 2_367_234_048, 2.21),
    # gemma-3-27b-it (vocab 262,208, hidden 5,376), C17 ("3.99 GiB for peak activation"): 3.5 x 1,024 x 262,208 x 4
    # = 3,759,013,888 + 132 x 262,208 x 4 = 138,445,824 + (8,192 + 2,048) x 5,376 x 2 = 110,100,480 + 33,554,432
    # + the encoder's held inputs 32 x (256 x 5,376 x 2 + 3 x 896^2 x 2) = 242,221,056 (tests/test_multimodal_v019.py)
    ("C17", 4_283_335_680, 3.99),
])
def test_v019_peak_derived_whole(entry, expected, logged):
    from kvplan.calibration import vllm as calibration

    found = next(e for e in calibration.entries() if e["id"] == entry)
    activation = calibration.plan_for(found).rank_zero_memory.activation_bytes
    assert activation == expected
    assert abs(activation / 2**30 - logged) < 0.01  # 2.205 and 3.989 GiB (the fitted 3.79 copies: 2.318, 4.137)


def test_an_unknown_sm_count_takes_the_largest_buffer_and_says_so():
    # The H100 NVL has no cited SM count in data/gpus.json: at 1,024 rows the buffer is taken at
    # next_power_of_2(1,024) = 1,024 rows, one float32 copy more than 3.5: Qwen3-8B's sampler side is
    # 4.5 x 622,329,856 + (8,192 + 2,048) x 4,096 x 2 + 33,554,432 = 2,917,924,864 B; the H100 SXM's (132 SMs)
    # is the 2,375,817,216 B above
    entry = {"gpu": "h100-nvl", "version": "0.19.0", "model": "Qwen/Qwen3-8B"}
    dep, choice = deployment({"utilization": 0.9, "max_model_len": 8192, **entry})
    plan = plan_deployment(resolve("Qwen/Qwen3-8B"), replace(dep, v2_model_runner=False), choice)
    assert plan.rank_zero_memory.activation_bytes == 2_917_924_864
    assert any("SM count is unknown" in note and "1,024 rows x vocab" in note for note in plan.notes)
    assert not any("SM count" in note for note in plan_deployment(
        resolve("Qwen/Qwen3-8B"), *deployment({"utilization": 0.9, "max_model_len": 8192, "gpu": "h100",
                                                "version": "0.19.0", "model": "Qwen/Qwen3-8B"})).notes)


def test_catalogue_sm_counts_carry_their_source():
    # data/gpus.json sm_count, each with its sm_source (NVIDIA's whitepapers and datasheets, AMD's data sheets for
    # compute units); MIG slices have none (fewer SMs than the parent)
    from kvplan.hardware import catalogue, find_gpu

    for gpu in catalogue():
        assert gpu.sm_count is None or gpu.sm_count > 0
    entries = {g["id"]: g for g in json.loads(CATALOGUE.read_text(encoding="utf-8"))["gpus"]}
    assert all(e.get("sm_source") for e in entries.values() if "sm_count" in e)
    wanted = {"h100-sxm": 132, "h100-pcie": 114, "h200": 132, "a100-80gb-sxm": 108, "l40s": 142, "l4": 58,
              "rtx4090": 128, "rtx3090": 82, "rtx5090": 170, "b200": 148, "a10": 72, "mi300x": 304}
    assert {name: find_gpu(name).sm_count for name in wanted} == wanted
    assert find_gpu("a100-80gb-sxm:1g.10gb").sm_count is None
