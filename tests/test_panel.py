"""The estimate panel's drawing: every line of the box has the box's width, long text wraps, colour only
when asked."""

from __future__ import annotations

from kvplan.cli.panel import Box, Span


def lines_of(box: Box, **kwargs) -> list[str]:
    return box.draw("a title", "units", "green", colour=False, **kwargs).splitlines()


def test_every_line_has_the_box_width_and_long_text_wraps():
    box = Box(width=40)  # 36 columns inside the border and its two spaces of padding
    box.rows([("knobs", [Span("one two three four five six seven eight nine ten")]), ("KV", [Span("short")])])
    box.paragraph("a paragraph of words that is longer than one line of thirty-six columns", "bold red")
    drawn = lines_of(box)
    assert {len(line) for line in drawn} == {40}
    # the row value wraps under itself, after the 5-column label and two spaces
    # 36 - 5 - 2 = 29 columns for the value: "one two three four five six" (27) fits, "seven" would not
    assert drawn[1] == "│ knobs  one two three four five six" + " " * 2 + " │"
    assert drawn[2] == "│        seven eight nine ten" + " " * 9 + " │"
    assert drawn[-1].startswith("╰") and " units " in drawn[-1]


def test_narrow_content_gives_a_narrow_box_and_tables_align():
    box = Box(width=120)
    box.table("ladder", ["context", "requests"], [["2,048", "55"], ["131,072", "0"]])
    drawn = lines_of(box)
    # nothing wrapped: the box is as wide as its widest line (or the title), not the terminal
    assert len(drawn[0]) < 40
    assert drawn[2].startswith("│   context    requests")
    assert drawn[4].startswith("│   131,072           0")


def test_colour_only_when_asked():
    box = Box(width=60)
    box.spans(Span("bold words", "bold"))
    assert "\033[1m" in box.draw("t", "s", "green", colour=True)
    assert "\033[" not in box.draw("t", "s", "green", colour=False)


def test_a_table_too_wide_for_the_page_keeps_every_column():
    # 40 columns: 36 inside. Widths 32 + 7 + 4 and two spaces of indent with gaps of 4 need 53; gaps of 2 need 49,
    # still 13 over, so the left column is cut from 32 to 19 characters (18 and an ellipsis); the last one stays whole.
    box = Box(width=40)
    box.table("levers", ["flags", "tokens", "fits"], [["--quantization awq (with 4 bits)", "423,952", "yes"]], left=(0,))
    lines = lines_of(box)
    assert all(len(line) == 40 for line in lines)
    row = next(line for line in lines if "423,952" in line)
    assert "--quantization awq…  423,952   yes" in row
