"""Ray Serve LLM: KubeRay's RayService, whose serveConfigV2 is a Serve config in a YAML string, and Ray Serve LLM
config files (`serve run` configs with applications[].args.llm_configs, a file of llm_configs, or one LLMConfig).
Each llm_config is one deployment: model_loading_config's model, engine_kwargs as the engine's own arguments
(Ray Serve LLM builds its engine from them), accelerator_type as the GPU. A Ray cluster's GPUs are shared by
every replica of every application, so the GPU count compared with the split is a replica's own: the
placement_group_config bundles' GPUs, when the file gives them."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from kvplan.check.commands import list_of, mapping_of, value_at
from kvplan.check.item import Built, Item, flag_name
from kvplan.check.kinds import _config_key, _key_problem
from kvplan.check.source import Settings, Source, annotation_settings, comment_settings
from kvplan.deployment.values import Draft
from kvplan.errors import KvplanError

ENGINE = "vllm"  # the one engine Ray Serve LLM runs (ray.llm LLMConfig.llm_engine: "vLLM")
LITERAL = re.compile(r":\s*\|[-+0-9]*\s*(#.*)?$")  # `key: |`: the block's lines are the file's, one for one


def llm_configs(document: Any) -> list[tuple[tuple[Any, ...], Any]]:
    """Each llm_config with its path: under applications[].args, at the top, or the document itself."""
    if not isinstance(document, dict):
        return []
    if isinstance(document.get("llm_configs"), list):
        return [(("llm_configs", i), c) for i, c in enumerate(document["llm_configs"])]
    if isinstance(document.get("model_loading_config"), dict):
        return [((), document)]
    found = []
    for a, application in enumerate(list_of(document.get("applications"))):
        configs = value_at(application, ("args", "llm_configs"))
        found += [(("applications", a, "args", "llm_configs", i), c) for i, c in enumerate(list_of(configs))]
    return found


def llm_items(source: Source, settings: Settings, gpu: tuple[str, str] | None = None,
              nested: bool = False) -> list[Item]:
    """The Items of a Serve config's llm_configs; a config given as a file path is read from beside the file
    (once: a file it names names no other)."""
    items = []
    for path, config in llm_configs(source.document):
        if isinstance(config, str) and nested:
            raise source.error("an LLMConfig file names another file; give the LLMConfig itself", *path)
        if isinstance(config, str):
            items += _config_file(source, config, path, settings)
            continue
        if not isinstance(config, dict):
            raise source.error("expected an LLMConfig mapping (model_loading_config, engine_kwargs, ...)", *path)
        items.append(_item(source, config, path, settings, gpu))
    return items


def _config_file(source: Source, name: str, path: tuple[Any, ...], settings: Settings) -> list[Item]:
    from kvplan.check.discover import load_sources

    target = Path(source.path).parent / name
    if not target.is_file():
        raise source.error(f"names the LLMConfig file {name!r}, which is not there to read", *path)
    items = []
    for other in load_sources(str(target)):
        if other.broken is not None:
            raise source.error(f"the LLMConfig file {name!r} does not read: {other.broken.message}", *path)
        items += llm_items(other, settings, nested=True)
    return items


def _item(source: Source, config: dict[Any, Any], path: tuple[Any, ...], settings: Settings,
          cluster_gpu: tuple[str, str] | None) -> Item:
    from kvplan.check.gpus import ray_gpu

    loading = mapping_of(config.get("model_loading_config"))
    model_key = "model_source" if isinstance(loading.get("model_source"), str) else "model_id"
    model = loading.get(model_key)
    if not isinstance(model, str) or not model.strip():
        raise source.error("an llm_config names no model (model_loading_config.model_id / model_source)", *path)
    engine = str(config.get("llm_engine") or ENGINE).lower()
    if engine != ENGINE:
        raise source.error(f"llm_engine {config['llm_engine']!r} is not one Ray Serve LLM runs", *path, "llm_engine")
    kwargs = config.get("engine_kwargs") or {}
    if not isinstance(kwargs, dict):
        raise source.error("expected a mapping of engine arguments", *path, "engine_kwargs")
    flags = {"model": model, **{str(k): v for k, v in kwargs.items()}}
    lines = {str(k): line for k, line in source.flat_lines(*path, "engine_kwargs").items() if "." not in k}
    lines["model"] = source.line(*path, "model_loading_config", model_key) or source.line(*path) or 0
    defaults = dict(settings.knobs)
    notes: tuple[str, ...] = ()
    accelerator = config.get("accelerator_type")
    if accelerator is not None and "gpu" not in defaults:
        where = source.where(*path, "accelerator_type")
        gpu, note = ray_gpu(str(accelerator))
        lines["gpu"] = source.line(*path, "accelerator_type") or 0
        defaults.update({"gpu": (gpu, where)} if gpu else {})
        notes = (note,) if note else ()
    elif cluster_gpu is not None and "gpu" not in defaults:
        defaults["gpu"] = cluster_gpu
    count, count_line = _replica_gpus(source, config, path)
    if count_line:
        lines["gpu_count"] = count_line

    def build() -> Built:
        draft, problems = Draft(), []
        for key, value in flags.items():
            try:
                draft.update(_config_key(source.path, key, value, engine, lines, None))
            except KvplanError as exc:
                problems.append(_key_problem(exc, key, engine))
        return Built(draft, problems)

    name = str(loading.get("model_id") or model)
    return Item(name, source.line(*path) or 1, engine, build, {**settings.lines, **lines},
                dict(settings.requirements), defaults, count, flags=tuple(flag_name("--" + k) for k in flags),
                gpu_notes=notes)


def _replica_gpus(source: Source, config: dict[Any, Any], path: tuple[Any, ...]) -> tuple[int | None, int | None]:
    """A replica's GPUs: the sum of its placement group bundles' GPU (Ray's default bundles follow the split,
    so without them there is no count to compare)."""
    bundles = value_at(config, ("placement_group_config", "bundles"))
    if not isinstance(bundles, list):
        return None, None
    total: float = 0
    for bundle in bundles:
        value = mapping_of(bundle).get("GPU", 0)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise source.error(f"a bundle's GPU must be a number, got {value!r:.40}", *path, "placement_group_config")
        total += value
    return (int(total) if total == int(total) else None), source.line(*path, "placement_group_config", "bundles")


class RayServeConfig:
    """A Ray Serve LLM config file: llm_configs under applications[].args (a `serve run` / `serve deploy`
    config), a list of llm_configs at the top, or one LLMConfig (model_loading_config at the top)."""

    name, label = "ray-serve-llm", "Ray Serve LLM config"
    EMPTY = "no application lists llm_configs"

    def detect(self, document: Any) -> bool:
        return bool(llm_configs(document)) and (not isinstance(document, dict) or "apiVersion" not in document)

    def items(self, source: Source) -> list[Item]:
        return llm_items(source, comment_settings(source))


class RayService:
    """KubeRay's RayService (ray.io): the Serve config in spec.serveConfigV2, read with its lines in the file."""

    name, label = "rayservice", "KubeRay RayService"
    EMPTY = "its serveConfigV2 runs no Ray Serve LLM application (no llm_configs)"

    def detect(self, document: Any) -> bool:
        return (isinstance(document, dict) and str(document.get("apiVersion", "")).startswith("ray.io/")
                and document.get("kind") == "RayService")

    def items(self, source: Source) -> list[Item]:
        settings = annotation_settings(source, value_at(source.document, ("metadata", "annotations")),
                                       ("metadata", "annotations"))
        config = value_at(source.document, ("spec", "serveConfigV2"))
        if config is None:
            return []
        if not isinstance(config, str):
            raise source.error("expected the Serve config as a YAML string (serveConfigV2: |)", "spec",
                               "serveConfigV2")
        return llm_items(serve_config(source, config), settings, cluster_gpu(source))


def serve_config(source: Source, text: str) -> Source:
    """serveConfigV2's YAML as a Source whose lines are the file's: a literal block (`|`) starts on the line after
    its key; any other string puts every key on the key's own line."""
    from kvplan.check.lines import LocatedError
    from kvplan.deployment.config_file import load_located

    start = source.line("spec", "serveConfigV2") or 1
    where = source.where("spec", "serveConfigV2")
    rows = source.text.splitlines()
    literal = bool(LITERAL.search(rows[start - 1] if start <= len(rows) else ""))
    try:
        documents = load_located(text, where)
    except KvplanError as exc:  # a | block's line n is the file's line start + n
        found = re.search(r" at line (\d+) column (\d+)", exc.message)
        line = start + int(found.group(1)) if found and literal else start
        if found and literal:  # and its columns are right of the block's indentation
            indent = next((len(r) - len(r.lstrip()) for r in rows[start:] if r.strip()), 0)
            column = int(found.group(2)) + indent
            message = exc.message.replace(found.group(0), f" at line {line} column {column}")
        else:
            message = exc.message
        raise LocatedError(f"serveConfigV2 is not YAML ({message})", where, line) from None
    document, lines = documents[0] if documents else (None, {})
    located = {path: start + line if literal else start for path, line in lines.items()}
    return Source(source.path, document, located, source.text)


def cluster_gpu(source: Source) -> tuple[str, str] | None:
    """The GPU the first worker group's pods are pinned to (nodeSelector, node affinity), as a knob default."""
    from kvplan.check.kubernetes import node_gpu

    groups = value_at(source.document, ("spec", "rayClusterConfig", "workerGroupSpecs"))
    for index, group in enumerate(list_of(groups)):
        path = ("spec", "rayClusterConfig", "workerGroupSpecs", index, "template", "spec")
        gpu, line, _ = node_gpu(source, mapping_of(value_at(group, ("template", "spec"))), path)
        if gpu is not None:
            return gpu, f"{source.path}:{line}: node selector"
    return None
