"""The Hub source, end to end through huggingface_hub against a local server speaking the Hub's API."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time

import pytest
from conftest import CONFIGS
from hub_server import COMMITS, FakeHub, safetensors_header

QWEN = (CONFIGS / "Qwen__Qwen2.5-7B.json").read_bytes()
GPT_OSS = (CONFIGS / "openai__gpt-oss-20b.json").read_bytes()
# A stored MXFP4 checkpoint: 1,804,459,584 BF16 elements (attention, router, embeddings, biases) and
# 10,152,345,600 U8 elements (packed 4-bit expert weights and their scales): 13,761,264,768 bytes.
STORED = {"bf16": ("BF16", [1_804_459_584]), "blocks": ("U8", [10_152_345_600])}
STORED_BYTES = 1_804_459_584 * 2 + 10_152_345_600
LLAMA = (CONFIGS / "meta-llama__Llama-3.1-8B.json").read_bytes()


def kvplan(args, env_extra, tmp_path, timeout=60):
    """kvplan in a fresh process with its own Hugging Face cache; an env_extra value of None unsets that variable."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    env.update({"HF_HOME": str(tmp_path / "hf-home"), "XDG_CACHE_HOME": str(tmp_path / "cache"),
                "HF_HUB_DISABLE_TELEMETRY": "1",
                "HF_HUB_ETAG_TIMEOUT": "3", "HF_HUB_DOWNLOAD_TIMEOUT": "3", **env_extra})
    env = {k: v for k, v in env.items() if v is not None}
    return subprocess.run([sys.executable, "-m", "kvplan.cli.app", *args], capture_output=True, text=True, env=env,
                          timeout=timeout)


@pytest.fixture
def hub():
    with FakeHub() as server:
        server.files[("acme/private-qwen", "main")] = QWEN
        server.files[("acme/private-qwen", "v1.0")] = LLAMA
        server.files[("acme/oss-mxfp4", "main")] = GPT_OSS
        server.extra[("acme/oss-mxfp4", "main", "model.safetensors")] = safetensors_header(STORED)
        server.status["acme/gated"] = (403, "GatedRepo")
        server.status["acme/secret"] = (401, "RepoNotFound")
        yield server


def show(model, hub_url, tmp_path, *extra, env=None, timeout=60):
    return kvplan(["models", "show", model, "--json", *extra], {"HF_ENDPOINT": hub_url, **(env or {})}, tmp_path,
                  timeout)


def test_download_success(hub, tmp_path):
    result = show("acme/private-qwen", hub.url, tmp_path)
    assert result.returncode == 0, result.stderr
    spec = json.loads(result.stdout)
    # Qwen2.5-7B geometry: 28 layers x 2 x 4 x 128 x 2 = 57,344 B/token
    assert spec["num_layers"] == 28 and spec["kv_bytes_per_token_16bit"] == 57_344
    assert spec["source"]["kind"] == "hub"
    assert any(r.startswith("GET /acme/private-qwen/resolve/main/config.json") for r in hub.requests)


def test_revision(hub, tmp_path):
    result = show("acme/private-qwen", hub.url, tmp_path, "--revision", "v1.0")
    assert result.returncode == 0, result.stderr
    spec = json.loads(result.stdout)
    assert spec["num_layers"] == 32 and spec["source"]["revision"] == "v1.0"  # the Llama config at v1.0
    missing = show("acme/private-qwen", hub.url, tmp_path, "--revision", "nope")
    assert missing.returncode == 2 and "revision 'nope' not found" in missing.stderr


def test_gated_and_unauthorized(hub, tmp_path):
    gated = show("acme/gated", hub.url, tmp_path)
    assert gated.returncode == 2
    assert gated.stderr.count("\n") == 1 and "gated" in gated.stderr and "--token" in gated.stderr
    secret = show("acme/secret", hub.url, tmp_path)
    assert secret.returncode == 2 and secret.stderr.count("\n") == 1
    assert "log in" in secret.stderr and "Traceback" not in secret.stderr


def test_not_found_lists_close_bundled_ids(hub, tmp_path):
    result = show("Qwen/Qwen2.5-7B-Instrct", hub.url, tmp_path)  # not bundled, and the server answers 404
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "repo not found" in result.stderr and "did you mean Qwen/Qwen2.5-7B-Instruct" in result.stderr
    assert "HEAD /Qwen/Qwen2.5-7B-Instrct/resolve/main/config.json" in hub.requests


# The library's defaults, as a user has them: no telemetry switch and no timeouts set.
DEFAULTS = {"HF_HUB_DISABLE_TELEMETRY": None, "HF_HUB_ETAG_TIMEOUT": None, "HF_HUB_DOWNLOAD_TIMEOUT": None}


def test_server_down_fails_at_once_without_retries(tmp_path):
    # Before: huggingface_hub retried the failed request five times with backoff, 24 s on a closed port. The
    # process limit sits below those 24 s and far above one refused connection, so load on the machine does not
    # decide the outcome: only retrying does.
    with FakeHub() as server:
        url = server.url  # the port is closed once the server has shut down
    result = show("acme/private-qwen", url, tmp_path, env=DEFAULTS, timeout=20)
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "unreachable (ConnectError)" in result.stderr and "bundled id" in result.stderr


class SilentServer:
    """Accepts connections, counts them and never answers."""

    def __init__(self):
        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        self.socket.listen(8)
        self.url = f"http://127.0.0.1:{self.socket.getsockname()[1]}"
        self.held: list[socket.socket] = []
        self.thread = threading.Thread(target=self._accept, daemon=True)

    def _accept(self):
        while True:
            try:
                connection, _ = self.socket.accept()
            except OSError:
                return
            self.held.append(connection)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.socket.close()
        for connection in self.held:
            connection.close()


def test_silent_server_is_asked_once_and_given_up_on(tmp_path):
    # A Hub (or proxy) that accepts the connection and never answers: kvplan waits HF_HUB_ETAG_TIMEOUT's default of
    # 3 s for its one request, then stops with one line. Without HF_HUB_DISABLE_TELEMETRY, huggingface_hub 2.x would
    # first open another connection for an agent-registry request; with retries, more again.
    with SilentServer() as silent:
        start = time.monotonic()
        result = show("acme/private-qwen", silent.url, tmp_path, env=DEFAULTS, timeout=60)
        waited = time.monotonic() - start
        connections = len(silent.held)
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "no answer within 3 s" in result.stderr and "HF_HUB_ETAG_TIMEOUT" in result.stderr
    assert connections == 1
    assert waited >= 3  # it did wait for the answer, the full 3 s


def test_server_down_after_a_download_uses_the_cache(tmp_path):
    with FakeHub() as server:
        server.files[("acme/private-qwen", "main")] = QWEN
        first = show("acme/private-qwen", server.url, tmp_path)
        url = server.url
    assert first.returncode == 0, first.stderr
    again = show("acme/private-qwen", url, tmp_path, env=DEFAULTS, timeout=5)
    assert again.returncode == 0, again.stderr
    spec = json.loads(again.stdout)
    assert spec["source"]["kind"] == "hub-cache" and spec["num_layers"] == 28


@pytest.mark.parametrize(("model", "says"), [
    ("acme/private-qwen ", "leading or trailing whitespace (did you mean 'acme/private-qwen'?)"),
    ("acme/-private-qwen", "'-private-qwen' starts or ends with '-' or '.'"),
    ("acme/private-qwen@main", "pass 'acme/private-qwen' with --revision main"),
    ("acme//private-qwen", "it has an empty part"),
    ("acme/../private-qwen", "no such file or directory"),
    ("acme/private..qwen", "it contains '..' or '--'"),
    ("acme/private-qwen/extra", "more than one '/'"),
    ("acme/private qwen", "'private qwen' has characters other than letters"),
    ("acme/private-qwen.git", "ends in '.git'"),
])
def test_ids_that_cannot_be_repo_ids_fail_before_any_request(hub, tmp_path, model, says):
    result = show(model, hub.url, tmp_path, timeout=5)
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert says in result.stderr
    assert hub.requests == []


@pytest.mark.parametrize("repo_id", ["acme/private-qwen", "a/b", "Org_1/Name.v2-x", "acme/_x_", "acme/x-", "acme/.x",
                                     "acme/x..y", "acme/x--y", "acme/x.git", "acme/x y", "acme/café", "a" * 97 + "/b",
                                     "acme/" + "n" * 96, "acme/-", "acme/_"])
def test_repo_id_rule_is_the_hubs(repo_id):
    # kvplan checks ids itself (no huggingface_hub import on the local paths); it must agree with the library
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

    from kvplan.models.sources import repo_id_problem

    try:
        validate_repo_id(repo_id)
        hub_accepts = True
    except HFValidationError:
        hub_accepts = False
    assert (repo_id_problem(repo_id) is None) == hub_accepts


def test_offline_with_and_without_cache(hub, tmp_path):
    offline = show("acme/private-qwen", hub.url, tmp_path, env={"HF_HUB_OFFLINE": "1"})
    assert offline.returncode == 2 and "HF_HUB_OFFLINE" in offline.stderr
    assert show("acme/private-qwen", hub.url, tmp_path).returncode == 0  # fills the cache
    requests_before = len(hub.requests)
    cached = show("acme/private-qwen", hub.url, tmp_path, env={"HF_HUB_OFFLINE": "1"})
    assert cached.returncode == 0, cached.stderr
    assert json.loads(cached.stdout)["source"]["kind"] == "hub-cache"
    assert len(hub.requests) == requests_before  # offline means no request at all


def test_estimate_from_hub(hub, tmp_path):
    result = kvplan(["estimate", "--model", "acme/private-qwen", "--engine", "simple", "--gpu-memory", "24GB",
                     "--weights-memory", "15.2GB", "--gpu-memory-utilization", "1.0", "--max-model-len", "8192",
                     "--json"], {"HF_ENDPOINT": hub.url}, tmp_path)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["capacity"]["num_blocks"] == 8_501  # the seed example, via the Hub


def test_snapshot_folder_is_the_commit_the_server_sent(hub, tmp_path):
    # huggingface_hub files a download under snapshots/<X-Repo-Commit> and records the branch in refs/<revision>
    for revision in ("main", "v1.0"):
        assert show("acme/private-qwen", hub.url, tmp_path, "--revision", revision).returncode == 0
    repo = tmp_path / "hf-home" / "hub" / "models--acme--private-qwen"
    assert sorted(p.name for p in (repo / "snapshots").iterdir()) == sorted(COMMITS.values())
    for revision, commit in COMMITS.items():
        assert (repo / "refs" / revision).read_text() == commit
        assert (repo / "snapshots" / commit / "config.json").is_file()


def test_quantized_weights_from_safetensors_metadata_and_cached(hub, tmp_path):
    # SGLang holds the checkpoint's bytes; vLLM on an H100 holds its MXFP4 experts in another layout (tests/test_mxfp4.py)
    args = ["estimate", "--model", "acme/oss-mxfp4", "--gpu", "h100", "--max-model-len", "8192", "--engine",
            "sglang", "--json"]
    first = kvplan(args, {"HF_ENDPOINT": hub.url}, tmp_path)
    assert first.returncode == 0, first.stderr
    weights = json.loads(first.stdout)["memory"]["weights_bytes"]
    # the stored bytes, less under 24 bytes of rounding when spread over 24 layers
    assert 0 <= STORED_BYTES - weights < 24
    assert any("model.safetensors" in r for r in hub.requests)
    requests_before = len(hub.requests)
    offline = kvplan(args, {"HF_ENDPOINT": hub.url, "HF_HUB_OFFLINE": "1"}, tmp_path)
    assert offline.returncode == 0, offline.stderr
    assert json.loads(offline.stdout)["memory"]["weights_bytes"] == weights
    assert len(hub.requests) == requests_before


def test_timeout_variable_that_huggingface_hub_cannot_read(hub, tmp_path):
    # huggingface_hub reads HF_HUB_ETAG_TIMEOUT with int() on import: '2.5' would be a ValueError traceback
    result = show("acme/private-qwen", hub.url, tmp_path, env={"HF_HUB_ETAG_TIMEOUT": "2.5"})
    assert result.returncode == 2
    assert result.stderr == "kvplan: error: HF_HUB_ETAG_TIMEOUT: must be a whole number of seconds, got '2.5'\n"
    assert hub.requests == []
