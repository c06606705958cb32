"""Engine flags into a Draft, in four steps that each ask the engine's dialect: walk the words (Words), spell a
flag as the engine reads it (spell), find the knob it sets (knob_of), and otherwise look it up in the engine's
catalogue (catalogued). Dashes or underscores, `--flag=value`, short forms (-tp, -O3), unique prefixes,
`--flag` / `--no-flag` booleans and `--json-flag.key value` as each engine's parser takes them."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from kvplan import registry
from kvplan.deployment.declaration import BY_NAME, FLAGS_DOOR, knobs
from kvplan.deployment.dialect import Catalogue, Dialect, dialect_of
from kvplan.deployment.knobs import Knob
from kvplan.deployment.values import Draft, all_spellings, did_you_mean, field_for
from kvplan.errors import KvplanError

INERT_NOTE = "not memory-relevant: "
KVPLAN_OPTIONS = ("json", "suggest", "context", "schema", "gpu", "gpu-memory", "engine", "vllm-version", "token")


class Words:
    """The words of a command line, walked once: a flag's value is the next word unless that is a flag."""

    def __init__(self, args: list[str]) -> None:
        self.args = args
        self.index = 0

    def __bool__(self) -> bool:
        return self.index < len(self.args)

    def next(self) -> str:
        self.index += 1
        return self.args[self.index - 1]

    def value(self, flag: str, inline: str | None) -> str:
        if inline is not None:
            return inline
        if self and not looks_like_flag(self.args[self.index]):
            return self.next()
        raise KvplanError("expects a value", flag)

    def skip(self, arity: str, flag: str, inline: str | None) -> None:
        """Step over what a flag kvplan does not model takes, by its arity."""
        if inline is not None or arity in ("bool", "bool+no"):
            return
        if arity == "value":
            self.value(flag, None)
        elif arity == "optional":
            if self and not looks_like_flag(self.args[self.index]):
                self.index += 1
        elif arity == "list":
            while self and not looks_like_flag(self.args[self.index]):
                self.index += 1


@dataclass(frozen=True)
class Flag:
    """One flag as the engine reads it: its dash-form name, a `.key` suffix, an inline `=value`."""

    name: str
    subkey: str
    inline: str | None
    here: str  # where errors point: the flag as typed, or the caller's origin
    typed: str  # the name as typed, before dashes replaced underscores
    long: bool  # written with two dashes


@dataclass
class Parse:
    """The state of one parse: what it found so far."""

    engine: str
    dialect: Dialect
    words: Words
    draft: Draft = field(default_factory=lambda: Draft(door=FLAGS_DOOR))
    inert: list[str] = field(default_factory=list)
    dotted: dict[str, list[tuple[str, str, str]]] = field(default_factory=dict)
    positional: str | None = None


def parse_flags(args: list[str], engine: str = registry.DEFAULT, where: str = "command line",
                positional_model: bool = False, kvplan_knobs: bool = True, origin: str | None = None,
                version: tuple[int, ...] | None = None) -> Draft:
    """Engine flags into a Draft; each value's origin is the flag as typed. kvplan_knobs: kvplan's own knobs
    (--engine, --weights-memory, ...) are allowed, as on kvplan's command line but not in a pasted one.
    origin: where every value came from, when not the flag itself (a key of a --config file).
    version: the engine version planned for, which decides whether a since-removed flag is still accepted."""
    parse = Parse(engine, dialect_of(engine), Words(args))
    while parse.words:
        token = parse.words.next()
        if not looks_like_flag(token):
            if positional_model and parse.positional is None:
                parse.positional = token
                continue
            raise KvplanError(f"unexpected argument {token!r:.60}", where)
        flag = spell(token, origin or token, parse.dialect)
        if flag.name == "config" and not flag.subkey and parse.dialect.flag_file:
            parse.draft.set("config", parse.words.value(flag.here, flag.inline), flag.here)
            continue
        if flag.long and not kvplan_knobs:
            check_spelling(flag, parse.dialect)
        take(parse, resolve(flag, parse.dialect), kvplan_knobs, version)
    return finish(parse)


def spell(token: str, here: str, dialect: Dialect) -> Flag:
    """The flag's name in dash form (underscores become dashes only before a .key suffix), short forms expanded."""
    body, has_value, inline_text = token.lstrip("-").partition("=")
    inline = inline_text if has_value else None
    typed, dot, subkey = body.partition(".")
    if token.startswith("--"):
        name = typed.replace("_", "-").lower() + dot + subkey
    else:
        level = re.match(r"^O(\d+)$", body)  # -O3: the optimization level glued to its flag
        if level:
            name, inline = short_flag("O", dialect) or "compilation-config", level.group(1)
        else:
            long = short_flag(body, dialect)
            if long is None:
                raise KvplanError(f"unknown short flag{did_you_mean(body, all_shorts(dialect), '-')}", here)
            name = long
    name, _, subkey = name.partition(".")
    return Flag(name, subkey, inline, here, typed, token.startswith("--"))


def resolve(flag: Flag, dialect: Dialect) -> Flag:
    """The flag under its full name: a second spelling the catalogue lists, or the flag a unique prefix names."""
    name = flag.name
    if field_for(name, dialect.name) is None:
        name = dialect.catalogue().aliases.get(name, name)
    name = unabbreviated(name, dialect)
    return Flag(name, flag.subkey, flag.inline, flag.here, flag.typed, flag.long)


def take(parse: Parse, flag: Flag, kvplan_knobs: bool, version: tuple[int, ...] | None) -> None:
    """What the flag sets: a knob, a `.key` of a JSON knob, a knob switched off, or an entry of the catalogue."""
    knob = field_for(flag.name, parse.engine)
    if flag.subkey:
        take_subkey(parse, flag, knob)
        return
    negated = negated_knob(flag.name, parse.engine) if knob is None else None
    if negated is not None:
        parse.draft.set(negated.name, False, flag.here)
        return
    if knob is not None and not knob.engine_flag and not kvplan_knobs:
        raise KvplanError(f"is kvplan's own flag, not {parse.dialect.label}'s: give it to kvplan before the "
                          "pasted command", flag.here)
    if knob is not None:
        set_knob(parse, knob, flag)
        return
    if not catalogued(parse, flag, version):
        unknown(flag, parse.engine, kvplan_knobs)


def take_subkey(parse: Parse, flag: Flag, knob: Knob | None) -> None:
    if knob is None or knob.kind != "json":
        if knob is None and parse.dialect.catalogue().catalogued(flag.name):
            parse.words.value(flag.here, flag.inline)
            parse.draft.notes.append(f"--{flag.name}.{flag.subkey} is accepted but not modelled")
            return
        raise KvplanError("only JSON-valued flags take a .key suffix", flag.here)
    parse.dotted.setdefault(knob.name, []).append((flag.subkey, parse.words.value(flag.here, flag.inline),
                                                   flag.here))


def negated_knob(name: str, engine: str) -> Knob | None:
    """`--no-X` for a boolean knob X."""
    if not name.startswith("no-"):
        return None
    knob = field_for(name[3:], engine)
    return knob if knob is not None and knob.kind == "bool" else None


def set_knob(parse: Parse, knob: Knob, flag: Flag) -> None:
    if knob.kind == "bool":
        parse.draft.set(knob.name, True if flag.inline is None else flag.inline, flag.here)
    else:
        parse.draft.set(knob.name, parse.words.value(flag.here, flag.inline), flag.here)


def catalogued(parse: Parse, flag: Flag, version: tuple[int, ...] | None) -> bool:
    """A flag the engine's catalogue lists: its own name for a knob, an inert or noted flag, a renamed one."""
    catalogue, name, words, notes = parse.dialect.catalogue(), flag.name, parse.words, parse.draft.notes
    table_knob = parse.dialect.knob_flags.get(name)
    if table_knob is not None:
        field_name, arity = table_knob
        if field_name == "config":  # trtllm-serve's --config / --extra_llm_api_options: read by the caller
            parse.draft.set("config", words.value(flag.here, flag.inline), flag.here)
        elif field_name in BY_NAME():
            set_knob(parse, BY_NAME()[field_name], flag)
        else:
            words.skip(arity, flag.here, flag.inline)
            notes.append(f"--{name} is accepted but not modelled")
        return True
    if name in catalogue.inert or negated_bool(name, catalogue.inert) or negated_bool(name, catalogue.noted):
        parse.inert.append("--" + name)
        words.skip(str(catalogue.inert.get(name, "bool")), flag.here, flag.inline)
        return True
    if name in catalogue.noted:
        arity, why = catalogue.noted[name]
        notes.append(f"--{name} is accepted but not modelled ({why})")
        words.skip(arity, flag.here, flag.inline)
        return True
    if name in catalogue.renamed:
        new, when, refused, arity = catalogue.renamed[name]
        if refused and not still_there(when, version):
            typed = flag.typed.replace("_", "-").lower()
            if typed != name:  # a prefix of a flag this release no longer has: argparse matches nothing
                unknown(Flag(typed, flag.subkey, flag.inline, flag.here, flag.typed, flag.long), parse.engine, True)
            raise KvplanError(f"this flag is gone from current {parse.dialect.label} ({when}); today: {new}",
                              flag.here)
        notes.append(f"--{name} is deprecated or gone ({when}); today: {new}")
        words.skip(arity, flag.here, flag.inline)
        return True
    return False


def unknown(flag: Flag, engine: str, kvplan_knobs: bool) -> None:
    if flag.name in KVPLAN_OPTIONS and not kvplan_knobs:
        raise KvplanError("is an option of kvplan, not of the pasted command: put it before --", flag.here)
    dialect = dialect_of(engine)
    catalogue = dialect.catalogue()
    candidates = all_spellings(engine) + list(catalogue.inert) + list(catalogue.noted) + list(catalogue.renamed)
    raise KvplanError(f"unknown {dialect.label} flag{did_you_mean(flag.name, candidates, '--')}"
                      f"{other_engines_flag(flag.name, engine)}", flag.here)


def finish(parse: Parse) -> Draft:
    draft = parse.draft
    if parse.inert:
        draft.notes.append(INERT_NOTE + ", ".join(dict.fromkeys(parse.inert)))
    for name, parts in parse.dotted.items():
        merge_dotted(draft, name, parts)
    if parse.positional is not None:
        flagged = draft.values.get("model")
        if flagged is not None and flagged[0] != parse.positional:
            # `vllm serve` serves its positional model whatever --model says (ServeSubcommand.cmd)
            draft.notes.append(f"the positional model {parse.positional} is served; {flagged[1]} {flagged[0]} is "
                               "ignored")
        draft.set("model", parse.positional, "model (positional)")
    return draft


def check_spelling(flag: Flag, dialect: Dialect) -> None:
    """A pasted command is spelled as its engine requires: SGLang takes dashes only, trtllm-serve its own
    underscore names; vLLM takes either."""
    catalogue = dialect.catalogue()
    if not catalogue.underscores_accepted and "_" in flag.typed:
        raise KvplanError(f"{dialect.label} spells its flags with dashes: --{flag.name}", flag.here)
    native = catalogue.native.get(flag.name)
    if not catalogue.dashes_accepted and native is not None and "--" + flag.typed != native:
        raise KvplanError(f"{dialect.label} spells this flag {native}", flag.here)


def merge_dotted(draft: Draft, name: str, parts: list[tuple[str, str, str]]) -> None:
    """`--speculative-config.method ngram` and friends, merged into the flag's JSON object."""
    import json

    raw, where = draft.values.get(name, ({}, parts[0][2]))
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise KvplanError(f"invalid JSON: {exc.msg} at column {exc.colno}", where) from None
    if not isinstance(raw, dict):
        raise KvplanError("takes .key suffixes only on a JSON object", where)
    merged = dict(raw)
    for path, text, here in parts:
        target = merged
        keys = path.split(".")
        for key in keys[:-1]:
            target = target.setdefault(key, {})
            if not isinstance(target, dict):
                raise KvplanError(f"{key!r} is not an object", here)
        try:
            target[keys[-1]] = json.loads(text)
        except json.JSONDecodeError:
            target[keys[-1]] = text
    draft.set(name, merged, where)


def unabbreviated(name: str, dialect: Dialect) -> str:
    """A unique prefix of a long flag stands for it, as argparse's allow_abbrev has it (vLLM keeps it on).
    An exact current flag wins; then a knob the prefix names; then any other flag."""
    engine, catalogue = dialect.name, dialect.catalogue()
    if field_for(name, engine) is not None or name.startswith("no-"):
        return name
    current = (catalogue.inert, catalogue.noted)
    if any(name in flags for flags in current) or not catalogue.abbreviations_allowed:
        return name
    prefixed: dict[str, str] = {}
    for spelling in all_spellings(engine):
        knob = field_for(spelling, engine)
        if knob is not None and spelling.startswith(name):
            prefixed.setdefault(knob.name, spelling)
    others = {flag: flag for flags in (*current, catalogue.renamed) for flag in flags
              if flag.startswith(name) and field_for(flag, engine) is None}
    if len(prefixed) == 1 and (not others or name in catalogue.renamed):
        return next(iter(prefixed.values()))
    if name in others:
        return name
    targets = {**prefixed, **others}
    if len(targets) == 1:
        return next(iter(targets.values()))
    if len(targets) > 1:
        raise KvplanError(f"ambiguous option: could match {', '.join('--' + t for t in sorted(targets.values()))}",
                          "--" + name)
    return name


def other_engines_flag(name: str, engine: str) -> str:
    """' (it is SGLang's: add --engine sglang)' when another engine has the flag this one lacks."""
    for other in registry.names():
        dialect = registry.dialect(other)
        if other != engine and dialect.catalogue_module is not None and (
                field_for(name, other) is not None or dialect.catalogue().catalogued(name)):
            return f" (it is {dialect.label}'s: add --engine {other})"
    return ""


def negated_bool(name: str, flags: dict[str, Any]) -> bool:
    """`--no-X` for an on/off flag X: argparse's BooleanOptionalAction, and the hidden --no- forms vLLM 0.33 keeps
    for its --enable-X / --disable-X pairs."""
    if not name.startswith("no-"):
        return False
    arity = flags.get(name[3:])
    arity = arity[0] if isinstance(arity, tuple) else arity
    return arity == "bool+no" or (arity == "bool" and name[3:].startswith(("enable-", "disable-")))


def still_there(when: str, version: tuple[int, ...] | None) -> bool:
    """A flag the catalogue marks removed is still accepted by an older engine version: one up to the release it
    was last in (`last in v0.17.1`, by major and minor), or one before the release it is gone by (`gone by
    0.5.20`, to the patch: SGLang removes flags in patch releases), and not before the release it was `added` in
    (by major and minor)."""
    added = re.search(r"added v(\d+)\.(\d+)", when)
    if version and added and version[:2] < (int(added.group(1)), int(added.group(2))):
        return False
    last = re.search(r"last in v(\d+)\.(\d+)", when)
    if version and last:
        return version[:2] <= (int(last.group(1)), int(last.group(2)))
    gone = re.search(r"gone by v?(\d+(?:\.\d+)+)", when)
    return bool(version and gone and version < tuple(int(part) for part in gone.group(1).split(".")))


def short_flag(body: str, dialect: Dialect) -> str | None:
    """The long name of a single-dash flag: the knobs' own short forms, then the engine's catalogue."""
    for knob in knobs():
        if body in knob.short:
            return knob.name.replace("_", "-")
    return dialect.catalogue().short.get(body)


def all_shorts(dialect: Dialect) -> list[str]:
    return [s for knob in knobs() for s in knob.short] + list(dialect.catalogue().short)


def is_short_flag(name: str, engine: str) -> bool:
    return any(name in knob.short for knob in knobs()) or name in dialect_of(engine).catalogue().short


def looks_like_flag(token: str) -> bool:
    return token.startswith("-") and len(token) > 1 and not re.match(r"^-\d", token)


__all__ = ["Catalogue", "INERT_NOTE", "parse_flags"]
