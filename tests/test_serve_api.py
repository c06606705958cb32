"""kvplan serve's API through FastAPI's test client: each endpoint answers with the document the matching CLI
command prints with --json, for the same inputs; the CLI is run for real (kvplan.cli.app.main, in process)."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from kvplan.cli.app import main
from kvplan.serve.app import EXIT_HEADER, create_app

QWEN = "Qwen/Qwen2.5-7B"


@pytest.fixture(scope="module")
def client():
    return TestClient(create_app())


def cli(capsys, *args):
    """The CLI's stdout as JSON, and its exit code."""
    capsys.readouterr()
    code = main(list(args))
    out = capsys.readouterr().out
    return json.loads(out), code


@pytest.mark.parametrize(("query", "argv"), [
    ({"model": QWEN, "gpu": "rtx3090"}, ["--model", QWEN, "--gpu", "rtx3090"]),
    ({"model": QWEN, "gpu": "rtx3090", "max-model-len": "32K"}, ["--model", QWEN, "--gpu", "rtx3090",
                                                                  "--max-model-len", "32K"]),
    ({"model": "meta-llama/Llama-3.1-8B-Instruct", "gpu": "l40s", "max_model_len": "65536", "kv-cache-dtype": "fp8",
      "gpu_memory_utilization": "0.9", "context": "4K,32K", "suggest": "true"},
     ["--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "l40s", "--max_model_len", "65536", "--kv-cache-dtype",
      "fp8", "--gpu_memory_utilization", "0.9", "--context", "4K,32K", "--suggest"]),
    ({"model": QWEN, "gpu": "h100", "tp": "2", "enforce-eager": "", "port": "8000"},
     ["--model", QWEN, "--gpu", "h100", "-tp", "2", "--enforce-eager", "--port", "8000"]),
    ({"model": QWEN, "gpu": "h100", "engine": "sglang", "mem-fraction-static": "0.85", "context-length": "32768"},
     ["--model", QWEN, "--gpu", "h100", "--engine", "sglang", "--mem-fraction-static", "0.85", "--context-length",
      "32768"]),
    ({"model": QWEN, "gpu": "a100-80gb", "vllm-version": "0.11"}, ["--model", QWEN, "--gpu", "a100-80gb",
                                                                   "--vllm-version", "0.11"]),
    ({"model": "meta-llama/Llama-3.1-70B", "gpu": "h100,h200", "tp": "4"},  # two GPUs: a list of two plans
     ["--model", "meta-llama/Llama-3.1-70B", "--gpu", "h100,h200", "-tp", "4"]),
])
def test_get_estimate_is_the_cli_document(client, capsys, query, argv):
    expected, code = cli(capsys, "estimate", *argv, "--json")
    response = client.get("/api/estimate", params=query)
    assert response.status_code == 200, response.text
    assert response.json() == expected
    assert response.headers[EXIT_HEADER] == str(code)


def test_the_rtx3090_figures_by_hand(client):
    # Qwen2.5-7B, bf16, 16-token blocks: 2 x 28 layers x 4 KV heads x 128 head dim x 16 x 2 B = 917,504 B;
    # README's 'What it prints' run: 6,836 blocks (tests/test_cli.py's pool by hand), 109,376 tokens, exit code 1
    # (131,072 tokens do not fit)
    response = client.get("/api/estimate", params={"model": QWEN, "gpu": "rtx3090"})
    plan = response.json()
    assert plan["kv"]["block_bytes"] == 2 * 28 * 4 * 128 * 16 * 2 == 917_504
    assert plan["capacity"]["num_blocks"] == 6_836 and plan["capacity"]["tokens"] == 6_836 * 16 == 109_376
    assert response.headers[EXIT_HEADER] == "1"
    assert plan["levers"][0]["flags"] == "--tensor-parallel-size 2"


def test_post_a_pasted_command_is_the_cli_document(client, capsys):
    line = "vllm serve Qwen/Qwen2.5-7B --max-model-len 32768 -tp 2 --port 8000 --enable-prefix-caching"
    expected, _ = cli(capsys, "estimate", "--gpu", "h100", "--json", "--", *shlex.split(line))
    for body in ({"command": line, "gpu": "h100"}, {"command": shlex.split(line), "gpu": "h100"}):
        response = client.post("/api/estimate", json=body)
        assert response.status_code == 200, response.text
        assert response.json() == expected
    # README's pasted-command run: 140,548 blocks of 16 = 2,248,768 tokens (TP 2 on NVSwitch H100s: 2.17 GiB of
    # non-torch memory, kvplan/engines/vllm/interconnect.py). A rank: budget int(85,018,877,624 x 0.92)
    # = 78,217,367,414, weights 7,649,170,944, activation (Model Runner V2, 1,024 rows) 3.5 x 1,024 x 152,064 x 4
    # + 1 MiB = 2,181,038,080 with the dummy run's hidden states (8,192 + 1,024) x 3,584 x 2 = 66,060,288, the
    # Hopper cuBLAS workspace 33,554,432 and the held buffers 1,024 x (152,064 + 2 x 4,752) x 4 = 661,782,528:
    # 2,942,435,328; non-torch 2,330,019,758, graphs 818,937,856: pool 64,476,803,528 // 458,752 = 140,548
    assert expected["capacity"]["tokens"] == 140_548 * 16 == 2_248_768
    # the same command in a GET query, as a deep link carries it
    assert client.get("/api/estimate", params={"command": line, "gpu": "h100"}).json() == expected


def test_post_sglang_and_trtllm_launch_lines(client, capsys):
    for line in ("python -m sglang.launch_server --model-path Qwen/Qwen2.5-7B --context-length 32768 --tp 2",
                 "trtllm-serve Qwen/Qwen2.5-7B --max_seq_len 32768 --tp_size 2"):
        expected, _ = cli(capsys, "estimate", "--gpu", "h100", "--json", "--", *shlex.split(line))
        response = client.post("/api/estimate", json={"command": line, "gpu": "h100"})
        assert response.json() == expected, line


def test_post_flags_object_is_the_cli_document(client, capsys):
    expected, code = cli(capsys, "estimate", "--model", QWEN, "--gpu", "l40s", "--max-model-len", "32768",
                         "--kv-cache-dtype", "fp8", "--enforce-eager", "--speculative-config",
                         '{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4}', "--json")
    response = client.post("/api/estimate", json={
        "model": QWEN, "gpu": "l40s",
        "flags": {"max_model_len": 32768, "kv-cache-dtype": "fp8", "enforce-eager": True,
                  "speculative-config": {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4}}})
    assert response.status_code == 200, response.text
    assert response.json() == expected and response.headers[EXIT_HEADER] == str(code)
    assert expected["engine"]["max_model_len"] == 32768


def test_flags_and_a_command_combine_as_on_the_command_line(client, capsys):
    # flags typed to kvplan win over the pasted command's, as in vLLM
    expected, _ = cli(capsys, "estimate", "--gpu", "h100", "--max-model-len", "8192", "--json", "--", "vllm", "serve",
                      QWEN, "--max-model-len", "32768")
    response = client.post("/api/estimate", json={"gpu": "h100", "flags": {"max-model-len": 8192},
                                                  "command": f"vllm serve {QWEN} --max-model-len 32768"})
    assert response.json() == expected and expected["engine"]["max_model_len"] == 8192


def test_working_gives_the_panel_lines_and_a_command_that_reproduces_it(client, capsys):
    query = {"model": QWEN, "gpu": "rtx3090", "max-model-len": "32K", "kv-cache-dtype": "fp8"}
    body = client.get("/api/estimate/working", params=query).json()
    assert body["estimate"] == client.get("/api/estimate", params=query).json()
    # fp8 halves the element: 2 x 28 x 4 x 128 x 16 x 1 B = 458,752 B
    assert body["working"][0]["formula"] == ("block bytes = 2 x 28 layers x 4 KV heads x 128 head dim x 16 tokens "
                                             "x 1 B = 458,752 B")
    blocks = body["estimate"]["capacity"]["num_blocks"]
    assert body["working"][0]["pool"].endswith(f"// 458,752 B = {blocks:,} blocks")
    argv = shlex.split(body["command"])
    assert argv[:2] == ["kvplan", "estimate"]
    assert cli(capsys, argv[1], "--json", *argv[2:])[0] == body["estimate"]


def test_working_command_reproduces_a_pasted_command(client, capsys):
    query = {"gpu": "h100", "command": "vllm serve Qwen/Qwen2.5-7B -tp 2 --max-model-len 16K", "suggest": ""}
    body = client.get("/api/estimate/working", params=query).json()
    assert "--suggest" in body["command"] and " -- vllm serve " in body["command"]
    argv = shlex.split(body["command"])
    assert cli(capsys, argv[1], "--json", *argv[2:])[0] == body["estimate"]


def test_size_is_the_cli_document(client, capsys):
    expected, code = cli(capsys, "size", "--model", QWEN, "--target", "32@8K", "--target", "2@32K", "--gpus",
                         "h100,l40s", "--price", "h100=2.9,l40s=0.9", "--top", "3", "--json")
    response = client.post("/api/size", json={"model": QWEN, "target": ["32@8K", "2@32K"], "gpus": "h100,l40s",
                                              "price": "h100=2.9,l40s=0.9", "top": 3})
    assert response.status_code == 200, response.text
    assert response.json() == expected and response.headers[EXIT_HEADER] == str(code) == "0"
    query = [("model", QWEN), ("target", "32@8K"), ("target", "2@32K"), ("gpus", "h100,l40s"),
             ("price", "h100=2.9,l40s=0.9"), ("top", "3")]
    assert client.get("/api/size", params=query).json() == expected


def test_simulate_is_the_cli_document(client, capsys):
    argv = ["--model", QWEN, "--gpu", "rtx3090", "--max-model-len", "4096", "--requests", "300", "--seed", "7",
            "--allocators", "contiguous-max,paged"]
    expected, _ = cli(capsys, "simulate", *argv, "--json")
    response = client.get("/api/simulate", params={"model": QWEN, "gpu": "rtx3090", "max-model-len": "4096",
                                                   "requests": "300", "seed": "7", "allocators": "contiguous-max,paged"})
    assert response.status_code == 200, response.text
    assert response.json() == expected
    # the RTX 3090's pool at 4,096 tokens, as estimate gives it
    plan, _ = cli(capsys, "estimate", "--model", QWEN, "--gpu", "rtx3090", "--max-model-len", "4096", "--json")
    assert expected["num_blocks"] == plan["capacity"]["num_blocks"] and expected["block_bytes"] == 917_504


def test_simulate_post_with_a_command(client, capsys):
    line = "vllm serve Qwen/Qwen2.5-7B --max-model-len 8192"
    expected, _ = cli(capsys, "simulate", "--gpu", "rtx3090", "--requests", "200", "--no-prefix-caching", "--json",
                      "--", *shlex.split(line))
    response = client.post("/api/simulate", json={"gpu": "rtx3090", "requests": 200, "prefix-caching": False,
                                                  "command": line})
    assert response.json() == expected


def test_check_is_the_cli_findings(client, capsys, tmp_path):
    text = (Path(__file__).parent.parent / "examples" / "deployments-fail.yaml").read_text(encoding="utf-8")
    copy = tmp_path / "fleet.yaml"
    copy.write_text(text, encoding="utf-8")
    expected, code = cli(capsys, "check", "--format", "json", str(copy))
    response = client.post("/api/check", json={"text": text, "name": "fleet.yaml"})
    assert response.status_code == 200, response.text
    assert response.headers[EXIT_HEADER] == str(code) == "1"  # README: the failing example exits 1
    assert response.json() == [{**finding, "file": "fleet.yaml"} for finding in expected]
    assert any(f["rule"] == "KV011" and f["status"] == "fail" and f["line"] == 9 for f in response.json())


def test_check_with_gpu_kind_and_select(client, capsys, tmp_path):
    text = "model: meta-llama/Llama-3.1-8B-Instruct\nmax-model-len: 65536\ngpu-memory-utilization: 0.97\n"
    copy = tmp_path / "serve.yaml"
    copy.write_text(text, encoding="utf-8")
    expected, _ = cli(capsys, "check", "--format", "json", "--gpu", "l40s", "--kind", "vllm-config", "--select",
                      "KV01,KV04", str(copy))
    response = client.post("/api/check", json={"text": text, "name": "serve.yaml", "gpu": "l40s",
                                               "kind": "vllm-config", "select": "KV01,KV04"})
    assert response.json() == [{**finding, "file": "serve.yaml"} for finding in expected]
    # --select picks rules; the file's own finding (KV000, file-readable) is not a rule's
    assert {f["rule"][:4] for f in expected if f["rule"] != "KV000"} <= {"KV01", "KV04"}


def test_models_and_gpus_are_the_cli_lists(client, capsys):
    assert client.get("/api/models").json() == cli(capsys, "models", "list", "--json")[0]
    gpus = client.get("/api/gpus").json()
    assert gpus == cli(capsys, "gpus", "--json")[0]
    rtx = next(g for g in gpus if g["id"] == "rtx3090")
    assert rtx["memory_bytes"] == 25_297_357_373  # README: the RTX 3090's CUDA total, 23.56 GiB


def test_no_state_between_requests(client):
    # the same request answers the same after others that changed every knob
    query = {"model": QWEN, "gpu": "rtx3090", "max-model-len": "16K"}
    first = client.get("/api/estimate", params=query).json()
    client.post("/api/estimate", json={"command": f"vllm serve {QWEN} -tp 2 --max-model-len 4096", "gpu": "h100"})
    client.get("/api/estimate", params={"model": QWEN, "gpu": "h100", "kv-cache-dtype": "fp8", "engine": "sglang"})
    assert client.get("/api/estimate", params=query).json() == first


def test_openapi_lists_the_cli_options_and_the_deployment_knobs(client):
    spec = client.get("/openapi.json").json()
    names = {p["name"] for p in spec["paths"]["/api/estimate"]["get"]["parameters"]}
    assert {"model", "gpu", "gpu-memory", "context", "suggest", "command", "max-model-len", "kv-cache-dtype",
            "tensor-parallel-size"} <= names
    assert "config" not in names and "json" not in names  # a file on the server, and a printing switch
    body = spec["paths"]["/api/estimate"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert {"model", "gpu", "flags", "command"} <= set(body["properties"])
    assert "max_model_len" in body["properties"]["flags"]["properties"]
    simulate = {p["name"] for p in spec["paths"]["/api/simulate"]["get"]["parameters"]}
    assert {"requests", "prompt-len", "seed", "prefix-caching"} <= simulate and "trace" not in simulate
    assert client.get("/docs").status_code == 200


def test_the_readme_curl_runs(client):
    """README, 'The calculator as a web page and an HTTP API': each curl line answers what the README shows."""
    readme = (Path(__file__).parent.parent / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## The calculator as a web page"):readme.index("## Commands")]
    assert "![kvplan serve" in section and (Path(__file__).parent.parent / "docs" / "serve.png").is_file()
    block = section[section.index("```\n$ curl") + 4:]
    block = block[:block.index("```")]
    gets = re.findall(r"curl -s '(http://127\.0\.0\.1:8765(/api/[^']+))'", block)
    capacity = client.get(gets[0][1]).json()["capacity"]
    del capacity["ladder"]
    shown = block[block.index("{"):block.index("}") + 1]
    assert json.loads(shown) == capacity
    body = json.loads(re.search(r"-d '(\{.*\})'", block).group(1))
    tokens = block.split("jq .capacity.tokens\n")[1].split("\n")[0]
    assert client.post("/api/estimate", json=body).json()["capacity"]["tokens"] == int(tokens) == 2_248_768
    error = client.get(gets[1][1])
    assert error.status_code == 400 and error.json() == json.loads(block.strip().splitlines()[-1])
