from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvplan.models.hf_config import load_json, parse_config
from kvplan.models.model import ModelSpec, SpecSource

FIXTURES = Path(__file__).parent / "fixtures"
CONFIGS = FIXTURES / "configs"


def load_fixture(name: str) -> ModelSpec:
    path = CONFIGS / name
    return parse_config(load_json(path.read_bytes(), str(path)), name, SpecSource("local", str(path)))


def check_findings(tmp_path: Path, text: str, name: str = "file.yaml", **options):
    """kvplan check's findings for one file written from TEXT (dedented)."""
    import textwrap

    from kvplan.check import Options, check_paths

    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return check_paths([str(path)], Options(**options)).findings


def first_finding(found, rule_id):
    """The first finding of a rule; the test fails naming every finding when there is none."""
    chosen = [f for f in found if f.rule == rule_id]
    assert chosen, [(f.rule, f.status, f.message) for f in found]
    return chosen[0]


def cdiv(a: int, b: int) -> int:
    """Ceiling division, for hand derivations written out in tests."""
    return -(-a // b)


def fp8_block_scales(rows: int, cols: int) -> int:
    """The scale entries of one FP8 linear quantised in 128 x 128 blocks (weight_block_size [128, 128])."""
    return cdiv(rows, 128) * cdiv(cols, 128)


def tower_note(plan) -> str:
    """A plan's one "multimodal encoder" note, which must be a modelled tower's."""
    notes = [note for note in plan.notes if note.startswith("multimodal encoder")]
    assert len(notes) == 1
    assert "not modelled" not in notes[0]
    return notes[0]


def fixture_dict(name: str) -> dict:
    return json.loads((CONFIGS / name).read_text())


@pytest.fixture
def user_spec_dir(tmp_path, monkeypatch):
    folder = tmp_path / "user-specs"
    monkeypatch.setenv("KVPLAN_SPEC_DIR", str(folder))
    return folder


@pytest.fixture
def cli_offline(monkeypatch):
    """The Hub switched off (a module takes it with pytestmark = pytest.mark.usefixtures("cli_offline"))."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)


def run_cli(capsys, *args):
    """kvplan's CLI in-process: (exit code, stdout, stderr)."""
    from kvplan.cli.app import main

    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err
