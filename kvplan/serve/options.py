"""A command's own options, read from its CLI function's signature: the API takes what the CLI takes, under the
same names, types and defaults, so the two cannot drift apart."""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

# Options that name a file on the server or change what is printed: a request cannot use them.
NOT_OVER_HTTP = {
    "config": "paste the file's flags under flags, or the launch command as command",
    "trace": "a trace names a file on the server; use the synthetic workload options",
    "plot": "the chart is not served",
    "prices": "give prices as price",
    "token": "the server sends no Hub token",
    "schema": "the schema is at /openapi.json",
    "json_output": "the API always answers JSON",
}

# Own options that build the Deployment, and the Deployment field each sets (as kvplan/cli passes them).
DEPLOYMENT_FIELDS = {"model": "model", "gpu": "gpu", "gpu_memory": "gpu_memory_bytes", "engine": "engine",
                     "vllm_version": "engine_version", "entrypoint": "entrypoint", "revision": "revision",
                     "kv_cache_memory": "kv_cache_memory_bytes"}


@dataclass(frozen=True)
class Own:
    name: str  # the CLI function's parameter
    flag: str  # its first spelling on the command line, --gpu-memory
    kind: str  # str, int, float, bool or list
    default: Any
    help: str

    @property
    def key(self) -> str:
        return self.flag.lstrip("-")


def _kind(annotation: Any) -> str:
    base = typing.get_args(annotation)[0] if typing.get_origin(annotation) is typing.Annotated else annotation
    if isinstance(base, types.UnionType) or typing.get_origin(base) is typing.Union:
        base = next(arg for arg in typing.get_args(base) if arg is not type(None))
    if typing.get_origin(base) is list:
        return "list"
    return {int: "int", float: "float", bool: "bool"}.get(base, "str")


@cache
def own_options(function: Callable[..., Any]) -> dict[str, Own]:
    """Every spelling of each option (gpu_memory, gpu-memory, and short names like m) -> the option."""
    hints = typing.get_type_hints(function, include_extras=True)
    found: dict[str, Own] = {}
    for name, parameter in inspect.signature(function).parameters.items():
        annotation = hints.get(name)
        if typing.get_origin(annotation) is not typing.Annotated:
            continue  # the click context
        info = typing.get_args(annotation)[1]
        # inside Annotated, typer reads Option's first argument (its "default") as the first spelling
        spellings = [info.default, *getattr(info, "param_decls", ())]
        decls = [d.split("/")[0] for d in spellings if isinstance(d, str) and d.startswith("-")]
        if not decls:
            continue
        own = Own(name, decls[0], _kind(annotation), parameter.default, getattr(info, "help", "") or "")
        for spelling in {name, name.replace("_", "-"), *(d.lstrip("-") for d in decls)}:
            found[spelling] = own
    return found


def command_function(command: str) -> Callable[..., Any]:
    from importlib import import_module

    function: Callable[..., Any] = import_module(f"kvplan.cli.{command}").COMMAND
    return function
