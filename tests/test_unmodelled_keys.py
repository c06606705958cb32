"""Never a silent guess (issue 22, part 3): every bundled spec and reference config is walked, and each key of
kvplan.models.unmodelled.GUARDED it holds is either read by the parser (modelled) or named: a one-line refusal
(exit 2), or with --allow-unmodelled a note. The families that are refused today are listed with their keys, so
that a key the parser stops reading, or starts reading, shows up here."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kvplan.errors import KvplanError
from kvplan.models import sources
from kvplan.models.hf_config import parse_config
from kvplan.models.model import SpecSource
from kvplan.models.unmodelled import GUARDED, present

ROOT = Path(__file__).parent.parent
CONFIGS = sorted(path for path in (ROOT / "tests" / "fixtures" / "configs").rglob("*.json")
                 if path.name != "hf_quant_config.json")
BUNDLED = sorted((ROOT / "model_specs").glob("*.json"))
NOT_LANGUAGE = ("vision_config", "audio_config", "quantization_config", "vision_tower", "rope_scaling",
                "rope_parameters")

# Published configs whose keys kvplan does not model yet, with the keys named (first one in the refusal).
REFUSED: dict[str, list[str]] = {
    "nvidia__Llama-3_3-Nemotron-Super-49B-v1": ["block_configs"],
}


def name_of(path: Path) -> str:
    return path.parent.name if path.name == "config.json" else path.stem


def guarded_in(data: dict[str, Any], path: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    """Every guarded key with a value, at any depth of the config's language sections."""
    found = set()
    for key, value in data.items():
        if key in GUARDED and present(value):
            found.add((*path, key))
        elif isinstance(value, dict) and key not in NOT_LANGUAGE:
            found |= guarded_in(value, (*path, key))
    return found


def config_of(path: Path) -> dict[str, Any]:
    document = json.loads(path.read_text())
    return document["config"] if "_kvplan" in document else document


@pytest.mark.parametrize("path", CONFIGS + BUNDLED, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_no_guarded_key_is_left_unread(path):
    data = config_of(path)
    accessed: set[tuple[str, ...]] = set()
    spec = parse_config(data, "m", SpecSource("local", str(path)), accessed=accessed, allow_unmodelled=True)
    unread = sorted(".".join(key) for key in guarded_in(data) - accessed)
    expected = REFUSED.get(name_of(path), [])
    assert unread == sorted(expected)
    notes = [note for note in spec.notes if note.startswith("not modelled")]
    for key in unread:  # planned with --allow-unmodelled: each unread key named in the note
        assert f"'{key}'" in notes[0]
    if unread:  # and without it, refused with one line naming the first
        with pytest.raises(KvplanError, match=f"key '{expected[0]}' .* is not modelled by kvplan"):
            parse_config(data, "m", SpecSource("local", str(path)))


def test_every_refused_family_is_a_config_here():
    names = {name_of(path) for path in CONFIGS + BUNDLED}
    assert set(REFUSED) <= names


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kvplan.cli.app", *args], capture_output=True, text=True, timeout=60)


def test_cli_refuses_with_one_line_and_plans_with_the_flag():
    model = str(ROOT / "tests/fixtures/configs/frontier/nvidia__Llama-3_3-Nemotron-Super-49B-v1")
    refused = run("estimate", "--gpu", "h200", "-tp", "8", "--model", model)
    assert refused.returncode == 2
    assert refused.stderr.count("\n") == 1 and "key 'block_configs'" in refused.stderr
    assert "--allow-unmodelled" in refused.stderr
    planned = run("estimate", "--gpu", "h200", "-tp", "8", "--model", model, "--allow-unmodelled", "--json")
    assert planned.returncode in (0, 1), planned.stderr
    notes = json.loads(planned.stdout)["notes"]
    assert any("not modelled, planned without: 'block_configs'" in note for note in notes)


def test_bundled_specs_plan_without_the_flag():
    for spec_file in sources.spec_files():
        if spec_file.kind == "bundled":
            sources.read_spec_file(spec_file)
