"""Start-up: the functions dataclasses writes for kvplan's classes, compiled once and kept beside kvplan's bytecode.

For every dataclass, the standard library writes __init__, __repr__, __eq__ (and __hash__, __setattr__ and
__delattr__ for a frozen one) as source text and compiles each with exec (CPython 3.10-3.12 dataclasses.py
_create_fn; 3.13's _FuncBuilder.add_fns_to_class compiles one text per class the same way). An estimate builds
~75 of kvplan's dataclasses, and compiling their texts was a fifth of its instructions (benchmarks/startup.py
--instructions, CPython 3.11: 682 M for the estimate that fits, 543 M with the code from here). The CLI (kvplan.cli.app)
therefore hands dataclasses an exec that looks the text up first: the code object compiled from the same text by
the same interpreter is the same object dataclasses would have made, so classes and output do not change, and a
text that is not in the store (a class edited since) is compiled as before and stored.

The store follows the interpreter's rules for .pyc files: it sits in kvplan's __pycache__ folder (or under
PYTHONPYCACHEPREFIX), one file per kvplan module, named for the interpreter (cache tag) and optimisation level,
with importlib's magic number inside; nothing is written under PYTHONDONTWRITEBYTECODE, a write that fails (a
read-only install) is dropped and the texts are compiled again next run, as without the store, and an unreadable,
foreign or damaged file is ignored. Only texts compiled for kvplan's own
modules are stored: the exec of anything else (an API caller's dataclasses in the same process) passes through."""

from __future__ import annotations

import builtins
import contextlib
import marshal
import os
import sys
from importlib.util import MAGIC_NUMBER, cache_from_source
from types import CodeType
from typing import Any

PACKAGE = "kvplan"
_PRUNE_FACTOR = 2  # a module's file is rewritten with only the texts this run used once it holds twice as many


class _Store:
    """The compiled texts by module: loaded from the folder on a module's first class, saved by save()."""

    def __init__(self, folder: str | None) -> None:
        self.folder = folder
        self.loaded: dict[str, dict[str, CodeType]] = {}
        self.used: dict[str, dict[str, CodeType]] = {}
        self.changed: set[str] = set()
        self.compiled = 0  # texts this process compiled (none once the store is warm)

    def path(self, module: str) -> str | None:
        tag = sys.implementation.cache_tag
        if self.folder is None or tag is None:
            return None
        return os.path.join(self.folder, f"{module}.dataclasses.{tag}.opt{sys.flags.optimize}.marshal")

    def _read(self, module: str) -> dict[str, CodeType]:
        path = self.path(module)
        if path is None:
            return {}
        try:
            with open(path, "rb") as file:
                magic, table = marshal.loads(file.read())  # marshal.load(file) reads it a field at a time: 10x slower
        except (OSError, EOFError, ValueError, TypeError):
            return {}
        if magic != MAGIC_NUMBER or not isinstance(table, dict):
            return {}
        return {text: code for text, code in table.items() if isinstance(text, str) and isinstance(code, CodeType)}

    def code(self, module: str, text: str) -> CodeType:
        known = self.loaded.get(module)
        if known is None:
            known = self.loaded[module] = self._read(module)
        code = known.get(text)
        if code is None:
            # dont_inherit: the flags exec gives text from dataclasses (no __future__ features), not this module's
            code = known[text] = compile(text, "<string>", "exec", dont_inherit=True)
            self.changed.add(module)
            self.compiled += 1
        self.used.setdefault(module, {})[text] = code
        return code

    def save(self) -> None:
        if sys.dont_write_bytecode:
            self.changed.clear()
        for module in sorted(self.changed):
            path = self.path(module)
            table = self.loaded[module]
            if len(table) > _PRUNE_FACTOR * len(self.used[module]):
                table = dict(self.used[module])  # texts of classes since edited or removed
            if path is not None:
                _write(path, marshal.dumps((MAGIC_NUMBER, table)))
        self.changed.clear()


def _write(path: str, data: bytes) -> None:
    """Whole or not at all: written beside the file, then renamed over it (two kvplan runs may save at once)."""
    partial = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(partial, "wb") as file:
            file.write(data)
        os.replace(partial, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.remove(partial)


def _folder() -> str | None:
    """kvplan's own __pycache__ folder, as importlib names it for the package's __init__.py."""
    package = sys.modules.get(PACKAGE)
    source = getattr(package, "__file__", None)
    if not source:
        return None
    try:
        return os.path.dirname(cache_from_source(source))
    except NotImplementedError:  # an interpreter without bytecode caching
        return None


_store: _Store | None = None


def _exec(source: Any, globals: dict[str, Any] | None = None, locals: Any = None, /) -> None:
    """builtins.exec as dataclasses calls it, with the code of a kvplan module's text taken from the store."""
    module = (globals or {}).get("__name__")
    if _store is not None and isinstance(source, str) and isinstance(module, str) and (
            module == PACKAGE or module.startswith(PACKAGE + ".")):
        source = _store.code(module, source)
    elif isinstance(source, str):
        source = compile(source, "<string>", "exec", dont_inherit=True)
    builtins.exec(source, globals, locals)


def install() -> None:
    """From now on dataclasses compiles kvplan's texts through the store (once per process)."""
    global _store
    if _store is not None:
        return
    import dataclasses

    _store = _Store(_folder())
    dataclasses.exec = _exec  # type: ignore[attr-defined]  # a module global shadows the builtin there


def save() -> None:
    """Write what this run compiled for the first time (nothing when nothing was new)."""
    if _store is not None and _store.changed:
        _store.save()
