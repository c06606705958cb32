"""File kinds: each knows how to recognise its documents (detect) and which deployments they state (items).
The kinds that read launch commands are in check.kubernetes, check.helm and check.compose."""

from __future__ import annotations

from pathlib import PurePath
from typing import Any, Protocol

from kvplan import registry
from kvplan.check.item import KNOWN_FLAGS, VALID_VALUES, Built, Item, Problem, flag_name, flag_problem, knob_for
from kvplan.check.requirements import REQUIREMENT_KEYS
from kvplan.check.source import SETTINGS_KEYS, Settings, Source, comment_settings, read_settings
from kvplan.deployment.values import Draft
from kvplan.errors import KvplanError


class FileKind(Protocol):
    name: str  # the --kind value
    label: str

    def detect(self, document: Any) -> bool: ...

    def items(self, source: Source) -> list[Item]: ...


def kinds() -> tuple[FileKind, ...]:
    """In the order they are tried: the most specific shape first."""
    from kvplan.check.compose import Compose
    from kvplan.check.crds import KServe, KubeAI
    from kvplan.check.helm import HelmValues
    from kvplan.check.kubernetes import Kubernetes
    from kvplan.check.llmd import ModelService
    from kvplan.check.ray import RayServeConfig, RayService

    return (DeploymentList(), HelmValues(), ModelService(), Compose(), KServe(), KubeAI(), RayService(),
            Kubernetes(), RayServeConfig(), ModelConfig(), EngineOptions(), VllmConfig())


def kind_named(name: str) -> FileKind:
    for kind in kinds():
        if kind.name == name:
            return kind
    raise KvplanError(f"unknown kind {name!r}; choose from {', '.join(k.name for k in kinds())}", "--kind")


class DeploymentList:
    """kvplan's own file: `deployments:`, a list of named deployments with knobs and requirements."""

    name, label = "deployments", "kvplan deployment file"
    ENTRY_KEYS = ("name", "gpu_count")

    def detect(self, document: Any) -> bool:
        return isinstance(document, dict) and isinstance(document.get("deployments"), list)

    def items(self, source: Source) -> list[Item]:
        document = source.document
        if not isinstance(document, dict) or not isinstance(document.get("deployments"), list):
            raise KvplanError("expected a mapping with a 'deployments:' list", source.path)
        for key in document:
            if key not in ("deployments", *SETTINGS_KEYS):
                raise source.error("unknown top-level key; a deployment file has 'deployments:' and 'kvplan:'", key)
        settings = read_settings(source)
        items: list[Item] = []
        named: dict[str, int] = {}
        for index, entry in enumerate(document["deployments"]):
            if not isinstance(entry, dict):
                raise source.error(f"expected a mapping of knobs (name, model, gpu, ...), got {_kind_of(entry)}",
                                   "deployments", index)
            name = entry.get("name")
            if not isinstance(name, str) or not name.strip():
                raise source.error(f"each deployment needs a name (text) for the reports, got {name!r:.40}",
                                   "deployments", index)
            line = source.line("deployments", index) or 0
            if name in named:
                raise source.error(f"two deployments are named {name!r} (lines {named[name]} and {line})",
                                   "deployments", index)
            named[name] = line
            items.append(self._item(source, index, name, entry, settings))
        return items

    def _item(self, source: Source, index: int, name: str, entry: dict[Any, Any], settings: Settings) -> Item:
        lines = {**settings.lines, **source.flat_lines("deployments", index)}
        knobs = {str(k): v for k, v in entry.items() if k not in (*self.ENTRY_KEYS, *REQUIREMENT_KEYS)}
        engine = str(knobs.get("engine") or settings.knobs.get("engine", (registry.DEFAULT,))[0] or registry.DEFAULT).lower()
        count = entry.get("gpu_count")
        if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 1):
            raise source.error(f"'gpu_count' must be a positive integer, got {count!r:.40}", "deployments", index,
                               "gpu_count")

        version = knobs.get("vllm_version", knobs.get("engine_version", settings.knobs.get("engine_version",
                                                                                          (None,))[0]))

        def build() -> Built:
            from kvplan.deployment.launch import version_tuple
            from kvplan.deployment.values import draft_from_mapping

            modelled = {key: raw for key, raw in knobs.items() if knob_for(key, engine) is not None}
            draft = draft_from_mapping(modelled, name, engine)  # knobs it knows: no error until their values
            problems = []
            for key, raw in knobs.items():  # the other keys one by one: every bad key is reported, not the first
                if key in modelled:
                    continue
                try:  # an engine flag kvplan does not model, read as a --config file's key is
                    draft.update(_config_key(source.path, key, raw, engine, lines,
                                             version_tuple(None if version is None else str(version))))
                except KvplanError as exc:
                    problems.append(_key_problem(exc, key, engine))
            return Built(draft, problems)

        return Item(name, source.line("deployments", index), engine, build, lines,
                    {**settings.requirements, **{k: entry[k] for k in REQUIREMENT_KEYS if k in entry}},
                    settings.knobs, count, flags=tuple(flag_name("--" + k) for k in knobs),
                    version=None if version is None else str(version))


def _key_problem(exc: KvplanError, key: str, engine: str) -> Problem:
    """A key of a mapping: a knob with a bad value (KV004), else a flag problem under its rule."""
    if knob_for(key, engine) is None:
        return flag_problem(KvplanError(exc.message, key), engine, flag_name("--" + key))
    return Problem(VALID_VALUES, f"{key}: {exc.message}", key)


class VllmConfig:
    """A `vllm serve --config` file: vLLM flags as keys, the model under `model:`."""

    name, label = "vllm-config", "vLLM --config file"
    ENGINE = "vllm"  # the engine whose --config file this kind reads

    def detect(self, document: Any) -> bool:
        """A mapping of which at least half the keys are vLLM flags, one of them a knob kvplan models (a
        training config with a `model:` key and its own keys is not one)."""
        if not isinstance(document, dict) or not document:
            return False
        catalogue = registry.dialect(self.ENGINE).catalogue()
        keys = [str(k) for k in document if k not in SETTINGS_KEYS]
        knobs = [k for k in keys if (knob := knob_for(k, self.ENGINE)) is not None and knob.engine_flag]
        flags = [k for k in keys if k in knobs or catalogue.catalogued(flag_name("--" + k))
                 or flag_name("--" + k) in registry.dialect(self.ENGINE).knob_flags]
        return bool(knobs) and len(flags) * 2 >= len(keys)

    def items(self, source: Source) -> list[Item]:
        from kvplan.deployment.launch import version_tuple

        document = source.document
        if not isinstance(document, dict):
            raise KvplanError(f"expected a mapping of vLLM flag names to values, got {_kind_of(document)}",
                              source.path)
        settings = comment_settings(source)
        flags = {str(k): v for k, v in document.items() if k not in SETTINGS_KEYS}
        misplaced = [str(k) for k in document if k in SETTINGS_KEYS]
        version = settings.knobs.get("engine_version", (None, ""))[0]
        engine = str(settings.knobs.get("engine", (self.ENGINE,))[0]).lower()
        top_lines = {key: line for key, line in source.flat_lines().items() if "." not in key}

        def build() -> Built:
            draft = Draft()
            problems = [Problem(KNOWN_FLAGS, f"{key}: vLLM reads every top-level key of a --config file as a flag and "
                                "refuses --" + key + "; put kvplan's settings in a comment instead: "
                                "# kvplan: {gpu: h100, vllm_version: \"0.11\"}", key) for key in misplaced]
            for key, value in flags.items():
                try:
                    draft.update(_config_key(source.path, key, value, engine, top_lines, version_tuple(
                        None if version is None else str(version))))
                except KvplanError as exc:
                    problems.append(_key_problem(exc, key, engine))
            return Built(draft, problems)

        model = flags.get("model")
        served = flags.get("served-model-name") or flags.get("served_model_name")
        if isinstance(served, list):
            served = served[0] if served else None
        name = str(served or model or PurePath(source.path).stem)
        return [Item(name, 1, engine, build, {**settings.lines, **top_lines}, settings.requirements, settings.knobs,
                     flags=tuple(flag_name("--" + k) for k in flags),
                     version=None if version is None else str(version))]


def _config_key(path: str, key: str, value: Any, engine: str, lines: dict[str, int],
                version: tuple[int, ...] | None) -> Draft:
    """One key of a --config file, read as vLLM reads it (config_file.draft_from_flags_mapping). A key that a
    later release removed is read for the pinned version, which may still accept it."""
    from kvplan.deployment.config_file import draft_from_flags_mapping
    from kvplan.deployment.dialect import dialect_of
    from kvplan.deployment.flags import parse_flags

    renamed = dialect_of(engine).catalogue().renamed.get(flag_name("--" + key))
    if renamed is not None and version is not None:
        arity = renamed[3]
        tokens = [f"--{key}"] + ([] if arity.startswith("bool") else [str(value)])
        return parse_flags(tokens, engine, path, origin=f"{path}:{lines.get(key, '?')}: {key}",
                           kvplan_knobs=False, version=version)
    memo = (key, repr(value), engine)
    if memo in _VALUELESS:  # a flag that sets no knob (--port 8000) reads the same in every file
        return Draft(notes=list(_VALUELESS[memo]))
    draft = draft_from_flags_mapping({key: value}, path, engine, lines)
    if not draft.values:
        _VALUELESS[memo] = tuple(draft.notes)
    return draft


_VALUELESS: dict[tuple[str, str, str], tuple[str, ...]] = {}  # flag key and value -> its notes


class ModelConfig:
    """A Hugging Face config.json: it must parse into a complete model spec."""

    name, label = "hf-config", "Hugging Face config.json"
    SHAPE_KEYS = ("num_hidden_layers", "n_layer", "n_layers", "num_layers", "text_config", "llm_config",
                  "language_config", "thinker_config")

    def detect(self, document: Any) -> bool:
        """`architectures` (a list) says config.json on its own, so one missing its layer count is read and fails
        KV050; `model_type` alone needs a layer count beside it."""
        return isinstance(document, dict) and (isinstance(document.get("architectures"), list) or (
            "model_type" in document and any(key in document for key in self.SHAPE_KEYS)))

    def items(self, source: Source) -> list[Item]:
        def build() -> Built:
            return Built(Draft())

        path = PurePath(source.path)
        name = (path.parent.name if path.name == "config.json" else "") or path.stem
        return [Item(name, 1, registry.DEFAULT, build, model_config=source.path)]


class EngineOptions:
    """An engine's own options file (TensorRT-LLM's --extra_llm_api_options / --config YAML), read by the
    engine's options reader (its dialect's options_reader): every key checked, with did-you-mean. It names no
    model (the launch command does), so the rules that need one skip."""

    name, label = "engine-options", "engine options file"

    def _dialect(self, document: Any) -> Any:
        if not isinstance(document, dict) or not document:
            return None
        keys = [str(k) for k in document if k not in SETTINGS_KEYS]
        for name in registry.names():
            dialect = registry.dialect(name)
            known = dialect.option_keys() if dialect.option_keys is not None else ()
            if known and keys and sum(key in known for key in keys) * 2 >= len(keys) and any(
                    knob_for(key, name) is None for key in keys if key in known):
                return dialect
        return None

    def detect(self, document: Any) -> bool:
        return self._dialect(document) is not None

    def items(self, source: Source) -> list[Item]:
        dialect = self._dialect(source.document)
        if dialect is None or dialect.options_reader is None:
            raise KvplanError("expected a mapping of an engine's options (max_batch_size:, kv_cache_config:, ...)",
                              source.path)
        reader = dialect.options_reader
        settings = comment_settings(source)
        lines = {k: v for k, v in source.flat_lines().items()}

        def build() -> Built:
            waiting = {"model": f"a {dialect.label} options file names no model (its launch command does)"}
            try:
                return Built(reader(source.path), [], waiting)
            except KvplanError as exc:
                key = (exc.where or "").rsplit(": ", 1)[-1]
                return Built(Draft(), [Problem(KNOWN_FLAGS, f"{key}: {exc.message}", key)], waiting)

        name = PurePath(source.path).stem
        return [Item(name, 1, dialect.name, build, lines, dict(settings.requirements), settings.knobs)]


def _kind_of(value: Any) -> str:
    return {list: "a list", str: "text", dict: "a mapping", type(None): "nothing"}.get(type(value), type(value).__name__)
