"""The pydantic model of a deployment, built from the same Knob declarations as the fast validator, for the
file formats (kvplan check) and `kvplan estimate --schema`. Text forms (32K, 24GiB, JSON strings) are read by
the same parsers as on the command line; type, range and choices are pydantic's own checks."""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Literal

from kvplan.deployment.declaration import knobs
from kvplan.deployment.knobs import AUTO, Knob
from kvplan.errors import KvplanError

NUMBER_TEXT = r"^\s*[0-9]+(\.[0-9]+)?\s*[kKmMgGtT]?\s*$"  # vLLM's human-readable integers: 32K, 25.6k
SIZE_TEXT = r"^\s*[0-9]+(\.[0-9]+)?\s*([kKmMgGtT]|[kKmMgGtT]i?[bB]|[bB])?\s*$"  # 24G, 24GB, 24GiB


def _python_type(knob: Knob) -> Any:
    """The knob's type for pydantic. Strict where a lax pydantic would bend a value the command line refuses
    (True as the integer 1, 3 as the text "3"); text forms are read before, by _text_reader."""
    from typing import Annotated

    from pydantic import Strict

    if knob.allowed:
        return Literal[knob.allowed]
    strict_int = Annotated[int, Strict()]
    json_object = Annotated[dict[str, Any], Strict()]
    return {"int": strict_int, "size": strict_int, "float": Annotated[float, Strict()], "str": Annotated[str, Strict()],
            "bool": bool,
            "json": json_object | strict_int if knob.json_level else json_object}[knob.kind]


def _schema_extra(knob: Knob) -> dict[str, Any]:
    extra: dict[str, Any] = {}
    if knob.default_rule:
        extra["x-default-rule"] = knob.default_rule
    from kvplan import registry

    spellings = [knob.name.replace("_", "-"), *knob.aliases]
    for engine in registry.names():
        spellings += [f"{name} ({engine})" for name in registry.dialect(engine).knob_spellings.get(knob.name, ())
                      if name not in spellings]
    extra["x-spellings"] = spellings
    return extra


def _text_form(knob: Knob, schema: dict[str, Any]) -> None:
    """Integers and sizes may be written as text (32K, 24GiB), and JSON knobs as a JSON string on a command
    line: the schema says so."""
    text = {"int": NUMBER_TEXT, "size": SIZE_TEXT}.get(knob.kind)
    if text is not None:
        schema.setdefault("anyOf", []).insert(1, {"type": "string", "pattern": text})
    if knob.auto:
        schema["anyOf"].insert(1, {"enum": ["auto", -1]})


def _text_reader(knob: Knob) -> Any:
    """What a knob's text form means, for pydantic: the same parsers of numbers, sizes and JSON as the command
    line uses; every other rule (type, range, choices) is pydantic's own, from the declaration."""
    import json

    from kvplan.units import parse_human_int, parse_size

    def read(value: Any) -> Any:
        if isinstance(value, float) and knob.kind in ("int", "size") and value.is_integer():
            return int(value)  # 4096.0 from a YAML or JSON file is the integer 4096
        if not isinstance(value, str):
            return value
        text = value.strip()
        try:
            if knob.auto and text.lower() == "auto":
                return AUTO
            if knob.kind == "int":
                return parse_human_int(text, knob.name)
            if knob.kind == "size":
                return parse_size(text, knob.name)
            if knob.kind == "float":
                return float(text)
            if knob.kind == "json":
                return int(text) if knob.json_level and text.isdigit() else json.loads(text)
        except KvplanError as exc:
            raise ValueError(exc.message) from None
        except (ValueError, RecursionError) as exc:
            raise ValueError(f"cannot read {text!r:.40}: {exc}") from None
        if knob.allowed:
            return next((c for c in knob.allowed if str(c).lower() == text.lower()), value)
        return value

    return read


@lru_cache(maxsize=1)
def deployment_model() -> Any:
    """A pydantic model with one optional field per knob; unknown keys are refused."""
    from typing import Annotated

    from pydantic import BeforeValidator, ConfigDict, Field, create_model

    definitions: dict[str, Any] = {}
    for knob in knobs():
        bounds: dict[str, Any] = {}
        if knob.kind in ("int", "size", "float"):
            if knob.minimum is not None:
                bounds["gt" if knob.exclusive_minimum else "ge"] = knob.minimum
            if knob.maximum is not None:
                bounds["le"] = knob.maximum
        if knob.kind == "float":
            bounds["allow_inf_nan"] = False

        def extra(schema: dict[str, Any], knob: Knob = knob) -> None:
            schema.update(_schema_extra(knob))
            _text_form(knob, schema)

        inner = Annotated[_python_type(knob), Field(**bounds)] if bounds else _python_type(knob)
        if knob.auto:
            inner = inner | Literal[AUTO]
        annotated = Annotated[inner | None, BeforeValidator(_text_reader(knob)),  # type: ignore[valid-type]
                              Field(description=knob.help, json_schema_extra=extra)]
        definitions[knob.name] = (annotated, knob.default)
    return create_model("Deployment", __config__=ConfigDict(extra="forbid"), **definitions)


def json_schema() -> dict[str, Any]:
    schema: dict[str, Any] = deployment_model().model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "kvplan deployment"
    schema["description"] = ("One deployment: model, GPU, engine and its knobs by vLLM's names (dashes or "
                             "underscores); other engines' own names are listed under x-spellings.")
    return schema
