"""One parsed document of a file, with its key lines and the file's own `kvplan:` settings."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kvplan.check.lines import LocatedError, Path, scoped
from kvplan.check.requirements import REQUIREMENT_KEYS, SETTING_KEYS
from kvplan.errors import KvplanError

SETTINGS_KEYS = ("kvplan", "x-kvplan")  # x-kvplan: docker-compose refuses unknown top-level keys without x-


@dataclass(eq=False)
class Source:
    path: str  # as the user named it
    document: Any
    lines: dict[Path, int] = field(default_factory=dict)
    text: str = ""  # the file's text, for settings kept in a comment
    broken: KvplanError | None = None  # a document of a multi-document file that cannot be parsed
    broken_line: int | None = None

    def line(self, *path: Any) -> int | None:
        return self.lines.get(tuple(path))

    def flat_lines(self, *prefix: Any) -> dict[str, int]:
        """The lines of the keys of the mapping at prefix (nested keys dotted), by key."""
        return {".".join(str(p) for p in path): line for path, line in scoped(self.lines, tuple(prefix)).items()}

    def error(self, message: str, *path: Any) -> LocatedError:
        """A mistake at a key of the file, with the key's line for the report."""
        return LocatedError(message, self.where(*path), self.line(*path))

    def where(self, *path: Any) -> str:
        if not path:
            return self.path
        line = self.line(*path)
        dotted = ".".join(str(p) if not isinstance(p, int) else f"[{p}]" for p in path).replace(".[", "[")
        return f"{self.path}:{line}: {dotted}" if line else f"{self.path}: {dotted}"


@dataclass(eq=False)
class Settings:
    """What a `kvplan:` mapping says for every deployment of the file."""

    knobs: dict[str, tuple[Any, str]] = field(default_factory=dict)  # Deployment field -> (raw, where)
    requirements: dict[str, Any] = field(default_factory=dict)
    lines: dict[str, int] = field(default_factory=dict)


COMMENT = "# kvplan"  # a vLLM --config file keeps kvplan's settings in a comment: `# kvplan: {gpu: a10g}`


def comment_settings(source: Source) -> Settings:
    """The `# kvplan: {...}` comment of a vLLM --config file. vLLM turns every top-level key of that file into a
    flag (FlexibleArgumentParser.load_config_file), so a `kvplan:` key would make `vllm serve` refuse the file;
    a comment is the one place vLLM does not read."""
    import re

    import yaml

    for number, line in enumerate(source.text.splitlines(), 1):
        match = re.match(r"\s*#\s*kvplan:\s*(.*?)\s*$", line)
        if not match:
            continue
        where = f"{source.path}:{number}: {COMMENT}"
        try:
            mapping = yaml.safe_load(match.group(1)[:4096]) if match.group(1) else None
        except yaml.YAMLError:
            mapping = None
        if not isinstance(mapping, dict):
            raise LocatedError("expected a one-line mapping, e.g. # kvplan: {gpu: h100, vllm_version: \"0.11\"}",
                               where, number)
        lines: dict[Path, int] = {(COMMENT, str(key)): number for key in mapping}
        lines[(COMMENT,)] = number
        located = Source(source.path, source.document, lines, source.text)
        return _settings(located, {str(k): v for k, v in mapping.items()}, (COMMENT,))
    return Settings()


ANNOTATION_PREFIX = "kvplan/"  # Kubernetes refuses unknown fields: a manifest says it in annotations


def read_settings(source: Source) -> Settings:
    """The file's `kvplan:` (or `x-kvplan:`) mapping."""
    document = source.document
    key = next((k for k in SETTINGS_KEYS if isinstance(document, dict) and k in document), None)
    if key is None:
        return Settings()
    mapping = document[key]
    if not isinstance(mapping, dict):
        raise source.error(f"expected a mapping (gpu, vllm_version, requirements), got {type(mapping).__name__}",
                           key)
    return _settings(source, {str(k): v for k, v in mapping.items()}, (key,))


def annotation_settings(source: Source, annotations: Any, path: tuple[Any, ...]) -> Settings:
    """A manifest's `kvplan/KEY: VALUE` annotations (min_requests_at as JSON: {"context": N, "requests": M})."""
    import json

    if not isinstance(annotations, dict):
        return Settings()
    mapping: dict[str, Any] = {}
    for name, value in annotations.items():
        if not str(name).startswith(ANNOTATION_PREFIX):
            continue
        key = str(name).removeprefix(ANNOTATION_PREFIX)
        if key == "min_requests_at" and isinstance(value, str):
            try:
                value = json.loads(value)
            except json.JSONDecodeError as exc:
                raise source.error(f"expected JSON ({exc.msg})", *path, name) from None
        mapping[str(name)] = value
    settings = _settings(source, {k.removeprefix(ANNOTATION_PREFIX): v for k, v in mapping.items()}, path,
                         prefix=ANNOTATION_PREFIX)
    return settings


def _settings(source: Source, mapping: dict[str, Any], path: tuple[Any, ...], prefix: str = "") -> Settings:
    from kvplan.check.item import knob_for
    from kvplan.deployment.values import did_you_mean

    settings = Settings(lines={k.removeprefix(prefix): v for k, v in source.flat_lines(*path).items()})
    for name, value in mapping.items():
        if name in REQUIREMENT_KEYS:
            settings.requirements[name] = value
        elif name.replace("-", "_") in SETTING_KEYS:
            knob = knob_for(name)
            assert knob is not None  # every setting key is a knob's spelling
            settings.knobs[knob.name] = (value, source.where(*path, prefix + name))
            settings.lines[knob.name] = settings.lines.get(name, 0)
        else:
            raise source.error(f"unknown key{did_you_mean(name, [*SETTING_KEYS, *REQUIREMENT_KEYS])}", *path,
                               prefix + name)
    return settings
