"""The front doors that combine sources: kvplan's command line (its own options, engine flags, a vLLM --config
file and a pasted launch command). Precedence as in vLLM: the file, then the pasted command, then the flags
typed to kvplan."""

from __future__ import annotations

import os
from typing import Any

from kvplan.deployment.declaration import Deployment, env_knobs
from kvplan.deployment.values import Draft


def from_cli(own: dict[str, tuple[Any, str]], flags: list[str], config: str | None,
             pasted: list[str] | None, environ: dict[str, str] | None = None) -> Deployment:
    """own: kvplan's typed options, field -> (value, flag as typed); flags: the engine flags typed to kvplan."""
    environ = dict(os.environ) if environ is None else environ
    typed = Draft()
    for name, (value, where) in own.items():
        typed.set(name, value, where)
    for variable, name in env_knobs().items():
        if environ.get(variable, "") != "":
            typed.set(name, environ[variable], variable)
    engine = str(own.get("engine", ("vllm", ""))[0]).lower()
    version = own.get("engine_version", (None, ""))[0]
    draft = Draft()
    if pasted:
        from kvplan.deployment.launch import parse_command

        draft.update(parse_command(pasted, "pasted command", engine, version))
        engine = str(draft.values.get("engine", (engine, ""))[0]).lower()
    if config is not None:
        from kvplan.deployment.config_file import read_config

        draft = read_config(config, engine).override(draft)
    if flags:  # the launch-command parser loads only when there are engine flags to read
        from kvplan.deployment.launch import parse_flags, version_tuple

        draft.override(parse_flags(flags, engine, "command line", version=version_tuple(version)))
    return draft.override(typed).deployment()
