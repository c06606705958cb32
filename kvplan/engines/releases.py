"""An engine's releases as kvplan knows them: which PyPI releases its rules cover, the newest (the default), and
each release in which a rule kvplan models changed, with what made it. Each engine's releases.py holds one."""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.deployment.launch import release_tuple
from kvplan.errors import KvplanError


@dataclass(frozen=True)
class Change:
    """A rule kvplan models that changed in a release, and the file, PR or log that says so."""

    release: tuple[int, ...]
    rule: str


@dataclass(frozen=True)
class Releases:
    label: str  # the engine's name in messages
    covered: tuple[str, ...]  # the PyPI releases whose rules kvplan applies, oldest first
    changes: tuple[Change, ...] = ()

    @property
    def newest(self) -> str:
        return self.covered[-1]

    def checked(self, text: str, where: str) -> str:
        """The release as given, when it is one the covered range holds (a major.minor stands for its releases)."""
        wanted = release_tuple(text)
        if wanted is None:
            raise KvplanError(f"cannot read {text!r} as a {self.label} release; write e.g. {self.newest}", where)
        known = {parts[:len(wanted)] for release in self.covered if (parts := release_tuple(release))}
        if wanted not in known:
            raise KvplanError(f"{self.label} {text} is not a release kvplan knows: it covers {self.covered[0]} to "
                              f"{self.newest}", where)
        return text
