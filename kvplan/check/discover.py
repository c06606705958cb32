"""The files a check reads: named files, globs, and directories searched for the kinds check reads (YAML
files and config.json), with symlink loops reported instead of followed forever."""

from __future__ import annotations

import glob
import os
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kvplan.errors import KvplanError

if TYPE_CHECKING:
    from kvplan.check.source import Source

YAML_SUFFIXES = (".yaml", ".yml")
MODEL_CONFIG = "config.json"
GLOB_CHARS = ("*", "?", "[")


@dataclass(frozen=True)
class Found:
    path: str
    error: KvplanError | None = None  # the path cannot be searched (a symlink loop, a glob that matches nothing)
    named: bool = False  # named on the command line itself (not found by walking a folder or by a glob)


def discover(paths: list[str]) -> list[Found]:
    found: list[Found] = []
    for path in paths:
        if any(char in path for char in GLOB_CHARS) and not os.path.lexists(path):
            matches = sorted(glob.glob(path, recursive=True))
            if not matches:
                found.append(Found(path, KvplanError("no file matches this pattern", path)))
            for match in matches:
                found.extend(_walk(match) if os.path.isdir(match) else [Found(match)])
        elif os.path.isdir(path):
            found.extend(_walk(path))
        else:
            found.append(Found(path, named=True))
    unique: dict[str, Found] = {}
    for item in found:
        # A file reached twice (a glob's ** follows symbolic links, loops included) is read once.
        key = os.path.normpath(item.path) if item.error else os.path.realpath(item.path)
        unique.setdefault(key, item)
    return list(unique.values())


def _walk(root: str) -> list[Found]:
    found: list[Found] = []
    visited = {os.path.realpath(root)}
    for folder, dirs, files in os.walk(root, followlinks=True):
        real = os.path.realpath(folder)
        kept = []
        for name in sorted(dirs):
            full = os.path.join(folder, name)
            if name.startswith(".") or name in ("node_modules", "__pycache__"):
                continue
            target = os.path.realpath(full)
            if os.path.islink(full) and (target in visited or real.startswith(target + os.sep) or target == real):
                found.append(Found(full, KvplanError("symbolic link loop: it leads back to a folder already "
                                                     "searched; not followed", full)))
                continue
            visited.add(target)
            kept.append(name)
        dirs[:] = kept
        for name in sorted(files):
            full = os.path.join(folder, name)
            if os.path.islink(full) and not os.path.exists(full):
                found.append(Found(full, KvplanError("symbolic link that leads nowhere (a loop, or a missing "
                                                     "target)", full)))
            elif name.endswith(YAML_SUFFIXES) or name == MODEL_CONFIG:
                found.append(Found(full))
    return found


def load_sources(path: str) -> list[Source]:
    """The documents of one file as Sources, each with its key lines. Raises KvplanError for a file that
    cannot be read or parsed (bounded in size, aliases and depth by deployment.config_file)."""
    from kvplan.check.source import Source
    from kvplan.deployment.config_file import load_located, read_text

    text = read_text(path)
    if not text.strip():
        raise KvplanError("file is empty; expected a deployment file, a vLLM config, a manifest or a config.json",
                          path)
    if path.endswith(".json"):
        document = _json(text, path)
        try:
            lines = load_located(text, path)[0][1]
        except (KvplanError, IndexError):  # JSON that YAML does not read (tabs): no lines, same checks
            lines = {}
        return [Source(path, document, lines, text)]
    try:
        return [Source(path, document, lines, text) for document, lines in load_located(text, path)]
    except KvplanError as exc:
        starts = [m.start() for m in DOCUMENT_START.finditer(text)]
        if not starts or (len(starts) == 1 and not text[:starts[0]].strip()):
            raise
        error = exc
    return _each_document(path, text, starts, error)


DOCUMENT_START = re.compile(r"^---(?:[ \t].*)?$", re.MULTILINE)


def _each_document(path: str, text: str, starts: list[int], whole: KvplanError) -> list[Source]:
    """A multi-document file that does not parse as a whole, read document by document: each readable one is
    a Source, a broken one a Source that carries its error and line (the parser's marks stay the file's own:
    each document is parsed behind as many blank lines as precede it)."""
    from kvplan.check.source import Source
    from kvplan.deployment.config_file import ExpansionError, load_located

    bounds = ([0] if text[:starts[0]].strip() else []) + starts + [len(text)]
    sources: list[Source] = []
    for begin, end in zip(bounds, bounds[1:], strict=False):
        before = text.count("\n", 0, begin)
        chunk = "\n" * before + text[begin:end]
        try:
            sources += [Source(path, document, lines, text) for document, lines in load_located(chunk, path)]
        except ExpansionError as exc:
            sources.append(Source(path, None, {}, text, broken=exc, broken_line=exc.node_line))
        except KvplanError as exc:
            line = getattr(exc, "line", None) or _line_in(exc.message) or before + 1
            sources.append(Source(path, None, {}, text, broken=exc, broken_line=line))
    return sources if any(s.broken is None for s in sources) else _reraise(whole)


def _line_in(message: str) -> int | None:
    match = re.search(r"at line (\d+)", message)
    return int(match.group(1)) if match else None


def _reraise(error: KvplanError) -> list[Source]:
    raise error


def _json(text: str, path: str) -> object:
    import json

    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise KvplanError(f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}", path) from None
    except (RecursionError, ValueError) as exc:
        raise KvplanError(f"invalid JSON: {str(exc).split(':')[0]}", path) from None
