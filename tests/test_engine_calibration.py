"""SGLang and TensorRT-LLM startup logs (each engine's data/calibration.yaml, each entry with its public source)
replayed through kvplan's engine rules (kvplan/engines/sglang.py, trtllm.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvplan.calibration import engines as calibration
from kvplan.engines.sglang import budget as sglang
from kvplan.engines.trtllm import budget as trtllm
from kvplan.units import GiB

BY_ID = {entry["id"]: entry for entry in calibration.entries()}
CLOSING = ["S11", "T03", "T06", "T08-1.5B", "T08-0.5B"]


@pytest.mark.parametrize("entry_id", CLOSING)
def test_replay_matches_the_logged_tokens_within_the_print_rounding(entry_id):
    # The logged memory is printed with 2 decimals (GiB); kvplan's token count at the two ends of that rounding
    # must bracket the logged one.
    replay = calibration.replay(BY_ID[entry_id])
    assert replay.low <= replay.logged <= replay.high, replay


def test_trtllm_rounds_the_max_tokens_up_to_whole_blocks_t06():
    # T06 (TensorRT-LLM memory.md): 0.9f x 70.48 GiB (+-0.005) / 262,144 B per token = 259,817..259,820 tokens;
    # ceilDiv by 64 = 4,060 blocks = 259,840 tokens, as logged, at both ends (a floor would give 4,059).
    replay = calibration.replay(BY_ID["T06"])
    assert replay.low == replay.high == 259_840 == 4_060 * 64


def test_trtllm_pytorch_backend_t03():
    entry = BY_ID["T03"]
    # kvplan's gpt-oss-120b cell in one flat pool: 36 layers x 8 KV heads x 64 x (K, V) x 2 B = 73,728, the log's
    # "kv size is 73728".
    assert calibration.cell_bytes(entry) == entry["kv_bytes_per_token"] == 36 * 8 * 64 * 2 * 2
    # (119.70 - 113.65) GiB + the 8,224-token estimation pool (606,339,072 B), x 0.8999999761581421
    # = 5.953 GiB -> 86,700 tokens, +-131 for the two printed figures: the logged 86,711 is inside.
    available = trtllm.pytorch_available_bytes(119.70 * GiB, 113.65 * GiB, 8224 * 73_728, entry["fraction"])
    assert trtllm.max_tokens(available, 73_728) == 86_700
    # the C++ pool: ceilDiv(86,711, 32) = 2,710 blocks = 86,720 tokens ("Adjusted max_seq_len to 86720")
    assert trtllm.pool_blocks(entry["max_tokens"], 32) * 32 == entry["tokens"] == 86_720


def test_trtllm_fraction_is_a_cpp_float():
    # T03 prints "fraction is set 0.8999999761581421": KvCacheConfig holds 0.9 as a float.
    assert trtllm.as_float32(0.9) == BY_ID["T03"]["fraction"] == 0.8999999761581421


def test_trtllm_cells_of_the_l4_lab_t08():
    # Qwen2.5-1.5B: 28 layers x 2 KV heads x 128 x (K, V) x 2 B (fp16) = 28,672 B; 0.5B: 24 x 2 x 64 x 2 x 2 = 12,288.
    # 4,278 and 2,979 blocks of 64 tokens; 273,792 x 28,672 B = 7.311 GiB and 190,656 x 12,288 B = 2.182 GiB, the
    # logged "Allocated 7.31 GiB" and "2.18 GiB".
    assert calibration.cell_bytes(BY_ID["T08-1.5B"]) == 28 * 2 * 128 * 2 * 2 == 28_672
    assert calibration.cell_bytes(BY_ID["T08-0.5B"]) == 24 * 2 * 64 * 2 * 2 == 12_288
    assert round(273_792 * 28_672 / GiB, 2) == BY_ID["T08-1.5B"]["kv_allocated_gib"]
    assert round(190_656 * 12_288 / GiB, 2) == BY_ID["T08-0.5B"]["kv_allocated_gib"]


def test_t05_log_does_not_match_its_model():
    # Llama-2-7B with an FP8 KV cache: 32 layers x 32 KV heads x 128 x (K, V) x 1 B = 262,144 B per token; the doc's
    # allocation line implies 229,376 (7/8 of it), so kvplan's count is far from the log ...
    entry = BY_ID["T05"]
    assert calibration.cell_bytes(entry) == 262_144
    assert not calibration.replay(entry).closes
    # ... while the engine rule with the log's own per-token size gives its 4,607 blocks: 0.99f x 63.62 GiB
    # (+-0.005) // 229,376 = 294,812..294,859 tokens; ceilDiv by 64 = 4,607 up to 294,848 tokens.
    low = trtllm.max_tokens(trtllm.engine_available_bytes(63.615 * GiB, trtllm.as_float32(0.99)), 229_376)
    assert trtllm.pool_blocks(low, 64) == entry["blocks"] == 4_607


def test_sglang_swa_pool_is_the_ratio_of_the_full_pool_in_pages_s11():
    # S11: int(375,360 x 0.8) = 300,288 = 4,692 pages of 64 ("swa_layer_tokens=300288"). swa_tokens is the rule the
    # plan's pools use (Sglang.pools via swa_split); tests/test_sglang_pools.py reproduces the logged pair through
    # a plan.
    assert sglang.swa_tokens(375_360, 0.8, 64) == 300_288
    # page alignment: int(375,390 x 0.8) = 300,312 -> 300,288 in whole 64-token pages
    assert sglang.swa_tokens(375_390, 0.8, 64) == 300_288


def test_sglang_cell_matches_the_logged_kv_sizes():
    # S02: 2,658,165 tokens x 6,144 B (24 layers x 2 KV heads x 64 x 2 B, K alone) = 15.21 GiB, the logged K size;
    # kvplan's cell (K and V) is twice that.
    assert calibration.cell_bytes(BY_ID["S02"]) == 2 * 6_144
    assert round(2_658_165 * 6_144 / GiB, 2) == BY_ID["S02"]["k_size_gib"] == 15.21
    # S03: 2,454,421 x 70,272 B = 160.63 GiB, the logged KV size (MLA: one latent per token on every rank)
    assert round(2_454_421 * 70_272 / GiB, 2) == BY_ID["S03"]["kv_size_gib"]


@pytest.mark.parametrize("entry_id, low_mib, high_mib", [
    # S02: (35.57 - 36.54 x 0.14) GiB = 30.454 GiB (+-0.0057) -> 2,660,648..2,661,644 cells of 12,288 B, above the
    # logged 2,658,165 by 29..41 MiB.
    ("S02", 29, 41),
    # S03: (209.98 - 283.56 x 0.17396) GiB = 160.652 GiB (+-0.0059) -> 2,454,641..2,454,820 cells of 70,272 B, above
    # the logged 2,454,421 by 15..27 MiB.
    ("S03", 15, 27),
    # S05: see test_sglang_hybrid_budget_s05.
    ("S05", 54, 64),
])
def test_sglang_budget_replays_are_upper_bounds_and_excluded_with_their_reason(entry_id, low_mib, high_mib):
    # SGLang budgets the free memory it measures at the end of torch-distributed init and again in its profiling
    # step, after the RoPE cache pre-expansion (and, at TP > 1, the minimum over the ranks); the logs print the
    # "Load weight" lines instead. Allocations between those points only shrink the pool, so the logged pool is
    # below the rule applied to the printed lines, by a few tens of MiB; the entry says so and is excluded.
    replay = calibration.replay(BY_ID[entry_id])
    assert not replay.closes and replay.bounded
    assert replay.excluded and "profiling step" in replay.excluded
    low, high = replay.gap_mib
    assert (round(low), round(high)) == (low_mib, high_mib)


def test_every_replay_closes_or_is_excluded_with_a_reason():
    # the done criterion: every given-memory replay exact to the block, or excluded in the data with its reason
    for entry in calibration.entries():
        if entry["kind"] in calibration.TOKEN_KINDS:
            replay = calibration.replay(entry)
            assert replay.closes or replay.excluded, entry["id"]


def test_replay_table_names_each_exclusion():
    replays, _ = calibration.tables()
    assert "| S02 | sglang | 2,658,165 | 2,660,648 | 2,661,644 | excluded (below) | 29 to 41 |" in replays
    assert "- T05 excluded from the exact replay: the log's allocation implies 229,376 B per token" in replays


@pytest.mark.parametrize("entry_id", ["S04", "S05"])
def test_sglang_mamba_pool_is_the_slots_plus_a_padding_slot(entry_id):
    # S04: --max-mamba-cache-size 360 -> 361 x 2,949,120 B = 0.99 GiB conv and 361 x 150,994,944 B = 50.77 GiB SSM;
    # S05: 124 slots chosen -> 125 x ... = 0.34 and 17.58 GiB, as logged (per-request sizes of the Qwen3.5-27B
    # geometry, which tests/test_sglang_rules.py derives from the config).
    entry = BY_ID[entry_id]
    conv, ssm = calibration.state_pool_gib(entry)
    assert (round(conv, 2), round(ssm, 2)) == (entry["conv_state_gib"], entry["ssm_state_gib"])


def test_sglang_hybrid_budget_s05():
    # S05: free before load 50.01 + 28.47 = 78.48 GiB; rest 50.01 - 78.48 x 0.15 = 38.238 GiB (+-0.005 over the
    # print rounding), less the 100 MiB multimodal embedding cache = 38.140 GiB (38.135..38.145). The Mamba rule
    # (budget x 0.9 / 1.9, less one slot) gives 124 slots below a rest of 38.137 GiB, 125 above it: the logged 124
    # is reached only at the low end, and only with the reservation (38.233 GiB at the least without it: 125).
    entry = BY_ID["S05"]
    assert calibration.mamba_slots(entry) == {124, 125}
    assert calibration.mamba_slots({**entry, "multimodal_reservation": False}) == {125}
    # With the logged 124 slots (125 x 153,944,064 B = 17.921 GiB with the padding slot) the KV gets
    # 20.214..20.224 GiB = 331,184..331,348 cells of 65,536 B: 54..64 MiB more than the logged 330,323.
    replay = calibration.replay(entry)
    assert (replay.low, replay.high) == (331_184, 331_348)
    assert tuple(round(x) for x in replay.gap_mib) == (54, 64)


def test_every_data_entry_has_a_source_and_a_known_kind():
    kinds = {"sglang_budget", "sglang_swa_split", "sglang_mamba_pool", "trtllm_pytorch", "trtllm_engine",
             *calibration.VLLM_KINDS}
    for entry in calibration.entries():
        assert entry["source"] and entry["kind"] in kinds, entry["id"]


def test_tables_match_docs():
    # docs/calibration.md carries the tables this model produces; regenerate with benchmarks/calibration.py.
    docs = (Path(__file__).parent.parent / "docs" / "calibration.md").read_text()
    replays, residuals = calibration.tables()
    assert replays in docs and residuals in docs
