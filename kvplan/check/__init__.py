"""kvplan check: deployment files in, findings per file, deployment and rule out (docs/architecture.md).

Files are read by kinds (check.kinds; check.kubernetes, check.helm, check.compose) into Items; the runner
builds each through the same builders and engines as kvplan estimate; rules (check.rules) judge them;
reporters (check.reporters) render them."""

from kvplan.check.runner import Options, Report, check_paths

__all__ = ["Options", "Report", "check_paths"]
