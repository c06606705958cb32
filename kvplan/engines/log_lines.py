"""How explain reads an engine's log: each engine's log_lines module declares its records (how one starts,
which only it prints) and the kinds of line it prints about sizing, built from the vocabulary here: a Figure
inside a line, and LineKinds that read figures, a utilization, or tell whose log it is. Figures are read as the
engines format them: GiB with two decimals, token counts with thousands separators, concurrency as 1.83x."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kvplan.units import GiB

if TYPE_CHECKING:
    from kvplan.explain.record import LoggedRun

NUMBER = r"(-?\d+(?:\.\d+)?)"
COUNT = r"(\d{1,3}(?:,\d{3})+|\d+)"
GIB = NUMBER + r"\s*Gi?B"


MAX_FIGURE = 2**50  # bytes, tokens or blocks: a figure above this is not one any GPU printed


def _shown(text: str) -> str:
    return text if len(text) <= 20 else text[:20] + "..."


def gib_bytes(text: str) -> int:
    value = float(text)
    if not value * GiB < MAX_FIGURE:  # also false for inf and nan
        raise ValueError(f"{_shown(text)} GiB is beyond any GPU")
    return round(value * GiB)


def gb_bytes(text: str) -> int:
    """A size printed in GB of 10^9 B (vLLM's offload region, SGLang's host pool), as bytes."""
    value = float(text)
    if not value * 1e9 < MAX_FIGURE:
        raise ValueError(f"{_shown(text)} GB is beyond any host")
    return round(value * 1e9)


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


class OtherEngine(LineKind):
    """A record only another engine prints (its log_lines module's `recognised`): kvplan tells whose log it is."""

    def __init__(self, engine: str, trigger: str) -> None:
        self.engine = engine
        self.trigger = re.compile(trigger)

    def read(self, match: re.Match[str], line: str, run: LoggedRun, at: Place) -> None:
        run.engine = run.engine or self.engine


@dataclass(frozen=True)
class LogLines:
    """How the engine's log records look, and what explain reads in them."""

    record_start: str  # a regular expression: how one of its records starts (a line that does not continues one)
    recognised: str | None = None  # a regular expression for a record only this engine prints (whose log it is)
    kinds: tuple[LineKind, ...] = field(default=())  # the kinds of sizing line it prints that explain reads
    reconciled: bool = False  # explain reconciles this engine's logs term by term (its figures are these kinds')

    def line_kinds(self, engine: str) -> tuple[LineKind, ...]:
        return (*self.kinds, *((OtherEngine(engine, self.recognised),) if self.recognised else ()))

