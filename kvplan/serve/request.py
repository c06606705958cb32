"""A request read into the CLI's front doors: a command's own options (typed as the CLI types them), engine
flags spelled as on the command line, and a pasted launch command. It remembers how the user spelled each field,
so that an error from the core names that field."""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kvplan.serve.errors import ApiError
from kvplan.serve.options import DEPLOYMENT_FIELDS, NOT_OVER_HTTP, Own, command_function, own_options

if TYPE_CHECKING:
    from kvplan.deployment import Deployment

COMMAND_FIELD = "command"
FLAGS_FIELD = "flags"
TRUE, FALSE = ("", "true", "1", "yes", "on"), ("false", "0", "no", "off")


@dataclass
class Request:
    command: str  # the CLI command: estimate, size or simulate
    values: dict[str, Any] = field(default_factory=dict)  # own option parameter -> value, as typer would pass it
    flags: list[str] = field(default_factory=list)  # engine flags as the CLI would get them
    pasted: list[str] | None = None
    fields: dict[str, str] = field(default_factory=dict)  # a spelling the core names -> the field as sent

    @property
    def options(self) -> dict[str, Own]:
        return own_options(command_function(self.command))

    def option(self, name: str) -> Any:
        """The value given, else the CLI's default."""
        return self.values[name] if name in self.values else self.options[name].default

    def flag_of(self, name: str) -> str:
        return self.options[name].flag

    def deployment(self) -> Deployment:
        """The Deployment as kvplan/cli's deployment_of builds it, reading no environment: a request carries
        all of its inputs."""
        from kvplan.deployment.front_doors import from_cli

        own = {DEPLOYMENT_FIELDS[name]: (value, self.flag_of(name)) for name, value in self.values.items()
               if name in DEPLOYMENT_FIELDS and value is not None}
        return from_cli(own, list(self.flags), None, self.pasted, environ={})

    def field_of(self, where: str | None) -> str | None:
        """The field a core error names (a flag as the CLI spells it, '--max_model_len=abc'), as the user sent
        it; inside a pasted command, the command."""
        if not where:
            return None
        head = where.split("=", 1)[0] if where.startswith("-") else where
        if head in self.fields:
            return self.fields[head]
        options = {own.flag: own.key for own in self.options.values()}
        if head in options:  # an option the request left out ("no GPU given")
            return options[head]
        for name, value in self.values.items():  # some sources name the value itself: '7' is not a model id
            if isinstance(value, str) and where in (value, repr(value)):
                return self.fields.get(self.flag_of(name), name)
        if self.pasted is not None:
            return COMMAND_FIELD
        return where

    def cli(self) -> list[str]:
        """The kvplan command line that gives the same answer."""
        args = ["kvplan", self.command]
        for name, value in self.values.items():
            flag = self.flag_of(name)
            if isinstance(value, bool):
                if value != self.options[name].default:
                    args.append(flag if value else f"--no-{flag.lstrip('-')}")
            elif isinstance(value, list):
                for item in value:
                    args += [flag, str(item)]
            elif value is not None:
                args += [flag, str(value)]
        args += self.flags
        if self.pasted is not None:
            args += ["--", *self.pasted]
        return args


def from_items(command: str, items: Iterable[tuple[str, Any]], engine_flags: Iterable[tuple[str, Any]] = ()) -> Request:
    """A request from (field, value) pairs: a command's own options, 'command' (a pasted launch command) and,
    for any other field, an engine flag; engine_flags are engine flags only (a JSON body's flags object)."""
    request = Request(command)
    options = own_options(command_function(command))
    for key, value in items:
        name = key.lstrip("-")
        if name == COMMAND_FIELD:
            if request.pasted is not None:
                raise ApiError("given twice; give one launch command", key)
            request.pasted = _pasted(value)
        elif name in options and options[name].name not in NOT_OVER_HTTP:
            own = options[name]
            typed = _typed(own, value, key)
            if own.kind == "list":  # repeatable, as --target is on the command line
                request.values[own.name] = request.values.get(own.name, []) + typed
            elif own.name in request.values:
                raise ApiError("given twice; give each field once", key)
            else:
                request.values[own.name] = typed
            request.fields[own.flag] = key
        elif name in options or name.replace("-", "_") in NOT_OVER_HTTP:
            reason = NOT_OVER_HTTP[options[name].name if name in options else name.replace("-", "_")]
            raise ApiError(f"not taken over HTTP: {reason}", key)
        else:
            _add_flag(request, key, value, key)
    for key, value in engine_flags:
        _add_flag(request, key, value, key)
    return request


def _pasted(value: Any) -> list[str]:
    if isinstance(value, list) and all(isinstance(part, str) for part in value):
        words = list(value)
    elif isinstance(value, str):
        try:
            words = shlex.split(value)
        except ValueError as exc:
            raise ApiError(f"cannot split the launch command as a shell would: {exc}", COMMAND_FIELD) from None
    else:
        raise ApiError("expected a launch command: a string (vllm serve MODEL ...) or a list of words", COMMAND_FIELD)
    words = [word for word in words if word != "\\"]  # a line continuation pasted from a shell script
    if not words:
        raise ApiError("the launch command is empty", COMMAND_FIELD)
    return words


def _typed(own: Own, value: Any, key: str) -> Any:
    """The value as typer would pass it to the CLI function; JSON values or query text."""
    if own.kind == "list":
        items = value if isinstance(value, list) else [value]
        if not all(isinstance(item, str | int | float) and not isinstance(item, bool) for item in items):
            raise ApiError("expected a string or a list of strings", key)
        return [str(item) for item in items]
    if isinstance(value, bool):
        if own.kind != "bool":
            raise ApiError(f"expected {'an integer' if own.kind == 'int' else 'a value'}, got {json.dumps(value)}", key)
        return value
    if own.kind == "bool":
        text = str(value).strip().lower()
        if text in TRUE or text in FALSE:
            return text in TRUE
        raise ApiError(f"expected true or false, got {str(value)[:40]!r}", key)
    if not isinstance(value, str | int | float):
        raise ApiError(f"expected a {'number' if own.kind in ('int', 'float') else 'string'}", key)
    if own.kind == "int":
        try:
            return int(str(value).strip())
        except ValueError:
            raise ApiError(f"expected an integer, got {str(value)[:40]!r}", key) from None
    if own.kind == "float":
        try:
            number = float(str(value).strip())
        except ValueError:
            raise ApiError(f"expected a number, got {str(value)[:40]!r}", key) from None
        if number != number or number in (float("inf"), float("-inf")):
            raise ApiError("expected a finite number", key)
        return number
    return str(value)


def _shorts() -> set[str]:
    from kvplan.deployment.declaration import knobs

    return {short for knob in knobs() for short in knob.short}


def _add_flag(request: Request, key: str, value: Any, field_name: str) -> None:
    """An engine flag as typed on a command line (the engines' notes quote flags as typed): --key value, a bare
    --key for true or an empty query value, --key=false, --key=-1 for a value that starts with a dash, and
    vLLM's single-dash short names (-tp 2)."""
    name = key.lstrip("-")
    if not name:
        raise ApiError("empty flag name", field_name)
    flag = key if key.startswith("-") else (f"-{name}" if name in _shorts() else f"--{name}")
    if flag in request.fields:
        raise ApiError("given twice; give each field once", field_name)
    request.fields[flag] = field_name
    if isinstance(value, bool) or (isinstance(value, str) and value.strip().lower() in ("", "true", "false")):
        switched = value if isinstance(value, bool) else value.strip().lower() != "false"
        request.flags.append(flag if switched else f"{flag}=false")
        return
    if isinstance(value, dict | list):
        text = json.dumps(value)
    elif isinstance(value, str | int | float):
        text = str(value)
    else:
        raise ApiError("expected a string, a number, true or false, or a JSON object", field_name)
    request.flags += [f"{flag}={text}"] if text.startswith("-") else [flag, text]
