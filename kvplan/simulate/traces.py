"""Recorded workloads: CSV or JSON Lines, one request per line. Three spellings of the columns are read:
kvplan's own (prompt_len, output_len, optional arrival in seconds, n, beam_width, prefix_id, prefix_len), the Azure
LLM inference traces (TIMESTAMP, ContextTokens, GeneratedTokens) and Vidur's (arrived_at, num_prefill_tokens,
num_decode_tokens). A bad line is reported as file:line: what."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from kvplan.errors import KvplanError
from kvplan.simulate.distributions import MAX_LENGTH
from kvplan.simulate.sharing import Sharing
from kvplan.simulate.workload import MAX_REQUESTS, Request, Workload, sharing_mode

# MAX_REQUESTS lines of up to 256 B (an Azure line is about 37 B, a JSON line with every key about 120 B)
MAX_TRACE_BYTES = MAX_REQUESTS * 256


def _seconds(value: str) -> float:
    number = float(value)
    if not 0 <= number < 1e9:
        raise ValueError("an arrival time must be 0 or more seconds")
    return number


def _timestamp(value: str) -> float:
    """'2023-11-16 18:15:46.6805900' (seven fractional digits, which older Pythons refuse) -> POSIX seconds."""
    whole, _, fraction = value.strip().partition(".")
    seconds = datetime.fromisoformat(whole).timestamp()
    return seconds + (float("0." + fraction) if fraction else 0.0)


@dataclass(frozen=True)
class TraceFormat:
    name: str
    prompt: str
    output: str
    arrival: str
    read_arrival: Callable[[str], float]

    def matches(self, columns: set[str]) -> bool:
        return {self.prompt, self.output} <= columns


FORMATS = (
    TraceFormat("kvplan", "prompt_len", "output_len", "arrival", _seconds),
    TraceFormat("azure", "ContextTokens", "GeneratedTokens", "TIMESTAMP", _timestamp),
    TraceFormat("vidur", "num_prefill_tokens", "num_decode_tokens", "arrived_at", _seconds),
)
_NAMES = "; ".join(f"{f.name}: {f.prompt},{f.output}[,{f.arrival}]" for f in FORMATS)


class _LineError(Exception):
    pass


def read_trace(path: str, default_prefix_len: int = 0) -> Workload:
    file = Path(path)
    text = _trace_text(file, path)
    rows = _jsonl_rows(text, path) if _looks_like_jsonl(text) else _csv_rows(text, path)
    requests: list[Request] = []
    prefixes: dict[str, int] = {}
    layout: TraceFormat | None = None
    for line, row in rows:
        if layout is None:
            layout = next((f for f in FORMATS if f.matches(set(row))), None)
            if layout is None:
                raise KvplanError(f"no known columns; expected {_NAMES}", f"{path}:{line}")
        if len(requests) >= MAX_REQUESTS:
            raise KvplanError(f"more than {MAX_REQUESTS:,} requests", f"{path}:{line}")
        try:
            requests.append(_request(row, layout, len(requests), prefixes, default_prefix_len))
        except (_LineError, ValueError, TypeError) as exc:
            raise KvplanError(str(exc) or "unreadable value", f"{path}:{line}") from None
        except KvplanError as exc:
            raise exc.at(f"{path}:{line}") from None
    if not requests:
        raise KvplanError("the trace holds no requests", path)
    start = min(request.arrival for request in requests)
    requests = sorted((_shifted(request, start) for request in requests), key=lambda r: (r.arrival, r.id))
    timed = any(request.arrival for request in requests)
    description = {"source": f"trace ({layout.name if layout else '?'})", "file": file.name,
                   "requests": len(requests), "arrivals": "from the trace" if timed else "all at once"}
    return Workload(requests, description)


def _trace_text(file: Path, path: str) -> str:
    """At most one byte past the cap is read: /dev/zero, a FIFO or a growing log has no honest size to stat."""
    try:
        with file.open("rb") as handle:
            raw = handle.read(MAX_TRACE_BYTES + 1)
    except OSError as exc:
        raise KvplanError(f"cannot read the trace: {exc.strerror or exc}", path) from None
    if len(raw) > MAX_TRACE_BYTES:
        raise KvplanError(f"the trace is over {MAX_TRACE_BYTES:,} bytes, more than the {MAX_REQUESTS:,} requests "
                          "simulate plays can fill; cut it to the requests to play", path)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise KvplanError("the trace is not UTF-8 text", path) from None


def _shifted(request: Request, start: float) -> Request:
    return Request(request.id, request.arrival - start, request.prompt, request.output, request.sharing,
                   request.prefix_id, request.prefix_len)


def _looks_like_jsonl(text: str) -> bool:
    return text.lstrip().startswith("{")


def _csv_rows(text: str, path: str) -> Iterator[tuple[int, dict[str, str]]]:
    reader = csv.reader(io.StringIO(text))
    header: list[str] | None = None
    for row in reader:
        line = reader.line_num
        if not row or all(not cell.strip() for cell in row):
            continue
        if header is None:
            header = [cell.strip() for cell in row]
            continue
        if len(row) != len(header):
            raise KvplanError(f"{len(row)} fields where the header has {len(header)}", f"{path}:{line}")
        yield line, {name: cell.strip() for name, cell in zip(header, row, strict=True)}
    if header is None:
        raise KvplanError("the trace is empty", path)


def _jsonl_rows(text: str, path: str) -> Iterator[tuple[int, dict[str, Any]]]:
    for line, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            row = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise KvplanError(f"not JSON: {exc.msg}", f"{path}:{line}") from None
        if not isinstance(row, dict):
            raise KvplanError("each line must be a JSON object", f"{path}:{line}")
        yield line, row


def _count(row: dict[str, Any], name: str, low: int, high: int, default: int | None = None) -> int:
    value = row.get(name)
    if value is None or value == "":
        if default is None:
            raise _LineError(f"no {name}")
        return default
    if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
        raise _LineError(f"{name} must be a whole number; got {value!r}")
    try:
        number = int(value)
    except (TypeError, ValueError):
        try:
            decimal = float(value)
        except (TypeError, ValueError):
            decimal = 0.5
        if not decimal.is_integer():
            raise _LineError(f"{name} must be a whole number; got {value!r}") from None
        number = int(decimal)
    if not low <= number <= high:
        raise _LineError(f"{name} must be {low:,} to {high:,}; got {number:,}")
    return number


def _request(row: dict[str, Any], layout: TraceFormat, index: int, prefixes: dict[str, int],
             default_prefix_len: int) -> Request:
    prompt = _count(row, layout.prompt, 1, MAX_LENGTH)
    output = _count(row, layout.output, 0, MAX_LENGTH)
    output = max(output, 1)  # a request generates at least the token its prefill samples
    arrival_text = row.get(layout.arrival)
    try:
        arrival = layout.read_arrival(str(arrival_text)) if arrival_text not in (None, "") else 0.0
    except (ValueError, OverflowError, OSError):
        raise _LineError(f"cannot read {layout.arrival} {arrival_text!r}") from None
    sharing: Sharing = sharing_mode(_count(row, "n", 1, 1024, 1), _count(row, "beam_width", 1, 1024, 1))
    prefix_key = row.get("prefix_id")
    prefix_id, prefix_len = None, 0
    if prefix_key not in (None, ""):
        prefix_len = _count(row, "prefix_len", 1, prompt, default_prefix_len or None)
        prefix_id = prefixes.setdefault(str(prefix_key), len(prefixes))
    return Request(index, arrival, prompt, output, sharing, prefix_id, prefix_len)
