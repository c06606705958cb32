"""kvplan: KV-cache capacity planning for LLM serving engines.

    >>> import kvplan
    >>> plan = kvplan.estimate("Qwen/Qwen2.5-7B", gpu="h100", max_model_len=32768, tensor_parallel_size=2)
    >>> plan.capacity.tokens, plan.capacity.max_concurrency
    (2278480, 69.53)

The README has more; the CLI is `kvplan` (or `python -m kvplan`).
"""

from __future__ import annotations

# typing's import takes ~15 ms, the first of kvplan's start-up: an interrupt in it would end in a traceback
# before the CLI takes Ctrl-C over (kvplan.cli.interrupt). Annotations are strings here, so none is needed.
TYPE_CHECKING = False
__version__ = "0.1.0"
__all__ = ["Deployment", "Plan", "estimate", "gpus", "load_model", "size", "__version__"]

if TYPE_CHECKING:
    from typing import Any

    from kvplan.api import estimate, gpus, load_model
    from kvplan.deployment import Deployment
    from kvplan.plan import Plan
    from kvplan.sizing import size

# Loaded on first use, so that `import kvplan` (and the CLI's start-up) stays cheap.
_EXPORTS = {"estimate": "kvplan.api", "gpus": "kvplan.api", "load_model": "kvplan.api",
            "Deployment": "kvplan.deployment", "Plan": "kvplan.plan", "size": "kvplan.sizing"}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'kvplan' has no attribute {name!r}")
    from importlib import import_module

    return getattr(import_module(module), name)


def __dir__() -> list[str]:
    return sorted(__all__)
