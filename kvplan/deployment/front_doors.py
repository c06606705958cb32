"""The front doors that combine sources: kvplan's command line (its own options, engine flags, the engine's
--config file and a pasted launch command). Precedence as in vLLM and TensorRT-LLM 1.2+: the file, then the
pasted command, then the flags typed to kvplan."""

from __future__ import annotations

import os
from typing import Any

from kvplan import registry
from kvplan.deployment.declaration import FLAGS_DOOR, Deployment, env_knobs, env_switch
from kvplan.deployment.values import Draft
from kvplan.errors import KvplanError


def from_cli(own: dict[str, tuple[Any, str]], flags: list[str], config: str | None,
             pasted: list[str] | None, environ: dict[str, str] | None = None) -> Deployment:
    """own: kvplan's typed options, field -> (value, flag as typed); flags: the engine flags typed to kvplan.
    Lowest first: the shell's environment, the --config file, the pasted command (its own VAR=value
    assignments included), the engine flags typed to kvplan, kvplan's own options."""
    environ = dict(os.environ) if environ is None else environ
    draft = Draft(door=FLAGS_DOOR)
    for variable, name in env_knobs().items():
        value = environ.get(variable)
        # set but empty is a value vLLM reads (env_switch refuses it as vLLM does); LMCache's are passed over
        if value is not None and (value != "" or variable.startswith("VLLM_")):
            draft.set(name, env_switch(variable, value), variable)
    typed = Draft()
    for name, (value, where) in own.items():
        typed.set(name, value, where)
    engine = str(own.get("engine", (registry.DEFAULT, ""))[0]).lower()
    version = own.get("engine_version", (None, ""))[0]
    pasted_draft = None
    if pasted:
        from kvplan.deployment.launch import parse_command

        pasted_draft = parse_command(pasted, "pasted command", engine, version)
        launcher = pasted_draft.values.get("engine")
        if launcher is not None and "engine" in own and str(own["engine"][0]).lower() != launcher[0]:
            raise KvplanError(f"the pasted command starts {launcher[0]}, so its flags are {launcher[0]}'s; drop "
                              f"--engine or paste a {own['engine'][0]} command", own["engine"][1])
        engine = str(launcher[0] if launcher else engine).lower()
    flags_draft = None
    if flags:  # the launch-command parser loads only when there are engine flags to read
        from kvplan.deployment.flags import parse_flags
        from kvplan.deployment.launch import version_tuple

        # the engine's own reading of its words (SGLang's --dp N --enable-dp-attention), as for a launch line
        reads_words = registry.dialect(engine).reads_words if engine in registry.names() else None
        words = reads_words(flags) if reads_words is not None else flags
        flags_draft = parse_flags(words, engine, "command line", version=version_tuple(version))
        flagged = flags_draft.values.pop("config", None)  # trtllm-serve's --extra_llm_api_options, typed to kvplan
        if flagged is not None:
            if config is not None:
                raise KvplanError(f"one options file: --config {config} is given too", flagged[1])
            config = str(flagged[0])
    if config is not None:
        from kvplan.deployment.config_file import read_engine_config

        draft.override(read_engine_config(config, engine))
    if pasted_draft is not None:
        draft.override(pasted_draft)
    if flags_draft is not None:
        draft.override(flags_draft)
    return draft.override(typed).deployment()
