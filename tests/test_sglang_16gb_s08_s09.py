"""SGLang on a 16 GB card (issue 18 section 6, bullet 4): the two public bench_one_batch logs S08 (granite-4.0-h-micro,
a Mamba-2 hybrid) and S09 (LFM2-700M, short convolutions + attention), kvplan/engines/sglang/data/calibration.yaml.

Sources: sglang 0.5.6.post2 bench_one_batch.py (ServerArgs.from_cli_args, then main() sets cuda_graph_max_bs from
--batch), server_args.py _handle_gpu_memory_settings, model_executor/model_runner.py profile_max_num_token and
handle_max_mamba_cache; 0.5.9 model_executor/model_runner_kv_cache_mixin.py (the same rules); 0.5.16 and 0.5.17
mem_cache/kv_cache_configurator.py _handle_max_mamba_cache (the padding slot budgeted from 0.5.17)."""

from __future__ import annotations

from kvplan.calibration import engines as calibration
from kvplan.engines.sglang import budget as sglang
from kvplan.engines.sglang.defaults import default_mem_fraction, gpu_defaults
from kvplan.units import GiB

BY_ID = {entry["id"]: entry for entry in calibration.entries()}
V0_5_9 = (0, 5, 9)


def test_the_default_fraction_of_a_16_gb_card():
    # Below 20 GiB: chunked prefill 2048, decode graph batch 8. bench_one_batch's ServerArgs.from_cli_args has run
    # __post_init__ (the fraction) before main() sets cuda_graph_max_bs = max(--batch), so the launch_server default
    # holds: reserve 512 + 2048 x 1.5 + 8 x 2 + 1 x 1 / 8 x 1024 = 3,728 MiB.
    assert gpu_defaults(16_303, 1, V0_5_9) == (2048, 8)
    # (16,303 - 3,728) / 16,303 = 0.7713 -> 0.771 (an nvidia-smi total of 16,303 MiB); (16,376 - 3,728) / 16,376 =
    # 0.7724 -> 0.772; the V100 16GB's 16,130 MiB: 0.7689 -> 0.769
    assert default_mem_fraction(16_303, 1, 1, 2048, 8, release=V0_5_9) == 0.771
    assert default_mem_fraction(16_376, 1, 1, 2048, 8, release=V0_5_9) == 0.772
    assert default_mem_fraction(16_130, 1, 1, 2048, 8, release=V0_5_9) == 0.769
    # 0.771 from 16,245 MiB: (16,245 - 3,728) / 16,245 = 0.77052; (16,244 - 3,728) / 16,244 = 0.77050 (0.770)
    assert default_mem_fraction(16_245, 1, 1, 2048, 8, release=V0_5_9) == 0.771
    assert default_mem_fraction(16_244, 1, 1, 2048, 8, release=V0_5_9) == 0.770


def test_the_padding_slot_is_budgeted_from_0_5_17():
    # A budget of 9 GiB (19 GiB x 0.9 / 1.9) and 1 GiB a request: up to 0.5.16 int(9 // 1) = 9 slots and 9 GiB
    # out of the rest (the padding slot allocated from the held-back memory); from 0.5.17 int((9 - 1) // 1) = 8 slots
    # and 8 + 1 = 9 GiB.
    assert sglang.mamba_pool(19 * GiB, GiB, padding_budgeted=False) == (9, 9 * GiB)
    assert sglang.mamba_pool(19 * GiB, GiB) == (8, 9 * GiB)
    assert sglang.mamba_pool(19 * GiB, GiB, given=360, padding_budgeted=False) == (360, 360 * GiB)


def test_s08_slots_follow_the_rule_before_0_5_17():
    # S08 at 0.771: rest = 9.26 - 15.24 x 0.229 = 5.770 GiB (6,188,935,130..6,202,131,417 B at the print rounding);
    # x 0.9 / 1.9 over 76,437,504 B a request (940,032 conv + 75,497,472 SSM) = 38.35..38.44 -> 38 slots, as logged;
    # 0.5.17's int((budget - state) // state) would give 37.
    entry = BY_ID["S08"]
    assert calibration.mamba_slots(entry) == {38} == {entry["max_mamba_cache_size"]}
    assert calibration.mamba_slots({**entry, "release": "0.5.17"}) == {37}
    # the printed pools hold the slots plus the padding slot: 39 x 940,032 B = 0.03 GiB, 39 x 75,497,472 = 2.74 GiB
    conv, ssm = calibration.state_pool_gib(entry)
    assert (round(conv, 2), round(ssm, 2)) == (0.03, 2.74)
    # and the logged K size: 399,740 x 4 layers x 8 KV heads x 64 x 2 B = 1.52 GiB
    assert round(399_740 * 4 * 8 * 64 * 2 / GiB, 2) == entry["k_size_gib"]


def test_s08_replay_is_an_upper_bound_by_9_to_22_mib():
    # The rest less 38 states (2,904,625,152 B): 3,284,309,978..3,297,506,265 B // 8,192 = 400,916..402,527 tokens;
    # the log's 399,740 is 1,176..2,787 cells (9..22 MiB) below: what SGLang allocates between the printed Load weight
    # line and its profiling step, as for S02, S03 and S05 (test_engine_calibration.py).
    replay = calibration.replay(BY_ID["S08"])
    assert (replay.low, replay.high) == (400_916, 402_527)
    assert not replay.closes and replay.bounded
    assert tuple(round(x) for x in replay.gap_mib) == (9, 22)
    assert replay.excluded and "profiling step" in replay.excluded
    # with 0.5.17's padding slot out of the rest as well, 37 slots: one state (9,331 cells at both ends) less for the KV
    newer = calibration.replay({**BY_ID["S08"], "release": "0.5.17"})
    assert (newer.low, newer.high) == (400_916 - 9_331, 402_527 - 9_331)


def test_s09_replay_closes_at_0_771():
    # S09: rest = 13.81 - 15.33 x 0.229 = 10.300 GiB (11,052,330,610..11,065,526,897 B); less the logged 85,292
    # states of 61,440 B (10 x 2 x 1,536 x 2, 0.5.6.post2 leaves the padding slot out) = 5,240,340,480 B, // 12,288
    # = 472,980..474,054 tokens: the logged 473,854 is inside.
    entry = BY_ID["S09"]
    replay = calibration.replay(entry)
    assert (replay.low, replay.high) == (472_980, 474_054)
    assert replay.closes
    # the ratio rule's slots at the corners: 85,210..85,311, the logged 85,292 among them
    slots = calibration.mamba_slots(entry)
    assert min(slots) <= entry["max_mamba_cache_size"] <= max(slots) == 85_311
    # printed: 85,293 x 61,440 B = 4.88 GiB conv, no SSM state; 473,854 x 6 x 8 x 64 x 2 B = 2.71 GiB K
    conv, ssm = calibration.state_pool_gib(entry)
    assert (round(conv, 2), ssm) == (4.88, 0.0)
    assert round(473_854 * 6 * 8 * 64 * 2 / GiB, 2) == entry["k_size_gib"]


def test_s09_rules_out_a_fraction_below_0_771():
    # At 0.770 (a card below 16,245 MiB, the V100 16GB's 0.769 further still) the rule gives 85,083..85,185 slots and
    # 472,685..473,250 tokens, both below the logged 85,292 and 473,854: the engine cannot have found more memory than
    # its rule allows, so the card's nvidia-smi total is at least 16,245 MiB, no catalogue GPU.
    entry = {**BY_ID["S09"], "mem_fraction_static": 0.770}
    assert max(calibration.mamba_slots(entry)) == 85_185 < 85_292
    ratio_tokens = []
    for before in (15.325, 15.335):
        for after in (13.805, 13.815):
            rest = sglang.rest_bytes(before * GiB, after * GiB, 0.770)
            taken = sglang.mamba_pool(rest, 61_440, padding_budgeted=False)[1]
            ratio_tokens.append((rest - taken) // 12_288)
    assert (min(ratio_tokens), max(ratio_tokens)) == (472_685, 473_250)
    assert max(ratio_tokens) < 473_854


def test_s08_s09_are_excluded_from_scratch_with_the_reason():
    for entry_id in ("S08", "S09"):
        reason = calibration.exclusion(BY_ID[entry_id])
        assert reason and reason.startswith("GPU not printed")
