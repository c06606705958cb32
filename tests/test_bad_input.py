"""Hostile and broken configs: always one line on stderr naming the file (and the key), exit code 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import CONFIGS, fixture_dict
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvplan.errors import KvplanError
from kvplan.models.sources import read_local

NAMES = sorted(p.name for p in CONFIGS.glob("*.json"))
REQUIRED_KEYS = ("num_hidden_layers", "hidden_size", "num_attention_heads", "vocab_size")
BAD_VALUES = st.one_of(st.integers(max_value=0), st.integers(min_value=10**13), st.text(max_size=5),
                       st.floats(allow_nan=True), st.lists(st.integers(), max_size=2), st.booleans(),
                       st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))


def check_one_line(path: Path) -> str:
    """Parse in-process (fast, for hypothesis): either a spec or a KvplanError naming the file."""
    try:
        read_local(path)
    except KvplanError as exc:
        message = str(exc)
        assert "\n" not in message
        assert str(path) in message
        return message
    return ""


settings.register_profile("kvplan", max_examples=60, deadline=None,
                          suppress_health_check=[HealthCheck.function_scoped_fixture])
settings.load_profile("kvplan")


@given(name=st.sampled_from(NAMES), data=st.data())
def test_removed_keys(tmp_path, name, data):
    config = fixture_dict(name)
    keys = data.draw(st.lists(st.sampled_from(sorted(config)), min_size=1, max_size=4, unique=True))
    for key in keys:
        del config[key]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    check_one_line(path)


@given(name=st.sampled_from(NAMES), key=st.sampled_from(REQUIRED_KEYS + ("num_key_value_heads", "head_dim",
                                                                          "sliding_window", "max_position_embeddings",
                                                                          "layer_types", "rope_scaling")),
       value=BAD_VALUES)
def test_wrong_types_and_values(tmp_path, name, key, value):
    config = fixture_dict(name)
    target = config.get("text_config", config)
    target[key] = value
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    message = check_one_line(path)
    if message and key in REQUIRED_KEYS and key in message:
        assert f"'{key}'" in message or key in message


@given(name=st.sampled_from(NAMES), cut=st.floats(min_value=0.0, max_value=0.99))
def test_truncated_json(tmp_path, name, cut):
    raw = (CONFIGS / name).read_bytes()
    path = tmp_path / "config.json"
    path.write_bytes(raw[: int(len(raw) * cut)])
    message = check_one_line(path)
    assert message  # a cut JSON object never parses


@given(blob=st.binary(min_size=1, max_size=300))
def test_binary_garbage(tmp_path, blob):
    path = tmp_path / "config.json"
    path.write_bytes(b"\x00\xff" + blob)
    assert check_one_line(path)


def test_non_strict_json_parses(tmp_path):
    config = fixture_dict("meta-llama__Llama-3.1-8B.json")
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config)[:-1] + ', "router_z_loss": Infinity, "eps": NaN}')
    assert read_local(path).num_layers == 32


def run_cli(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kvplan.cli.app", "estimate", "--model", str(path), "--gpu", "h100"],
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("content", [b"", b"   \n", b"[1, 2]", b"\x89PNG\r\n\x1a\n\x00\x00", b'{"num_hidden_layers": "x"',
                                     b'{"num_hidden_layers": 0, "hidden_size": 4096}'])
def test_cli_errors_are_one_line(tmp_path, content):
    path = tmp_path / "config.json"
    path.write_bytes(content)
    result = run_cli(path)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and str(path) in result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""


def test_fifty_megabyte_file(tmp_path):
    path = tmp_path / "config.json"
    with path.open("wb") as out:
        out.write(b'{"pad": "' + b"x" * (50 * 2**20) + b'"}')
    result = run_cli(path)
    assert result.returncode == 2 and "52,428,8" in result.stderr and result.stderr.count("\n") == 1


def test_deep_nesting(tmp_path):
    path = tmp_path / "config.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    result = run_cli(path)
    assert result.returncode == 2 and result.stderr.count("\n") == 1


def test_missing_key_names_file_and_key(tmp_path):
    config = fixture_dict("Qwen__Qwen2.5-7B.json")
    del config["num_hidden_layers"]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    result = run_cli(path)
    assert result.returncode == 2
    assert str(path) in result.stderr and "'num_hidden_layers' is missing" in result.stderr
