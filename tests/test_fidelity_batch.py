"""vLLM's batch defaults by entry point, GPU and version (EngineArgs.get_batch_defaults, vllm/engine/arg_utils.py;
the PRs are cited in kvplan/engines/vllm.py BATCH_TIERS)."""

from __future__ import annotations

import pytest

from kvplan.api import gpu_choices, load_model
from kvplan.deployment import Deployment
from kvplan.engines import plan_deployment
from kvplan.errors import KvplanError


def settings(gpu: str, version: str = "0.29", **knobs):
    dep = Deployment.from_mapping({"gpu": gpu, "engine_version": version, **knobs})
    plan = plan_deployment(load_model("Qwen/Qwen2.5-7B"), dep, gpu_choices(dep)[0])
    return plan.engine.max_num_seqs, plan.engine.max_num_batched_tokens


@pytest.mark.parametrize(("gpu", "version", "entrypoint", "expected"), [
    # >= 70 GiB and not an A100 (H100: 79.18 GiB): serve 8192, LLM class 16384, 1024 sequences.
    ("h100", "0.29", "serve", (1024, 8192)),
    ("h100", "0.29", "llm", (1024, 16384)),
    # A100-SXM4-80GB (79.35 GiB) is left out by name since PR #17885: serve 2048, LLM class 8192, 256.
    ("a100-80gb-sxm", "0.29", "serve", (256, 2048)),
    ("a100-80gb-sxm", "0.29", "llm", (256, 8192)),
    # L40S, 44.52 GiB: the small tier.
    ("l40s", "0.29", "llm", (256, 8192)),
    # v0.8 chose by name (PR #12369: "h100" or "h200"): MI300X (191.98 GiB) was small then, big from v0.9.
    ("mi300x", "0.8", "serve", (256, 2048)),
    ("mi300x", "0.9", "serve", (1024, 8192)),
    ("h200", "0.8", "serve", (1024, 8192)),
    # v0.28 added a >= 160 GiB tier serving 16,384 (PR #51726): B200 (178.35 GiB) 8192 in v0.27, 16384 in v0.28;
    # H200 (139.80 GiB) stays at 8192.
    ("b200", "0.27", "serve", (1024, 8192)),
    ("b200", "0.28", "serve", (1024, 16384)),
    ("h200", "0.28", "serve", (1024, 8192)),
])
def test_batch_defaults(gpu, version, entrypoint, expected):
    assert settings(gpu, version, entrypoint=entrypoint) == expected


def test_given_values_win_over_the_entry_points_defaults():
    assert settings("h100", entrypoint="llm", max_num_batched_tokens=4096, max_num_seqs=64) == (64, 4096)


def test_entrypoint_is_checked():
    with pytest.raises(KvplanError, match="entrypoint"):
        Deployment.from_mapping({"gpu": "h100", "entrypoint": "server"})


def test_the_cli_takes_entrypoint():
    import json
    import subprocess
    import sys

    def run(*args):
        return subprocess.run([sys.executable, "-m", "kvplan.cli.app", "estimate", "--model", "Qwen/Qwen2.5-7B",
                               "--gpu", "h100", *args], capture_output=True, text=True, timeout=120)

    result = run("--entrypoint", "llm", "--json")
    assert result.returncode == 0 and json.loads(result.stdout)["engine"]["max_num_batched_tokens"] == 16384
    bad = run("--entrypoint", "offline")
    assert bad.returncode == 2 and "--entrypoint" in bad.stderr and "serve, llm" in bad.stderr
