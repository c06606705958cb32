"""kvplan against the engines' own released code: every line of tests/oracle/cases.jsonl is what one release's
planning code returned (or, for "read" cases, what its source says) for one deployment; the case's kvplan estimate
arguments go through kvplan's own front door (deployment.front_doors.from_cli) and API (api.estimates), and each
number the engine gave is compared. tests/oracle/README.md says how the file is made.

Where kvplan disagrees with a release the case is a strict xfail naming the issue-18 item it belongs to (KNOWN),
so a fix turns it into a failure until the mark is removed."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from kvplan.deployment.front_doors import from_cli

CASES_FILE = Path(__file__).parent / "oracle" / "cases.jsonl"
# "read" cases: what a release's source implies where its code cannot run on CPU (Model Runner V2 needs Triton;
# hybrid, MLA and Llama 4 layers need compiled kernels), each derived by hand in its "derivation"
READ_CASES_FILE = Path(__file__).parent / "oracle" / "read_cases.jsonl"
CASES = [json.loads(line) for path in (CASES_FILE, READ_CASES_FILE) for line in path.read_text().splitlines()
         if line.strip()]
# kvplan's own options (the rest of a case's arguments are engine flags)
OWN = {"--model": "model", "--gpu": "gpu", "--vllm-version": "engine_version", "--engine-version": "engine_version",
       "--engine": "engine"}


def plan_of(args: list[str], env: dict[str, str] | None = None) -> Any:
    """The plan kvplan estimate prints for these arguments."""
    from kvplan.api import estimates

    own: dict[str, tuple[Any, str]] = {}
    flags: list[str] = []
    words = iter(args)
    for word in words:
        if word in OWN:
            own[OWN[word]] = (next(words), word)
        else:
            flags.append(word)
    dep = from_cli(own, flags, None, None, environ=env or {})
    # The generator hands each release's KV-cache code the layers directly, not through its model registry, so a
    # case may pair a model with a release that does not register it (gpt-oss at vLLM 0.8.5 and 0.9.2), which a
    # plan refuses without --allow-unmodelled (kvplan/engines/registered.py)
    return estimates(replace(dep, allow_unmodelled=True))[0].plan


def vllm_says(plan: Any, case: dict[str, Any]) -> dict[str, Any]:
    """kvplan's answer to every key the release answered."""
    from kvplan.engines.vllm.budget import cuda_graph_sizes, default_largest_capture

    settings, capacity = plan.engine, plan.capacity
    says = case["engine_says"]
    mine: dict[str, Any] = {}
    defaults = says.get("defaults", {})
    ours = {"gpu_memory_utilization": settings.gpu_memory_utilization, "max_num_seqs": settings.max_num_seqs,
            "max_num_batched_tokens": settings.max_num_batched_tokens, "max_model_len": settings.max_model_len}
    if "block_size" not in says:  # a KV case states the block size its groups ended with
        ours["block_size"] = settings.block_size
    # the capture sizes matter to kvplan where it subtracts the CUDA-graph estimate: from v0.20 (18 section 2.1)
    if "cudagraph_capture_sizes" in defaults and version_of(case) >= (0, 20):
        ours["cudagraph_capture_sizes"] = cuda_graph_sizes(settings.max_num_seqs or 1,
                                                           settings.max_num_batched_tokens or 1, 0,
                                                           plan.model.architecture,
                                                           default_largest_capture(plan.gpu, version_of(case)[:2]))[0]
    if case["how"] == "read":  # the oracle's CPU run has no Triton, so its own runner choice is always V1
        ours["use_v2_model_runner"] = settings.model_runner == "V2"
    mine["defaults"] = {key: value for key, value in ours.items() if key in defaults}
    if "cudagraph_estimate_bytes" in says:
        mine["cudagraph_estimate_bytes"] = plan.memory.cuda_graph_bytes
    if says.get("fits") is False:
        mine["fits"] = capacity.fits
        mine["estimated_max_model_len"] = capacity.max_model_len_that_fits
    for key in ("num_blocks", "tokens", "max_concurrency", "block_size"):
        if key in says:
            mine[key] = {"num_blocks": capacity.num_blocks, "tokens": capacity.tokens,
                         "max_concurrency": capacity.max_concurrency, "block_size": settings.block_size}[key]
    return mine


def sglang_says(plan: Any, case: dict[str, Any]) -> dict[str, Any]:
    from kvplan.engines.sglang.budget import gpu_defaults, gpu_mib

    defaults = case["engine_says"]["defaults"]
    _, graph_bs = gpu_defaults(gpu_mib(plan.gpu), plan.tensor_parallel, version_of(case))
    ours = {"mem_fraction_static": plan.engine.gpu_memory_utilization,
            # chunked prefill off is -1 to SGLang, no chunk (None) to kvplan
            "chunked_prefill_size": plan.engine.max_num_batched_tokens or -1, "cuda_graph_max_bs": graph_bs}
    return {"defaults": {key: value for key, value in ours.items() if key in defaults}}


def compared(case: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(what the release said, what kvplan says), over the keys both answer."""
    plan = plan_of(case["args"], case.get("env"))
    mine = (sglang_says if case["engine"] == "sglang" else vllm_says)(plan, case)
    theirs = {key: value for key, value in case["engine_says"].items() if key in mine}
    theirs["defaults"] = {key: value for key, value in case["engine_says"].get("defaults", {}).items()
                          if key in mine.get("defaults", {})}
    return theirs, mine


def version_of(case: dict[str, Any]) -> tuple[int, ...]:
    return tuple(int(part) for part in case["version"].split(".")[:3])


def known(case: dict[str, Any]) -> str | None:
    """The issue-18 items a disagreement belongs to, each read in the release's own source (None: kvplan agrees).
    Every boundary the oracle showed is fixed (tests/test_vllm_releases_issue18.py,
    tests/test_sglang_releases_issue18.py)."""
    return None


def case_id(case: dict[str, Any]) -> str:
    args = case["args"]
    words = [args[args.index(flag) + 1] for flag in ("--model", "--gpu") if flag in args]
    rest = [word for word in args if word.startswith("--") and word not in OWN][:4]
    return f"{case['engine']}-{case['version']}-{'-'.join(words)}-{'-'.join(rest)}"


def params() -> list[Any]:
    found = []
    for case in CASES:
        reason = known(case)
        marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
        found.append(pytest.param(case, id=case_id(case), marks=marks))
    return found


def test_cases_cover_the_issue_18_target() -> None:
    """At least 300 cases, 200 of them run, over 10+ vLLM releases from 0.8 to 0.33 and 2+ SGLang releases."""
    ran = [case for case in CASES if case["how"] == "ran"]
    vllm = {case["version"] for case in CASES if case["engine"] == "vllm"}
    sglang = {case["version"] for case in CASES if case["engine"] == "sglang"}
    assert len(CASES) >= 300 and len(ran) >= 200
    assert len(vllm) >= 10 and {"0.8.5", "0.33.0"} <= vllm and len(sglang) >= 2
    assert all(case["source"].startswith(case["engine"] + ".") for case in CASES)
    assert all(case.get("derivation") for case in CASES if case["how"] == "read")


@pytest.mark.parametrize("case", params())
def test_kvplan_agrees_with_the_release(case: dict[str, Any]) -> None:
    theirs, mine = compared(case)
    assert mine == theirs
