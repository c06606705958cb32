"""One deployment found in a file, before it is built: its name, where its keys are, how to build its Draft, and
what the file says around it (GPU count, image, requirements). File kinds produce Items; the runner builds and
checks them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from kvplan import registry
from kvplan.deployment.knobs import Knob
from kvplan.deployment.values import Draft
from kvplan.errors import KvplanError

if TYPE_CHECKING:
    from kvplan.deployment.dialect import Dialect

# The rules a flag or value problem found while building falls under (check.rules declares them).
KNOWN_FLAGS, CURRENT_FLAGS, VALID_VALUES = "KV002", "KV003", "KV004"


@dataclass(frozen=True)
class Problem:
    """A flag or value the engine would refuse, under the rule it breaks; key: where it is in the file."""

    rule: str
    message: str
    key: str | None = None


@dataclass(eq=False)
class Built:
    draft: Draft
    problems: list[Problem] = field(default_factory=list)
    unresolved: dict[str, str] = field(default_factory=dict)  # knob (model, gpu_count) -> the variable it waits for


FLOATING_TAGS = ("latest", "nightly", "main")


@dataclass(frozen=True)
class Image:
    """A container image reference; the tag pins the engine version when it reads as one (v0.10.1)."""

    reference: str

    @property
    def tag(self) -> str | None:
        name = self.reference.split("@", 1)[0]
        last = name.rsplit("/", 1)[-1]
        return last.split(":", 1)[1] if ":" in last else None

    @property
    def server(self) -> Dialect | None:
        """The engine whose server is the image's entry point (vllm/vllm-openai: vLLM's), by its dialect."""
        from kvplan.deployment.launch import image_dialect

        return image_dialect(self.reference)

    @property
    def version(self) -> str | None:
        """The engine release the tag of an engine's own image names (v0.10.1 -> 0.10.1)."""
        from kvplan.deployment.launch import image_release

        server = self.server
        return image_release(self.reference) if server is not None and server.image_tags_are_releases else None

    @property
    def floating(self) -> bool:
        """No tag, or one that moves with each release (latest, nightly); a digest pins it."""
        if "@" in self.reference:
            return False
        tag = (self.tag or "latest").lower()
        return tag.startswith(FLOATING_TAGS)


@dataclass(eq=False)
class Item:
    """A deployment as a file states it."""

    name: str
    line: int | None
    engine: str
    build: Callable[[], Built]
    lines: dict[str, int] = field(default_factory=dict)  # knob field, flag (dash form) or file key -> line
    requirements: dict[str, Any] = field(default_factory=dict)  # raw, validated by the runner
    defaults: dict[str, tuple[Any, str]] = field(default_factory=dict)  # knob -> (raw, where): the file's kvplan: GPU
    gpu_count: int | None = None  # what the manifest gives the pod (limits, requestGPU, compose devices)
    image: Image | None = None
    flags: tuple[str, ...] = ()  # engine flags as given, dash form without dashes
    version: str | None = None  # engine version pinned by the image tag or the file
    gpu_notes: tuple[str, ...] = ()  # why the GPU the file names could not be used (a product not catalogued)
    model_config: str | None = None  # a Hugging Face config.json to check as a model, not a deployment
    gpu_count_note: str = ""  # why the GPU count is not known (it waits for a variable)

    def line_of(self, key: str | None) -> int | None:
        if key is None:
            return self.line
        for spelling in (key, key.replace("_", "-"), key.replace("-", "_")):
            if spelling in self.lines:
                return self.lines[spelling]
        return self.line


@lru_cache(maxsize=4096)
def knob_for(key: str, engine: str = registry.DEFAULT) -> Knob | None:
    """deployment.values.field_for, remembered: a fleet spells the same keys in every file."""
    from kvplan.deployment.values import field_for

    return field_for(key, engine)


def flag_name(token: str) -> str:
    """A flag as typed (--max_model_len=4096, -tp) in the dash form the catalogues use (max-model-len, tp)."""
    body = token.strip().lstrip("-").split("=", 1)[0].split(".", 1)[0]
    return body.replace("_", "-").lower() if token.startswith("--") else body


def flag_problem(exc: KvplanError, engine: str, name: str | None = None) -> Problem:
    """The rule a flag error breaks, from what the engine's catalogue says of the flag: one it renamed or
    removed (KV003), one it has but with a bad value (KV004), or one it does not know (KV002)."""
    from kvplan.deployment.dialect import dialect_of
    from kvplan.deployment.flags import is_short_flag

    name = name or flag_name(exc.where or "")
    catalogue = dialect_of(engine).catalogue()
    if name in catalogue.renamed:
        rule = CURRENT_FLAGS
    elif (knob_for(name, engine) is not None or catalogue.has(name) or name in dialect_of(engine).knob_flags
          or is_short_flag(name, engine)):
        rule = VALID_VALUES
    else:
        rule = KNOWN_FLAGS
    return Problem(rule, str(exc), name)
