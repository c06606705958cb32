"""Targets: N requests of CONTEXT tokens each, running at once ("32@8K")."""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.deployment.knobs import MAX_TOKENS
from kvplan.errors import KvplanError
from kvplan.units import parse_human_int


@dataclass(frozen=True)
class Target:
    """requests of context tokens each, all running at once."""

    requests: int
    context: int

    def __str__(self) -> str:
        return f"{self.requests:,} x {self.context:,} tokens"


def parse_target(text: str, where: str = "--target") -> Target:
    """'32@8K' -> 32 requests of 8,192 tokens; numbers as vLLM reads them (8K = 8,192, 8k = 8,000)."""
    shown = f"{text!r:.40}"
    requests_text, at, context_text = str(text).strip().partition("@")
    if not at or not requests_text.strip() or not context_text.strip():
        raise KvplanError(f"cannot read {shown} as a target; write REQUESTS@CONTEXT, e.g. 32@8K (32 requests of "
                          "8,192 tokens each at once)", where)
    try:
        requests = parse_human_int(requests_text.strip(), where)
        context = parse_human_int(context_text.strip(), where)
    except KvplanError as exc:
        raise KvplanError(f"target {shown}: {exc.message}", where) from None
    for label, value in (("requests", requests), ("context", context)):
        if value is None or not 1 <= value <= MAX_TOKENS:
            raise KvplanError(f"target {shown}: {label} must be a whole number from 1 to {MAX_TOKENS:,}", where)
    assert requests is not None and context is not None
    return Target(requests, context)


def parse_targets(texts: list[str] | tuple[str, ...], where: str = "--target") -> tuple[Target, ...]:
    """Each --target (comma-separated ones too); at least one."""
    parts = [part for text in texts for part in str(text).split(",") if part.strip()]
    if not parts:
        raise KvplanError("give at least one target, e.g. --target 32@8K", where)
    return tuple(parse_target(part, where) for part in parts)
