"""Calibration against real vLLM startup logs (kvplan/data/vllm_calibration.yaml, each entry with its source)."""

from __future__ import annotations

import pytest

from kvplan import calibration
from kvplan.units import GiB

ENTRIES = calibration.entries()
WITH_TOKENS = [e for e in ENTRIES if "tokens" in e or "blocks" in e]


@pytest.mark.parametrize("entry", WITH_TOKENS, ids=[e["id"] for e in WITH_TOKENS])
def test_tokens_match_to_the_block_given_logged_memory(entry):
    # vLLM prints available memory with 2 decimals; the logged block / token count must fall between what
    # kvplan computes at the two ends of that rounding band.
    low, high = calibration.block_band(entry)
    if "blocks" in entry:
        assert low.capacity.num_blocks <= entry["blocks"] <= high.capacity.num_blocks
    if "tokens" in entry:
        assert low.capacity.tokens <= entry["tokens"] <= high.capacity.tokens
    assert high.capacity.num_blocks - low.capacity.num_blocks <= 0.01 * GiB // low.layout.block_bytes + 1


@pytest.mark.parametrize("entry", [e for e in ENTRIES if "concurrency" in e],
                         ids=[e["id"] for e in ENTRIES if "concurrency" in e])
def test_concurrency_matches_log(entry):
    low, high = calibration.block_band(entry)
    assert low.capacity.max_concurrency - 0.01 <= entry["concurrency"] <= high.capacity.max_concurrency + 0.01


def test_exact_figures_from_logs():
    by_id = {e["id"]: e for e in ENTRIES}
    # C16 gemma-2-9b: 54.12 GiB // (21 slots x 131,072 B) = 21,111 blocks; // 2 groups x 16 = 168,880 tokens;
    # 21,111 / (512 full + 513 sliding blocks) = 20.60x
    plan = calibration.plan_for(by_id["C16"], int(54.12 * GiB))
    assert (plan.capacity.num_blocks, plan.capacity.tokens, plan.capacity.max_concurrency) == (21_111, 168_880, 20.6)
    # C17 gemma-3-27b: 7 groups, 8 padding layers (log: "Add 8 padding layers"), 36,560 tokens, 4.46x
    plan = calibration.plan_for(by_id["C17"], int(19.53 * GiB))
    assert plan.layout.padding_layers == by_id["C17"]["padding_layers"]
    assert plan.capacity.tokens == 36_560 and plan.capacity.max_concurrency == 4.46


def test_v0_refuses_29k_context():
    # C03: 1,478 blocks x 16 = 23,648 tokens < 29,000 -> vLLM V0 refused to start. Pool of exactly 1,478 blocks
    # of 2 MiB (2 x 32 x 8 x 128 x 16 x 2 B).
    entry = next(e for e in ENTRIES if e["id"] == "C03")
    plan = calibration.plan_for(entry, 1478 * 2 * 2**20)
    assert not plan.capacity.fits and plan.error is not None
    assert plan.capacity.max_model_len_that_fits == 23_648


def test_from_scratch_within_3_percent_on_90_percent():
    rows = [calibration.from_scratch(e) for e in ENTRIES]
    within = [r for r in rows if abs(r.error_percent) <= 3]
    assert len(within) >= 0.9 * len(rows), calibration.residual_table(rows)


def test_from_scratch_residual_table_matches_docs():
    # docs/calibration.md carries the table this model produces; regenerate with benchmarks/calibration.py.
    from pathlib import Path

    docs = (Path(__file__).parent.parent / "docs" / "calibration.md").read_text()
    table = calibration.residual_table([calibration.from_scratch(e) for e in ENTRIES])
    assert table in docs
