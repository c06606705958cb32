"""Issue 20, devices: MIG slices as GPUs of their own (ID:PROFILE), DGX Spark's GB10, and kvplan gpus grouping
them. Every figure is the catalogue's cited one, derived here by hand."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import run_cli

from kvplan.errors import KvplanError
from kvplan.hardware import find_gpu, mig_slices

GiB = 2**30


@pytest.mark.parametrize(("name", "gib_2dp"), [
    # 'nvidia-smi mig -lgip' on an A100-80GB: 1g.10gb 9.50, 2g.20gb 19.50, 3g.40gb 39.25, 7g.80gb 79.00 GiB
    ("a100-80gb-sxm:1g.10gb", 950), ("a100-80gb-sxm:2g.20gb", 1950), ("a100-80gb-sxm:3g.40gb", 3925),
    ("a100-80gb-sxm:7g.80gb", 7900),
    # and on an H100 80GB: 9.75, 19.62, 39.50, 79.25 GiB
    ("h100-sxm:1g.10gb", 975), ("h100-sxm:2g.20gb", 1962), ("h100-sxm:3g.40gb", 3950), ("h100-sxm:7g.80gb", 7925),
    # on an A30 (Summer-Lo/Docker_configuration 000-MIG/README.md): 1g.6gb 5.81, 2g.12gb 11.69, 4g.24gb 23.50 GiB
    ("a30:1g.6gb", 581), ("a30:1g.6gb+me", 581), ("a30:2g.12gb", 1169), ("a30:4g.24gb", 2350),
    # on an H200: 1g.18gb 16.00 (inside the slice, '16.0 GiB usable'), 2g.35gb 32.50, 7g.141gb 140.00 GiB
    ("h200:1g.18gb", 1600), ("h200:1g.18gb+me", 1600), ("h200:2g.35gb", 3250), ("h200:7g.141gb", 14000),
])
def test_a_mig_slice_has_the_memory_inside_the_slice(name, gib_2dp):
    gpu = find_gpu(name)
    assert gpu.memory_bytes == gib_2dp * GiB // 100  # floored, as the catalogue does for gib_2dp figures
    assert gpu.memory_precision == "gib_2dp" and "nvidia-smi mig -lgip" in gpu.memory_source
    assert "mig-user-guide" in gpu.memory_source and gpu.parent == name.split(":")[0] and gpu.group == "MIG slices"


def test_the_slice_is_found_by_alias_and_keeps_the_parents_compute():
    gpu = find_gpu("A100-80GB:1g.10gb")
    assert gpu.id == "a100-80gb-sxm:1g.10gb" and gpu.memory_bytes == 10_200_547_328  # 9.50 x 2^30
    assert gpu.name == "NVIDIA A100-SXM4-80GB MIG 1g.10gb" and gpu.compute_capability == "8.0" and not gpu.fp8
    assert find_gpu("h100:MIG-1g.10gb").fp8 and find_gpu(gpu.id).id == gpu.id  # a plan's id finds it again


def test_an_unknown_profile_or_a_gpu_without_slices_is_one_line():
    with pytest.raises(KvplanError) as caught:
        find_gpu("a100-80gb-sxm:5g.50gb")
    assert str(caught.value) == ("--gpu: a100-80gb-sxm has no MIG profile '5g.50gb' in the catalogue; it has "
                                 "1g.10gb, 1g.10gb+me, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb")
    with pytest.raises(KvplanError, match="rtx3090 has no MIG slice in the catalogue"):
        find_gpu("rtx3090:1g.10gb")


@pytest.mark.parametrize(("gpu", "total", "budget"), [
    # gpus.json's a100-80gb-sxm:2g.20gb: 'nvidia-smi mig -lgip' on an A100-80GB, 19.50 GiB = 19.50 x 2^30
    # = 20,937,965,568 B; vLLM's default 0.92 of it: 19,262,928,322.56, floored
    ("a100-80gb-sxm:2g.20gb", 20_937_965_568, 19_262_928_322),
    # gpus.json's b200:1g.23gb: 'nvidia-smi mig -lgip' on a B200 180 GB, 20.50 GiB = 22,011,707,392 B; 0.92 of it
    # 20,250,770,800.64, floored
    ("b200:1g.23gb", 22_011_707_392, 20_250_770_800),
])
def test_estimate_on_a_slice_budgets_the_slice(capsys, gpu, total, budget):
    # one test for both catalogues' slices (tests/test_gpus_blackwell.py held the B200 one's copy)
    assert total == {"a100-80gb-sxm:2g.20gb": 1950, "b200:1g.23gb": 2050}[gpu] * GiB // 100
    code, out, err = run_cli(capsys, "estimate", "--model", "Qwen/Qwen2.5-7B", "--gpu", gpu, "--max-model-len",
                             "16K", "--json")
    assert code == 0, err
    memory = json.loads(out)["memory"]
    assert (memory["total_bytes"], memory["budget_bytes"]) == (total, budget)
    assert budget == int(0.92 * total)


def test_an_unknown_slice_profile_on_the_command_line_is_one_line():
    bad = subprocess.run([sys.executable, "-m", "kvplan.cli.app", "estimate", "--model", "Qwen/Qwen2.5-7B",
                          "--gpu", "h100-sxm:9g.90gb"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "no MIG profile '9g.90gb'" in bad.stderr


def test_dgx_spark_is_unified_memory_with_its_logged_total():
    gpu = find_gpu("DGX Spark")
    assert gpu.id == "gb10" and gpu.unified_memory and gpu.group == "unified memory"
    assert gpu.memory_bytes == 11963 * GiB // 100  # 'GPU 0 has a total capacity of 119.63 GiB' on a DGX Spark
    assert "119.63 GiB" in gpu.memory_source and gpu.compute_capability == "12.1"


def test_kvplan_gpus_groups_whole_gpus_unified_memory_and_slices():
    from kvplan.cli.gpus import grouped

    groups = list(dict.fromkeys(g.group for g in grouped()))
    assert groups == ["NVIDIA", "AMD Instinct", "Intel Gaudi", "unified memory", "MIG slices"]
    assert [g.id for g in grouped() if g.parent] == [g.id for g in mig_slices()]
    # 7 sourced profiles each of the A100-80GB, the H100 80GB and the H200, 4 of the A30, 6 of the B200 and 3 of the
    # RTX PRO 6000 Blackwell
    assert len(mig_slices()) == 34


def test_the_a30_is_a_gpu_of_its_own_with_its_logged_total():
    gpu = find_gpu("A30")
    assert gpu.memory_bytes == 2353 * GiB // 100  # 'GPU 0 has a total capacty of 23.53 GiB' (google/RB-Modulation#5)
    assert gpu.compute_capability == "8.0" and not gpu.fp8 and gpu.group == "NVIDIA"
    assert find_gpu("a30:4g.24gb").memory_bytes < gpu.memory_bytes  # the whole GPU as one slice: 23.50 GiB


def test_the_rtx_pro_6000_server_edition_reports_the_workstation_cards_total():
    # torch 'total_memory=97250MB' on the Server Edition: 97,250 MiB = 94.97 GiB, the catalogue's figure
    gpu = find_gpu("RTX PRO 6000 Blackwell Server Edition")
    assert gpu.id == "rtx-pro-6000-blackwell" and gpu.memory_bytes == 9497 * GiB // 100
    assert 97250 * 2**20 // (GiB // 100) == 9497 and "Server Edition" in gpu.memory_source
