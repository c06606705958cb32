"""Sizes and dtypes. Bytes are integers everywhere inside kvplan; GB (10^9) and GiB (2^30) live only here."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

from kvplan.errors import KvplanError

GB = 10**9
GiB = 2**30
MiB = 2**20

_UNITS = {
    "": 1, "b": 1,
    "kb": 10**3, "mb": 10**6, "gb": GB, "tb": 10**12,
    "kib": 2**10, "mib": MiB, "gib": GiB, "tib": 2**40,
}
_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*$")


def parse_size(text: str, where: str = "size") -> int:
    """'24GB' -> 24*10^9, '24GiB' -> 24*2^30, '123' -> 123 bytes."""
    match = _SIZE.match(str(text))
    if not match:
        raise KvplanError(f"cannot read {text!r} as a size; write bytes, or a number with GB (10^9) or GiB (2^30)",
                          where)
    number, unit = match.groups()
    factor = _UNITS.get(unit.lower())
    if factor is None:
        raise KvplanError(f"unknown unit {unit!r} in {text!r}; use B, KB, MB, GB, TB, KiB, MiB, GiB or TiB", where)
    try:
        return int(Decimal(number) * factor)
    except InvalidOperation as exc:  # pragma: no cover - the regex admits only decimals
        raise KvplanError(f"cannot read {text!r} as a size", where) from exc


_DECIMAL = {"k": 10**3, "m": 10**6, "g": 10**9}
_BINARY = {"K": 2**10, "M": 2**20, "G": 2**30}


def parse_human_int(text: str | None, flag: str) -> int | None:
    """Integers as vLLM reads them: '32768', '32K' (x 1024), '25.6k' (x 1000; decimals only with k/m/g)."""
    if text is None:
        return None
    value = text.strip().replace("_", "")
    suffix = value[-1:] if value[-1:] in _DECIMAL or value[-1:] in _BINARY else ""
    number = value[: len(value) - len(suffix)]
    try:
        if suffix in _DECIMAL:
            return int(float(number) * _DECIMAL[suffix])
        return int(number) * _BINARY.get(suffix, 1)
    except ValueError:
        raise KvplanError(f"expected an integer (e.g. 32768, 32K = 32,768 or 32k = 32,000), got {text!r}",
                          flag) from None


# Bytes per element of the dtypes that appear in HF configs and vLLM flags.
DTYPE_BYTES: dict[str, float] = {
    "float32": 4, "float": 4, "fp32": 4,
    "float16": 2, "half": 2, "fp16": 2,
    "bfloat16": 2, "bf16": 2,
    "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1, "fp8_inc": 1, "float8_e4m3fn": 1, "int8": 1,
}

CANONICAL_DTYPE = {
    "float": "float32", "fp32": "float32", "half": "float16", "fp16": "float16", "bf16": "bfloat16",
    "float8_e4m3fn": "fp8_e4m3",
}


def canonical_dtype(name: str) -> str:
    lowered = name.lower().removeprefix("torch.")
    return CANONICAL_DTYPE.get(lowered, lowered)


def dtype_bytes(name: str, where: str = "dtype") -> int:
    canonical = canonical_dtype(name)
    size = DTYPE_BYTES.get(canonical)
    if size is None:
        known = ", ".join(sorted({canonical_dtype(k) for k in DTYPE_BYTES}))
        raise KvplanError(f"unknown dtype {name!r}; known: {known}", where)
    return int(size)


def cdiv(a: int, b: int) -> int:
    return -(-a // b)
