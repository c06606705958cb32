"""What a check reports: one Finding per file, deployment and rule, with a status."""

from __future__ import annotations

from dataclasses import asdict, dataclass

PASS, WARN, FAIL, SKIP, ERROR = "pass", "warn", "fail", "skip", "error"
STATUSES = (PASS, WARN, FAIL, SKIP, ERROR)
FILE_RULE = "KV000"  # a file that cannot be read or is not valid: not a rule outcome, exit code 2


@dataclass(frozen=True)
class Finding:
    file: str
    deployment: str | None
    rule: str
    status: str
    message: str
    line: int | None = None

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass(frozen=True)
class Outcome:
    """A rule's verdict on one deployment, before it is placed in a file."""

    status: str
    message: str
    key: str | None = None  # the key (knob field, requirement, 'image', ...) whose line the finding points at


def exit_code(findings: list[Finding]) -> int:
    """0 all pass (warnings allowed), 1 a rule failed, 2 a file could not be read or is invalid."""
    statuses = {finding.status for finding in findings}
    if ERROR in statuses:
        return 2
    return 1 if FAIL in statuses else 0
