"""Bundled specs: enough of them, the families the users ask for, each parsed and traceable to its source."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import CONFIGS

from kvplan.models import sources
from kvplan.models.hf_config import parse_config

FILES = sources.spec_files()
REQUIRED = [
    "Qwen/Qwen2.5-0.5B", "Qwen/Qwen2.5-1.5B", "Qwen/Qwen2.5-3B", "Qwen/Qwen2.5-7B", "Qwen/Qwen2.5-14B",
    "Qwen/Qwen2.5-32B", "Qwen/Qwen2.5-72B", "Qwen/Qwen3-0.6B", "Qwen/Qwen3-1.7B", "Qwen/Qwen3-4B", "Qwen/Qwen3-8B",
    "Qwen/Qwen3-14B", "Qwen/Qwen3-32B", "Qwen/Qwen3-30B-A3B", "Qwen/Qwen3-235B-A22B", "meta-llama/Llama-2-7b-hf",
    "meta-llama/Meta-Llama-3-8B", "meta-llama/Llama-3.1-8B", "meta-llama/Llama-3.2-1B-Instruct",
    "meta-llama/Llama-3.3-70B-Instruct", "meta-llama/Llama-4-Scout-17B-16E-Instruct", "mistralai/Mistral-7B-v0.1",
    "mistralai/Mistral-Nemo-Instruct-2407", "mistralai/Mistral-Small-24B-Instruct-2501",
    "mistralai/Mixtral-8x7B-v0.1", "mistralai/Mixtral-8x22B-v0.1", "google/gemma-2-9b-it", "google/gemma-3-27b-it",
    "microsoft/Phi-3-mini-4k-instruct", "microsoft/Phi-3.5-mini-instruct", "microsoft/phi-4",
    "deepseek-ai/DeepSeek-V2-Lite", "deepseek-ai/DeepSeek-V3", "deepseek-ai/DeepSeek-R1", "openai/gpt-oss-20b",
    "openai/gpt-oss-120b", "tiiuae/falcon-7b-instruct", "tiiuae/falcon-40b",
]


def test_at_least_forty():
    assert len(FILES) >= 40


@pytest.mark.parametrize("model_id", REQUIRED)
def test_required_family_is_bundled(model_id):
    assert sources.find_spec_file(model_id) is not None


@pytest.mark.parametrize("spec_file", FILES, ids=[f.id for f in FILES])
def test_bundled_spec_parses_and_has_a_source(spec_file):
    document = json.loads(spec_file.path.read_text())
    assert document["_kvplan"]["source"].startswith("https://huggingface.co/")
    spec = sources.read_spec_file(spec_file)
    assert spec.num_layers > 0 and spec.params.total > 0
    published = document["_kvplan"].get("params")
    if published:
        assert spec.params.total == published and spec.params.exact
        derived = parse_config(document["config"], spec_file.id, spec.source).params
        if derived.exact:  # a verified family: the config-derived count is the published one
            assert derived.total == published


def test_lookup_is_case_insensitive_and_suggests():
    assert sources.find_spec_file("qwen/qwen2.5-7b") is not None
    assert "Qwen/Qwen2.5-7B-Instruct" in sources.close_ids("Qwen/Qwen2.5-7B-Instrct")


def run(*args, env=None):
    return subprocess.run([sys.executable, "-m", "kvplan.cli.app", *args], capture_output=True, text=True,
                          timeout=60, env=env)


def test_import_round_trip(user_spec_dir, tmp_path):
    import os

    env = {**os.environ}
    source = CONFIGS / "google__gemma-3-27b-it__resaved-tf4.56.2.json"
    result = run("models", "import", str(source), "--id", "acme/my-gemma", "--params", "27432406640", env=env)
    assert result.returncode == 0, result.stderr
    written = user_spec_dir / "acme__my-gemma.json"
    document = json.loads(written.read_text())
    # trimmed to the keys the parser reads: token ids and the like are gone, architecture keys stay
    config = document["config"]
    assert "boi_token_index" not in config and "eos_token_id" not in config
    assert config["text_config"]["num_hidden_layers"] == 62
    original = json.loads(run("models", "show", str(source), "--json", env=env).stdout)
    imported = json.loads(run("models", "show", "acme/my-gemma", "--json", env=env).stdout)
    for key in ("num_layers", "kv_layers", "num_kv_heads", "head_dim", "attention", "params", "layers",
                "max_context", "kv_bytes_per_token_16bit"):
        assert imported[key] == original[key], key
    assert imported["source"]["kind"] == "user"
    listed = json.loads(run("models", "list", "--json", env=env).stdout)
    assert "acme/my-gemma" in [row["id"] for row in listed]
    again = run("models", "import", str(source), "--id", "acme/my-gemma", env=env)
    assert again.returncode == 2 and "--force" in again.stderr


def test_import_bad_config_writes_nothing(user_spec_dir, tmp_path):
    import os

    bad = tmp_path / "config.json"
    bad.write_text('{"model_type": "llama", "num_hidden_layers": -1}')
    result = run("models", "import", str(bad), "--id", "acme/bad", env={**os.environ})
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert not user_spec_dir.exists() or not any(user_spec_dir.iterdir())


def test_lookup_order_local_path_then_user_then_bundled_then_hub(user_spec_dir, tmp_path):
    """The same name, found at each level in turn: a local path beats a user spec, which beats a bundled spec,
    which beats the Hub (the Hub is not even asked)."""
    import os

    from hub_server import FakeHub

    def layers_and_kind(cwd):
        result = subprocess.run([sys.executable, "-m", "kvplan.cli.app", "models", "show", "Qwen/Qwen2.5-7B", "--json"],
                                capture_output=True, text=True, timeout=60, env=env, cwd=cwd)
        assert result.returncode == 0, result.stderr
        shown = json.loads(result.stdout)
        assert shown["lookup_order"] == ["local path", "user specs", "bundled specs", "Hugging Face cache",
                                         "Hugging Face Hub"]  # the order the three specs above were found in
        return shown["num_layers"], shown["source"]["kind"]

    def config_with(layers):
        config = json.loads((CONFIGS / "Qwen__Qwen2.5-7B.json").read_text())
        config["num_hidden_layers"] = layers
        return json.dumps(config)

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    with FakeHub() as hub:
        hub.files[("Qwen/Qwen2.5-7B", "main")] = config_with(3).encode()  # what the Hub would say
        env = {**os.environ, "HF_ENDPOINT": hub.url, "HF_HOME": str(tmp_path / "hf-home")}
        assert layers_and_kind(elsewhere) == (28, "bundled")  # the bundled Qwen2.5-7B has 28 layers
        user_config = tmp_path / "user-config.json"
        user_config.write_text(config_with(14))
        imported = subprocess.run([sys.executable, "-m", "kvplan.cli.app", "models", "import", str(user_config), "--id",
                                   "Qwen/Qwen2.5-7B", "--force"], capture_output=True, text=True, timeout=60, env=env)
        assert imported.returncode == 0, imported.stderr
        assert layers_and_kind(elsewhere) == (14, "user")
        local = elsewhere / "Qwen" / "Qwen2.5-7B"
        local.mkdir(parents=True)
        (local / "config.json").write_text(config_with(7))
        assert layers_and_kind(elsewhere) == (7, "local")  # run where ./Qwen/Qwen2.5-7B/config.json exists
        assert hub.requests == []
