"""Hostile and broken configs: always one line on stderr naming the file (and the key), exit code 2."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import CONFIGS, fixture_dict
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvplan.errors import KvplanError
from kvplan.models.families import family_of
from kvplan.models.fields import INT_LIMITS
from kvplan.models.hf_config import HEAD_KEYS, HIDDEN_KEYS, LAYER_KEYS
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


def language_dict(config: dict) -> dict:
    """The part of a fixture that holds the language model's keys (all fixtures are flat or use text_config)."""
    return config.get("text_config", config)


def required_keys(config: dict, removed: set[str] | None = None) -> set[str]:
    """Keys the parser cannot do without, of those removed (default: each removed alone): every spelling of layers,
    hidden size or heads this config gives once all of them are gone, and vocab_size when the family has no default
    for it."""
    lm = language_dict(config)
    required = set()
    groups = [LAYER_KEYS, HIDDEN_KEYS] + ([] if "state_size" in lm else [HEAD_KEYS])
    for group in groups:
        present = [k for k in group if lm.get(k) is not None]
        if removed is None and len(present) == 1:
            required.add(present[0])
        elif removed is not None and present and set(present) <= removed:
            required.update(present)
    model_type = lm.get("model_type") or config.get("model_type") or "unknown"
    if family_of(model_type).vocab_default is None and "vocab_size" in lm:
        required.add("vocab_size")
    return required


@given(name=st.sampled_from(NAMES), data=st.data())
def test_removed_keys(tmp_path, name, data):
    config = fixture_dict(name)
    lm = language_dict(config)
    keys = data.draw(st.lists(st.sampled_from(sorted(lm)), min_size=1, max_size=4, unique=True))
    for key in keys:
        del lm[key]
    removed_required = required_keys(fixture_dict(name), set(keys)) & set(keys)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    message = check_one_line(path)
    if removed_required:
        # a required key is gone: the parse fails, and the line names one of the removed required keys
        assert message, f"removing {sorted(removed_required)} from {name} parsed"
        assert "is missing" in message
        if "model_type" not in keys:
            # (without model_type the family's defaults go too, and another key may be the first missing one)
            assert any(f"{key}" in message for key in removed_required), message
    else:
        # only optional keys are gone: it parses, or the line names the key it stumbled on
        assert message == "" or "key '" in message, message


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
    if key in REQUIRED_KEYS and not is_valid_count(key, value):
        # a wrong value of a required key never slips through, and the line names that key
        assert message, f"{key}={value!r} parsed"
        assert f"{key}'" in message, message


def is_valid_count(key: str, value: object) -> bool:
    """The values the parser accepts for a count: an integer (or an integral float) from 1 to the key's limit."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        return False
    return 1 <= value <= INT_LIMITS[key]


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
    path.write_bytes(b"\x00\xff" + blob)  # 0xff never occurs in UTF-8
    assert "not UTF-8 text" in check_one_line(path)


def not_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return True
    return False


JSON_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=10))
JSON_VALUES = st.recursive(JSON_SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
    st.text(max_size=5), inner, max_size=3), max_leaves=8)
PARSER_KEYS = set(LAYER_KEYS) | {"text_config", "llm_config", "language_config", "thinker_config"}


@given(text=st.text(min_size=1, max_size=200).filter(lambda t: t.strip() != "" and not_json(t)))
def test_utf8_text_that_is_not_json(tmp_path, text):
    path = tmp_path / "config.json"
    path.write_text(text, encoding="utf-8")
    assert "invalid JSON" in check_one_line(path)


@given(value=JSON_VALUES.filter(lambda v: not isinstance(v, dict)))
def test_json_that_is_not_an_object(tmp_path, value):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(value))
    assert "expected a JSON object at the top level" in check_one_line(path)


@given(value=st.dictionaries(st.text(max_size=8).filter(lambda k: k not in PARSER_KEYS), JSON_VALUES, max_size=6))
def test_json_object_without_the_keys(tmp_path, value):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(value))
    assert "key 'num_hidden_layers' is missing" in check_one_line(path)


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
    assert result.returncode == 2 and "over 8,388,608 bytes" in result.stderr and result.stderr.count("\n") == 1


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


def write_config(tmp_path: Path, name: str = "Qwen__Qwen2.5-7B.json", **changes: object) -> Path:
    config = fixture_dict(name)
    language_dict(config).update(changes)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    return path


@pytest.mark.parametrize(("key", "value", "limit"), [
    ("num_hidden_layers", 10**7, "4,096"),
    ("num_hidden_layers", 10**12, "4,096"),
    ("num_attention_heads", 10**9, "8,192"),
    ("num_key_value_heads", 10**9, "8,192"),
    ("vocab_size", 10**12, "100,000,000"),
    ("hidden_size", 10**8, "1,000,000"),
    ("intermediate_size", 10**12, "10,000,000"),
    ("max_position_embeddings", 10**15, "2,147,483,648"),
])
def test_huge_numbers_fail_at_once(tmp_path, key, value, limit):
    # Before the per-key limits, 10^7 layers built a ten-million-entry layer tuple (seconds, then a MemoryError
    # at 10^12). The subprocess timeout is only a guard: the answer takes a fraction of a second.
    path = write_config(tmp_path, **{key: value})
    result = subprocess.run([sys.executable, "-m", "kvplan.cli.app", "estimate", "--model", str(path), "--gpu", "h100"],
                            capture_output=True, text=True, timeout=5)
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert str(path) in result.stderr and f"key '{key}' is {value:,}" in result.stderr
    assert f"at most {limit}" in result.stderr


def test_layer_limit_is_the_boundary(tmp_path):
    # 4096 layers of Qwen2.5-7B geometry still parse (2 x 4 KV heads x 128 x 2 B = 2,048 B per layer per token);
    # one more is refused.
    assert read_local(write_config(tmp_path, num_hidden_layers=4096)).kv_bytes_per_token(2) == 4096 * 2_048
    with pytest.raises(KvplanError, match="'num_hidden_layers' is 4,097"):
        read_local(write_config(tmp_path, num_hidden_layers=4097))


def test_experts_per_token_cannot_exceed_experts(tmp_path):
    path = write_config(tmp_path, "Qwen__Qwen3-30B-A3B.json", num_experts_per_tok=129)  # of 128 experts
    with pytest.raises(KvplanError, match=r"'num_experts_per_tok' \(129\) is more than the 128 experts"):
        read_local(path)


def test_rope_factor_cannot_scale_past_the_context_limit(tmp_path):
    # DeepSeek-V2-Lite uses yarn: context = original_max_position_embeddings x factor. A factor may be up to 1024,
    # but 2^31 x 1024 tokens is past the 2^31 limit on any context; a factor of 1025 is refused by itself.
    config = fixture_dict("deepseek-ai__DeepSeek-V2-Lite.json")
    config["rope_scaling"]["factor"] = 1024
    config["rope_scaling"]["original_max_position_embeddings"] = 2**31
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    with pytest.raises(KvplanError, match=r"'rope_scaling.factor' \(1024\) scales the context to 2,199,023,255,552"):
        read_local(path)
    config["rope_scaling"]["factor"] = 1025
    path.write_text(json.dumps(config))
    with pytest.raises(KvplanError, match=r"'rope_scaling.factor' is 1,025"):
        read_local(path)


def test_rope_table_past_any_real_model_is_refused_on_the_command_line(tmp_path):
    # Gemma 3 keeps rope_scaling out of its context length, but vLLM still builds its RoPE table of
    # max_position_embeddings x factor: 2^31 x 8 positions is past 4 x 2^31, so the key is named, exit code 2
    config = fixture_dict("google__gemma-3-27b-it.json")
    config["text_config"]["max_position_embeddings"] = 2**31
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    result = run_cli(path)
    assert result.returncode == 2 and "rope_scaling.factor" in result.stderr and "Traceback" not in result.stderr
    assert result.stderr.count("\n") == 1 and result.stdout == ""


def test_integer_of_five_thousand_digits(tmp_path):
    # Python's json refuses integers over 4300 digits with a ValueError that is not a JSONDecodeError
    path = tmp_path / "config.json"
    path.write_text('{"num_hidden_layers": ' + "9" * 5000 + "}")
    assert "invalid JSON: Exceeds the limit (4300 digits)" in check_one_line(path)


@pytest.mark.parametrize("name", NAMES)
def test_every_reference_config_is_within_the_limits(name):
    assert read_local(CONFIGS / name).num_layers > 0


def test_a_flag_value_of_400_digits_is_one_line():
    # float() of a 400-digit integer overflows: the range message must print it without converting it
    result = subprocess.run([sys.executable, "-m", "kvplan.cli.app", "estimate", "--model", "Qwen/Qwen2.5-7B",
                             "--gpu", "h100", "--max-model-len", "9" * 400], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert result.stderr == ("kvplan: error: --max-model-len: must be within [1, 2,147,483,647], got "
                             "9,999,999,999,999,999,999,999,999,999,99...\n")


def test_weights_larger_than_the_gpu_are_blamed_on_the_weights():
    # Llama-3.1-70B: 70,553,706,496 parameters x 2 B + the 131,072 x 128 x 2 B RoPE table = 141,140,967,424 B
    # = 131.45 GiB on an RTX 3090 of 23.56 GiB (data/gpus.json): with --kv-cache-memory given, it is the weights
    # that do not fit, not the KV size.
    from kvplan.api import estimate
    plan = estimate("meta-llama/Llama-3.1-70B", gpu="rtx3090", kv_cache_memory_bytes=2**30)
    assert plan.error is not None and plan.error.startswith(
        "vLLM would fail to load the weights: 131.45 GiB exceed the GPU's 23.56 GiB")
