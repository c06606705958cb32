"""The README's command-line examples run as a new user would run them, each printing what the README shows: the
panel of the first command, the pasted launch line, the --config file, check, explain, simulate, size and (with
torch) verify. Each README block was rendered at a terminal width of its own (the panels at 116 columns, simulate's
chart at 118 - 24 = 94 columns, size's tables at 125), so each command runs at that width (COLUMNS) in a
subprocess, and lines are compared without trailing blanks. A block the README calls an excerpt is matched as an
ordered subset; check's block leaves its pass and skip lines out, as the README says; verify's decode line is a
timing. The Python session is tests/test_readme.py's; the HTTP examples are tests of the serve package's own."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def fenced_blocks(text: str) -> list[str]:
    """The README's code blocks without a language (its terminal sessions), fence by fence."""
    blocks: list[str] = []
    current: list[str] | None = None
    plain = False
    for line in text.splitlines():
        if line.startswith("```"):
            if current is None:
                current, plain = [], line == "```"
            else:
                if plain:
                    blocks.append("\n".join(current))
                current = None
        elif current is not None:
            current.append(line)
    return blocks


BLOCKS = fenced_blocks(README)
WIDTHS = {"estimate": 116, "simulate": 118, "size": 125}
EXPLAIN_LOG = "tests/fixtures/explain/gemma-2-9b-h100-v0.19.log"  # the log the README's explain block names


def examples() -> list[tuple[list[str], list[str], str]]:
    """Every `$ kvplan ...` in the README: its words, the lines shown after it, and its trailing comment."""
    found = []
    for block in BLOCKS:
        lines = block.splitlines()
        index = 0
        while index < len(lines):
            line = lines[index]
            if not line.startswith("$ "):
                index += 1
                continue
            command = line[2:]
            while command.endswith("\\"):
                index += 1
                command = command[:-1] + lines[index].strip()
            command, _, comment = command.partition("  #")
            index += 1
            shown = []
            while index < len(lines) and not lines[index].startswith("$ "):
                shown.append(lines[index].rstrip())
                index += 1
            if command.startswith("kvplan "):
                found.append((shlex.split(command), shown, comment.strip()))
    return found


def example(start: str) -> tuple[list[str], list[str], str]:
    """The one README example whose command starts so (kvplan estimate --gpu h100 --, kvplan check, ...)."""
    chosen = [found for found in examples() if " ".join(found[0]).startswith(start)]
    assert len(chosen) == 1, f"{len(chosen)} README examples start {start!r}"
    return chosen[0]


def run(words: list[str], width: int, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": str(width), "NO_COLOR": "1"}
    env.pop("FORCE_COLOR", None)
    return subprocess.run([sys.executable, "-m", "kvplan.cli.app", *words[1:]], capture_output=True, text=True,
                          timeout=300, cwd=cwd, env=env)


def ordered_subset(shown: list[str], printed: list[str]) -> bool:
    rest = iter(printed)
    return all(any(line == candidate for candidate in rest) for line in shown)


def test_the_first_command_prints_the_panel_shown():
    # README "Set up": the first command; "What it prints": its panel, exit code 1 (one full-context request does not fit)
    panel = next(block for block in BLOCKS if block.startswith("╭"))
    result = run(["kvplan", "estimate", "--model", "Qwen/Qwen2.5-7B", "--gpu", "rtx3090"], WIDTHS["estimate"])
    assert result.returncode == 1, result.stderr
    assert [line.rstrip() for line in result.stdout.splitlines()] == [line.rstrip() for line in panel.splitlines()]


@pytest.mark.parametrize("start", [
    "kvplan estimate --gpu h100 --", "kvplan check", "kvplan explain", "kvplan simulate",
    "kvplan size",
])
def test_each_example_prints_what_the_readme_shows(start):
    words, shown, comment = example(start)
    name = words[1]
    if name == "explain":
        words = [EXPLAIN_LOG if word == "vllm.log" else word for word in words]
    result = run(words, WIDTHS.get(name, 120))
    assert result.returncode == (1 if "exit code 1" in comment else 0), result.stderr
    printed = [line.rstrip() for line in result.stdout.splitlines()]
    if name == "check":  # "with its pass and skip lines left out here"
        printed = [line for line in printed if not re.search(r": KV\d{3} (pass|skip): ", line)]
    assert printed == shown


def test_the_config_file_example_prints_its_excerpt(tmp_path):
    # the `$ cat serve.yaml` block gives the file; its estimate block is "an excerpt of the output"
    block = next(block for block in BLOCKS if block.startswith("$ cat serve.yaml"))
    text = block.split("\n$ kvplan")[0].split("\n", 1)[1]
    (tmp_path / "serve.yaml").write_text(text)
    words, shown, comment = example("kvplan estimate --gpu l40s --config serve.yaml")
    assert comment == "an excerpt of the output"
    result = run(words, WIDTHS["estimate"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert ordered_subset(shown, [line.rstrip() for line in result.stdout.splitlines()])


def test_verify_on_the_cpu_prints_the_plan_shown():
    pytest.importorskip("torch")
    words, shown, _ = example("kvplan verify")
    result = run(words, 120)
    assert result.returncode == 0, result.stderr
    timing = re.compile(r"^decode ")  # its error and its milliseconds are the machine's
    printed = [line.rstrip() for line in result.stdout.splitlines() if not timing.match(line)]
    assert printed == [line for line in shown if not timing.match(line)]
