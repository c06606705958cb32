"""Engine command lines into a Draft: bare vLLM-style flags, or a whole pasted launch command (`vllm serve`,
`python -m vllm.entrypoints.openai.api_server`, `python -m sglang.launch_server`, `trtllm-serve`), read with
each engine's spelling rules: dashes or underscores, `--flag=value`, short forms (-tp), `--flag` / `--no-flag`
booleans, human-readable integers, JSON values, and the engine's `--config` file beneath the flags."""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from kvplan.deployment.declaration import BY_NAME, FLAGS_DOOR, env_knobs
from kvplan.deployment.knobs import Knob
from kvplan.deployment.values import Draft, all_spellings, did_you_mean, field_for
from kvplan.errors import KvplanError

ENV_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
PYTHON = re.compile(r"^python(\d+(\.\d+)?)?$")
MODULE_ENGINES = {"vllm.entrypoints.openai.api_server": "vllm", "vllm.entrypoints.api_server": "vllm",
                  "sglang.launch_server": "sglang"}


FLAG_TABLES = {"vllm": "flags_vllm", "sglang": "flags_sglang", "trtllm": "flags_trtllm"}


def flag_table(engine: str) -> ModuleType | None:
    """The engine's catalogue of flags kvplan does not model (deployment/flags_*.py), loaded on first need."""
    from importlib import import_module

    name = FLAG_TABLES.get(engine)
    return import_module(f"kvplan.deployment.{name}") if name else None


@dataclass(eq=False)
class Launch:
    """What a launch command names: its engine (None for bare flags) and the flags after the launcher."""

    engine: str | None
    launcher: str
    args: list[str]


# Shell words that end the command (pipes, lists, background, redirections) or run it inside another program.
SHELL_ENDINGS = ("|", "||", "&&", ";", "&", ">", ">>", "<", "2>", "2>>", "&>")
REDIRECTION = re.compile(r"^(\d*>>?|&>|<)(&\d+)?\S*$")
WRAPPERS = {"nohup": 1, "exec": 1, "time": 1, "env": 1, "sudo": 1, "uv": 2, "poetry": 2, "pipenv": 2}
DOCKER_IMAGES = ("vllm/vllm-openai", "vllm-openai")  # images whose entry point is vLLM's OpenAI server


def shell_words(text: str, where: str) -> list[str]:
    """A command line as the shell splits it: quotes, backslash-newline continuations, comments."""
    try:
        lexer = shlex.shlex(text.replace("\\\n", " "), posix=True, punctuation_chars=False)
        lexer.whitespace_split = True
        lexer.commenters = "#"
        return list(lexer)
    except ValueError as exc:  # an unclosed quote or a trailing backslash
        raise KvplanError(f"cannot split the command as a shell would: {exc}", where) from None


def _command_part(tokens: list[str]) -> list[str]:
    """The tokens of the one command: shell operators and redirections cut it, wrappers (nohup, uv run, ...)
    and environment assignments are stepped over by the caller."""
    for index, token in enumerate(tokens):
        if token in SHELL_ENDINGS or REDIRECTION.match(token):
            return tokens[:index]
    return tokens


def _docker_args(rest: list[str]) -> list[str] | None:
    """`docker run ... vllm/vllm-openai[:tag] ARGS`: the image's entry point is vLLM's OpenAI server."""
    if os.path.basename(rest[0]) not in ("docker", "podman") or rest[1:2] != ["run"]:
        return None
    for index, token in enumerate(rest[2:], start=2):
        image = token.split("@")[0].rsplit(":", 1)[0] if not token.startswith("-") else ""
        if any(image == known or image.endswith("/" + known) for known in DOCKER_IMAGES):
            args = rest[index + 1:]
            if args[:1] and not args[0].startswith("-"):
                return args  # the container runs its own command (vllm serve ..., python -m ...)
            return ["python", "-m", "vllm.entrypoints.openai.api_server", *args]
    return None


def split_launcher(tokens: list[str], where: str) -> tuple[dict[str, str], Launch]:
    """Environment assignments, the launcher and its arguments."""
    if len(tokens) == 1 and (" " in tokens[0].strip() or "\n" in tokens[0]):
        tokens = shell_words(tokens[0], where)
    tokens = _command_part(tokens)
    env: dict[str, str] = {}
    index = 0
    while index < len(tokens):
        if ENV_ASSIGNMENT.match(tokens[index]):
            name, _, value = tokens[index].partition("=")
            env[name] = value
            index += 1
        elif tokens[index] in WRAPPERS and index + 1 < len(tokens):
            step = WRAPPERS[tokens[index]]
            if step == 2 and tokens[index + 1] != "run":
                break
            index += step
        else:
            break
    rest = tokens[index:]
    docker = _docker_args(rest) if len(rest) > 1 else None
    if docker is not None:
        inner_env, launch = split_launcher(docker, where)
        return env | inner_env, launch
    if not rest or rest[0].startswith("-"):
        return env, Launch(None, "flags", rest)
    program = os.path.basename(rest[0])
    if program == "vllm":
        if rest[1:2] != ["serve"]:
            raise KvplanError(f"'vllm {' '.join(rest[1:2])}' does not start a server; expected 'vllm serve MODEL'",
                              where)
        return env, Launch("vllm", "vllm serve", rest[2:])
    if PYTHON.match(program) and rest[1:2] == ["-m"] and len(rest) > 2:
        engine = MODULE_ENGINES.get(rest[2])
        if engine is None:
            raise KvplanError(f"module {rest[2]!r} is not a server kvplan knows; expected "
                              f"{', '.join(MODULE_ENGINES)}", where)
        return env, Launch(engine, f"python -m {rest[2]}", rest[3:])
    if program == "trtllm-serve":
        args = rest[2:] if rest[1:2] == ["serve"] else rest[1:]
        return env, Launch("trtllm", "trtllm-serve", args)
    raise KvplanError(f"{rest[0]!r} is not a launch command kvplan reads; expected vllm serve, python -m "
                      "vllm.entrypoints.openai.api_server, python -m sglang.launch_server or trtllm-serve", where)


def parse_command(tokens: list[str] | str, where: str = "command line", engine: str | None = None,
                  version: str | None = None) -> Draft:
    """A launch command or bare engine flags (a list of words, or one string the shell would split). `engine`
    applies to bare flags (default vLLM); `version` is the engine version planned for."""
    if isinstance(tokens, str):
        tokens = [tokens]
    if not tokens:
        raise KvplanError("empty command", where)
    env, launch = split_launcher(list(tokens), where)
    chosen = launch.engine or engine or "vllm"
    draft = Draft(door=FLAGS_DOOR)
    if launch.engine is not None:
        draft.set("engine", launch.engine, f"{where}: {launch.launcher}")
    for name, value in env.items():
        knob_name = env_knobs().get(name)
        if knob_name is not None:
            draft.set(knob_name, value, name)
        elif name.startswith(("VLLM_", "SGLANG_", "TRTLLM_", "CUDA_", "NCCL_")):
            draft.notes.append(f"environment {name} is not modelled")
    flags = parse_flags(launch.args, chosen, where, positional_model=launch.engine in ("vllm", "trtllm"),
                        kvplan_knobs=launch.engine is None, version=version_tuple(version))
    config = flags.values.pop("config", None)
    if config is not None:
        from kvplan.deployment.config_file import read_engine_config

        # the file sits under the flags, as in vLLM and TensorRT-LLM >= 1.2 (flags_trtllm.EXTRA_OPTIONS_KNOBS)
        base = read_engine_config(str(config[0]), chosen)
        draft = base.override(draft)
    return draft.override(flags)


def version_tuple(text: str | None) -> tuple[int, int] | None:
    match = re.match(r"^v?(\d+)\.(\d+)", text.strip()) if text else None
    return (int(match.group(1)), int(match.group(2))) if match else None


def _short_flag(body: str, engine: str) -> str | None:
    """The long name of a single-dash flag: the knobs' own short forms, then the engine's catalogue."""
    from kvplan.deployment.declaration import knobs

    for knob in knobs():
        if body in knob.short:
            return knob.name.replace("_", "-")
    shorts: dict[str, str] = getattr(flag_table(engine), "SHORT", {})
    return shorts.get(body)


def _all_shorts(engine: str) -> list[str]:
    from kvplan.deployment.declaration import knobs

    return [s for knob in knobs() for s in knob.short] + list(getattr(flag_table(engine), "SHORT", {}))


def parse_flags(args: list[str], engine: str = "vllm", where: str = "command line",
                positional_model: bool = False, kvplan_knobs: bool = True, origin: str | None = None,
                version: tuple[int, int] | None = None) -> Draft:
    """Engine flags into a Draft; each value's origin is the flag as typed. kvplan_knobs: kvplan's own knobs
    (--engine, --weights-memory, ...) are allowed, as on kvplan's command line but not in a pasted one.
    origin: where every value came from, when not the flag itself (a key of a --config file).
    version: the engine version planned for, which decides whether a since-removed flag is still accepted."""
    draft = Draft(door=FLAGS_DOOR)
    inert: list[str] = []
    dotted: dict[str, list[tuple[str, str, str]]] = {}
    positional: str | None = None
    index = 0

    def take_value(flag: str, inline: str | None) -> str:
        nonlocal index
        if inline is not None:
            return inline
        if index < len(args) and not _looks_like_flag(args[index]):
            index += 1
            return args[index - 1]
        raise KvplanError("expects a value", flag)

    def skip(arity: str, inline: str | None) -> None:
        nonlocal index
        if inline is not None or arity in ("bool", "bool+no"):
            return
        if arity == "value":
            take_value(here, None)
        elif arity == "optional":
            if index < len(args) and not _looks_like_flag(args[index]):
                index += 1
        elif arity == "list":
            while index < len(args) and not _looks_like_flag(args[index]):
                index += 1

    while index < len(args):
        token = args[index]
        index += 1
        here = origin or token
        if not _looks_like_flag(token):
            if positional_model and positional is None:
                positional = token
                continue
            raise KvplanError(f"unexpected argument {token!r:.60}", where)
        body, has_value, inline_text = token.lstrip("-").partition("=")
        inline = inline_text if has_value else None
        flag_name, dot, subkey = body.partition(".")  # dashes for underscores only before a .key suffix
        name = flag_name.replace("_", "-").lower() + dot + subkey if token.startswith("--") else body
        if not token.startswith("--"):
            level = re.match(r"^O(\d+)$", body)  # -O3: the optimization level glued to its flag
            if level:
                name, inline = _short_flag("O", engine) or "compilation-config", level.group(1)
            else:
                long = _short_flag(body, engine)
                if long is None:
                    raise KvplanError(f"unknown short flag{did_you_mean(body, _all_shorts(engine), '-')}", here)
                name = long
        if name == "config" and engine in ("vllm", "sglang"):
            draft.set("config", take_value(here, inline), here)
            continue
        name, _, subkey = name.partition(".")
        if token.startswith("--") and not kvplan_knobs:
            _check_spelling(flag_name, name, engine, here)
        if field_for(name, engine) is None:
            name = getattr(flag_table(engine), "ALIASES", {}).get(name, name)
        name = _unabbreviated(name, engine)
        knob = field_for(name, engine)
        if subkey:
            if knob is None or knob.kind != "json":
                if knob is None and _known_elsewhere(name, engine):
                    take_value(here, inline)
                    draft.notes.append(f"--{name}.{subkey} is accepted but not modelled")
                    continue
                raise KvplanError("only JSON-valued flags take a .key suffix", here)
            dotted.setdefault(knob.name, []).append((subkey, take_value(here, inline), here))
            continue
        negated = None
        if knob is None and name.startswith("no-"):
            negated = field_for(name[3:], engine)
            if negated is not None and negated.kind != "bool":
                negated = None
        if negated is not None:
            draft.set(negated.name, False, here)
            continue
        if knob is not None and not knob.engine_flag and not kvplan_knobs:
            raise KvplanError(f"is kvplan's own flag, not {_engine_label(engine)}'s: give it to kvplan before the "
                              "pasted command", here)
        if knob is not None:
            _set_knob(draft, knob, here, inline, take_value)
            continue
        table = flag_table(engine)  # only flags kvplan does not model need the engine's catalogue
        known_inert: dict[str, Any] = getattr(table, "INERT", {})
        noted: dict[str, Any] = getattr(table, "NOTED", {})
        renamed: dict[str, Any] = getattr(table, "RENAMED", {})
        table_knob = getattr(table, "KNOBS", {}).get(name)
        if table_knob is not None:
            field_name, arity = table_knob
            if field_name == "config":  # trtllm-serve's --config / --extra_llm_api_options: read by the caller
                draft.set("config", take_value(here, inline), here)
            elif field_name in BY_NAME():
                _set_knob(draft, BY_NAME()[field_name], here, inline, take_value)
            else:
                skip(arity, inline)
                draft.notes.append(f"--{name} is accepted but not modelled")
            continue
        if name in known_inert or _negated_bool(name, known_inert) or _negated_bool(name, noted):
            inert.append("--" + name)
            skip(str(known_inert.get(name, "bool")), inline)
            continue
        if name in noted:
            arity, why = noted[name]
            draft.notes.append(f"--{name} is accepted but not modelled ({why})")
            skip(arity, inline)
            continue
        if name in renamed:
            new, when, refused, arity = renamed[name]
            if refused and not _still_there(when, version):
                raise KvplanError(f"this flag is gone from current {_engine_label(engine)} ({when}); today: {new}",
                                  here)
            draft.notes.append(f"--{name} is deprecated or gone ({when}); today: {new}")
            skip(arity, inline)
            continue
        if name in KVPLAN_OPTIONS and not kvplan_knobs:
            raise KvplanError("is an option of kvplan, not of the pasted command: put it before --", here)
        candidates = all_spellings(engine) + list(known_inert) + list(noted) + list(renamed)
        raise KvplanError(f"unknown {_engine_label(engine)} flag{did_you_mean(name, candidates, '--')}"
                          f"{_other_engines_flag(name, engine)}", here)
    if inert:
        draft.notes.append(INERT_NOTE + ", ".join(dict.fromkeys(inert)))
    for name, parts in dotted.items():
        _merge_dotted(draft, name, parts)
    if positional is not None:
        flagged = draft.values.get("model")
        if flagged is not None and flagged[0] != positional:
            # `vllm serve` serves its positional model whatever --model says (ServeSubcommand.cmd)
            draft.notes.append(f"the positional model {positional} is served; {flagged[1]} {flagged[0]} is ignored")
        draft.set("model", positional, "model (positional)")
    return draft


def _check_spelling(typed: str, name: str, engine: str, where: str) -> None:
    """A pasted command is spelled as its engine requires: SGLang takes dashes only, trtllm-serve its own
    underscore names; vLLM takes either."""
    table = flag_table(engine)
    label = _engine_label(engine)
    if not getattr(table, "UNDERSCORES_ACCEPTED", True) and "_" in typed:
        raise KvplanError(f"{label} spells its flags with dashes: --{name}", where)
    native = getattr(table, "NATIVE", {}).get(name)
    if not getattr(table, "DASHES_ACCEPTED", True) and native is not None and "--" + typed != native:
        raise KvplanError(f"{label} spells this flag {native}", where)


def _merge_dotted(draft: Draft, name: str, parts: list[tuple[str, str, str]]) -> None:
    """`--speculative-config.method ngram` and friends, merged into the flag's JSON object."""
    import json

    raw, where = draft.values.get(name, ({}, parts[0][2]))
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise KvplanError(f"invalid JSON: {exc.msg} at column {exc.colno}", where) from None
    if not isinstance(raw, dict):
        raise KvplanError("takes .key suffixes only on a JSON object", where)
    merged = dict(raw)
    for path, text, here in parts:
        target = merged
        keys = path.split(".")
        for key in keys[:-1]:
            target = target.setdefault(key, {})
            if not isinstance(target, dict):
                raise KvplanError(f"{key!r} is not an object", here)
        try:
            target[keys[-1]] = json.loads(text)
        except json.JSONDecodeError:
            target[keys[-1]] = text
    draft.set(name, merged, where)


def _unabbreviated(name: str, engine: str) -> str:
    """A unique prefix of a long flag stands for it, as argparse's allow_abbrev has it (vLLM keeps it on).
    An exact current flag wins; then a knob the prefix names; then any other flag."""
    from kvplan.deployment.values import field_for

    if field_for(name, engine) is not None or name.startswith("no-"):
        return name
    table = flag_table(engine)
    current = (getattr(table, "INERT", {}), getattr(table, "NOTED", {}))
    if any(name in flags for flags in current) or not getattr(table, "ABBREVIATIONS_ALLOWED", False):
        return name
    knobs: dict[str, str] = {}
    for spelling in all_spellings(engine):
        knob = field_for(spelling, engine)
        if knob is not None and spelling.startswith(name):
            knobs.setdefault(knob.name, spelling)
    others = {flag: flag for flags in (*current, getattr(table, "RENAMED", {})) for flag in flags
              if flag.startswith(name) and field_for(flag, engine) is None}
    if len(knobs) == 1 and (not others or name in getattr(table, "RENAMED", {})):
        return next(iter(knobs.values()))
    if name in others:
        return name
    targets = {**knobs, **others}
    if len(targets) == 1:
        return next(iter(targets.values()))
    if len(targets) > 1:
        raise KvplanError(f"ambiguous option: could match {', '.join('--' + t for t in sorted(targets.values()))}",
                          "--" + name)
    return name


def _other_engines_flag(name: str, engine: str) -> str:
    """' (it is SGLang's: add --engine sglang)' when another engine has the flag this one lacks."""
    from kvplan.engines import NAMES

    for other in NAMES:
        if other != engine and flag_table(other) is not None and (
                field_for(name, other) is not None or _known_elsewhere(name, other)):
            return f" (it is {_engine_label(other)}'s: add --engine {other})"
    return ""


def _known_elsewhere(name: str, engine: str) -> bool:
    table = flag_table(engine)
    return any(name in getattr(table, kind, {}) for kind in ("INERT", "NOTED", "RENAMED"))


INERT_NOTE = "not memory-relevant: "
KVPLAN_OPTIONS = ("json", "suggest", "context", "schema", "gpu", "gpu-memory", "engine", "vllm-version", "token")


def _negated_bool(name: str, flags: dict[str, Any]) -> bool:
    """`--no-X` for an on/off flag X: argparse's BooleanOptionalAction, and the hidden --no- forms vLLM 0.33 keeps
    for its --enable-X / --disable-X pairs."""
    if not name.startswith("no-"):
        return False
    arity = flags.get(name[3:])
    arity = arity[0] if isinstance(arity, tuple) else arity
    return arity == "bool+no" or (arity == "bool" and name[3:].startswith(("enable-", "disable-")))


def _still_there(when: str, version: tuple[int, int] | None) -> bool:
    """A flag the catalogue marks removed is still accepted by an older engine version (`last in v0.17.1`)."""
    last = re.search(r"last in v(\d+)\.(\d+)", when)
    return bool(version and last and version <= (int(last.group(1)), int(last.group(2))))


def _set_knob(draft: Draft, knob: Knob, here: str, inline: str | None, take_value: Any) -> None:
    if knob.kind == "bool":
        draft.set(knob.name, True if inline is None else inline, here)
    else:
        draft.set(knob.name, take_value(here, inline), here)


def _looks_like_flag(token: str) -> bool:
    return token.startswith("-") and len(token) > 1 and not re.match(r"^-\d", token)


def _engine_label(engine: str) -> str:
    """How the engine names itself (its Engine's label), for messages."""
    from kvplan.engines import NAMES
    from kvplan.engines import engine as engine_for

    return engine_for(engine).label if engine in NAMES else engine
