"""vLLM's non-torch memory at TP > 1 by interconnect (issue 18 section 6, kvplan/engines/vllm/interconnect.py).

Figures, each from its source:
- one GPU: int(0.13 GiB) = 139,586,437 B (v0.8-v0.17), int(0.25 GiB) = 268,435,456 B (v0.18+), data/calibration.yaml;
- NCCL's growth: int(0.42 GiB) = 450,971,566 B over NVLink (B03, vLLM 0.11.0 H100 TP 2 logs 0.55 GiB), int(0.08 GiB)
  = 85,899,345 B over PCIe (an 8 x L40S vLLM 0.10.2 TP 4 log, read_file id 38962983769: "0.21 GiB for non-torch
  memory");
- FlashInfer's all-reduce fusion workspace, v0.17+ at TP > 1 on compute capability 9.0 / 10.x with NVSwitch:
  3 buffers (flashinfer 0.6.6 comm/trtllm_ar.py) each rounded up to the 512 MiB multicast granularity
  (comm/mnnvl.py), 1,610,612,736 B; on when vLLM 0.19.0 config/vllm.py enable_allreduce_rms_fusion says so (-O2,
  PP 1, DP 1).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from kvplan.calibration.vllm import deployment
from kvplan.engines import plan_deployment
from kvplan.models.sources import resolve

ONE_GPU_018, ONE_GPU_08 = 268_435_456, 139_586_437
NVLINK, PCIE, FUSION = 450_971_566, 85_899_345, 3 * 512 * 2**20


def non_torch(gpu: str, version: str, tp: int = 1, pp: int = 1, **knobs: object) -> int:
    entry = {"gpu": gpu, "version": version, "utilization": 0.9, "model": "meta-llama/Llama-3.1-8B-Instruct",
             "max_model_len": 8192, "tp": tp, "pp": pp}
    dep, choice = deployment(entry)
    plan = plan_deployment(resolve(entry["model"]), replace(dep, **knobs), choice)
    return plan.rank_zero_memory.non_torch_bytes


def test_l40s_tp4_v019_is_one_gpu_plus_pcie_growth():
    # issue 18 section 6: kvplan printed int(2.1 GiB) = 2,254,857,830 B here, about 1.7 GiB above the withheld log;
    # the L40S has no NVLink (its vendor page: "NVLink Support: No") and compute capability 8.9 (no fusion pass)
    assert non_torch("l40s", "0.19.0", tp=4) == ONE_GPU_018 + PCIE == 354_334_801


def test_the_public_l40s_tp4_log_of_v0102():
    # the log's own figure, 0.21 GiB: 0.13 + 0.08 (kvplan printed 0.55 GiB before)
    assert non_torch("l40s", "0.10.2", tp=4) == ONE_GPU_08 + PCIE == 225_485_782


def test_nvswitch_hopper_adds_the_fusion_workspace_from_v017_only():
    # v0.19 H100 logs L02-L21 print 2.06-2.21 GiB at TP 2 and TP 4: 0.25 + 0.42 + 1.5 = 2.17 GiB
    assert non_torch("h100", "0.19.0", tp=2) == non_torch("h100", "0.19.0", tp=4) == ONE_GPU_018 + NVLINK + FUSION
    # 0.16.0 has fuse_allreduce_rms False at every -O level: B03's 0.55 GiB
    assert non_torch("h100", "0.16.0", tp=2) == non_torch("h100", "0.11.0", tp=2) == ONE_GPU_08 + NVLINK
    assert non_torch("h100", "0.17.0", tp=2) == int(0.13 * 2**30) + NVLINK + FUSION


def test_no_fusion_workspace_where_vllm_turns_the_pass_off():
    # A100 SXM: NVSwitch but compute capability 8.0; -O1 and eager: no compiled pass (0.19.0 config/vllm.py levels)
    assert non_torch("a100-80gb-sxm", "0.19.0", tp=2) == ONE_GPU_018 + NVLINK
    assert non_torch("h100", "0.19.0", tp=2, enforce_eager=True) == ONE_GPU_018 + NVLINK
    assert non_torch("h100", "0.19.0", tp=2, optimization_level=1) == ONE_GPU_018 + NVLINK
    assert non_torch("h100", "0.19.0", tp=2, optimization_level=3) == ONE_GPU_018 + NVLINK + FUSION
    # PP 1 only through 0.23 (0.23.0 config/vllm.py); 0.30.0 drops it; TP 2 x PP 2 at 0.19: no workspace
    assert non_torch("h100", "0.19.0", tp=2, pp=2) == ONE_GPU_018 + NVLINK
    assert non_torch("h100", "0.30.0", tp=2, pp=2) == ONE_GPU_018 + NVLINK + FUSION


def test_optional_bridges_are_taken_as_absent_and_nvl_pairs_as_pairs():
    # A100 / H100 PCIe and RTX 3090: an optional NVLink bridge ("bridge"), taken as absent: PCIe, and no multicast, so
    # no fusion workspace on H100 PCIe. Engine-calibration Y12 (2 x RTX 5090, PCIe) prints 15.03 GiB of weights and
    # non-torch together against its family's 14.68 GiB of weights: 0.35 GiB, this 0.25 + 0.08 = 0.33.
    assert non_torch("a100-80gb-pcie", "0.19.0", tp=2) == non_torch("rtx3090", "0.19.0", tp=2) == ONE_GPU_018 + PCIE
    assert non_torch("h100-pcie", "0.19.0", tp=2) == ONE_GPU_018 + PCIE
    assert non_torch("rtx5090", "0.27.1", tp=2) == ONE_GPU_018 + PCIE
    # H100 NVL, sold as bridged pairs ("nvlink"): NVLink at TP 2, PCIe between the pairs at TP 4; no NVSwitch
    assert non_torch("h100-nvl", "0.19.0", tp=2) == ONE_GPU_018 + NVLINK
    assert non_torch("h100-nvl", "0.19.0", tp=4) == ONE_GPU_018 + PCIE


@pytest.mark.parametrize("gpu", ["l40s", "l4", "a10g", "rtx4090", "h100-sxm", "h100-nvl", "b200", "rtx3090"])
def test_every_flag_has_a_vendor_source(gpu):
    entries = json.loads((Path(__file__).parent.parent / "kvplan" / "data" / "gpus.json").read_text())["gpus"]
    entry = next(e for e in entries if e["id"] == gpu)
    assert entry["nvlink"] in ("nvswitch", "nvlink", "bridge", "none") and entry["nvlink_source"].startswith("https://")


def test_the_workspace_is_its_three_buffers_each_rounded_to_the_granularity():
    from kvplan.deployment import Deployment
    from kvplan.engines.vllm.interconnect import fusion_workspace
    from kvplan.plan import GpuChoice

    dep = Deployment(engine="vllm", tensor_parallel_size=4)
    # compute capability 10.3 at TP 4 (FI_ALLREDUCE_FUSION_MAX_SIZE_MB: 64 MiB), hidden 8,192 in bfloat16, 8,192
    # batched tokens: 64 MiB // 16,384 B = 4,096 tokens; data 4 x 4,096 x 8,192 x 2 = 256 MiB -> 512 MiB, flags
    # -> 512 MiB, Lamport 3 x 256 MiB = 768 MiB -> 1,024 MiB: 2 GiB (an unknown device is taken as NVSwitch)
    b300 = GpuChoice("custom", "a 10.3 device", 0, 4, "10.3")
    assert fusion_workspace(dep, b300, (0, 19), 8192, 2, 8192) == 2048 * 2**20
    # B200 (10.0) at TP 4: 32 MiB -> 2,048 tokens, 128 + 384 MiB: three granules
    b200 = GpuChoice("b200", "B200", 0, 4, "10.0")
    assert fusion_workspace(dep, b200, (0, 19), 8192, 2, 8192) == 3 * 512 * 2**20
    # TP 6: no max size for that world size, no workspace ("not supported for world size")
    assert fusion_workspace(Deployment(engine="vllm", tensor_parallel_size=6), b200, (0, 19), 8192, 2, 8192) == 0
