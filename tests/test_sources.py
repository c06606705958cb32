"""User specs: a broken one is skipped with a note, one under a bundled id is used in its place and says so, ids
that cannot name a spec file are refused, and `models list` shows KV bytes at the dtype estimate serves in."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import CONFIGS, fixture_dict

from kvplan.errors import KvplanError
from kvplan.models import sources

QWEN_7B = CONFIGS / "Qwen__Qwen2.5-7B.json"


def kvplan(*args):
    return subprocess.run([sys.executable, "-m", "kvplan.cli.app", *args], capture_output=True, text=True,
                          timeout=60, env={**os.environ})


def write_json(path, data):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


def test_broken_user_spec_is_skipped_with_a_note(user_spec_dir, tmp_path):
    bundled = len(kvplan_json("models", "list", "--json"))
    user_spec_dir.mkdir()
    (user_spec_dir / "acme__broken.json").write_text('{"_kvplan": {"id": "acme/broken"}, "config": {')
    write_json(user_spec_dir / "acme__no-layers.json", {"_kvplan": {"id": "acme/no-layers"}, "config": {}})
    assert kvplan("models", "import", str(QWEN_7B), "--id", "acme/good").returncode == 0
    for args in (("models", "list", "--json"), ("models", "list")):
        result = kvplan(*args)
        assert result.returncode == 0, result.stderr
        notes = result.stderr.splitlines()
        assert len(notes) == 2, result.stderr
        assert notes[0].startswith("kvplan: note: skipped user spec: ") and "acme__broken.json: invalid JSON" in notes[0]
        assert "acme__no-layers.json: key 'num_hidden_layers' is missing" in notes[1]
    rows = json.loads(kvplan("models", "list", "--json").stdout)
    assert len(rows) == bundled + 1 and "acme/good" in [r["id"] for r in rows]
    # asked for by name, the broken spec is an error naming its file
    shown = kvplan("models", "show", "acme/no-layers")
    assert shown.returncode == 2 and "acme__no-layers.json: key 'num_hidden_layers' is missing" in shown.stderr


def kvplan_json(*args):
    result = kvplan(*args)
    assert result.returncode in (0, 1), result.stderr
    return json.loads(result.stdout)


def test_user_spec_overrides_the_bundled_one(user_spec_dir, tmp_path):
    bundled = kvplan_json("models", "show", "Qwen/Qwen2.5-7B", "--json")
    assert bundled["num_layers"] == 28 and bundled["source"]["label"] == "bundled"
    config = fixture_dict("Qwen__Qwen2.5-7B.json")
    config["num_hidden_layers"] = 14
    source = write_json(tmp_path / "half" / "config.json", config)
    refused = kvplan("models", "import", str(source), "--id", "Qwen/Qwen2.5-7B")  # never silently (issue 19)
    assert refused.returncode == 2 and "is a bundled spec's id" in refused.stderr
    result = kvplan("models", "import", str(source), "--id", "Qwen/Qwen2.5-7B", "--force")
    assert result.returncode == 0, result.stderr
    shown = kvplan_json("models", "show", "Qwen/Qwen2.5-7B", "--json")
    assert shown["num_layers"] == 14 and shown["kv_bytes_per_token_16bit"] == 14 * 2 * 4 * 128 * 2  # 28,672
    assert shown["source"]["kind"] == "user" and shown["source"]["label"] == "user (overrides bundled)"
    assert "source: user (overrides bundled)" in kvplan("models", "show", "Qwen/Qwen2.5-7B").stdout
    rows = [r for r in kvplan_json("models", "list", "--json") if r["id"] == "Qwen/Qwen2.5-7B"]
    assert len(rows) == 1 and rows[0]["layers"] == 14 and rows[0]["source"] == "user (overrides bundled)"
    # and estimate uses it: KV bytes per token halve with the layers
    plan = kvplan_json("estimate", "--model", "Qwen/Qwen2.5-7B", "--gpu", "h100", "--json")
    assert plan["kv"]["bytes_per_token"] == 28_672
    # a user spec under a new id is plain "user"
    assert kvplan("models", "import", str(source), "--id", "acme/half").returncode == 0
    assert kvplan_json("models", "show", "acme/half", "--json")["source"]["label"] == "user"


@pytest.mark.parametrize(("model_id", "says"), [
    ("acme/../x", "contains '..'"),
    ("/acme/x", "empty part"),
    ("acme\\x", "backslash"),
    ("acme/x/y", "more than one '/'"),
    ("acme/x__y", "'__', which spec file names use for '/'"),
    ("noslash", "org/name"),
    ("acme/x ", "whitespace"),
])
def test_import_refuses_ids_that_cannot_name_a_spec(user_spec_dir, model_id, says):
    result = kvplan("models", "import", str(QWEN_7B), "--id", model_id)
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert result.stderr.startswith("kvplan: error: --id: ") and says in result.stderr
    assert not user_spec_dir.exists() or not any(user_spec_dir.iterdir())


def test_import_refuses_a_bad_name_or_path_from_the_config(user_spec_dir, tmp_path):
    config = fixture_dict("Qwen__Qwen2.5-7B.json")
    config["_name_or_path"] = "acme/x/y"
    source = write_json(tmp_path / "config.json", config)
    result = kvplan("models", "import", str(source))
    assert result.returncode == 2 and "_name_or_path; pass --id org/name" in result.stderr


def test_models_list_shows_kv_bytes_at_the_served_dtype(user_spec_dir, tmp_path):
    config = fixture_dict("Qwen__Qwen2.5-7B.json")
    config["torch_dtype"] = "float8_e4m3fn"  # an fp8 checkpoint: vLLM serves the rest, and the KV cache, in bf16
    source = write_json(tmp_path / "config.json", config)
    assert kvplan("models", "import", str(source), "--id", "acme/qwen-fp8").returncode == 0
    rows = {r["id"]: r for r in kvplan_json("models", "list", "--json")}
    # gpt2 (float32): 12 layers x 2 x 12 heads x 64 x 2 B = 36,864; bloom (float32): 70 x 2 x 112 x 128 x 2 B
    # = 4,014,080; the fp8 Qwen: 28 x 2 x 4 x 128 x 2 B = 57,344. At 4 B or 1 B they would double or halve.
    expected = {"openai-community/gpt2": 36_864, "bigscience/bloom": 4_014_080, "acme/qwen-fp8": 57_344}
    for model_id, per_token in expected.items():
        assert rows[model_id]["kv_dtype"] == "bfloat16" and rows[model_id]["kv_bytes_per_token"] == per_token
        plan = kvplan_json("estimate", "--model", model_id, "--gpu", "h200", "--json")
        assert plan["kv"]["bytes_per_token"] == per_token and plan["kv"]["dtype"] == "bfloat16"
    assert rows["meta-llama/Llama-2-7b-hf"]["kv_dtype"] == "float16"  # a float16 config stays float16


def test_spec_files_marks_the_override(user_spec_dir):
    write_json(user_spec_dir / "qwen__qwen2.5-7b.json", {"_kvplan": {"id": "Qwen/Qwen2.5-7B"},
                                                         "config": fixture_dict("Qwen__Qwen2.5-7B.json")})
    found = sources.find_spec_file("Qwen/Qwen2.5-7B")
    assert found is not None and found.kind == "user" and found.overrides  # matched case-insensitively
    assert sources.find_spec_file("Qwen/Qwen2.5-3B").overrides is False


def test_tilde_naming_no_user_is_not_a_crash():
    # Path.expanduser raises RuntimeError for "~user" when no such user exists; that is a model name, not a path.
    with pytest.raises(KvplanError) as caught:
        sources.resolve("~no-such-user-here/model")
    assert "~no-such-user-here/model" in str(caught.value)
