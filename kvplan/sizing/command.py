"""A Deployment as the engine's own launch command, ready to paste: every knob that differs from its default,
spelled as that engine spells it."""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from functools import cache
from typing import Any

from kvplan.deployment import Deployment
from kvplan.deployment.declaration import knobs
from kvplan.deployment.knobs import AUTO, Knob


@dataclass(frozen=True)
class Launcher:
    """How an engine's server is started, and how it takes the model."""

    program: str
    model_flag: str | None  # None: the model is the first argument


LAUNCHERS = {
    "vllm": Launcher("vllm serve", None),
    "sglang": Launcher("python -m sglang.launch_server", "--model-path"),
    "trtllm": Launcher("trtllm-serve", None),
}
# The knobs a search sets, first on the line; the others follow in declaration order.
LEADING = ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size", "max_model_len", "kv_cache_dtype",
           "quantization")


@cache
def engine_has(engine: str, name: str) -> bool:
    """Whether the engine's own command line sets this knob: SGLang's and trtllm-serve's flag tables list the
    options that map onto kvplan's knobs; vLLM's flags are the knobs' own names."""
    from kvplan.deployment.declaration import BY_NAME
    from kvplan.deployment.launch import flag_table

    knob = BY_NAME()[name]
    if not knob.engine_flag or (knob.engines and engine not in knob.engines):
        return False
    table: dict[str, tuple[str, str]] | None = getattr(flag_table(engine), "KNOBS", None)
    return table is None or any(field == name for field, _ in table.values())


def _value(knob: Knob, value: Any) -> str:
    if knob.kind == "json":
        return shlex.quote(json.dumps(value, separators=(",", ":")))
    if value == AUTO and knob.auto:
        return "auto"
    return shlex.quote(str(value))


def _flag(knob: Knob, engine: str, value: Any) -> str:
    from kvplan.levers import flag

    if knob.kind == "bool":
        return flag(knob.name, engine, "").strip() if value else ""
    return flag(knob.name, engine, _value(knob, value))


def unspoken(dep: Deployment) -> list[str]:
    """Knobs the deployment sets that the engine's command line cannot say."""
    return [k.name for k in knobs() if k.engine_flag and k.name != "model" and getattr(dep, k.name) != k.default
            and not engine_has(dep.engine, k.name)]


def launch_command(dep: Deployment) -> str:
    """The launch line; environment switches (VLLM_... = ...) in front of it."""
    launcher = LAUNCHERS[dep.engine]
    model = shlex.quote(dep.model or "MODEL")
    words = [launcher.program, f"{launcher.model_flag} {model}" if launcher.model_flag else model]
    ordered = sorted(knobs(), key=lambda k: LEADING.index(k.name) if k.name in LEADING else len(LEADING))
    for knob in ordered:
        value = getattr(dep, knob.name)
        if knob.name == "model" or value is None or value == knob.default or not engine_has(dep.engine, knob.name):
            continue
        words.append(_flag(knob, dep.engine, value))
    env = [f"{k.env}={int(bool(getattr(dep, k.name)))}" for k in knobs()
           if k.env and getattr(dep, k.name) is not None]
    return " ".join(word for word in (*env, *words) if word)
