"""The two shapes of settings a vLLM startup log prints: the `non-default args: {...}` Python dict repr, and the
engine config's `key=value, key=value` list. Both are read item by item, so that a line cut off by a terminal,
an excerpt's `...` or a value Python cannot rebuild (`<CompilationMode.VLLM_COMPILE: 3>`) loses only that item."""

from __future__ import annotations

import ast
import warnings
from typing import Any

OPENERS = {"{": "}", "[": "]", "(": ")"}
ELLIPSIS = "..."


def top_level_items(text: str) -> tuple[list[str], bool]:
    """TEXT (after an opening brace) split at the commas outside quotes and brackets, up to the brace that closes
    it. The flag says whether that brace was found (False: the text was cut off, and the last item with it)."""
    items: list[str] = []
    closers: list[str] = []
    quote = ""
    start = 0
    index = 0
    while index < len(text):
        char = text[index]
        if quote:
            if char == "\\":
                index += 1
            elif char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif char in OPENERS:
            closers.append(OPENERS[char])
        elif closers and char == closers[-1]:
            closers.pop()
        elif not closers and char in "})":
            items.append(text[start:index])
            return items, True
        elif not closers and char == ",":
            items.append(text[start:index])
            start = index + 1
        index += 1
    items.append(text[start:])
    return items, False


def python_dict(text: str) -> tuple[dict[str, Any], int]:
    """The entries of a dict repr (TEXT starts just after its '{') that Python can read back, and how many
    could not be read (cut off, elided, or not a literal)."""
    items, closed = top_level_items(text)
    unread = 0
    if not closed:
        unread += bool(items.pop().strip())  # the cut-off tail
    found: dict[str, Any] = {}
    for item in items:
        body = item.strip()
        while body.startswith(ELLIPSIS):
            body = body[len(ELLIPSIS):].strip()
        if not body:
            continue
        try:
            entry = _literal("{" + body + "}")
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            unread += 1
            continue
        if isinstance(entry, dict):
            found.update((str(key), value) for key, value in entry.items())
    return found, unread


def config_pairs(text: str) -> dict[str, Any]:
    """`model='x', dtype=torch.bfloat16, max_seq_len=8192, quantization=None`: each value as a Python literal where
    it is one, else as the text itself ('torch.bfloat16')."""
    items, _ = top_level_items(text)
    pairs: dict[str, Any] = {}
    for item in items:
        if not item.strip():
            continue
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key.isidentifier() or key in pairs:
            continue
        pairs[key] = scalar(raw.strip())
    return pairs


def scalar(raw: str) -> Any:
    try:
        return _literal(raw)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return raw


def _literal(text: str) -> Any:
    """ast.literal_eval without the SyntaxWarning Python prints to stderr for garbled text such as '1e308x'."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)
        return ast.literal_eval(text)
