"""Typed reads of a Hugging Face config dict, with aliases and one-line errors naming file and key."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from kvplan.errors import KvplanError

# Anything larger than this is not a real architecture value: it guards the arithmetic, not the user.
MAX_REASONABLE = 10**12


class ConfigFields:
    """A view of one config dict (optionally a nested language config) that reads typed values."""

    def __init__(self, data: dict[str, Any], where: str, path: tuple[str, ...] = (),
                 accessed: set[tuple[str, ...]] | None = None) -> None:
        self.data = data
        self.where = where
        self.path = path
        # Every key path read, shared with nested views: `models import` keeps exactly these.
        self.accessed: set[tuple[str, ...]] = set() if accessed is None else accessed

    @property
    def prefix(self) -> str:
        return "".join(f"{p}." for p in self.path)

    def _key(self, key: str) -> str:
        return f"{self.prefix}{key}"

    def _mark(self, key: str) -> None:
        if key in self.data:
            self.accessed.add((*self.path, key))

    def fail(self, key: str, message: str) -> KvplanError:
        return KvplanError(f"key '{self._key(key)}' {message}", self.where)

    def has(self, key: str) -> bool:
        self._mark(key)
        return self.data.get(key) is not None

    def first_key(self, keys: Sequence[str]) -> str | None:
        found = next((k for k in keys if self.data.get(k) is not None), None)
        if found is not None:
            self._mark(found)
        return found

    def integer(self, keys: str | Sequence[str], default: int | None = None, *, minimum: int = 1,
            required: bool = True) -> int:
        names = [keys] if isinstance(keys, str) else list(keys)
        key = self.first_key(names)
        if key is None:
            if default is not None or not required:
                return default  # type: ignore[return-value]
            raise self.fail(names[0], "is missing" + (f" (also looked for {', '.join(names[1:])})"
                                                       if len(names) > 1 else ""))
        value = self.data[key]
        if isinstance(value, float) and math.isfinite(value) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(key, f"must be an integer, got {value!r:.60}")
        if value < minimum:
            raise self.fail(key, f"must be at least {minimum}, got {value}")
        if value > MAX_REASONABLE:
            raise self.fail(key, f"is implausibly large ({value})")
        return value

    def optional_int(self, keys: str | Sequence[str], *, minimum: int = 1) -> int | None:
        return self.integer(keys, minimum=minimum, required=False)

    def number(self, key: str, default: float | None = None) -> float | None:
        self._mark(key)
        value = self.data.get(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            raise self.fail(key, f"must be a positive number, got {value!r:.60}")
        return float(value)

    def flag(self, key: str, default: bool) -> bool:
        self._mark(key)
        value = self.data.get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self.fail(key, f"must be true or false, got {value!r:.60}")
        return value

    def text(self, keys: str | Sequence[str], default: str | None = None) -> str | None:
        names = [keys] if isinstance(keys, str) else list(keys)
        key = self.first_key(names)
        if key is None:
            return default
        value = self.data[key]
        if not isinstance(value, str):
            raise self.fail(key, f"must be a string, got {value!r:.60}")
        return value

    def array(self, key: str) -> list[Any] | None:
        self._mark(key)
        value = self.data.get(key)
        if value is None:
            return None
        if not isinstance(value, list):
            raise self.fail(key, f"must be a list, got {value!r:.60}")
        return value

    def mapping(self, key: str) -> dict[str, Any] | None:
        self._mark(key)
        value = self.data.get(key)
        if value is None:
            return None
        if not isinstance(value, dict):
            raise self.fail(key, f"must be an object, got {value!r:.60}")
        return value

    def nested(self, key: str) -> ConfigFields | None:
        value = self.data.get(key)
        if value is None:
            return None
        if not isinstance(value, dict):
            raise self.fail(key, f"must be an object, got {value!r:.60}")
        return ConfigFields(value, self.where, (*self.path, key), self.accessed)


def trimmed(data: dict[str, Any], accessed: set[tuple[str, ...]]) -> dict[str, Any]:
    """Only the key paths that were read, in the config's own key order."""
    result: dict[str, Any] = {}
    for key, value in data.items():
        if (key,) in accessed:
            result[key] = value
        elif isinstance(value, dict):
            inner = trimmed(value, {p[1:] for p in accessed if len(p) > 1 and p[0] == key})
            if inner:
                result[key] = inner
    return result
