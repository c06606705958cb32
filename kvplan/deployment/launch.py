"""Engine command lines into a Draft: bare vLLM-style flags, or a whole pasted launch command (`vllm serve`,
`python -m vllm.entrypoints.openai.api_server`, `python -m sglang.launch_server`, `trtllm-serve`, or any other
launcher an engine's dialect names), with the engine's `--config` file beneath the flags. The flags themselves are
read by deployment.flags."""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass

from kvplan import registry
from kvplan.deployment.declaration import FLAGS_DOOR, env_knobs, env_switch
from kvplan.deployment.dialect import Dialect
from kvplan.deployment.flags import parse_flags
from kvplan.deployment.values import Draft
from kvplan.errors import KvplanError

ENV_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
PYTHON = re.compile(r"^python(\d+(\.\d+)?)?$")
SHARED_ENV_PREFIXES = ("CUDA_", "NCCL_")  # variables of the CUDA runtime and NCCL, read by every engine


@dataclass(eq=False)
class EngineCommand:
    """What a launch command names: its engine (None for bare flags) and the flags after the launcher."""

    engine: str | None
    launcher: str
    args: list[str]
    release: str | None = None  # the engine release a pinned container image runs
    notes: tuple[str, ...] = ()  # what the launcher itself makes kvplan say (a benchmark's own flags passed over)


# Shell words that end the command (pipes, lists, background, redirections) or run it inside another program.
SHELL_ENDINGS = ("|", "||", "&&", ";", "&", ">", ">>", "<", "2>", "2>>", "&>")
REDIRECTION = re.compile(r"^(\d*>>?|&>|<)(&\d+)?\S*$")
WRAPPERS = {"nohup": 1, "exec": 1, "time": 1, "env": 1, "sudo": 1, "uv": 2, "poetry": 2, "pipenv": 2}


def dialects() -> Iterator[Dialect]:
    """Every engine's dialect, each loaded when the search reaches it: `vllm serve` never loads SGLang's."""
    return (registry.dialect(name) for name in registry.names())


def image_dialect(reference: str) -> Dialect | None:
    """The engine whose server a container image runs, by the images each dialect names."""
    return next((d for d in dialects() if d.images and d.serves_image(reference)), None)


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


def _docker_args(rest: list[str]) -> tuple[list[str], str | None] | None:
    """`docker run ... IMAGE[:tag] ARGS` for an image whose entry point is an engine's server: the command the
    container runs, and the release its tag pins where the image's tags are the engine's releases."""
    if os.path.basename(rest[0]) not in ("docker", "podman") or rest[1:2] != ["run"]:
        return None
    for index, token in enumerate(rest[2:], start=2):
        dialect = image_dialect(token.split("@")[0]) if not token.startswith("-") else None
        if dialect is not None:
            args = rest[index + 1:]
            release = image_release(token) if dialect.image_tags_are_releases else None
            if args[:1] and not args[0].startswith("-"):
                return args, release  # the container runs its own command (vllm serve ..., python -m ...)
            return ["python", "-m", dialect.modules[0], *args], release
    return None


def image_release(reference: str) -> str | None:
    """The release an image tag names (vllm/vllm-openai:v0.20.0 -> 0.20.0); None for latest, nightly or none."""
    last = reference.split("@", 1)[0].rsplit("/", 1)[-1]
    match = re.match(r"^v?(\d+\.\d+(?:\.\d+)?)", last.split(":", 1)[1]) if ":" in last else None
    return match.group(1) if match else None


def split_launcher(tokens: list[str], where: str) -> tuple[dict[str, str], EngineCommand]:
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
        inner_env, launch = split_launcher(docker[0], where)
        launch.release = docker[1]
        return env | inner_env, launch
    if not rest or rest[0].startswith("-"):
        return env, EngineCommand(None, "flags", rest)
    return env, _launch(rest, where)


def _launch(rest: list[str], where: str) -> EngineCommand:
    """The engine whose launcher starts the words: a program (and its subcommand) or `python -m MODULE`."""
    program = os.path.basename(rest[0])
    if PYTHON.match(program) and rest[1:2] == ["-m"] and len(rest) > 2:
        server = next((d for d in dialects() if rest[2] in d.modules), None)
        bench = next(((d, b) for d in dialects() for b in d.bench_modules if b.module == rest[2]), None)
        if server is None and bench is not None:
            args, own = bench[1].split(rest[3:])
            notes = (f"python -m {rest[2]}: its own flags {', '.join(dict.fromkeys(own))} are passed over "
                     f"({bench[1].note}); the rest are read as {bench[0].label}'s server flags",) if own else ()
            return EngineCommand(bench[0].name, f"python -m {rest[2]}", args, notes=notes)
        if server is None:
            modules = [module for d in dialects() for module in d.modules]
            raise KvplanError(f"module {rest[2]!r} is not a server kvplan knows; expected {', '.join(modules)}",
                              where)
        return EngineCommand(server.name, f"python -m {rest[2]}", rest[3:])
    for dialect in dialects():
        for known in dialect.programs:
            if program != known.name:
                continue
            if known.subcommand is None:
                return EngineCommand(dialect.name, known.name, rest[1:])
            if rest[1:2] == [known.subcommand]:
                return EngineCommand(dialect.name, dialect.launcher, rest[2:])
            if known.subcommand_optional:
                return EngineCommand(dialect.name, dialect.launcher, rest[1:])
            raise KvplanError(f"'{program} {' '.join(rest[1:2])}' does not start a server; expected "
                              f"'{program} {known.subcommand} MODEL'", where)
    launchers = [launcher for d in dialects() for launcher in d.launchers]
    raise KvplanError(f"{rest[0]!r} is not a launch command kvplan reads; expected {', '.join(launchers[:-1])} or "
                      f"{launchers[-1]}", where)


def parse_command(tokens: list[str] | str, where: str = "command line", engine: str | None = None,
                  version: str | None = None) -> Draft:
    """A launch command or bare engine flags (a list of words, or one string the shell would split). `engine`
    applies to bare flags (default vLLM); `version` is the engine version planned for."""
    if isinstance(tokens, str):
        tokens = [tokens]
    if not tokens:
        raise KvplanError("empty command", where)
    env, launch = split_launcher(list(tokens), where)
    chosen = launch.engine or engine or registry.DEFAULT
    draft = Draft(door=FLAGS_DOOR)
    if launch.engine is not None:
        draft.set("engine", launch.engine, f"{where}: {launch.launcher}")
    if launch.release is not None and version is None:
        version = launch.release
        draft.set("engine_version", launch.release, f"{where}: image tag {launch.release}")
    _read_environment(draft, env)
    draft.notes.extend(launch.notes)
    positional = launch.engine is not None and registry.dialect(launch.engine).positional_model
    reads_words = registry.dialect(chosen).reads_words if chosen in registry.names() else None
    if reads_words is not None:
        launch.args = reads_words(launch.args)
    flags = parse_flags(launch.args, chosen, where, positional_model=positional, kvplan_knobs=launch.engine is None,
                        version=release_tuple(version))
    config = flags.values.pop("config", None)
    if config is not None:
        from kvplan.deployment.config_file import read_engine_config

        # the file sits under the flags, as in vLLM and TensorRT-LLM >= 1.2 (trtllm's flags.EXTRA_OPTIONS_KNOBS)
        base = read_engine_config(str(config[0]), chosen)
        draft = base.override(draft)
    return draft.override(flags)


def _read_environment(draft: Draft, env: dict[str, str]) -> None:
    """Variables in front of the command: the engines' switches kvplan models, a note for the others."""
    if not env:
        return
    prefixes = (*SHARED_ENV_PREFIXES, *(d.env_prefix for d in dialects() if d.env_prefix))
    for name, value in env.items():
        knob_name = env_knobs().get(name)
        if knob_name is not None:
            draft.set(knob_name, env_switch(name, value), name)
        elif name.startswith(prefixes):
            gone = next((d.catalogue().renamed_env[name] for d in dialects() if name in d.catalogue().renamed_env),
                        None)
            draft.notes.append(f"environment {name} is gone ({gone[1]}); today: {gone[0]}" if gone
                               else f"environment {name} is not modelled")


def release_tuple(text: str | None) -> tuple[int, ...] | None:
    """A release as numbers to the patch where it has one (v0.5.4 -> (0, 5, 4)): what flag removals compare. A part
    of over 9 digits is no release (and past Python's int-from-str limit at 4,300)."""
    match = re.match(r"^v?(\d{1,9})\.(\d{1,9})(?:\.(\d{1,9}))?(?!\d)", text.strip()) if text else None
    return tuple(int(part) for part in match.groups() if part is not None) if match else None


def version_tuple(text: str | None) -> tuple[int, int] | None:
    match = re.match(r"^v?(\d{1,9})\.(\d{1,9})(?!\d)", text.strip()) if text else None
    return (int(match.group(1)), int(match.group(2))) if match else None
