"""The OpenAPI description of the requests, from the same declarations the CLI reads: each command's own
options from its typer signature, the engine flags from the Deployment's knobs (deployment/schema.py)."""

from __future__ import annotations

from typing import Any

from kvplan.serve.options import NOT_OVER_HTTP, Own, command_function, own_options

JSON_TYPES: dict[str, dict[str, Any]] = {"str": {"type": "string"}, "int": {"type": "integer"}, "float": {"type": "number"},
              "bool": {"type": "boolean"}, "list": {"type": "array", "items": {"type": "string"}}}
COMMAND_HELP = ("A pasted launch command: vllm serve MODEL ..., python -m sglang.launch_server ..., trtllm-serve "
                "MODEL ...; read as the engine reads it.")


def _options(command: str) -> list[Own]:
    unique = {own.name: own for own in own_options(command_function(command)).values()}
    return [own for own in unique.values() if own.name not in NOT_OVER_HTTP]


def _flag_properties() -> dict[str, Any]:
    from kvplan.deployment.schema import json_schema

    properties: dict[str, Any] = json_schema()["properties"]
    return properties


def query_parameters(command: str) -> dict[str, Any]:
    """GET: the command's own options, a pasted command, and every engine knob (dashes or underscores; any other
    flag the engine takes is accepted too)."""
    parameters = [{"name": own.key, "in": "query", "required": False, "description": own.help,
                   "schema": JSON_TYPES[own.kind] if own.kind != "bool" else {"type": "string"}}
                  for own in _options(command)]
    parameters.append({"name": "command", "in": "query", "required": False, "description": COMMAND_HELP,
                       "schema": {"type": "string"}})
    own_names = {own.key for own in _options(command)}
    for name, schema in _flag_properties().items():
        key = name.replace("_", "-")
        if key not in own_names:
            parameters.append({"name": key, "in": "query", "required": False,
                               "description": schema.get("description", ""), "schema": {"type": "string"}})
    return {"parameters": parameters}


def request_body(command: str) -> dict[str, Any]:
    """POST: the command's own options, and the engine flags as an object (or a pasted command)."""
    properties: dict[str, Any] = {own.key: {**JSON_TYPES[own.kind], "description": own.help}
                                  for own in _options(command)}
    properties["command"] = {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}],
                             "description": COMMAND_HELP}
    properties["flags"] = {"type": "object", "properties": _flag_properties(), "additionalProperties": True,
                           "description": "Engine flags by the engine's names, dashes or underscores (true for a "
                                          "bare switch); flags the engine takes that do not change memory are "
                                          "accepted and listed in the notes."}
    schema = {"type": "object", "properties": properties, "additionalProperties": False}
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}


def check_body() -> dict[str, Any]:
    properties = {
        "text": {"type": "string", "description": "The file's text: a deployment list, vLLM --config file, "
                                                  "Kubernetes manifest, Helm values, compose file or config.json."},
        "name": {"type": "string", "description": "The file's name in the findings (default deployment.yaml, or "
                                                  "config.json for JSON text)."},
        "kind": {"type": "string", "description": "Read the file as this kind (kvplan check --kind)."},
        "gpu": {"type": "string", "description": "GPU for deployments that name none."},
        "select": {"type": "string", "description": "Only these rule ids or prefixes, comma-separated."},
        "ignore": {"type": "string", "description": "Drop these rule ids or prefixes, comma-separated."},
    }
    schema = {"type": "object", "properties": properties, "required": ["text"], "additionalProperties": False}
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}
