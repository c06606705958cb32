"""What an engine's command line means, as one typed object per engine (kvplan/engines/<name>/dialect.py): how its
server is launched (programs, `python -m` modules, container images), how it takes the model, how it spells the
Deployment's knobs, and its catalogue of the flags kvplan does not model. Every front door, the levers, `size`'s
launch lines and `check` ask the dialect instead of naming an engine."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kvplan.deployment.knobs import Knob
    from kvplan.deployment.values import Draft

# Arity of a catalogued flag, i.e. what follows it on the command line:
#   "value"    exactly one value (`--port 8000` or `--port=8000`)
#   "bool"     no value (a store_true flag, or one spelling of an enable/disable pair)
#   "bool+no"  no value, and `--no-NAME` also exists (argparse.BooleanOptionalAction, click's --x/--no-x)
#   "optional" a value may follow or not (nargs='?')
#   "list"     one or more values up to the next flag (nargs='+')
ARITIES = ("value", "bool", "bool+no", "optional", "list")


@dataclass(frozen=True, eq=False)
class Catalogue:
    """The flags of one engine release's command line beyond the Deployment's knobs, and its spelling rules."""

    short: dict[str, str] = field(default_factory=dict)  # single-dash spelling -> long flag (dash form)
    aliases: dict[str, str] = field(default_factory=dict)  # second long spelling -> the flag
    inert: dict[str, str] = field(default_factory=dict)  # flags that change no memory kvplan plans: -> arity
    noted: dict[str, tuple[str, str]] = field(default_factory=dict)  # memory-relevant, not modelled: (arity, why)
    renamed: dict[str, tuple[str, str, bool, str]] = field(default_factory=dict)  # (today, when, refused, arity)
    native: dict[str, str] = field(default_factory=dict)  # dash form -> as the engine itself spells the flag
    renamed_env: dict[str, tuple[str, str]] = field(default_factory=dict)  # removed variable -> (today, when)
    underscores_accepted: bool = True  # `--max_model_len` reads as `--max-model-len`
    dashes_accepted: bool = True  # the dash form of an underscore-spelled flag is accepted
    abbreviations_allowed: bool = False  # argparse's allow_abbrev: a unique prefix stands for the flag

    def catalogued(self, name: str) -> bool:
        """A flag the engine has that kvplan does not model (current, or renamed and removed)."""
        return name in self.inert or name in self.noted or name in self.renamed

    def has(self, name: str) -> bool:
        """Any flag of the engine's that the catalogue lists, second spellings included."""
        return self.catalogued(name) or name in self.aliases


@dataclass(frozen=True)
class BenchModule:
    """A `python -m MODULE` that starts no server but parses the server's flags and then its own (SGLang's
    one-batch benchmark): the server's are read as a launch line's, its own passed over with a note."""

    module: str
    own_flags: dict[str, str]  # its own flags (dash form) -> arity: "switch", "value", or "values" (nargs +)
    note: str  # what the note says of them: whether they set the pool

    def split(self, args: list[str]) -> tuple[list[str], list[str]]:
        """The server's words, and the own flags found (as typed, without their values)."""
        kept: list[str] = []
        found: list[str] = []
        index = 0
        while index < len(args):
            word = args[index]
            name, equals, _ = word.partition("=")
            arity = self.own_flags.get(name[2:].replace("_", "-")) if name.startswith("--") else None
            if arity is None:
                kept.append(word)
                index += 1
                continue
            found.append(name)
            index += 1
            if equals or arity == "switch":
                continue
            index += 1 if arity == "value" else 0
            while arity == "values" and index < len(args) and not args[index].startswith("-"):
                index += 1
        return kept, found


@dataclass(frozen=True)
class Program:
    """An executable that starts the engine's server, and the subcommand that must (or may) follow it."""

    name: str
    subcommand: str | None = None
    subcommand_optional: bool = False


@dataclass(frozen=True, eq=False)
class Dialect:
    """One engine's command line."""

    name: str  # the --engine value
    label: str  # how the engine names itself in messages
    catalogue_module: str | None = None  # the module whose CATALOGUE lists the engine's other flags
    programs: tuple[Program, ...] = ()
    modules: tuple[str, ...] = ()  # `python -m MODULE` entry points of its server
    bench_modules: tuple[BenchModule, ...] = ()  # `python -m MODULE` tools that take its server's flags too
    images: tuple[str, ...] = ()  # container images whose entry point is its server (the first module)
    image_tags_are_releases: bool = False  # an image's tag (v0.10.1) names the engine release it runs
    # fragments of image names that run this engine (quay.io/.../vllm-openai-ubi9, opea/vllm-gaudi): a container
    # on such an image with flags only and no command runs its server (check's args-only containers)
    image_fragments: tuple[str, ...] = ()
    positional_model: bool = False  # `vllm serve MODEL`: the first bare word is the model
    model_flag: str | None = None  # how a pasted launch line names the model; None: positionally
    flag_file: bool = False  # --config FILE: a YAML file of the engine's flag names
    # the engine's own --config file, when it is not a file of flag names (trtllm-serve's LLM-API options)
    options_reader: Callable[[str], Draft] | None = None
    option_keys: Callable[[], frozenset[str]] | None = None  # the top-level keys its options file takes
    # the engine's own flags for kvplan's knobs: flag -> (Deployment field, or a setting read elsewhere; arity);
    # empty where its flags are the knobs' own names (vLLM's)
    knob_flags: dict[str, tuple[str, str]] = field(default_factory=dict)
    # Deployment knob -> spellings kvplan takes for this engine beyond its own flags for them (dash form)
    extra_spellings: dict[str, tuple[str, ...]] = field(default_factory=dict)
    own_knobs: frozenset[str] = frozenset()  # the engine-only knobs (Knob.engine_only) this engine has
    env_prefix: str | None = None  # its environment variables' prefix (VLLM_): a note names those not modelled
    raises_utilization: bool = False  # utilization is a share of the whole GPU: raising it is a lever
    # the launch words as the engine itself reads them before its flags mean anything (SGLang: --dp N with
    # --enable-dp-attention is attention DP inside TP); applied by every front door that reads a launch line
    reads_words: Callable[[list[str]], list[str]] | None = None
    # the max_num_batched_tokens value below 1 that turns chunked prefill off (SGLang's --chunked-prefill-size -1)
    unchunked_prefill: int | None = None

    @cached_property
    def knob_spellings(self) -> dict[str, tuple[str, ...]]:
        """Deployment knob -> this engine's own spellings of it (dash form), beyond the knob's name and aliases:
        its flags for kvplan's knobs, then the extra ones."""
        found: dict[str, list[str]] = {}
        for flag, (name, _) in self.knob_flags.items():
            if flag != name.replace("_", "-"):
                found.setdefault(name, []).append(flag)
        for name, flags in self.extra_spellings.items():
            found.setdefault(name, []).extend(flags)
        return {name: tuple(flags) for name, flags in found.items()}

    def catalogue(self) -> Catalogue:
        if self.catalogue_module is None:
            return EMPTY
        return import_module(self.catalogue_module).CATALOGUE

    @property
    def launchers(self) -> list[str]:
        """How a command line starts the server: each program (with its required subcommand), then the first
        module (vllm serve, python -m vllm.entrypoints.openai.api_server)."""
        programs = [p.name if p.subcommand is None or p.subcommand_optional else f"{p.name} {p.subcommand}"
                    for p in self.programs]
        return programs + ([f"python -m {self.modules[0]}"] if self.modules else [])

    @property
    def launcher(self) -> str:
        """The launcher a pasted line starts with (vllm serve, python -m sglang.launch_server)."""
        return next(iter(self.launchers), self.name)

    def spellings(self, knob: Knob) -> tuple[str, ...]:
        """How a knob may be written for this engine (dash form); none where the engine lacks it."""
        if knob.engine_only and knob.name not in self.own_knobs:
            return ()
        return tuple(dict.fromkeys((knob.name.replace("_", "-"), *knob.aliases,
                                    *self.knob_spellings.get(knob.name, ()))))

    def flag_for(self, knob: Knob) -> str:
        """The knob as this engine's own command line spells it (--context-length, --max_seq_len)."""
        own = self.knob_spellings.get(knob.name)
        dashed = own[0] if own else knob.name.replace("_", "-")
        return self.catalogue().native.get(dashed, "--" + dashed)

    def sets(self, knob: Knob) -> bool:
        """Whether the engine's command line can say this knob."""
        if not knob.engine_flag or (knob.engine_only and knob.name not in self.own_knobs):
            return False
        return not self.knob_flags or any(name == knob.name for name, _ in self.knob_flags.values())

    def names_image(self, reference: str) -> bool:
        """A container image whose name (registry and tag aside) contains one of the engine's fragments."""
        name = reference.split("@", 1)[0].lower()
        if ":" in name.rsplit("/", 1)[-1]:
            name = name.rsplit(":", 1)[0]
        return any(fragment in name for fragment in self.image_fragments)

    @property
    def entry(self) -> tuple[str, ...]:
        """The words that start the engine's server, as an image's entry point would run them."""
        if self.modules:
            return ("python3", "-m", self.modules[0])
        if self.programs:
            program = self.programs[0]
            return (program.name, program.subcommand) if program.subcommand else (program.name,)
        return ()

    def serves_image(self, reference: str) -> bool:
        """A container image (registry/name[:tag][@digest]) whose entry point is this engine's server."""
        name = reference.split("@", 1)[0]
        if ":" in name.rsplit("/", 1)[-1]:
            name = name.rsplit(":", 1)[0]
        return any(name == known or name.endswith("/" + known) for known in self.images)


EMPTY = Catalogue()


def dialect_of(engine: str) -> Dialect:
    """The engine's dialect; an engine kvplan does not know speaks the shared knobs only."""
    from kvplan import registry

    return registry.dialect(engine) if engine in registry.names() else Dialect(engine, engine)
