"""The kinds of line a vLLM startup log prints about sizing, one type each, and the rule that turns a pasted
log (ANSI colours, progress bars redrawn with carriage returns, wrapped lines, process prefixes, several ranks)
into records.
Figures are read as vLLM formats them: GiB with two decimals (older releases wrote "GB" for the same 2^30
unit), token counts with thousands separators, concurrency as 1.83x."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from typing import Any

from kvplan.engines.log_lines import LogLines
from kvplan.explain.literals import config_pairs, python_dict
from kvplan.explain.record import LoggedRun
from kvplan.units import GiB

ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-_]")
RANK = re.compile(r"\((\w+) pid=\d+\)")
NUMBER = r"(-?\d+(?:\.\d+)?)"
COUNT = r"(\d{1,3}(?:,\d{3})+|\d+)"
GIB = NUMBER + r"\s*Gi?B"
MAX_LINE = 200_000  # characters: a record longer than this is not a log line worth reading


def log_lines(text: str) -> list[tuple[int, str]]:
    """(line number in the file, text) of each line without colour codes; a progress bar's carriage returns split
    its line into the frames it drew, each under that line's number. CRLF ends one line, as in a Windows file."""
    return [(number, frame[:MAX_LINE]) for number, line in enumerate(ANSI.sub("", text).split("\n"), start=1)
            for frame in line.removesuffix("\r").split("\r")]


MAX_FIGURE = 2**50  # bytes, tokens or blocks: a figure above this is not one any GPU printed


def _shown(text: str) -> str:
    return text if len(text) <= 20 else text[:20] + "..."


def gib_bytes(text: str) -> int:
    value = float(text)
    if not value * GiB < MAX_FIGURE:  # also false for inf and nan
        raise ValueError(f"{_shown(text)} GiB is beyond any GPU")
    return round(value * GiB)


def ratio(text: str) -> float:
    """A concurrency (1.83x) or a percentage as printed: a finite figure, not negative, within any GPU's."""
    value = float(text)
    if not 0 <= value < MAX_FIGURE:  # also false for nan and for the inf of an overlong digit string
        raise ValueError(f"{_shown(text)} is not a figure an engine prints")
    return value


def count(text: str) -> int:
    digits = text.replace(",", "")
    if len(digits) > 16:
        raise ValueError(f"{_shown(digits)} is beyond any GPU")
    return int(digits)


@dataclass(frozen=True)
class Figure:
    """One figure inside a line: the pattern that finds it, where it goes, and how its text becomes a value."""

    pattern: re.Pattern[str]
    section: str  # "memory" or "capacity"
    name: str
    convert: Any = gib_bytes


def figure(pattern: str, section: str, name: str, convert: Any = gib_bytes) -> Figure:
    return Figure(re.compile(pattern), section, name, convert)




def _engine_log_lines() -> list[tuple[str, LogLines]]:
    from kvplan import registry

    return [(name, lines) for name in registry.names() if (lines := registry.log_lines(name)) is not None]


@cache
def _record_start(engines: tuple[str, ...]) -> re.Pattern[str]:
    """How a log record starts, in any engine's format. A line that starts none continues the record before it (a
    terminal or an editor wrapped it, or a progress bar redrew)."""
    return re.compile(r"\s*(?:" + "|".join(lines.record_start for _, lines in _engine_log_lines()) + ")")
MAX_WRAPPED = 200  # continuation lines joined to one record at most


@dataclass(frozen=True)
class Place:
    """Where a record is: the line it starts on and the process that printed it."""

    number: int
    rank: str | None


class LineKind:
    """A kind of line: `trigger` says a line is one of them; `read` takes what it says into the run."""

    trigger: re.Pattern[str]

    def read(self, match: re.Match[str], line: str, run: LoggedRun, at: Place) -> None:
        raise NotImplementedError


class Figures(LineKind):
    """A line that holds sizing figures only: each is looked for on its own, so that a variant of the line
    that drops or reorders a phrase still yields the rest."""

    def __init__(self, trigger: str, *figures: Figure) -> None:
        self.trigger = re.compile(trigger)
        self.figures = figures

    def read(self, match: re.Match[str], line: str, run: LoggedRun, at: Place) -> None:
        for item in self.figures:
            found = item.pattern.search(line)
            if found:
                try:
                    value = item.convert(found.group(1))
                except ValueError as exc:  # a figure no real log prints: said (once per figure), and not read
                    if item.name not in run.unusable:
                        run.unusable.add(item.name)
                        label = item.name.removesuffix("_bytes").replace("_", " ")
                        run.notes.append(f"line {at.number}: the logged {label} cannot be used ({exc}); it is "
                                         "left out")
                    continue
                run.add(item.section, item.name, value, at.rank, at.number)


class Utilization(LineKind):
    """The utilization vLLM sized by, as its memory summary prints it."""

    def __init__(self, trigger: str) -> None:
        self.trigger = re.compile(trigger)

    def read(self, match: re.Match[str], line: str, run: LoggedRun, at: Place) -> None:
        run.set_flag("gpu_memory_utilization", float(match.group(1)), at.rank, at.number)


class Banner(LineKind):
    """`version 0.19.0` and `model   google/gemma-2-9b-it` in the start-up banner."""

    trigger = re.compile(r"[▄█▀]\s+(version|model)\s+(\S+)\s*$")

    def read(self, match: re.Match[str], line: str, run: LoggedRun, at: Place) -> None:
        if match.group(1) == "version":
            run.version = run.version or match.group(2)
        else:
            run.model = run.model or match.group(2)
        run.engine = "vllm"


class NonDefaultArgs(LineKind):
    """`non-default args: {...}`: the flags the user set, by vLLM's own names."""

    trigger = re.compile(r"non-default args: \{")

    def read(self, match: re.Match[str], line: str, run: LoggedRun, at: Place) -> None:
        args, unread = python_dict(line[match.end():])
        for name, value in args.items():
            run.set_flag(name, value, at.rank, at.number)
        if isinstance(args.get("model"), str):
            run.model = args["model"]
        elif isinstance(args.get("model_tag"), str) and run.model is None:
            run.model = args["model_tag"]
        if unread:
            run.notes.append(f"line {at.number}: the non-default args are cut off or elided; {len(args)} read, "
                             f"{unread} not")
        if args:  # "non-default args: {...}" quoted in prose holds none
            run.engine = "vllm"


class EngineConfig(LineKind):
    """`Initializing a V1 LLM engine (v0.19.0) with config: model=..., dtype=torch.bfloat16, ...` (V0 writes
    `an LLM engine`)."""

    trigger = re.compile(r"Initializing an? (V1 )?LLM engine \(v?([^)\s]+)\) with config: ")
    flags = {"tensor_parallel_size": "tensor_parallel_size", "pipeline_parallel_size": "pipeline_parallel_size",
             "data_parallel_size": "data_parallel_size", "max_seq_len": "max_model_len",
             "quantization": "quantization", "kv_cache_dtype": "kv_cache_dtype", "enforce_eager": "enforce_eager",
             "enable_prefix_caching": "enable_prefix_caching", "dtype": "dtype", "block_size": "block_size"}

    def read(self, match: re.Match[str], line: str, run: LoggedRun, at: Place) -> None:
        run.engine = "vllm"
        run.engine_generation = run.engine_generation or ("V1" if match.group(1) else "V0")
        run.version = run.version or match.group(2)
        pairs = config_pairs(line[match.end():])
        if isinstance(pairs.get("model"), str):
            run.model = run.model or pairs["model"]
        for key, name in self.flags.items():
            if key in pairs:
                value = pairs[key]
                if name == "dtype" and isinstance(value, str):
                    value = value.removeprefix("torch.")
                run.set_flag(name, value, at.rank, at.number)


class Era(LineKind):
    """A line whose wording only one range of vLLM releases used: the era, when the version is not printed."""

    def __init__(self, trigger: str, version: str, releases: str) -> None:
        self.trigger = re.compile(trigger)
        self.version = version
        self.releases = releases

    def read(self, match: re.Match[str], line: str, run: LoggedRun, at: Place) -> None:
        if run.version_hint is None:
            run.version_hint = (self.version, f"line {at.number} has the wording of {self.releases}")
        run.engine = "vllm"


class OtherEngine(LineKind):
    """A record only another engine prints (its log_lines module's `recognised`): kvplan tells whose log it is."""

    def __init__(self, engine: str, trigger: str) -> None:
        self.engine = engine
        self.trigger = re.compile(trigger)

    def read(self, match: re.Match[str], line: str, run: LoggedRun, at: Place) -> None:
        run.engine = run.engine or self.engine


VLLM_KINDS: tuple[LineKind, ...] = (
    Banner(),
    NonDefaultArgs(),
    EngineConfig(),
    # worker start: "worker init memory snapshot: ... free_memory=78.68GiB, total_memory=79.19GiB"
    Figures(r"memory snapshot:", figure(r"free_memory=" + GIB, "memory", "free_bytes"),
            figure(r"total_memory=" + GIB, "memory", "total_bytes")),
    Figures(r"worker requested memory:", figure(r"requested memory: " + GIB, "memory", "budget_bytes")),
    Figures(r"Model loading took|Loading model weights took",
            figure(r"took " + GIB, "memory", "weights_bytes")),
    # v0.17+: "Memory profiling takes 21.51 seconds. Total non KV cache memory: 21.11GiB; torch peak memory
    # increase: 3.65GiB; non-torch forward increase memory: 0.25GiB; weights memory: 17.22GiB."
    Figures(r"Total non KV cache memory:",
            figure(r"torch peak memory increase: " + GIB, "memory", "activation_bytes"),
            figure(r"non-torch forward increase memory: " + GIB, "memory", "non_torch_bytes"),
            figure(r"weights memory: " + GIB, "memory", "weights_bytes")),
    # v0.7-v0.10: "total_gpu_memory (23.58GiB) x gpu_memory_utilization (0.99) = 23.35GiB" and "model weights take
    # 21.21GiB; non_torch_memory takes 0.20GiB; PyTorch activation peak memory takes 0.37GiB; the rest of the
    # memory reserved for KV Cache is 1.57GiB."
    Figures(r"total_gpu_memory \(", figure(r"total_gpu_memory \(" + GIB, "memory", "total_bytes"),
            figure(r"\) = " + GIB, "memory", "budget_bytes")),
    Utilization(r"gpu_memory_utilization \(" + NUMBER + r"\)"),
    Figures(r"model weights take|the rest of the memory reserved for KV Cache",
            figure(r"model weights take " + GIB, "memory", "weights_bytes"),
            figure(r"non_torch_memory takes " + GIB, "memory", "non_torch_bytes"),
            figure(r"activation peak memory takes " + GIB, "memory", "activation_bytes"),
            figure(r"reserved for KV Cache is " + GIB, "memory", "kv_cache_bytes")),
    # V0 (v0.6): "Memory profiling results: total_gpu_memory=23.58GiB ... non_torch_memory=0.35GiB
    # kv_cache_size=3.81GiB gpu_memory_utilization=0.90"
    Figures(r"Memory profiling results:", figure(r"total_gpu_memory=" + GIB, "memory", "total_bytes"),
            figure(r"peak_torch_memory=" + GIB, "memory", "peak_torch_bytes"),
            figure(r"non_torch_memory=" + GIB, "memory", "non_torch_bytes"),
            figure(r"kv_cache_size=" + GIB, "memory", "kv_cache_bytes")),
    Utilization(r"Memory profiling results:.*gpu_memory_utilization=" + NUMBER),
    # the V0 worker's summary line, as the kvplan calibration notes date it (vllm#10517: V0, 0.6.4-0.6.x)
    Era(r"Memory profiling results: total_gpu_memory=", "0.6", "vLLM 0.6.4-0.6.x (V0)"),
    Figures(r"Estimated CUDA graph memory:", figure(r"memory: " + GIB, "memory", "cuda_graph_bytes")),
    # "CUDA graph pool memory: 0.09 GiB (actual), 0.13 GiB (estimated)": the estimate is what the budget uses
    Figures(r"CUDA graph pool memory:", figure(GIB + r" \(estimated\)", "memory", "cuda_graph_bytes")),
    # v0.19+: "Free memory on device (78.68/79.19 GiB) on startup. Desired GPU memory utilization is (0.95,
    # 75.23 GiB). Actual usage is 17.22 GiB for weight, 3.65 GiB for peak activation, 0.25 GiB for non-torch
    # memory, and 1.09 GiB for CUDAGraph memory. ... Current kv cache memory in use is 54.12 GiB."
    Figures(r"Free memory on device \(",
            figure(r"Free memory on device \(" + NUMBER, "memory", "free_bytes"),
            figure(r"on device \([\d.]+/" + GIB, "memory", "total_bytes"),
            figure(r"utilization is \([\d.]+, " + GIB, "memory", "budget_bytes"),
            figure(GIB + r" for weight", "memory", "weights_bytes"),
            figure(GIB + r" for peak activation", "memory", "activation_bytes"),
            figure(GIB + r" for non-torch", "memory", "non_torch_bytes"),
            figure(r"kv cache memory in use is " + GIB, "memory", "kv_cache_bytes")),
    Utilization(r"Desired GPU memory utilization is \(" + NUMBER + ","),
    Figures(r"Available KV cache memory:", figure(r"memory: " + GIB, "memory", "kv_cache_bytes")),
    Figures(r"GPU KV cache size:", figure(r"size: " + COUNT + r" tokens", "capacity", "tokens", count)),
    Figures(r"Maximum concurrency for",
            figure(r"for " + COUNT + r" tokens per request", "capacity", "concurrency_context", count),
            figure(r"request: (-?\d+(?:\.\d+)?|-?inf|nan)x", "capacity", "max_concurrency", ratio)),
    Figures(r"GPU blocks:|num_gpu_blocks is:",
            figure(r"(?:GPU blocks:|num_gpu_blocks is:) " + COUNT, "capacity", "num_blocks", count)),
    # V0's refusal: "... larger than the maximum number of tokens that can be stored in KV cache (23648)."
    Figures(r"tokens that can be stored in KV cache \(",
            figure(r"stored in KV cache \(" + COUNT + r"\)", "capacity", "tokens", count)),
    Figures(r"Setting attention block size to",
            figure(r"block size to " + COUNT + r" tokens", "capacity", "block_size", count)),
    Figures(r"Padding mamba page size by",
            figure(r"page size by " + NUMBER + "%", "capacity", "mamba_padding_percent", ratio)),
    Figures(r"padding layers", figure(r"Add " + COUNT + r" padding layers", "capacity", "padding_layers", count)),
)


@cache
def _kinds(engines: tuple[str, ...]) -> tuple[LineKind, ...]:
    """vLLM's lines, then a record only another engine prints, in that engine's own format."""
    return (*VLLM_KINDS, *(OtherEngine(name, lines.recognised) for name, lines in _engine_log_lines()
                           if lines.recognised))


def records(lines: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """(line number, text) of each record: a line that starts one, with the wrapped lines after it joined back
    as a terminal split them (no separator). A line that starts no record and follows none stands alone."""
    from kvplan import registry

    record_start = _record_start(registry.names())
    found: list[tuple[int, list[str]]] = []
    open_record = False
    length = 0
    for number, line in lines:
        if not line.strip():
            open_record = False
            continue
        starts = bool(record_start.match(line))
        parts = found[-1][1] if found else []
        if open_record and not starts and len(parts) < MAX_WRAPPED and length + len(line) <= MAX_LINE:
            parts.append(line)
            length += len(line)
            continue
        found.append((number, [line]))
        open_record, length = starts, len(line)
    return [(number, "".join(parts)) for number, parts in found]


def read_into(run: LoggedRun, text: str) -> None:
    """Every recognised record of TEXT, read into RUN in log order."""
    from kvplan import registry

    kinds = _kinds(registry.names())
    for number, record in records(log_lines(text)):
        rank_match = RANK.search(record)
        rank = rank_match.group(1) if rank_match else None
        if rank:
            run.ranks.add(rank)
        for kind in kinds:
            match = kind.trigger.search(record)
            if match:
                kind.read(match, record, run, Place(number, rank))
