"""A titled box of lines for the terminal, drawn with the standard library. kvplan estimate prints one on every
run, and rich's import and layout engine cost more start-up than the command's whole budget (benchmarks/
startup.py): this draws the same box with plain string work. rich still draws the tables of other commands."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field

from kvplan.cli.output import colour_wanted, terminal_width

ANSI = {"bold": "1", "dim": "2", "italic": "3", "red": "31", "green": "32", "yellow": "33", "blue": "34", "magenta": "35",
        "cyan": "36", "white": "37"}


@dataclass
class Span:
    text: str
    style: str = ""  # space-separated ANSI names: "bold red"


@dataclass
class Box:
    """Lines of styled spans inside a border; widths are measured on the text, styles added when drawn."""

    width: int = field(default_factory=terminal_width)
    lines: list[list[Span]] = field(default_factory=list)
    full: bool = False  # something was wrapped: the box takes the whole width

    @property
    def inner(self) -> int:
        return max(20, self.width - 4)

    def blank(self) -> None:
        self.lines.append([])

    def spans(self, *spans: Span) -> None:
        self.lines.append(list(spans))

    def paragraph(self, text: str, style: str = "") -> None:
        wrapped = textwrap.wrap(text, self.inner) or [""]
        self.full = self.full or len(wrapped) > 1
        for line in wrapped:
            self.lines.append([Span(line, style)])

    def rows(self, rows: list[tuple[str, list[Span]]]) -> None:
        """Label and value columns; a long value wraps under itself."""
        label_width = max(len(label) for label, _ in rows)
        room = max(10, self.inner - label_width - 2)
        for label, value in rows:
            text = "".join(span.text for span in value)
            head = Span(label.ljust(label_width) + "  ")
            if len(text) <= room:
                self.lines.append([head, *value])
                continue
            wrapped = textwrap.wrap(text, room)
            self.full = True
            self.lines.append([head, Span(wrapped[0])])
            self.lines.extend([Span(" " * (label_width + 2)), Span(rest)] for rest in wrapped[1:])

    def table(self, title: str, headers: list[str], body: list[list[str]], left: tuple[int, ...] = ()) -> None:
        """Columns padded by two spaces each side, right-aligned but for the `left` ones, under a title line."""
        widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *body, strict=True)]
        # On a narrow page the gaps shrink, then the widest left column is cut: every column stays visible.
        gap = 4 if sum(widths) + 4 * (len(widths) - 1) + 2 <= self.inner else 2
        over = sum(widths) + gap * (len(widths) - 1) + 2 - self.inner
        if over > 0 and left:
            cut = max(left, key=lambda i: widths[i])
            widths[cut] = max(len(headers[cut]), widths[cut] - over)

        def fit(cell: str, width: int) -> str:
            return cell if len(cell) <= width else cell[: width - 1] + "…"

        def cells(row: list[str]) -> str:
            return (" " * gap).join(fit(cell, w).ljust(w) if i in left else fit(cell, w).rjust(w)
                                    for i, (cell, w) in enumerate(zip(row, widths, strict=True))).rstrip()

        self.lines.append([Span(title, "italic")])
        self.lines.append([Span("  " + cells(headers), "bold")])
        self.lines.extend([Span("  " + cells(row))] for row in body)

    def draw(self, title: str, subtitle: str, border: str, colour: bool | None = None) -> str:
        colour = colour_wanted() if colour is None else colour

        def paint(text: str, style: str) -> str:
            codes = [ANSI[name] for name in style.split() if name in ANSI]
            return f"\033[{';'.join(codes)}m{text}\033[0m" if colour and codes and text else text

        widest = max((sum(len(span.text) for span in line) for line in self.lines), default=0)
        inner = self.inner if self.full else min(max(widest, len(title) + 2, len(subtitle) + 2), self.inner)

        def rule(left: str, label: str, right: str) -> str:
            label = f" {label} " if label else ""
            label = label if len(label) <= inner + 2 else label[: inner - 1] + "… "
            dashes = inner + 2 - len(label)
            return paint(left + "─" * (dashes // 2), border) + label + paint("─" * (dashes - dashes // 2) + right,
                                                                             border)

        out = [rule("╭", title, "╮")]
        for line in self.lines:
            line = _cut(line, inner)
            text_width = sum(len(span.text) for span in line)
            body = "".join(paint(span.text, span.style) for span in line) + " " * max(0, inner - text_width)
            out.append(paint("│", border) + " " + body + " " + paint("│", border))
        out.append(rule("╰", subtitle, "╯"))
        return "\n".join(out) + "\n"


def _cut(line: list[Span], width: int) -> list[Span]:
    """The line within width characters (a table wider than the terminal loses its right end)."""
    kept, room = [], width
    for span in line:
        if room <= 0:
            break
        kept.append(Span(span.text[:room], span.style))
        room -= len(kept[-1].text)
    return kept
