"""The GPU catalogue: lookups that are exact or refused, the H20 141 GB entry, and a source for every figure."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from kvplan.errors import KvplanError
from kvplan.hardware import CATALOGUE, catalogue, find_gpu

A100S = ["a100-40gb-pcie", "a100-40gb-sxm", "a100-80gb-pcie", "a100-80gb-sxm"]


def test_a100_is_ambiguous_and_lists_the_four():
    with pytest.raises(KvplanError) as caught:
        find_gpu("a100")
    assert str(caught.value) == f"--gpu: 'a100' matches several GPUs: {', '.join(A100S)}; pick one"


def test_ambiguity_reaches_the_command_line():
    result = subprocess.run([sys.executable, "-m", "kvplan.cli.app", "estimate", "--model", "Qwen/Qwen2.5-7B",
                             "--gpu", "A100"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == f"kvplan: error: --gpu: 'A100' matches several GPUs: {', '.join(A100S)}; pick one\n"


@pytest.mark.parametrize(("name", "gpu_id"), [
    ("h100", "h100-sxm"),  # 'H100' is an alias of the SXM part
    ("a100-80gb", "a100-80gb-sxm"),  # alias 'A100-80GB'
    ("a100-40gb-pcie", "a100-40gb-pcie"),  # an id
    ("NVIDIA A100-SXM4-80GB", "a100-80gb-sxm"),  # the CUDA device name
    ("h20", "h20"),  # an alias, though 'h20' also starts 'h20-141gb' and 'h200'
    ("h200", "h200"),
    ("H20-3e", "h20-141gb"),
    ("v100", "v100-16gb"),  # an alias, kept as it was
    ("RTX 3090", "rtx3090"),
])
def test_ids_and_aliases_resolve(name, gpu_id):
    assert find_gpu(name).id == gpu_id


def test_a_unique_prefix_is_suggested_not_guessed():
    with pytest.raises(KvplanError, match=r"unknown GPU 'mi300'; did you mean mi300x"):
        find_gpu("mi300")


def test_h20_141gb_memory_is_the_cited_figure():
    gpu = find_gpu("h20-141gb")
    # vllm-project/vllm#13074 logs total_gpu_memory 139.72 GiB on the H20-3e: 139.72 x 2^30 = 150,023,207,649.28,
    # floored as the catalogue does for gib_2dp figures
    assert gpu.memory_bytes == 150_023_207_649
    assert gpu.memory_precision == "gib_2dp"
    assert "vllm-project/vllm/issues/13074" in gpu.memory_source and "139.72 GiB" in gpu.memory_source
    assert find_gpu("h20").memory_bytes == 102_010_716_160  # the 96 GB H20 is unchanged: 97285 MiB


def test_every_entry_has_a_memory_source_and_unique_names():
    entries = json.loads(CATALOGUE.read_text(encoding="utf-8"))["gpus"]
    assert len(entries) == len(catalogue()) >= 31
    for entry in entries:
        assert entry["memory_source"].strip(), entry["id"]
        assert entry["memory_precision"] in ("exact_bytes", "mib_floor", "gib_2dp", "derived"), entry["id"]
        assert "spec_source" in entry and "nvml_source" in entry, entry["id"]
    ids = [e["id"] for e in entries]
    assert len(ids) == len(set(ids))
    # no alias points at two entries (an alias matched only by the first entry would be a silent pick)
    from kvplan.hardware import _normalize

    owners: dict[str, str] = {}
    for entry in entries:
        for name in (entry["id"], entry["name"], *entry["aliases"]):
            key = _normalize(name)
            assert owners.setdefault(key, entry["id"]) == entry["id"], (name, owners[key], entry["id"])


def test_estimate_does_not_import_yaml():
    probe = ("import sys; from kvplan.cli.app import main; code = main(['estimate', '--model', 'Qwen/Qwen2.5-7B', "
             "'--gpu', 'rtx3090', '--json']); sys.stderr.write('YAML=' + str('yaml' in sys.modules) + chr(10))")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert "YAML=False" in result.stderr.splitlines(), result.stderr
