"""kvplan serve's error shape: a user's mistake is a 4xx with {"error": one line, "field": the field as sent},
never a 500 or a traceback; bodies are capped; simulate is bounded in requests and time."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from kvplan.serve import bounded
from kvplan.serve.app import create_app
from kvplan.serve.documents import MAX_SIMULATED_REQUESTS
from kvplan.serve.limits import MAX_BODY_BYTES

QWEN = "Qwen/Qwen2.5-7B"


@pytest.fixture(scope="module")
def client():
    return TestClient(create_app(), raise_server_exceptions=False)


def refused(response, status, field):
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error", "field"}, body
    assert body["field"] == field, body
    assert body["error"] and "\n" not in body["error"] and "Traceback" not in body["error"]
    return body["error"]


@pytest.mark.parametrize(("query", "field", "says"), [
    ({"model": QWEN, "gpu": "h1000"}, "gpu", "unknown GPU 'h1000'"),
    ({"model": QWEN, "gpu": "h100", "max-model-len": "abc"}, "max-model-len", "expected an integer"),
    ({"model": QWEN, "gpu": "h100", "max_model_len": "abc"}, "max_model_len", "expected an integer"),
    ({"model": QWEN, "gpu": "h100", "tp": "3"}, "tp", "divisible by tensor parallel size (3)"),
    ({"model": QWEN, "gpu": "h100", "kv-cache-dtype": "fp9"}, "kv-cache-dtype", "invalid choice 'fp9'"),
    ({"model": QWEN, "gpu": "h100", "max-modl-len": "4096"}, "max-modl-len", "unknown vLLM flag"),
    ({"model": QWEN, "gpu": "h100", "swap-space": "4"}, "swap-space", "gone from current vLLM"),
    ({"model": QWEN, "gpu": "h100", "context": "4K,x"}, "context", ""),
    ({"model": QWEN, "gpu": "h100", "suggest": "maybe"}, "suggest", "expected true or false"),
    ({"model": QWEN}, "gpu", "no GPU given"),
    ({"gpu": "h100"}, "model", "no model given"),
    ({"model": "no-such-org/no-such-model-xyz", "gpu": "h100", "revision": "v1"}, None, ""),
    ({"model": QWEN, "gpu": "h100", "config": "serve.yaml"}, "config", "not taken over HTTP"),
    ({"model": QWEN, "gpu": "h100", "token": "hf_x"}, "token", "not taken over HTTP"),
    ({"model": QWEN, "gpu": "h100", "command": "vllm serve Qwen/Qwen2.5-7B --max-model-len abc"}, "command",
     "expected an integer"),
    ({"model": QWEN, "gpu": "h100", "command": "vllm serve 'unclosed"}, "command", "cannot split"),
    ({"gpu": "h100", "command": "docker run foo"}, "command", "not a launch command"),
    ({"gpu": "h100", "command": f"vllm serve {QWEN}", "engine": "sglang"}, "engine", "the pasted command starts vllm"),
])
def test_estimate_get_errors_name_the_field(client, query, field, says):
    response = client.get("/api/estimate", params=query)
    if field is None:  # a model kvplan cannot find offline: any 4xx that names the model
        assert 400 <= response.status_code < 500, response.text
        assert set(response.json()) == {"error", "field"}
        return
    assert says in refused(response, 400, field)


def test_the_same_field_twice_is_refused(client):
    refused(client.get("/api/estimate", params=[("model", QWEN), ("gpu", "h100"), ("gpu", "l40s")]), 400, "gpu")
    refused(client.get("/api/estimate", params=[("model", QWEN), ("gpu", "h100"), ("tp", "2"), ("tp", "4")]),
            400, "tp")


@pytest.mark.parametrize(("body", "field", "says"), [
    ({"model": QWEN, "gpu": "h100", "flags": {"max_model_len": "abc"}}, "max_model_len", "expected an integer"),
    ({"model": QWEN, "gpu": "h100", "flags": {"max-model-len": [1, 2]}}, "max-model-len", ""),
    ({"model": QWEN, "gpu": "h100", "flags": {"max-model-len": None}}, "max-model-len", "expected a string"),
    ({"model": QWEN, "gpu": "h100", "flags": "--max-model-len 4096"}, "flags", "expected an object"),
    ({"model": 7, "gpu": "h100"}, "model", "not a bundled id"),
    ({"model": QWEN, "gpu": ["h100"]}, "gpu", "expected a string"),
    ({"model": QWEN, "gpu": "h100", "suggest": "yes please"}, "suggest", "expected true or false"),
    ({"model": QWEN, "gpu": "h100", "context": True}, "context", "expected a value"),
    ({"gpu": "h100", "command": 42}, "command", "expected a launch command"),
    ({"gpu": "h100", "command": ""}, "command", "empty"),
    ({"gpu": "h100", "command": ["vllm", "serve", QWEN, "--max-model-len", "-5"]}, "command", ""),
])
def test_estimate_post_errors_name_the_field(client, body, field, says):
    assert says in refused(client.post("/api/estimate", json=body), 400, field)


def test_a_body_that_is_not_a_json_object(client):
    headers = {"content-type": "application/json"}
    assert "not valid JSON" in refused(client.post("/api/estimate", content=b"{model:", headers=headers), 400, "body")
    assert "JSON object" in refused(client.post("/api/estimate", json=[QWEN, "h100"]), 400, "body")
    refused(client.post("/api/estimate", content=b"[" * 100_000, headers=headers), 400, "body")  # deep nesting


def test_bodies_are_capped(client):
    big = {"text": "x" * (MAX_BODY_BYTES + 1)}
    assert "256 KiB" in refused(client.post("/api/check", json=big), 413, "body")

    def chunks():  # no Content-Length: the cap counts what arrives
        for _ in range(MAX_BODY_BYTES // 65536 + 2):
            yield b" " * 65536

    refused(client.post("/api/estimate", content=chunks(), headers={"content-type": "application/json"}), 413,
            "body")


def test_simulate_errors_and_bounds(client):
    base = {"model": QWEN, "gpu": "rtx3090", "max-model-len": "4096"}
    refused(client.get("/api/simulate", params={**base, "requests": "abc"}), 400, "requests")
    says = refused(client.get("/api/simulate", params={**base, "requests": str(MAX_SIMULATED_REQUESTS + 1)}), 422,
                   "requests")
    assert "20,000" in says
    refused(client.get("/api/simulate", params={**base, "prompt-len": "foo:1"}), 400, "prompt-len")
    refused(client.get("/api/simulate", params={**base, "rate": "nan"}), 400, "rate")
    refused(client.get("/api/simulate", params={**base, "allocators": "buddy"}), 400, "allocators")
    refused(client.get("/api/simulate", params={**base, "trace": "/etc/passwd"}), 400, "trace")
    refused(client.get("/api/simulate", params={**base, "plot": "out.png"}), 400, "plot")
    refused(client.get("/api/simulate", params={**base, "gpu": "h100,l40s"}), 400, "gpu")
    refused(client.post("/api/simulate", json={**base, "max-model-len": 4096, "flags": {"max-num-seqs": "x"}}), 400,
            "max-num-seqs")


def test_simulate_past_its_time_cap_is_stopped(client, monkeypatch):
    monkeypatch.setattr(bounded, "SECONDS", 0.05)  # a spawned worker cannot even import kvplan in 50 ms
    says = refused(client.get("/api/simulate", params={"model": QWEN, "gpu": "rtx3090", "requests": "500"}), 422,
                   "requests")
    assert "ran past 0.05 s" in says


def test_size_errors(client):
    refused(client.get("/api/size", params={"model": QWEN}), 400, "target")
    refused(client.get("/api/size", params={"model": QWEN, "target": "32@8K", "top": "0"}), 400, "top")
    refused(client.get("/api/size", params={"model": QWEN, "target": "32@8K", "max-gpus": "500"}), 400, "max-gpus")
    refused(client.get("/api/size", params={"model": QWEN, "target": "lots"}), 400, "target")
    refused(client.get("/api/size", params={"model": QWEN, "target": "1@8K", "prices": "p.yaml"}), 400, "prices")
    refused(client.post("/api/size", json={"model": QWEN, "target": "1@8K", "price": "h100=cheap"}), 400, "price")


def test_check_errors(client):
    refused(client.post("/api/check", json={}), 400, "text")
    refused(client.post("/api/check", json={"text": 5}), 400, "text")
    refused(client.post("/api/check", json={"text": "a: 1", "path": "/etc/passwd"}), 400, "path")
    refused(client.post("/api/check", json={"text": "a: 1", "name": "../x.yaml"}), 400, "name")
    refused(client.post("/api/check", json={"text": "a: 1", "kind": "helm"}), 400, "kind")
    refused(client.post("/api/check", json={"text": "a: 1", "gpu": "h1000"}), 400, "gpu")
    refused(client.post("/api/check", json={"text": "model: x", "select": "ZZ9"}), 400, "select")


def test_a_broken_file_is_a_finding_not_an_error(client):
    # as kvplan check reports it: the file's own rule KV000, status error, exit code 2
    response = client.post("/api/check", json={"text": "deployments: [\n", "name": "fleet.yaml"})
    assert response.status_code == 200 and response.headers["X-Kvplan-Exit-Code"] == "2"
    [finding] = response.json()
    assert finding["rule"] == "KV000" and finding["status"] == "error" and finding["file"] == "fleet.yaml"


def test_unknown_paths_and_methods(client):
    refused(client.get("/api/nothing"), 404, None)
    refused(client.delete("/api/estimate"), 405, None)
    refused(client.get("/api/check"), 405, None)


@pytest.mark.parametrize("value", ["", "-1", "0", "1e400", "nan", "9" * 400, "\x00", "%", "{", "[]", "auto", "32Q"])
def test_odd_values_never_give_a_500(client, value):
    for key in ("max-model-len", "gpu-memory-utilization", "tp", "block-size", "speculative-config", "gpu-memory",
                "kv-cache-memory-bytes", "hf-overrides"):
        response = client.get("/api/estimate", params={"model": QWEN, "gpu": "h100", key: value})
        assert response.status_code < 500, (key, value, response.text)
        if response.status_code >= 400:
            assert set(response.json()) == {"error", "field"}


def test_a_third_worker_at_once_is_told_to_retry(client, monkeypatch):
    import threading

    busy = threading.BoundedSemaphore(1)
    busy.acquire()  # every worker slot taken
    monkeypatch.setattr(bounded, "_slots", busy)
    says = refused(client.get("/api/simulate", params={"model": QWEN, "gpu": "rtx3090"}), 503, None)
    assert "try again" in says


def test_serve_without_fastapi_says_what_to_install(monkeypatch, capsys):
    import sys

    from kvplan.cli.app import main

    monkeypatch.setitem(sys.modules, "uvicorn", None)  # an import of it now fails, as where it is not installed
    assert main(["serve", "--port", "0"]) == 2
    assert "pip install 'kvplan[serve]'" in capsys.readouterr().err
