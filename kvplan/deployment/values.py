"""Reading and checking knob values against their declarations, without pydantic (it costs the estimate path
more start-up time than the whole command may take). Text from a command line and native values from a
mapping or a YAML file go through the same rules; errors name the knob as the user spelled it."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from kvplan import registry
from kvplan.deployment.declaration import BY_NAME, DOOR, Deployment, knobs
from kvplan.deployment.knobs import AUTO, Knob
from kvplan.errors import KvplanError
from kvplan.units import parse_human_int, parse_size

# The words pydantic reads as booleans, so that the file formats and the command line agree.
TRUE_WORDS = ("true", "t", "1", "yes", "y", "on")
FALSE_WORDS = ("false", "f", "0", "no", "n", "off")


def _range_text(knob: Knob) -> str:
    low = "(" if knob.exclusive_minimum else "["
    return f"{low}{_number(knob.minimum)}, {_number(knob.maximum)}]"


def _number(value: float | None) -> str:
    if value is None:
        return "..."
    if isinstance(value, int):  # exact, and a float() of a huge one would overflow
        text = f"{value:,}"
        return text if len(text) <= 40 else text[:40] + "..."
    return f"{int(value):,}" if value.is_integer() else str(value)


def check_value(knob: Knob, value: Any, where: str) -> None:
    """A typed value against its knob: type, choices and range."""
    if knob.auto and value == AUTO and not isinstance(value, bool):
        return
    kind = knob.kind
    if kind in ("int", "size"):
        if isinstance(value, bool) or not isinstance(value, int):
            raise KvplanError(f"expected an integer, got {value!r:.60}", where)
    elif kind == "float":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise KvplanError(f"expected a number, got {value!r:.60}", where)
    elif kind == "bool":
        if not isinstance(value, bool):
            raise KvplanError(f"expected true or false, got {value!r:.60}", where)
    elif kind == "str":
        if not isinstance(value, str):
            raise KvplanError(f"expected text, got {value!r:.60}", where)
    elif kind == "json" and not isinstance(value, dict):
        level = knob.json_level and isinstance(value, int) and not isinstance(value, bool)
        if not level:
            raise KvplanError(f"expected a JSON object, got {value!r:.60}", where)
    if isinstance(value, str) and value in knob.unmodelled:
        raise KvplanError(knob.unmodelled[value], where)
    if knob.allowed and value not in knob.allowed:
        raise KvplanError(f"invalid choice {value!r:.60} (choose from {', '.join(map(str, knob.allowed))})", where)
    if kind in ("int", "size", "float"):
        low, high = knob.minimum, knob.maximum
        below = low is not None and (value <= low if knob.exclusive_minimum else value < low)
        if below or (high is not None and value > high):
            raise KvplanError(f"must be within {_range_text(knob)}, got {_number(value)}", where)


def coerce(knob: Knob, raw: Any, where: str) -> Any:
    """Text or a native value (from YAML, JSON or Python) into the knob's type; then checked."""
    value = _convert(knob, raw, where)
    if value is not None:
        check_value(knob, value, where)
    return value


def _convert(knob: Knob, raw: Any, where: str) -> Any:
    if raw is None:
        return None
    kind = knob.kind
    if isinstance(raw, float) and kind in ("int", "size") and math.isfinite(raw) and raw.is_integer():
        return int(raw)
    if kind == "bool" and type(raw) is int and raw in (0, 1):
        return bool(raw)  # as "0" / "1" are read
    if kind == "float" and type(raw) is int:
        return float(raw)
    if not isinstance(raw, str):
        return raw
    if kind == "str" and not knob.allowed:
        return raw  # as written: a model id with a stray space is an error where ids are checked
    text = raw.strip()
    if knob.auto and text.lower() == "auto":
        return AUTO
    if kind == "int":
        return parse_human_int(text, where)
    if kind == "size":
        return parse_size(text, where)
    if kind == "float":
        try:
            return float(text)
        except ValueError:
            raise KvplanError(f"expected a number, got {raw!r:.60}", where) from None
    if kind == "bool":
        lowered = text.lower()
        if lowered in TRUE_WORDS or lowered in FALSE_WORDS:
            return lowered in TRUE_WORDS
        raise KvplanError(f"expected true or false, got {raw!r:.60}", where)
    if kind == "json":
        if knob.json_level and text.isdigit():
            return int(text)
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise KvplanError(f"invalid JSON: {exc.msg} at column {exc.colno}", where) from None
        except RecursionError:
            raise KvplanError("JSON nested too deeply", where) from None
    if knob.allowed:
        lowered = text.lower()
        return next((c for c in knob.allowed if str(c).lower() == lowered), text)
    return text


@dataclass
class Draft:
    """Knob values gathered from the front doors before they become a Deployment: field -> (raw value, where
    it came from). A later layer overrides an earlier one (a vLLM --config file, then the command line)."""

    values: dict[str, tuple[Any, str]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    door: str | None = None  # how knobs not given are named in errors: by flag, or as a mapping's keys

    def set(self, name: str, raw: Any, where: str) -> None:
        self.values[name] = (raw, where)

    def override(self, other: Draft) -> Draft:
        """update(), noting each value the other layer replaces with a different one."""
        for name, (raw, where) in other.values.items():
            before = self.values.get(name)
            if before is not None and str(before[0]) != str(raw):
                self.notes.append(f"{where} {raw} wins over {before[1]} {before[0]}")
        return self.update(other)

    def update(self, other: Draft) -> Draft:
        self.values.update(other.values)
        self.door = self.door or other.door
        self.notes.extend(n for n in other.notes if n not in self.notes)
        return self

    def deployment(self) -> Deployment:
        kwargs: dict[str, Any] = {}
        origins: dict[str, str] = {DOOR: self.door} if self.door else {}
        for name, (raw, where) in self.values.items():
            value = coerce(BY_NAME()[name], raw, where)
            if value is not None:
                kwargs[name] = value
                origins[name] = where
        return Deployment(**kwargs, origins=origins, notes=tuple(self.notes))


def field_for(key: str, engine: str = registry.DEFAULT) -> Knob | None:
    """The knob a key names in any of its spellings: field name, flag with dashes or underscores, an alias,
    or this engine's own name for it."""
    return _spelling_index(engine).get(key.strip().lstrip("-").replace("_", "-").lower())


@cache
def _spelling_index(engine: str) -> dict[str, Knob]:
    from kvplan.deployment.dialect import dialect_of

    dialect = dialect_of(engine)
    index: dict[str, Knob] = {}
    for knob in knobs():
        for spelling in dialect.spellings(knob):
            index.setdefault(spelling, knob)  # the first knob that claims a spelling keeps it, as the scan did
    return index


def all_spellings(engine: str = registry.DEFAULT) -> list[str]:
    from kvplan.deployment.dialect import dialect_of

    dialect = dialect_of(engine)
    return [spelling for knob in knobs() for spelling in dialect.spellings(knob)]


def did_you_mean(word: str, candidates: list[str], prefix: str = "") -> str:
    import difflib

    close = difflib.get_close_matches(word, candidates, n=2, cutoff=0.6)
    return f"; did you mean {' or '.join(prefix + c for c in close)}?" if close else ""


def draft_from_mapping(mapping: Any, where: str, engine: str | None = None,
                       lines: dict[str, int] | None = None) -> Draft:
    """A plain mapping of knobs (the Python API, check files): keys in any spelling of the engine."""
    if not isinstance(mapping, dict):
        raise KvplanError(f"expected a mapping of knob names to values, got {type(mapping).__name__}", where)
    engine = engine or str(mapping.get("engine") or registry.DEFAULT).lower()
    draft = Draft(door=where)
    for key, raw in mapping.items():
        line = f":{lines[key]}" if lines and key in lines else ""
        here = f"{where}{line}: {key}"
        knob = field_for(str(key), engine)
        if knob is None:
            raise KvplanError(f"unknown knob{_other_engines_knob(str(key), engine)}"
                              f"{did_you_mean(str(key).replace('_', '-'), all_spellings(engine))}", here)
        draft.set(knob.name, raw, here)
    return draft


def _other_engines_knob(key: str, engine: str) -> str:
    """' of vLLM (it is TensorRT-LLM's: set engine to trtllm)' when another engine has the knob this one lacks."""
    if engine not in registry.names():
        return ""
    for other in registry.names():
        if other != engine and field_for(key, other) is not None:
            return f" of {registry.label(engine)} (it is {registry.label(other)}'s: set engine to {other})"
    return ""


def from_mapping(mapping: Any, where: str = "deployment") -> Deployment:
    return draft_from_mapping(mapping, where).deployment()
