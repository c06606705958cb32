"""Prices per GPU-hour, from flags (h100=2.9,a100-80gb=1.8) or a YAML file of `gpu: price` lines, keyed by
catalogue id. Read before the core runs: the file is read boundedly and safely (deployment.config_file)."""

from __future__ import annotations

import math
from typing import Any

from kvplan.errors import KvplanError
from kvplan.hardware import find_gpu

MAX_PRICE = 10_000.0  # per GPU-hour: far above any rental price, so a slip of the keyboard rather than a price


def _price(raw: Any, where: str) -> float:
    if isinstance(raw, bool) or not isinstance(raw, (int, float, str)):
        raise KvplanError(f"a price is a number per GPU-hour, got {type(raw).__name__}", where)
    try:
        value = float(str(raw).strip().lstrip("$"))
    except ValueError:
        raise KvplanError(f"cannot read {str(raw)!r:.40} as a price per GPU-hour (e.g. 2.9)", where) from None
    if not math.isfinite(value) or not 0 <= value <= MAX_PRICE:
        raise KvplanError(f"a price per GPU-hour must be from 0 to {MAX_PRICE:,.0f}, got {str(raw)!r:.40}", where)
    return value


def _add(prices: dict[str, float], name: Any, raw: Any, where: str) -> None:
    if not isinstance(name, str) or not name.strip():
        raise KvplanError(f"expected a GPU id as the key, got {name!r:.40}", where)
    try:
        gpu = find_gpu(name.strip())
    except KvplanError as exc:
        raise exc.at(where) from None
    if gpu.id in prices:
        raise KvplanError(f"{gpu.id} is priced twice ({name.strip()!r} names it again)", where)
    prices[gpu.id] = _price(raw, where)


def parse_price_flags(texts: list[str] | tuple[str, ...], where: str = "--price") -> dict[str, float]:
    """'h100=2.9,a100-80gb=1.8' (the flag may repeat) -> {catalogue id: price per GPU-hour}."""
    prices: dict[str, float] = {}
    for part in (p for text in texts for p in str(text).split(",") if p.strip()):
        name, equals, value = part.partition("=")
        if not equals:
            raise KvplanError(f"cannot read {part.strip()!r:.40}; write GPU=PRICE, e.g. h100=2.9", where)
        _add(prices, name, value, where)
    return prices


def read_price_file(path: str) -> dict[str, float]:
    """A YAML mapping of GPU ids (or aliases) to prices per GPU-hour; every error names the file and line."""
    from kvplan.deployment.config_file import load_documents, read_text

    documents = load_documents(read_text(path), path)
    if len(documents) != 1:
        raise KvplanError(f"expected one YAML document, found {len(documents)}", path)
    mapping, lines = documents[0]
    if not isinstance(mapping, dict) or not mapping:
        kind = "nothing" if mapping is None else type(mapping).__name__
        raise KvplanError(f"expected a mapping of GPU ids to prices per GPU-hour (h100: 2.9), got {kind}", path)
    prices: dict[str, float] = {}
    for name, raw in mapping.items():
        _add(prices, name, raw, f"{path}:{lines.get(str(name), '?')}: {str(name):.40}")
    return prices
