"""kvplan explain never crashes on a messy log: random text, real logs cut anywhere, with colour codes and
carriage returns spliced in. The only outcomes are an explanation (that renders and serialises) or a
KvplanError (one line for the user)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvplan.errors import KvplanError
from kvplan.explain import explain, read_log
from kvplan.explain.render import render

LOGS = Path(__file__).parent / "fixtures" / "explain"
TEXTS = [path.read_text(encoding="utf-8") for path in sorted(LOGS.glob("*.log"))]
NOISE = st.sampled_from(["\x1b[31m", "\x1b[0m", "\r", "\n", "{", "}", "'", "(", ")", ",", "...", " GiB", "x",
                         "non-default args: {", "Available KV cache memory: ", "GPU KV cache size: ", "nan",
                         "1e999", "-1", "0", "9" * 400, "9" * 5000, "\x00", "█  model   ",
                         "Initializing a V1 LLM engine (v"])


@st.composite
def messy_logs(draw):
    base = draw(st.sampled_from(TEXTS))
    start = draw(st.integers(0, len(base)))
    end = draw(st.integers(start, len(base)))
    pieces = [base[start:end]]
    for _ in range(draw(st.integers(0, 6))):
        at = draw(st.integers(0, len(pieces[0])))
        pieces[0] = pieces[0][:at] + draw(NOISE) + pieces[0][at:]
    return pieces[0]


@pytest.fixture(autouse=True)
def no_hub(monkeypatch):
    """A cut-off model name ('google/gemma-2') is a Hub id: answer as an offline Hub would, without a request."""
    from kvplan.models import hub

    def offline(*args, **kwargs):
        raise KvplanError("the Hub is not reachable in this test")

    monkeypatch.setattr(hub, "download_config", offline)


def outcome(text: str) -> None:
    try:
        result = explain(text, "fuzz.log")
    except KvplanError as exc:
        assert str(exc) and "\n" not in str(exc).strip()
        return
    json.dumps(result.to_dict(), allow_nan=False)
    assert isinstance(render(result), str)
    assert result.exit_code in (0, 1)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(messy_logs())
def test_cut_and_spliced_real_logs(text):
    outcome(text)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(max_size=400))
def test_random_text(text):
    outcome(text)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from([line for text in TEXTS for line in text.splitlines()]), max_size=12))
def test_any_order_of_real_lines_reads(lines):
    read_log("\n".join(lines)).to_dict()
