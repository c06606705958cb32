"""Rules that a review broke without any test failing (issue 19's list), each pinned here by a case that fails
when the rule is broken: rank 0 of a log whose ranks name two dimensions, Llama 4's chunked attention with an
EAGLE drafter, Mamba-2's conv rows for draft tokens, MXFP4's fallback for experts that are not gated, and the
bundled specs' published parameter counts against the count derived from each config alone."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from kvplan.deployment import Deployment
from kvplan.engines.vllm import budget as vllm
from kvplan.engines.vllm.mxfp4 import MXFP4_TRITON_HOPPER
from kvplan.explain import read_log
from kvplan.models import sources
from kvplan.models.hf_config import parse_config
from kvplan.models.layers import Mamba2State
from kvplan.models.sources import resolve
from kvplan.units import GiB
from kvplan.weights import _mxfp4_expert_bytes

FIXTURES = Path(__file__).parent / "fixtures" / "explain"


def test_rank_zero_is_the_first_rank_of_every_dimension_it_names() -> None:
    # The PP 2 log (calibration L10) with its ranks named Worker_PP<n>_TP0, rank 0's "Available KV cache memory:
    # 66.54 GiB" moved after the last stage's lines: Worker_PP1_TP0 is TP 0 but not rank 0, so the figure read is
    # still PP 0's, not the 65.63 GiB "in use" figure PP 1 prints first.
    text = (FIXTURES / "llama-3.1-8b-h100-pp2-v0.19.log").read_text(encoding="utf-8")
    text = text.replace("Worker_PP0", "Worker_PP0_TP0").replace("Worker_PP1", "Worker_PP1_TP0")
    lines = text.splitlines()
    available = next(line for line in lines if "Available KV cache memory" in line)
    run = read_log("\n".join([line for line in lines if line != available] + [available]))
    assert [r.rank for r in run.memory["kv_cache_bytes"]][0] == "Worker_PP1_TP0"
    assert run.first("memory", "kv_cache_bytes") == round(66.54 * GiB)


def test_an_eagle_drafter_turns_llama4s_hybrid_manager_off_even_when_allowed() -> None:
    # vLLM config/vllm.py VllmConfig.__post_init__ (v0.10+): the hybrid KV cache manager is off for chunked local
    # attention unless VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=1, and always with an EAGLE drafter.
    scout = resolve("meta-llama/Llama-4-Scout-17B-16E-Instruct")
    eagle = {"method": "eagle", "model": "some/eagle-head", "num_speculative_tokens": 2}
    assert vllm.hybrid_kv_manager(scout, Deployment(chunked_hybrid_kv=True), (0, 33)) is True
    assert vllm.hybrid_kv_manager(scout, Deployment(chunked_hybrid_kv=True, speculative_config=eagle), (0, 33)) is False


def test_mamba2_keeps_a_conv_row_per_draft_token() -> None:
    # vLLM mamba_utils mamba2_state_shape: the conv state holds conv_kernel - 1 + num_spec rows of conv_dim =
    # inner + 2 x groups x state channels. Nemotron-H-like: inner 8,192, 8 groups, state 128, kernel 4, fp32 conv:
    # conv_dim 8,192 + 2 x 8 x 128 = 10,240; 2 draft tokens add 2 x 10,240 x 4 B = 81,920 B a page on one rank,
    # and at TP 2 half of that (the groups divide over the ranks).
    state = Mamba2State(8192, 128, 64, 8, 128, 4, conv_bytes=4)
    drafted = state.as_served(4, None, 2, 0)
    assert drafted.state_page_bytes(1) - state.state_page_bytes(1) == 81_920
    assert drafted.state_page_bytes(2) - state.state_page_bytes(2) == 40_960


def test_mxfp4_experts_that_are_not_gated_keep_the_checkpoints_bytes() -> None:
    # gpt-oss-20b: 24 layers x 32 experts of hidden 2,880 and intermediate 2,880; its 19,116,933,120 expert
    # parameters are 24,891,840 per expert, above the gated 3 x 2,880 x 2,880 = 24,883,200 (biases): the backend's
    # padded gated layout applies. Experts of two matrices (2 x 2,880 x 2,880 each) are not MXFP4 MoE layers:
    # no backend layout, the checkpoint's own bytes.
    spec = resolve("openai/gpt-oss-20b")
    gated = _mxfp4_expert_bytes(spec, MXFP4_TRITON_HOPPER)
    assert gated == 768 * MXFP4_TRITON_HOPPER.expert_bytes(2880, 2880, biased=True)
    not_gated = replace(spec, params=replace(spec.params, experts=768 * 2 * 2880 * 2880))
    assert _mxfp4_expert_bytes(not_gated, MXFP4_TRITON_HOPPER) is None


def test_published_counts_match_the_count_each_config_gives() -> None:
    # read_spec_file replaces a spec's count with its published total, so only the count derived from the config
    # alone can be checked against it: equal for every verified family, within 2.5% for the others (Qwen2.5-VL's
    # vision tower is approximate: 2.2%), and the verified families are most of them.
    exact = 0
    for spec_file in sources.spec_files():
        document = json.loads(spec_file.path.read_text(encoding="utf-8"))
        published = document["_kvplan"].get("params")
        if not published:
            continue
        derived = parse_config(document["config"], spec_file.id, sources.read_spec_file(spec_file).source).params
        assert abs(derived.total - published) <= 0.025 * published, spec_file.id
        if derived.exact:
            assert derived.total == published, spec_file.id
            exact += 1
    assert exact >= 29
