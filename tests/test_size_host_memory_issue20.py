"""Issue 20 part 6: size takes the host memory a CPU KV tier needs as a constraint (--host-memory, per node).
The tiers' host memory by hand: vLLM 0.33.0's native tier pins whole chunks (v1/kv_offload/cpu/spec.py; Qwen2.5-7B,
64 GiB: 74,898 x 917,504 B, tests/test_kv_offload_issue20.py); LMCache 0.5.6 pins max_local_cpu_size x 2^30 in
every worker (v1/storage_backend/local_cpu_backend.py; tests/test_lmcache_issue20.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kvplan.sizing import size

NATIVE = 74_898 * 917_504  # 68,719,214,592 B
LMCACHE = {"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}


def test_a_native_tier_over_the_host_memory_meets_nothing_and_says_why():
    short = size("Qwen/Qwen2.5-7B", "16@32K", gpus="h100", max_gpus=1, kv_offloading_size=64, host_memory="32GiB")
    assert not short.found
    assert all(option.host_bytes == NATIVE for option in short.closest)
    assert any("host memory: the CPU KV tier pins 64.0 GiB a node, over --host-memory 32.0 GiB" in limit
               for option in short.closest for limit in option.limits)
    enough = size("Qwen/Qwen2.5-7B", "16@32K", gpus="h100", max_gpus=1, kv_offloading_size=64, host_memory="64GiB")
    assert enough.found and enough.options[0].host_bytes == NATIVE <= 64 * 2**30
    assert enough.to_dict()["options"][0]["host_memory_bytes"] == NATIVE


def test_lmcache_workers_each_pin_their_size_on_the_node():
    # TP 2 on one node: 2 workers x 5 GiB (LMCache's default max_local_cpu_size) = 10 GiB
    knobs = {"kv_transfer_config": LMCACHE, "tensor_parallel_size": 2}
    assert not size("Qwen/Qwen2.5-7B", "16@32K", gpus="h100", max_gpus=2, host_memory="9GiB", **knobs).found
    fits = size("Qwen/Qwen2.5-7B", "16@32K", gpus="h100", max_gpus=2, host_memory="10GiB", **knobs)
    assert fits.found and fits.options[0].host_bytes == 2 * 5 * 2**30


def test_host_memory_without_a_tier_is_noted():
    found = size("Qwen/Qwen2.5-7B", "16@32K", gpus="h100", max_gpus=1, host_memory="1GiB")
    assert found.found and any("keeps no CPU KV tier" in note for note in found.notes)


def test_a_bad_host_memory_is_one_line():
    result = subprocess.run([sys.executable, "-m", "kvplan.cli.app", "size", "-m", "Qwen/Qwen2.5-7B", "--target",
                             "16@32K", "--gpus", "h100", "--host-memory", "lots"], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and "--host-memory" in result.stderr


def test_the_http_api_takes_host_memory_as_the_cli_does():
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from kvplan.serve.app import create_app

    client = TestClient(create_app())
    body = {"model": "Qwen/Qwen2.5-7B", "target": ["16@32K"], "gpus": "h100", "max_gpus": 1, "host_memory": "32GiB",
            "flags": {"kv_offloading_size": 64}}
    answer = client.post("/api/size", json=body)
    assert answer.status_code == 200, answer.text
    assert not answer.json()["options"] and "64.0 GiB a node" in answer.json()["closest"][0]["limits"][-1]
    bad = client.post("/api/size", json={**body, "host_memory": "lots"})
    assert bad.status_code == 400 and bad.json()["field"] == "host_memory", bad.text
