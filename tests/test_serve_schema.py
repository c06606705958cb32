"""kvplan serve's response schema: every /api endpoint's answer is described in the /openapi.json the server
serves (kvplan/serve/responses.py builds it from the dataclasses and to_dict code the CLI's documents come from),
and real answers validate against it, closed: a key a document gains, loses or retypes fails here."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from kvplan.plan import Plan
from kvplan.serve.app import create_app

QWEN = "Qwen/Qwen2.5-7B"
EXAMPLES = Path(__file__).parent.parent / "examples"
ANNOTATIONS = {"title", "description", "default"}


@pytest.fixture(scope="module")
def client():
    return TestClient(create_app())


@pytest.fixture(scope="module")
def spec(client):
    return client.get("/openapi.json").json()


def problems(value: Any, schema: dict[str, Any], spec: dict[str, Any], at: str = "$") -> list[str]:
    """Where value breaks the JSON Schema (the subset OpenAPI 3.1 uses here). A keyword it does not know fails,
    so a schema cannot pass by using one it skips."""
    if "$ref" in schema:
        name = schema["$ref"].removeprefix("#/components/schemas/")
        return problems(value, spec["components"]["schemas"][name], spec, at)
    unknown = set(schema) - ANNOTATIONS - {"type", "properties", "required", "additionalProperties", "items",
                                          "anyOf"}
    if unknown:
        return [f"{at}: keywords this check does not know: {sorted(unknown)}"]
    if "anyOf" in schema:
        if any(not problems(value, option, spec, at) for option in schema["anyOf"]):
            return []
        return [f"{at}: matches none of {len(schema['anyOf'])} shapes: "
                + "; ".join(p for option in schema["anyOf"] for p in problems(value, option, spec, at)[:2])]
    kind = schema.get("type")
    checks = {"string": lambda v: isinstance(v, str), "boolean": lambda v: isinstance(v, bool),
              "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
              "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
              "null": lambda v: v is None, "array": lambda v: isinstance(v, list),
              "object": lambda v: isinstance(v, dict)}
    if kind is not None and not checks[kind](value):
        return [f"{at}: {value!r:.60} is not {kind}"]
    found: list[str] = []
    if kind == "array" and "items" in schema:
        for index, item in enumerate(value):
            found += problems(item, schema["items"], spec, f"{at}[{index}]")
    if kind == "object":
        properties = schema.get("properties", {})
        found += [f"{at}: {key} is required and missing" for key in schema.get("required", []) if key not in value]
        for key, item in value.items():
            if key in properties:
                found += problems(item, properties[key], spec, f"{at}.{key}")
            elif schema.get("additionalProperties") is False:
                found.append(f"{at}: {key} is not in the schema")
            elif isinstance(schema.get("additionalProperties"), dict):
                found += problems(item, schema["additionalProperties"], spec, f"{at}.{key}")
    return found


def answer_schema(spec: dict[str, Any], method: str, path: str, status: int = 200) -> dict[str, Any]:
    schema: dict[str, Any] = spec["paths"][path][method]["responses"][str(status)]["content"]["application/json"][
        "schema"]
    return schema


def valid(client, spec, method: str, path: str, status: int = 200, **request: Any) -> Any:
    response = getattr(client, method)(path, **request)
    assert response.status_code == status, response.text
    document = response.json()
    found = problems(document, answer_schema(spec, method, path, status), spec)
    assert not found, found[:5]
    return document


ESTIMATES = [
    {"model": QWEN, "gpu": "rtx3090"},  # README's first run: four levers
    {"model": QWEN, "gpu": "h100", "tp": "2", "suggest": "true", "context": "4K,32K"},
    {"model": "meta-llama/Llama-3.1-70B", "gpu": "h100,h200", "tp": "4"},  # a list of two plans
    {"model": QWEN, "gpu": "h100", "engine": "sglang", "mem-fraction-static": "0.85"},
    {"model": QWEN, "gpu": "h100", "engine": "trtllm"},
    {"model": "meta-llama/Llama-3.1-70B", "gpu": "h100", "tp": "2", "pp": "2"},
    {"model": "Qwen/Qwen3-30B-A3B", "gpu": "h100", "tp": "2", "enable-expert-parallel": ""},  # expert placement
    {"model": "openai/gpt-oss-20b", "gpu": "h100", "engine": "sglang"},  # SGLang's full and sliding pools
    {"model": "openai/gpt-oss-20b", "gpu": "h100"},  # vLLM's MXFP4 experts
]


@pytest.mark.parametrize("query", ESTIMATES)
def test_estimates_validate_against_the_served_schema(client, spec, query):
    assert valid(client, spec, "get", "/api/estimate", params=query) == valid(client, spec, "post", "/api/estimate",
                                                                              json=query)


def test_the_cases_reach_the_optional_parts(client):
    # the estimates above reach every part of the schema that is null or absent in the first one
    documents = [client.get("/api/estimate", params=query).json() for query in ESTIMATES]
    plans = [plan for document in documents for plan in (document if isinstance(document, list) else [document])]
    assert any(plan.get("levers") for plan in plans) and any("levers" not in plan for plan in plans)
    assert any(plan["pools"] for plan in plans)
    assert any(plan["engine"]["expert_placement"] for plan in plans)
    assert any(plan["engine"]["mxfp4_experts"] for plan in plans)
    assert any(plan["parallel"]["pipeline"] == 2 for plan in plans)
    assert {plan["engine"]["name"] for plan in plans} == {"vllm", "sglang", "trtllm"}


def test_working_size_simulate_check_models_gpus_validate(client, spec):
    valid(client, spec, "get", "/api/estimate/working", params={"model": QWEN, "gpu": "rtx3090"})
    size = valid(client, spec, "post", "/api/size", json={"model": QWEN, "target": ["32@8K", "2@32K"],
                                                          "gpus": "h100,l40s", "price": "h100=2.9,l40s=0.9"})
    assert size["options"] and size["best_per_gpu"]
    closest = valid(client, spec, "get", "/api/size", params={"model": "meta-llama/Llama-3.1-70B",
                                                              "target": "500@128K", "gpus": "l40s", "max-gpus": "2"})
    assert closest["options"] == [] and closest["closest"]  # nothing meets: the closest tries
    simulate = valid(client, spec, "get", "/api/simulate",
                     params={"model": QWEN, "gpu": "rtx3090", "max-model-len": "4096", "requests": "200",
                             "shared-prefix": "512", "prefix-groups": "4", "rate": "50", "step-time": "10,1"})
    assert simulate["step_time"] is not None and "shared_prefix" in simulate["workload"]
    valid(client, spec, "post", "/api/simulate", json={"gpu": "rtx3090", "requests": 100,
                                                       "command": f"vllm serve {QWEN} --max-model-len 8192"})
    for example in ("deployments-fail.yaml", "deployments-pass.yaml", "k8s-deployment.yaml"):
        text = (EXAMPLES / example).read_text(encoding="utf-8")
        assert valid(client, spec, "post", "/api/check", json={"text": text, "name": example})
    assert any(row["id"] == QWEN for row in valid(client, spec, "get", "/api/models"))
    assert any(gpu["id"] == "rtx3090" for gpu in valid(client, spec, "get", "/api/gpus"))


def test_mistakes_validate_against_the_error_schema(client, spec):
    body = valid(client, spec, "get", "/api/estimate", 400, params={"model": QWEN, "gpu": "rtx3090",
                                                                    "max-model-len": "lots"})
    assert body["field"] == "max-model-len"
    valid(client, spec, "post", "/api/simulate", 422, json={"model": QWEN, "gpu": "rtx3090", "requests": 10**6})


def test_every_api_route_has_a_typed_answer(spec):
    routes = [(path, method) for path, methods in spec["paths"].items() if path.startswith("/api/")
              for method in methods]
    assert len(routes) == 10
    for path, method in routes:
        schema = answer_schema(spec, method, path)
        assert schema.get("$ref") or schema.get("items") or schema.get("anyOf"), (path, method, schema)
        assert answer_schema(spec, method, path, 400) == {"$ref": "#/components/schemas/ErrorBody"}


def test_every_key_is_required_and_no_other_is_taken(spec):
    # a document always writes its keys (null when there is nothing): so a key the code stops writing fails too
    optional = {("Estimate", "levers"), ("SimulateWorkload", "shared_prefix"), ("SimulateWorkload", "prefix_groups"),
                ("SimulateWorkload", "clipped_to_max_model_len")}
    for name, schema in spec["components"]["schemas"].items():
        assert schema["additionalProperties"] is False, name
        for key in schema["properties"]:
            assert (key in schema.get("required", [])) != ((name, key) in optional), (name, key)


def test_a_key_the_schema_does_not_know_fails(client, spec, monkeypatch):
    original = Plan.to_dict
    monkeypatch.setattr(Plan, "to_dict", lambda self: {**original(self), "new_figure": 1})
    document = client.get("/api/estimate", params={"model": QWEN, "gpu": "rtx3090"}).json()
    assert document["new_figure"] == 1
    found = problems(document, answer_schema(spec, "get", "/api/estimate"), spec)
    assert len(found) == 1 and "$: new_figure is not in the schema" in found[0]
    monkeypatch.setattr(Plan, "to_dict", lambda self: {**original(self), "capacity": {
        **original(self)["capacity"], "tokens": "many"}})
    document = client.get("/api/estimate", params={"model": QWEN, "gpu": "rtx3090"}).json()
    assert "$.capacity.tokens: 'many' is not integer" in problems(document, answer_schema(
        spec, "get", "/api/estimate"), spec)[0]


def test_the_schema_takes_what_json_dumps_writes():
    schema = {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"],
              "additionalProperties": False}
    assert problems({"x": math.inf}, schema, {}) == []  # a document the CLI prints with Infinity is served as is
    assert problems({"x": True}, schema, {}) == ["$.x: True is not number"]
    assert problems({"x": 1, "y": 2}, schema, {}) == ["$: y is not in the schema"]
    assert problems({}, schema, {}) == ["$: x is required and missing"]
