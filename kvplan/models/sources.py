"""Where a spec comes from, in this order: a local path, a user spec, a bundled spec, the Hugging Face cache,
the Hub. huggingface_hub is imported only when nothing local matched."""

from __future__ import annotations

import difflib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kvplan.errors import KvplanError
from kvplan.models.hf_config import load_json, parse_config
from kvplan.models.model import ModelSpec, ParamCount, SpecSource

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


@dataclass(frozen=True)
class SpecFile:
    id: str
    path: Path
    kind: str  # "bundled" or "user"


def spec_files() -> list[SpecFile]:
    """Every bundled and user spec; a user spec with a bundled spec's id overrides it."""
    found: dict[str, SpecFile] = {}
    for kind, folder in (("bundled", bundled_dir()), ("user", user_dir())):
        if not folder.is_dir():
            continue
        for path in sorted(folder.glob("*.json")):
            model_id = path.stem.replace("__", "/")
            found[model_id.lower()] = SpecFile(model_id, path, kind)
    return sorted(found.values(), key=lambda f: f.id.lower())


def spec_file_name(model_id: str) -> str:
    return model_id.replace("/", "__") + ".json"


def read_spec_file(spec_file: SpecFile) -> ModelSpec:
    where = str(spec_file.path)
    document = load_json(spec_file.path.read_bytes(), where)
    meta = document.get("_kvplan")
    config = document.get("config")
    if not isinstance(meta, dict) or not isinstance(config, dict):
        raise KvplanError("a kvplan spec needs a '_kvplan' metadata object and a 'config' object", where)
    model_id = str(meta.get("id", spec_file.id))
    source = SpecSource(spec_file.kind, str(meta.get("source", where)), meta.get("revision"))
    spec = parse_config(config, model_id, source, where)
    published = meta.get("params")
    if isinstance(published, int) and not isinstance(published, bool) and published > 0:
        spec = _with_published_params(spec, published)
    return spec


def _with_published_params(spec: ModelSpec, published: int) -> ModelSpec:
    from dataclasses import replace

    counted = spec.params
    params = ParamCount(total=published, exact=True, embeddings=counted.embeddings, lm_head=counted.lm_head,
                        experts=counted.experts, vision=counted.vision,
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
    ids = [f.id for f in spec_files()]
    lowered = {i.lower(): i for i in ids}
    matches = difflib.get_close_matches(model.lower(), list(lowered), n=limit, cutoff=0.5)
    name = model.lower().rsplit("/", 1)[-1]
    matches += [low for low in lowered if low.rsplit("/", 1)[-1] == name and low not in matches]
    return [lowered[m] for m in matches[:limit]]


def read_local(path: Path, model_id: str | None = None) -> ModelSpec:
    config_path = path / "config.json" if path.is_dir() else path
    where = str(config_path)
    if not config_path.is_file():
        raise KvplanError("no config.json in this directory", str(path))
    try:
        raw = config_path.read_bytes()
    except OSError as exc:
        raise KvplanError(f"cannot read: {exc.strerror}", where) from None
    data = load_json(raw, where)
    if "_kvplan" in data and isinstance(data.get("config"), dict):
        return read_spec_file(SpecFile(str(data["_kvplan"].get("id", path.stem)), config_path, "local"))
    name = model_id or name_from_config(data) or _name_from_path(path)
    return parse_config(data, name, SpecSource("local", where))


def _name_from_path(path: Path) -> str:
    """A model directory's name, or a JSON file's stem; 'org__name' (the bundled naming) reads as org/name."""
    stem = path.name if path.is_dir() else (path.parent.name if path.name == "config.json" else path.stem)
    return (stem or "local-model").replace("__", "/", 1)


def name_from_config(data: dict[str, Any]) -> str | None:
    name = data.get("_name_or_path")
    return name if isinstance(name, str) and name and "/" in name and not name.startswith(("/", ".")) else None


def looks_like_path(model: str) -> bool:
    return model.startswith((".", "/", "~")) or model.endswith(".json") or os.sep in model.replace("/", "", 1)


def resolve(model: str, revision: str | None = None, token: str | None = None) -> ModelSpec:
    """The spec for MODEL: a local path, a bundled or user id, or a Hub repo id."""
    path = Path(model).expanduser()
    if path.exists():
        return read_local(path)
    if looks_like_path(model):
        raise KvplanError("no such file or directory", model)
    if revision is None:
        spec_file = find_spec_file(model)
        if spec_file is not None:
            return read_spec_file(spec_file)
    from kvplan.models import hub  # imports huggingface_hub; only reached when nothing local matched

    config_path, source = hub.download_config(model, revision, token, suggestions=close_ids(model))
    data = load_json(config_path.read_bytes(), f"{model} (config.json from {source.kind})")
    spec = parse_config(data, model, source, f"{model}/config.json")
    if spec.quantization is not None:
        stored = hub.stored_weight_bytes(model, revision, token)
        if stored:
            from dataclasses import replace

            spec = replace(spec, stored_weight_bytes=stored)
    return spec


def dump_document(spec_id: str, config: dict[str, Any], meta: dict[str, object]) -> str:
    return json.dumps({"_kvplan": {"id": spec_id, **meta}, "config": config}, indent=2) + "\n"
