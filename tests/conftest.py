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


def fixture_dict(name: str) -> dict:
    return json.loads((CONFIGS / name).read_text())


@pytest.fixture
def user_spec_dir(tmp_path, monkeypatch):
    folder = tmp_path / "user-specs"
    monkeypatch.setenv("KVPLAN_SPEC_DIR", str(folder))
    return folder
