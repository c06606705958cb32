"""vLLM hybrid-model startup logs (engine-calibration Y01-Y12 and the Qwen3-Next log of issue #7, in
each engine's data/calibration.yaml with their public sources) replayed through kvplan's vLLM engine from the
logged available memory: block size, tokens and concurrency, each against the log."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvplan.calibration import engines as calibration
from kvplan.units import GiB

BY_ID = {entry["id"]: entry for entry in calibration.entries()}
ROOT = Path(__file__).parent.parent


@pytest.mark.parametrize("entry_id, block_size, tokens, concurrency", [
    # I7, issue #7 (Qwen3-Next-80B-A3B, 2 x H200, vLLM 0.10.2): block 544, 44.59 GiB -> 973,760 tokens, 14.77x at
    # 262,144. 44.59 GiB (+-0.005) // 6,684,672 B = 7,162 blocks at both ends; // 4 groups x 544 = 973,760.
    ("I7", 544, 973_760, 14.77),
    # Y02, club-3090#594 (Qwen3.6-27B FP8, 2 x RTX 3090, fp8 KV, MTP): 5.33 GiB -> 300,220 tokens, 1.15x at 262,144.
    # The log has no block line; kvplan's is 1,600.
    ("Y02", None, 300_220, 1.15),
    # Y03, club-3090#602 (same profile, int8_per_token_head KV): "Setting attention block size to 1584 tokens",
    # 5.23 GiB -> 289,661 tokens, 1.10x at 262,144.
    ("Y03", 1584, 289_661, 1.10),
    # Y06, talos-argocd-proxmox#1995 (Qwen3.8-27B-FP8, 2 x RTX 3090, fp8_e4m3 KV): block 1,568, 4.99 GiB per GPU
    # -> 302,921 tokens, 2.31x at 131,072 (208 blocks / 90 per request).
    ("Y06", 1568, 302_921, 2.31),
    # Y14, stored id 56681168668 (Qwen3.6-35B-A3B, vLLM 0.22.0, prefix caching, MTP with 3 draft tokens, bf16 KV):
    # "Setting attention block size to 1072 tokens", 71.15 GiB -> 3,131,683 tokens, 15.66x at 200,000.
    ("Y14", 1072, 3_131_683, 15.66),
    # Y15, stored id 61569442000 (Qwen3.6-27B-NVFP4, a vLLM 0.23.1 nightly, prefix caching, MTP 2, fp8 KV):
    # "Setting attention block size to 1600 tokens", 48.6 GiB -> 1,394,129 tokens, 5.32x at 262,144.
    ("Y15", 1600, 1_394_129, 5.32),
])
def test_pool_replay_closes_on_block_size_tokens_and_concurrency(entry_id, block_size, tokens, concurrency):
    replay = calibration.pool_replay(BY_ID[entry_id])
    assert replay.low is not None and replay.high is not None
    if block_size is not None:
        assert replay.low.block_size == replay.high.block_size == block_size
    assert replay.low.tokens <= tokens <= replay.high.tokens
    assert replay.low.concurrency <= concurrency <= replay.high.concurrency
    assert replay.closes


@pytest.mark.parametrize("field, wrong", [("block_size", 1600), ("padding_percent", 0.81), ("tokens", 289_662),
                                          ("concurrency", 1.11)])
def test_each_printed_figure_is_compared(field, wrong):
    # Y03 with one of its printed figures changed (1,600 is Y02's block) no longer closes.
    assert calibration.pool_replay(BY_ID["Y03"]).closes
    assert not calibration.pool_replay({**BY_ID["Y03"], field: wrong}).closes


def test_y03_state_padding_matches_the_log():
    # Y03: "Padding mamba page size by 0.80%". Per rank: conv 6 x 5,120 x 2 B = 61,440 (3 conv rows + 3 draft
    # tokens), recurrent 24 x 128 x 128 x 4 B = 1,572,864; 1,634,304 B against the 1,584 x 1,040 B attention page
    # of 1,647,360 B: +0.80%.
    replay = calibration.pool_replay(BY_ID["Y03"])
    assert replay.low is not None and replay.low.padding_percent == 0.80


def test_y03_block_size_leaves_three_or_four_draft_tokens_and_the_tokens_pick_three():
    # The args are cut off in the speculative config. int8 per-token-head KV is 2 x 2 heads x (256 + 4) = 1,040 B
    # per token per rank; each draft token adds a conv row of 5,120 x 2 B to the 1,603,584 B GDN state:
    # 16 x cdiv(state, 16 x 1,040) = 1,552, 1,552, 1,568, 1,584, 1,584 tokens with 0..4 draft tokens. Only 3 and 4
    # give the logged 1,584, and 4 holds a block more per request (3 x (2 + 4) state blocks): fewer tokens.
    def replay_with(tokens):
        drafts = {"method": "mtp", "num_speculative_tokens": tokens} if tokens else None
        return calibration.pool_replay({**BY_ID["Y03"], "speculative_config": drafts})

    blocks = {n: replay_with(n).low.block_size for n in range(5)}
    assert blocks == {0: 1552, 1: 1552, 2: 1568, 3: 1584, 4: 1584}
    assert replay_with(3).closes and not replay_with(4).closes


def test_y04_without_a_memory_line_needs_423_blocks():
    # Y04, club-3090#91 (vLLM v0.20.1, full args): 619,479 tokens, 2.36x at 262,144, no memory line. A block is
    # 17 slots x 1,600 tokens x 1,024 B = 27,852,800 B, a request 164 + 3 x (2 + 3) = 179 blocks: 423 blocks give
    # 423 x 262,144 // 179 = 619,479 and 423 / 179 = 2.36x; 423 x 27,852,800 B = 10.97 GiB (424: 11.00), beside the
    # 10.87-10.99 GiB other boots of the profile print.
    replay = calibration.pool_replay(BY_ID["Y04"])
    assert replay.implied_blocks == 423 and replay.closes
    assert replay.low is not None and (replay.low.tokens, replay.low.concurrency) == (619_479, 2.36)
    assert replay.implied_gib is not None
    assert round(replay.implied_gib[0] * GiB) == 423 * 27_852_800
    assert 10.87 <= replay.implied_gib[0] <= 10.99 + 0.01


def test_y08_block_alignment_of_nemotron_h():
    # Y08 (vLLM 0.19.0, NemotronH, fp8 KV, --mamba-ssm-cache-dtype float32): "Setting attention block size to 4176
    # tokens", "Padding mamba page size by 0.19%". Attention 2 x 2 KV heads x 128 x 1 B = 512 B per token; Mamba-2
    # conv 3 x (4,096 + 2 x 8 x 128) x 2 B = 36,864 B + SSM 64 x 64 x 128 x 4 B = 2,097,152 B = 2,134,016 B ->
    # 16 x cdiv(2,134,016, 16 x 512) = 4,176 tokens; page 2,138,112 B, +0.19%.
    replay = calibration.pool_replay(BY_ID["Y08"])
    assert replay.low is not None
    assert (replay.low.block_size, replay.low.padding_percent) == (4176, 0.19)
    assert replay.closes


def test_y08_the_flag_sets_the_state_dtype():
    # With --mamba-ssm-cache-dtype bfloat16 instead of the log's float32, the SSM state is 1,048,576 B:
    # 16 x cdiv(36,864 + 1,048,576, 8,192) = 16 x 133 = 2,128 tokens.
    replay = calibration.pool_replay({**BY_ID["Y08"], "mamba_ssm_cache_dtype": "bfloat16"})
    assert replay.low is not None and replay.low.block_size == 2128 and not replay.closes


def test_y08_the_config_sets_it_when_the_flag_is_auto():
    # The same 2,128 tokens from the config's mamba_ssm_dtype, the flag left at auto.
    replay = calibration.pool_replay({**BY_ID["Y08"], "mamba_ssm_cache_dtype": "auto",
                                      "hf_overrides": {"mamba_ssm_dtype": "bfloat16"}})
    assert replay.low is not None and replay.low.block_size == 2128 and not replay.closes


def test_y01_is_excluded_with_kvplans_per_request_size():
    # Y01, club-3090#1084: 16.01 GiB -> 374,847 tokens, 1.83x at 204,800: 8.75 GiB a request. Without the profile's
    # DFlash2 drafter (bf16 KV) a block is 16 x 784 x 2 x 2 heads x 256 x 2 B = 25,690,112 B and a request
    # cdiv(204,800, 784) = 262 + 3 x 2 = 268 blocks = 6.41 GiB (2.49-2.50x); the exclusion quotes both.
    replay = calibration.pool_replay(BY_ID["Y01"])
    assert not replay.closes and replay.excluded
    plan = calibration.vllm_plan(BY_ID["Y01"], int(16.01 * GiB))
    assert plan.capacity.request_bytes == 268 * 25_690_112
    assert "8.75 GiB" in replay.excluded and "6.41 GiB" in replay.excluded


@pytest.mark.parametrize("entry_id, per_request_gib", [
    # club-3090#1086 / #1085 without their DFlash2 drafter. Y05-65k, bf16 KV: blocks of 16 x 784 x 2 x 2 heads x 256 x
    # 2 B = 25,690,112 B, 84 + 3 x 2 = 90 a request = 2.15 GiB. Y05-147k, fp8 KV: 1,568-token blocks of the same
    # bytes, cdiv(147,456, 1,568) = 95 + 6 = 101 a request = 2.42 GiB.
    ("Y05-65k", 2.15), ("Y05-147k", 2.42)])
def test_y05_is_excluded_with_kvplans_per_request_size(entry_id, per_request_gib):
    replay = calibration.pool_replay(BY_ID[entry_id])
    assert not replay.closes and replay.excluded and f"{per_request_gib} GiB" in replay.excluded
    plan = calibration.vllm_plan(BY_ID[entry_id], int(11.15 * GiB))
    assert round(plan.capacity.request_bytes / GiB, 2) == per_request_gib


def test_every_vllm_log_closes_or_says_why_not():
    # issue #7's done criterion: every given-memory replay exact to the block, or excluded with its reason; and every
    # log either predicted from scratch or excluded from it with its reason.
    ids = [e["id"] for e in calibration.entries() if e["engine"] == "vllm"]
    assert ids == ["I7", "Y01", "Y02", "Y03", "Y04", "Y05-65k", "Y05-147k", "Y06", "Y07", "Y08", "Y09", "Y10",
                   "Y11", "Y12", "Y13", "Y14", "Y15", "Y16", "Y17", "Y18", "Y19"]
    for entry_id in ids:
        entry = BY_ID[entry_id]
        assert entry["source"] and entry["kind"] in calibration.VLLM_KINDS
        replay = calibration.pool_replay(entry)
        assert replay.closes or replay.excluded, entry_id
        assert not (replay.closes and replay.excluded), entry_id  # a stale exclusion
    eligible = [e["id"] for e in calibration.entries() if e["engine"] == "vllm" and calibration.exclusion(e) is None]
    assert eligible == ["Y02", "Y03", "Y06"]


def test_packaged_geometry_is_the_tests_fixture():
    # The package cannot read tests/fixtures: it carries its own copy of the Qwen3.5-27B text config.
    packaged = ROOT / "kvplan" / "engines" / "vllm" / "data" / "calibration_models" / "qwen3.5-27b.json"
    fixture = ROOT / "tests" / "fixtures" / "configs" / "hybrid" / "qwen3.5-27b.json"
    assert json.loads(packaged.read_text()) == json.loads(fixture.read_text())


def test_hybrid_tables_match_docs():
    # docs/calibration.md carries the tables this model produces; regenerate with benchmarks/calibration.py.
    docs = (ROOT / "docs" / "calibration.md").read_text()
    replays, residuals = calibration.hybrid_tables()
    assert replays in docs and residuals in docs
