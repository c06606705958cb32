"""kvplan verify: hold a plan against a real device. The KV block pool is allocated from the layer kinds' own
page shapes, a paged decode step runs through block tables over it, and, where the planned pool does not fit, the
largest pool that does is searched. torch is imported only here (pip install 'kvplan[verify]')."""

from __future__ import annotations

from kvplan.errors import KvplanError

INSTALL_HINT = "pip install 'kvplan[verify]'"


def require_torch() -> None:
    """torch is an optional dependency: without it verify says so in one line (exit 2)."""
    import warnings

    try:
        with warnings.catch_warnings():  # torch warns at import when numpy is absent; verify does not use numpy
            warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
            import torch  # noqa: F401
    except ImportError:
        raise KvplanError(f"kvplan verify needs torch, which is not installed: {INSTALL_HINT}", "verify") from None
