"""The README's Python session is run as a doctest: the numbers it shows are the numbers kvplan gives."""

from __future__ import annotations

import doctest
import re
from pathlib import Path

README = Path(__file__).parent.parent / "README.md"


def test_readme_python_session():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)
    sessions = [block for block in blocks if ">>>" in block]
    assert sessions, "the README has no Python session"
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    for number, text in enumerate(sessions):
        test = doctest.DocTestParser().get_doctest(text, {}, f"README session {number}", str(README), 0)
        runner.run(test)
    assert runner.failures == 0 and runner.tries > 0
