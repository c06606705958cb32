"""Which model architectures each engine release registers (issue 18 section 5, issue 22 item 3): a plan for an
architecture the chosen release does not register is refused with one line naming the releases that do, or with
--allow-unmodelled planned with a note. The ranges are read from the release wheels by
benchmarks/architecture_registries.py into each engine's data/architectures.json; this module loads a file at
the first plan that asks, once.

The name checked is the spec's architecture, config.json's first `architectures` entry (both engines try each
entry in turn; configs name one). A config without `architectures` (which kvplan names by its model_type) and a
release whose wheel was not read are not checked."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kvplan.deployment.declaration import Deployment
from kvplan.deployment.launch import release_tuple
from kvplan.errors import KvplanError
from kvplan.models.model import ModelSpec


@dataclass
class Registries:
    """One engine's registered architectures by release. fallback: what the engine does with a name its release
    does not register, said in the refusal."""

    label: str
    path: Path
    fallback: str
    _data: dict[str, Any] = field(default_factory=dict, repr=False)

    def data(self) -> dict[str, Any]:
        if not self._data:
            self._data.update(json.loads(self.path.read_text()))
        return self._data

    def unregistered(self, architecture: str, version: str) -> str | None:
        """The line saying `version` does not register `architecture`; None where it does or where it is not
        checked."""
        data = self.data()
        runs = data["architectures"].get(architecture)
        releases: list[str] = data["releases"]
        wanted = release_tuple(version) or ()
        wanted = wanted + (0,) * (3 - len(wanted))  # a major.minor: its first release, as the budgets read it
        at = next((i for i, release in enumerate(releases) if release_tuple(release) == wanted), None)
        if at is None:
            return None
        if runs is None:
            return f"{self.label} {releases[at]} does not register {architecture} (nor does any release from " \
                   f"{releases[0]} to {releases[-1]})"
        if any(releases.index(first) <= at <= releases.index(last) for first, last in runs):
            return None
        registered = ", ".join(first if first == last else f"{first}-{last}" for first, last in runs)
        return f"{self.label} {releases[at]} does not register {architecture} (registered {registered})"

    def refusal(self, spec: ModelSpec, dep: Deployment, version: str) -> str | None:
        """The line for the deployment's architecture; an engine whose table depends on more than the release
        (TensorRT-LLM's backends) overrides it."""
        return self.unregistered(spec.architecture, version)

    def consequence(self, dep: Deployment) -> str:
        """What the engine does at start-up with the refused name; an engine with more than one model table
        (TensorRT-LLM's backends) says which."""
        return self.fallback

    def check(self, spec: ModelSpec, dep: Deployment, version: str) -> str | None:
        """Refuse a plan for an architecture `version` does not register; with --allow-unmodelled, the note."""
        if spec.architecture == spec.model_type:  # config.json without `architectures` (models/hf_config.py)
            return None
        line = self.refusal(spec, dep, version)
        if line is None:
            return None
        if not dep.allow_unmodelled:
            where = dep.where("engine_version" if dep.engine_version else "model")
            raise KvplanError(f"{line}: {self.consequence(dep)}; --allow-unmodelled plans it anyway", where)
        return f"{line}: planned with its own layers anyway (--allow-unmodelled)"
