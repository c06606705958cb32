"""A Deployment as the engine's own launch command, ready to paste: every knob that differs from its default,
spelled as that engine spells it."""

from __future__ import annotations

import json
import shlex
from functools import cache
from typing import Any

from kvplan.deployment import Deployment
from kvplan.deployment.declaration import knobs
from kvplan.deployment.knobs import AUTO, Knob

# The knobs a search sets, first on the line; the others follow in declaration order.
LEADING = ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size", "max_model_len", "kv_cache_dtype",
           "quantization")


@cache
def engine_has(engine: str, name: str) -> bool:
    """Whether the engine's own command line sets this knob: SGLang's and trtllm-serve's flag tables list the
    options that map onto kvplan's knobs; vLLM's flags are the knobs' own names."""
    from kvplan.deployment.declaration import BY_NAME
    from kvplan.deployment.dialect import dialect_of

    return dialect_of(engine).sets(BY_NAME()[name])


def launchable() -> list[str]:
    """The engines whose dialect names a launcher, so that a launch line can be printed."""
    from kvplan import registry

    return [name for name in registry.names() if registry.dialect(name).launchers]


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
    from kvplan.deployment.dialect import dialect_of

    dialect = dialect_of(dep.engine)
    model = shlex.quote(dep.model or "MODEL")
    words = [dialect.launcher, f"{dialect.model_flag} {model}" if dialect.model_flag else model]
    ordered = sorted(knobs(), key=lambda k: LEADING.index(k.name) if k.name in LEADING else len(LEADING))
    for knob in ordered:
        value = getattr(dep, knob.name)
        if knob.name == "model" or value is None or value == knob.default or not engine_has(dep.engine, knob.name):
            continue
        words.append(_flag(knob, dep.engine, value))
    env = [f"{k.env}={int(bool(getattr(dep, k.name)))}" for k in knobs()
           if k.env and getattr(dep, k.name) is not None]
    return " ".join(word for word in (*env, *words) if word)
