"""The engines kvplan knows, each a folder kvplan/engines/<name>/ with a `budget` module (its ENGINE), a `dialect`
module (its DIALECT) and a `log_lines` module (its LOG_LINES). Nothing here imports an engine: each is loaded when
first asked for, so any layer may ask which engines there are."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kvplan.deployment.dialect import Dialect
    from kvplan.engines.base import Engine
    from kvplan.engines.log_lines import LogLines
    from kvplan.engines.registered import Registries
    from kvplan.engines.releases import Releases

DEFAULT = "vllm"  # the engine a deployment that names none is planned for
# --engine name -> the package holding that engine's folder. Adding an engine is one line here.
_PACKAGES: dict[str, str] = {
    "vllm": "kvplan.engines.vllm",
    "sglang": "kvplan.engines.sglang",
    "trtllm": "kvplan.engines.trtllm",
    "simple": "kvplan.engines.simple",
}


def names() -> tuple[str, ...]:
    return tuple(_PACKAGES)


def register(name: str, package: str) -> None:
    """An engine whose folder lives outside kvplan (a plug-in, or a test's toy engine)."""
    _PACKAGES[name] = package


def unregister(name: str) -> None:
    _PACKAGES.pop(name, None)


def _part(name: str, module: str, attribute: str) -> Any:
    if name not in _PACKAGES:
        raise ValueError(f"unknown engine {name!r}")
    return getattr(import_module(f"{_PACKAGES[name]}.{module}"), attribute)


def engine(name: str) -> Engine:
    """The engine's budget rule (its Engine)."""
    return _part(name, "budget", "ENGINE")


def dialect(name: str) -> Dialect:
    """How the engine's command line is written: launchers, images, spellings, flags."""
    return _part(name, "dialect", "DIALECT")


def log_lines(name: str) -> LogLines | None:
    """How the engine's log records look, for explain; None for an engine that prints no log kvplan reads."""
    from importlib.util import find_spec

    if name in _PACKAGES and find_spec(f"{_PACKAGES[name]}.log_lines") is None:
        return None
    return _part(name, "log_lines", "LOG_LINES")


def releases(name: str) -> Releases | None:
    """The releases of the engine kvplan covers; None for an engine without releases (the textbook one)."""
    from importlib.util import find_spec

    if name in _PACKAGES and find_spec(f"{_PACKAGES[name]}.releases") is None:
        return None
    return _part(name, "releases", "RELEASES")


def architectures(name: str) -> Registries | None:
    """The model architectures each release of the engine registers (engines/registered.py); None for an engine
    kvplan has no such table for."""
    from importlib.util import find_spec

    if name in _PACKAGES and find_spec(f"{_PACKAGES[name]}.architectures") is None:
        return None
    return _part(name, "architectures", "REGISTRIES")


def label(name: str) -> str:
    """How the engine names itself in messages (vLLM, SGLang, TensorRT-LLM); the name itself when unknown."""
    return dialect(name).label if name in _PACKAGES else name
