"""Where a spec comes from, in this order: a local path, a user spec, a bundled spec, the Hugging Face cache,
the Hub. huggingface_hub is imported only when nothing local matched."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kvplan.errors import KvplanError
from kvplan.models.hf_config import load_json, parse_config
from kvplan.models.model import ModelSpec, ParamCount, Quantization, SpecSource
from kvplan.models.modelopt import QUANT_FILE, parse_quant_config

USER_SPEC_DIR_ENV = "KVPLAN_SPEC_DIR"
# User specs come before bundled ones: importing a spec under a bundled id replaces it.
LOOKUP_ORDER = ("local path", "user specs", "bundled specs", "Hugging Face cache", "Hugging Face Hub")


def bundled_dir() -> Path:
    package = Path(__file__).resolve().parent.parent
    installed = package / "_bundled_specs"
    return installed if installed.is_dir() else package.parent / "model_specs"


def user_dir() -> Path:
    explicit = os.environ.get(USER_SPEC_DIR_ENV)
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "kvplan" / "specs"


@dataclass(eq=False)
class SpecFile:
    id: str
    path: Path
    kind: str  # "bundled" or "user"
    overrides: bool = False  # a user spec under a bundled spec's id, used in its place

    @property
    def label(self) -> str:
        return f"{self.kind} (overrides bundled)" if self.overrides else self.kind


def spec_files() -> list[SpecFile]:
    """Every bundled and user spec; a user spec with a bundled spec's id overrides it."""
    found: dict[str, SpecFile] = {}
    for kind, folder in (("bundled", bundled_dir()), ("user", user_dir())):
        if not folder.is_dir():
            continue
        for path in sorted(folder.glob("*.json")):
            model_id = path.stem.replace("__", "/")
            shadowed = found.get(model_id.lower())
            found[model_id.lower()] = SpecFile(model_id, path, kind,
                                               overrides=shadowed is not None and shadowed.kind == "bundled")
    return sorted(found.values(), key=lambda f: f.id.lower())


def overrides_bundled(model_id: str) -> bool:
    """Whether MODEL_ID names a user spec that takes the place of a bundled one."""
    found = find_spec_file(model_id)
    return found is not None and found.overrides


def spec_file_name(model_id: str) -> str:
    return model_id.replace("/", "__") + ".json"


def with_overrides(config: dict[str, Any], overrides: dict[str, Any] | None) -> dict[str, Any]:
    """The config with vLLM's --hf-overrides applied: each key replaced, nested objects merged key by key."""
    if not overrides:
        return config
    merged = dict(config)
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = with_overrides(merged[key], value)
        else:
            merged[key] = value
    return merged


def read_bounded(path: Path) -> bytes:
    """At most one byte more than a config may have: /dev/zero or a FIFO must not make kvplan read forever."""
    from kvplan.models.hf_config import MAX_CONFIG_BYTES

    with path.open("rb") as handle:
        return handle.read(MAX_CONFIG_BYTES + 1)


def read_spec_file(spec_file: SpecFile, overrides: dict[str, Any] | None = None,
                   allow_unmodelled: bool = False) -> ModelSpec:
    where = str(spec_file.path)
    try:
        raw = read_bounded(spec_file.path)
    except OSError as exc:
        raise KvplanError(f"cannot read: {exc.strerror or exc}", where) from None
    document = load_json(raw, where)
    meta = document.get("_kvplan")
    config = document.get("config")
    if not isinstance(meta, dict) or not isinstance(config, dict):
        raise KvplanError("a kvplan spec needs a '_kvplan' metadata object and a 'config' object", where)
    model_id = str(meta.get("id", spec_file.id))
    source = SpecSource(spec_file.kind, str(meta.get("source", where)), meta.get("revision"))
    quant_file = (parse_quant_config(document["hf_quant_config"], f"{where}: hf_quant_config")
                  if "hf_quant_config" in document else None)
    spec = parse_config(with_overrides(config, overrides), model_id, source, where,
                        allow_unmodelled=allow_unmodelled, quant_file=quant_file)
    published = meta.get("params")
    if isinstance(published, int) and not isinstance(published, bool) and published > 0 and not overrides:
        spec = _with_published_params(spec, published)
    return spec


def _with_published_params(spec: ModelSpec, published: int) -> ModelSpec:
    from dataclasses import replace

    counted = spec.params
    params = ParamCount(total=published, exact=True, embeddings=counted.embeddings, lm_head=counted.lm_head,
                        experts=counted.experts, vision=counted.vision, by_layer=counted.by_layer,
                        note="" if counted.total == published else
                        f"published count; the config-derived count is {counted.total:,}")
    notes = tuple(n for n in spec.notes if n != counted.note)
    return replace(spec, params=params, notes=notes)


def find_spec_file(model: str) -> SpecFile | None:
    wanted = model.lower()
    for spec_file in spec_files():
        if spec_file.id.lower() == wanted:
            return spec_file
    return None


def close_ids(model: str, limit: int = 3) -> list[str]:
    import difflib  # only for suggestions

    ids = [f.id for f in spec_files()]
    lowered = {i.lower(): i for i in ids}
    matches = difflib.get_close_matches(model.lower(), list(lowered), n=limit, cutoff=0.5)
    name = model.lower().rsplit("/", 1)[-1]
    matches += [low for low in lowered if low.rsplit("/", 1)[-1] == name and low not in matches]
    return [lowered[m] for m in matches[:limit]]


def read_local(path: Path, model_id: str | None = None, overrides: dict[str, Any] | None = None,
               allow_unmodelled: bool = False) -> ModelSpec:
    config_path = path / "config.json" if path.is_dir() else path
    where = str(config_path)
    if not config_path.is_file():
        raise KvplanError("no config.json in this directory", str(path))
    try:
        raw = read_bounded(config_path)
    except OSError as exc:
        raise KvplanError(f"cannot read: {exc.strerror}", where) from None
    data = load_json(raw, where)
    if "_kvplan" in data and isinstance(data.get("config"), dict):
        return read_spec_file(SpecFile(str(data["_kvplan"].get("id", path.stem)), config_path, "local"), overrides,
                              allow_unmodelled)
    name = model_id or name_from_config(data) or _name_from_path(path)
    return parse_config(with_overrides(data, overrides), name, SpecSource("local", where),
                        allow_unmodelled=allow_unmodelled, quant_file=read_quant_file(config_path))


def quant_document(config_path: Path) -> dict[str, Any] | None:
    """The hf_quant_config.json document beside a checkpoint's config.json (not beside any other JSON file), or
    None where there is none."""
    path = config_path.parent / QUANT_FILE
    if config_path.name != "config.json" or not path.is_file():
        return None
    try:
        raw = read_bounded(path)
    except OSError as exc:
        raise KvplanError(f"cannot read: {exc.strerror or exc}", str(path)) from None
    return load_json(raw, str(path))


def read_quant_file(config_path: Path) -> Quantization | None:
    """ModelOpt's hf_quant_config.json beside CONFIG_PATH, parsed (kvplan.models.modelopt)."""
    document = quant_document(config_path)
    return None if document is None else parse_quant_config(document, str(config_path.parent / QUANT_FILE))


def _name_from_path(path: Path) -> str:
    """A model directory's name, or a JSON file's stem; 'org__name' (the bundled naming) reads as org/name."""
    stem = path.name if path.is_dir() else (path.parent.name if path.name == "config.json" else path.stem)
    return (stem or "local-model").replace("__", "/", 1)


def name_from_config(data: dict[str, Any]) -> str | None:
    name = data.get("_name_or_path")
    return name if isinstance(name, str) and name and "/" in name and not name.startswith(("/", ".")) else None


def looks_like_path(model: str) -> bool:
    return model.startswith((".", "/", "~")) or model.endswith(".json") or os.sep in model.replace("/", "", 1)


# The Hub's own rule, as huggingface_hub.utils.validate_repo_id states it: one or two parts of at most 96
# characters, letters, digits, '-', '_' and '.', each part starting and ending with a letter, digit or '_';
# no '--' or '..' anywhere and no '.git' at the end. kvplan also wants the 'org/' part.
_REPO_PART = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_.\-]{0,94}[A-Za-z0-9_])?")


def repo_id_problem(model: str) -> str | None:
    """Why MODEL cannot be a Hub repo id (org/name), or None when it can."""
    if model != model.strip():
        return f"it has leading or trailing whitespace (did you mean {model.strip()!r}?)"
    if "@" in model:
        name, _, rev = model.partition("@")
        return f"a revision does not go in the id; pass {name!r} with --revision {rev or 'REVISION'}"
    if "\\" in model:
        return "it contains a backslash; a Hub id is org/name"
    if ".." in model or "--" in model:
        return "it contains '..' or '--', which the Hub does not allow"
    if "/" not in model:
        return "a Hub id is org/name"
    if model.startswith("/") or model.endswith("/") or "//" in model:
        return "it has an empty part; a Hub id is org/name"
    if model.count("/") > 1:
        return "it has more than one '/'; a Hub id is org/name"
    if model.endswith(".git"):
        return "it ends in '.git'; drop it"
    for part in model.split("/"):
        if len(part) > 96:
            return f"{part[:20]!r}... is longer than the Hub's 96 characters"
        if not _REPO_PART.fullmatch(part):
            if part[0] in "-." or part[-1] in "-.":
                return f"{part!r} starts or ends with '-' or '.', which the Hub does not allow"
            return f"{part!r} has characters other than letters, digits, '-', '_' and '.'"
    return None


def check_spec_id(model_id: str, where: str) -> None:
    """An id to store a user spec under: a Hub-style org/name, without the '__' that stands for '/' on disk."""
    problem = repo_id_problem(model_id)
    if problem is None and "__" in model_id:
        problem = "it contains '__', which spec file names use for '/'"
    if problem is not None:
        raise KvplanError(f"{model_id!r} cannot be a spec id: {problem}", where)


def resolve(model: str, revision: str | None = None, token: str | None = None,
            overrides: dict[str, Any] | None = None, allow_unmodelled: bool = False) -> ModelSpec:
    """The spec for MODEL: a local path, a bundled or user id, or a Hub repo id; overrides: --hf-overrides."""
    if not model.strip():
        raise KvplanError("the model is empty; give a bundled id (kvplan models list), a config.json path or a Hub "
                          "repo id")
    try:
        path = Path(model).expanduser()
    except RuntimeError:  # "~user/..." naming no user of this machine: not a local path
        path = Path(model)
    try:
        exists = path.exists()
    except OSError as exc:  # a name longer than the file system allows, and the like
        raise KvplanError(f"not a usable path or model id ({exc.strerror})", repr(model[:80])) from None
    if exists:
        return read_local(path, overrides=overrides, allow_unmodelled=allow_unmodelled)
    if looks_like_path(model):
        explicit = model.startswith((".", "/", "~")) or model.endswith(".json")
        problem = None if explicit else repo_id_problem(model)
        raise KvplanError("no such file or directory" + (f", and not a Hub repo id: {problem}" if problem else ""),
                          model)
    if revision is None:
        spec_file = find_spec_file(model)
        if spec_file is not None:
            return read_spec_file(spec_file, overrides, allow_unmodelled)
    problem = repo_id_problem(model)
    if problem is not None:  # before huggingface_hub is imported, and before any request
        close = close_ids(model.strip()) if model == model.strip() and "@" not in model else []
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise KvplanError(f"not a bundled id, a local path, or a Hub repo id: {problem}{hint}", repr(model))
    from kvplan.models import hub  # imports huggingface_hub; only reached when nothing local matched

    config_path, source = hub.download_config(model, revision, token, suggestions=close_ids(model))
    data = load_json(read_bounded(config_path), f"{model} (config.json from {source.kind})")
    quant_path = None if "quantization_config" in data else hub.download_quant_config(model, revision, token,
                                                                                       source.kind == "hub")
    quant_file = (parse_quant_config(load_json(read_bounded(quant_path), f"{model}/{QUANT_FILE}"),
                                     f"{model}/{QUANT_FILE}") if quant_path is not None else None)
    spec = parse_config(with_overrides(data, overrides), model, source, f"{model}/config.json",
                        allow_unmodelled=allow_unmodelled, quant_file=quant_file)
    if spec.quantization is not None:
        stored = hub.stored_weight_bytes(model, revision, token)
        if stored:
            from dataclasses import replace

            spec = replace(spec, stored_weight_bytes=stored)
    return spec


def dump_document(spec_id: str, config: dict[str, Any], meta: dict[str, object],
                  quant: dict[str, Any] | None = None) -> str:
    """A kvplan spec document; quant: the checkpoint's hf_quant_config.json, kept as its "hf_quant_config" entry."""
    document: dict[str, Any] = {"_kvplan": {"id": spec_id, **meta}, "config": config}
    if quant is not None:
        document["hf_quant_config"] = quant
    return json.dumps(document, indent=2) + "\n"
