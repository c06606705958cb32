"""Issue 20 item 5, the devices left without a runtime figure: B300, GB200, GB300, L20, the B200's MIG profiles, the
H200's 1g.35gb / 3g.71gb / 4g.71gb, the RTX PRO 6000 Blackwell's slices, and the MI355X's exact total. Every
expected byte count is the cited figure converted by hand here (GiB = 2^30 bytes; an 'xx.yy GiB' figure floored)."""

from __future__ import annotations

import pytest

from kvplan.hardware import find_gpu

GiB = 2**30


@pytest.mark.parametrize(("name", "gib_2dp", "said"), [
    # vLLM 'Free memory on device (264.8/267.69 GiB)' on 8x B300 SXM6 (driver 580.95.05), and InferenceX's B300 log
    ("b300", 26769, "267.69 GiB"),
    # vLLM 'Free memory on device (181.84/184.31 GiB)' and torch 'total capacity of 184.31 GiB' on GB200
    ("gb200", 18431, "184.31 GiB"),
    # torch 'GPU 0 has a total capacity of 276.50 GiB' on a DGX Station's GB300 (stas00/ml-engineering)
    ("gb300", 27650, "276.50 GiB"),
])
def test_blackwell_whole_gpus_have_their_logged_totals(name, gib_2dp, said):
    gpu = find_gpu(name)
    assert gpu.memory_bytes == gib_2dp * GiB // 100 and gpu.memory_precision == "gib_2dp"
    assert said in gpu.memory_source and gpu.group == "NVIDIA" and gpu.fp8 and not gpu.unified_memory


def test_the_b300_total_is_below_its_nvml_total():
    gpu = find_gpu("HGX B300")
    assert gpu.memory_bytes == 287_429_948_866  # 267.69 x 2^30 = 287,429,948,866.56, floored
    # nvidia-smi's 275,040 MiB on the same node: the CUDA total is 920 MiB under it (267.69 GiB = 274,114.56 MiB)
    assert gpu.nvml_total_mib == 275_040 and gpu.compute_capability == "10.3"
    assert find_gpu("GB300").compute_capability == "10.3" and find_gpu("GB200").compute_capability == "10.0"


@pytest.mark.parametrize(("profile", "gib_2dp"), [
    # 'nvidia-smi mig -lgip' on a B200 180 GB: 20.50, 44.25, 44.25, 89.00, 89.00, 178.50 GiB
    ("1g.23gb", 2050), ("1g.45gb", 4425), ("2g.45gb", 4425), ("3g.90gb", 8900), ("4g.90gb", 8900),
    ("7g.180gb", 17850),
])
def test_b200_slices_have_the_lgip_memory(profile, gib_2dp):
    gpu = find_gpu(f"b200:{profile}")
    assert gpu.memory_bytes == gib_2dp * GiB // 100 and gpu.memory_precision == "gib_2dp"
    assert "nvidia-smi mig -lgip" in gpu.memory_source and "mig-user-guide" in gpu.memory_source
    assert gpu.parent == "b200" and gpu.group == "MIG slices" and gpu.compute_capability == "10.0"


def test_the_b200_1g_23gb_slice_has_two_notes_agreeing():
    # 20.50 GiB = 22,011,707,392 bytes; a second note says '1g.23gb slices (20.5 GiB, 18 SMs each)'
    assert find_gpu("B200:1g.23gb").memory_bytes == 22_011_707_392
    assert "20.5 GiB, 18 SMs" in find_gpu("b200:1g.23gb").memory_source


def test_h200_3g_71gb_is_zerogpus_torch_total():
    gpu = find_gpu("h200:3g.71gb")
    # Hugging Face ZeroGPU (PyPI spaces 0.51.3, spaces/config.py) presents total_memory 74,625,056,768 = 69.50 x 2^30
    assert gpu.memory_bytes == 74_625_056_768 == 6950 * GiB // 100 and gpu.memory_precision == "exact_bytes"
    assert "spaces 0.51.3" in gpu.memory_source and "74,893,492,224" in gpu.memory_source  # the nsys reading, higher


@pytest.mark.parametrize(("profile", "same_memory_as"), [("1g.35gb", "2g.35gb"), ("4g.71gb", "3g.71gb")])
def test_h200_profiles_sharing_a_memory_fraction_are_derived_from_the_observed_one(profile, same_memory_as):
    # the MIG user guide gives 1g.35gb and 2g.35gb 2/8 of the memory, 3g.71gb and 4g.71gb 4/8
    gpu, observed = find_gpu(f"h200:{profile}"), find_gpu(f"h200:{same_memory_as}")
    assert gpu.memory_bytes == observed.memory_bytes and gpu.memory_precision == "derived"
    assert observed.memory_precision != "derived" and "not observed" in gpu.memory_source


@pytest.mark.parametrize(("profile", "memory_bytes", "said"), [
    ("1g.24gb", 24192 * 2**20, "total memory: 24192 MiB"),  # torch inside the slice: 25,367,150,592 bytes
    ("2g.48gb", 4738 * GiB // 100, "47.38"),  # -lgip: 47.38 GiB = 50,873,887,621 bytes
    ("4g.96gb", 9512 * GiB // 100, "95.12"),  # -lgip: 95.12 GiB = 102,134,322,298 bytes
])
def test_rtx_pro_6000_blackwell_slices(profile, memory_bytes, said):
    gpu = find_gpu(f"RTX PRO 6000 Blackwell Server Edition:{profile}")
    assert gpu.id == f"rtx-pro-6000-blackwell:{profile}" and gpu.memory_bytes == memory_bytes
    assert said in gpu.memory_source and gpu.compute_capability == "12.0"
    assert find_gpu("rtx-pro-6000-blackwell:1g.24gb").memory_bytes == 25_367_150_592


def test_mi355x_is_exact_from_the_rocm_runtime():
    gpu = find_gpu("MI355X")
    # OpenCL on ROCm: '294896 MB VRAM', '301973504 KB': 301,973,504 x 1024 = 309,220,868,096 = 288 GiB - 16 MiB
    assert gpu.memory_bytes == 301_973_504 * 1024 == 288 * GiB - 16 * 2**20 and gpu.memory_precision == "exact_bytes"
    assert "301973504 KB" in gpu.memory_source and "287.98 GiB" in gpu.memory_source


def test_h100_slices_name_the_page_of_their_listing():
    gpu = find_gpu("h100-sxm:3g.40gb")
    assert gpu.memory_bytes == 3950 * GiB // 100 and "jbarrow.ai/field_notes/nvidia-mig" in gpu.memory_source


def test_the_l20_has_the_total_its_vllm_worker_printed():
    gpu = find_gpu("L20")
    # vllm-project/vllm#14011: 'total_gpu_memory: 44.52056884765625GiB' on an NVIDIA L20; x 2^30 = 47,803,596,800
    assert gpu.memory_bytes == 47_803_596_800 == 729_425 * 2**20 // 16 and gpu.memory_precision == "exact_bytes"
    assert "vllm-project/vllm/issues/14011" in gpu.memory_source and gpu.nvml_total_mib == 46_068
    assert gpu.compute_capability == "8.9" and gpu.nvlink == "none" and gpu.group == "NVIDIA"
