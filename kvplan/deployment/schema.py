"""The pydantic model of a deployment, built from the same Knob declarations as the fast validator, for the
file formats (kvplan check) and `kvplan estimate --schema`. Each field first runs the fast validator's own
conversion, then pydantic's checks of type and range, so the two accept and refuse the same values."""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Literal

from kvplan.deployment.declaration import knobs
from kvplan.deployment.knobs import AUTO, Knob
from kvplan.errors import KvplanError

NUMBER_TEXT = r"^\s*[0-9]+(\.[0-9]+)?\s*[kKmMgGtT]?\s*$"  # vLLM's human-readable integers: 32K, 25.6k
SIZE_TEXT = r"^\s*[0-9]+(\.[0-9]+)?\s*([kKmMgGtT]|[kKmMgGtT]i?[bB]|[bB])?\s*$"  # 24G, 24GB, 24GiB


def _python_type(knob: Knob) -> Any:
    if knob.choices:
        return Literal[knob.choices]
    return {"int": int, "size": int, "float": float, "str": str, "bool": bool,
            "json": dict[str, Any] | int if knob.json_level else dict[str, Any]}[knob.kind]


def _schema_extra(knob: Knob) -> dict[str, Any]:
    extra: dict[str, Any] = {}
    if knob.default_rule:
        extra["x-default-rule"] = knob.default_rule
    spellings = [knob.name.replace("_", "-"), *knob.aliases]
    for engine, names in knob.engine_aliases.items():
        spellings += [f"{name} ({engine})" for name in names]
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


@lru_cache(maxsize=1)
def deployment_model() -> Any:
    """A pydantic model with one optional field per knob; unknown keys are refused."""
    from typing import Annotated

    from pydantic import BeforeValidator, ConfigDict, Field, create_model

    from kvplan.deployment.values import coerce

    definitions: dict[str, Any] = {}
    for knob in knobs():
        bounds: dict[str, Any] = {}
        if knob.kind in ("int", "size", "float"):
            if knob.minimum is not None:
                bounds["gt" if knob.exclusive_minimum else "ge"] = knob.minimum
            if knob.maximum is not None:
                bounds["le"] = knob.maximum

        def convert(value: Any, knob: Knob = knob) -> Any:
            try:
                return coerce(knob, value, knob.name)
            except KvplanError as exc:
                raise ValueError(str(exc).removeprefix(f"{knob.name}: ")) from None

        def extra(schema: dict[str, Any], knob: Knob = knob) -> None:
            schema.update(_schema_extra(knob))
            _text_form(knob, schema)

        inner = Annotated[_python_type(knob), Field(**bounds)] if bounds else _python_type(knob)
        if knob.auto:
            inner = inner | Literal[AUTO]
        annotated = Annotated[inner | None, BeforeValidator(convert),  # type: ignore[valid-type]
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
