"""A catalogue total marked "derived" (no runtime printed it) is said so in the plan, never passed off as observed."""

import json
from pathlib import Path

from kvplan.api import estimate

CATALOGUE = json.loads((Path(__file__).parents[1] / "kvplan" / "data" / "gpus.json").read_text(encoding="utf-8"))


def _precision(gpu_id: str, profile: str | None = None) -> str:
    entry = next(g for g in CATALOGUE["gpus"] if g["id"] == gpu_id)
    if profile is None:
        return entry["memory_precision"]
    return next(m for m in entry["mig"] if m["profile"] == profile)["memory_precision"]


def test_a_derived_slice_total_is_noted():
    assert _precision("h200", "1g.35gb") == "derived"  # copied from 2g.35gb's listing, as gpus.json says
    notes = estimate("Qwen/Qwen2.5-7B", gpu="h200:1g.35gb", max_model_len=8192).notes
    # 2g.35gb's -lgip listing prints 32.50 GiB; the 1g.35gb entry takes that figure
    assert "NVIDIA H200 MIG 1g.35gb: its 32.50 GiB total is derived from another figure, not observed " \
           "(kvplan gpus --json gives how)" in notes


def test_a_derived_whole_gpu_total_is_noted_and_in_json():
    assert _precision("mi250x") == "derived"
    plan = estimate("Qwen/Qwen2.5-7B", gpu="mi250x", max_model_len=8192)
    assert any(note.startswith("AMD Instinct MI250X: its 63.98 GiB total is derived") for note in plan.notes)
    assert plan.to_dict()["gpu"]["memory_note"].startswith("AMD Instinct MI250X: its 63.98 GiB")


def test_an_observed_total_carries_no_such_note():
    assert _precision("h200", "2g.35gb") == "gib_2dp"  # the listing's own figure
    plan = estimate("Qwen/Qwen2.5-7B", gpu="h200:2g.35gb", max_model_len=8192)
    assert not any("derived from another figure" in note for note in plan.notes)
    assert plan.gpu.memory_note is None


def test_size_notes_a_derived_slice_it_shows_once():
    from kvplan.sizing import size

    sizing = size("Qwen/Qwen2.5-7B", "4@8K", gpus="h200:1g.35gb,h200:2g.35gb")
    derived = [note for note in sizing.notes if "derived from another figure" in note]
    assert derived == ["NVIDIA H200 MIG 1g.35gb: its 32.50 GiB total is derived from another figure, not observed "
                       "(kvplan gpus --json gives how)"]
