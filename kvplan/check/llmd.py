"""The values of llm-d's ModelService chart (llm-d-incubation/llm-d-modelservice): the prefill and the decode
role each run their containers as a deployment of their own, the command built as the chart's
templates/_helpers.tpl builds it: modelCommand vllmServe (`vllm serve MODEL --port P`, the parallelism's
--tensor-parallel-size, --data-parallel-size and --data-parallel-size-local above 1, --served-model-name, then the
container's args), imageDefault (the same arguments after --model, for the image's entry point) or custom (the
container's own command and args); the GPU count is the container's resources, else what the chart fills in
(dataLocal x tensor per worker)."""

from __future__ import annotations

import re
from typing import Any

from kvplan import registry
from kvplan.check.commands import (
    Container,
    Launch,
    command_item,
    gpu_count_of,
    gpu_resource,
    joined,
    list_of,
    mapping_of,
    server_launch,
    value_at,
    words_of,
)
from kvplan.check.item import Image, Item
from kvplan.check.source import SETTINGS_KEYS, Settings, Source, comment_settings, read_settings

TEMPLATE = re.compile(r"\{\{-?\s*\.Values\.([A-Za-z0-9_.]+)\s*-?\}\}")


class ModelService:
    """llm-d ModelService values: modelArtifacts and a prefill and/or decode role with containers."""

    name, label = "llm-d", "llm-d ModelService values"
    ENGINE = "vllm"  # the engine the chart's vllmServe command runs (templates/_helpers.tpl: ["vllm", "serve"])
    ROLES = ("prefill", "decode")
    COMMANDS = ("vllmServe", "imageDefault", "custom")
    EMPTY = "no prefill or decode container runs a model server (create: false, or a custom command of no engine)"

    def detect(self, document: Any) -> bool:
        return isinstance(document, dict) and isinstance(document.get("modelArtifacts"), dict) and any(
            isinstance(value_at(document, (role, "containers")), list) for role in self.ROLES)

    def items(self, source: Source) -> list[Item]:
        document = source.document
        keyed = isinstance(document, dict) and any(key in document for key in SETTINGS_KEYS)
        settings = read_settings(source) if keyed else comment_settings(source)
        items = []
        for role in self.ROLES:
            spec = mapping_of(document.get(role))
            if spec.get("create") is False:
                continue
            serving = []
            for index, container in enumerate(list_of(spec.get("containers"))):
                if not isinstance(container, dict):
                    raise source.error("expected a mapping", role, "containers", index)
                found = self._container(source, role, spec, container, (role, "containers", index), settings)
                if found is not None:
                    serving.append(found)
            for found in serving:
                label = role if len(serving) == 1 else f"{role}/{found.name}"
                items.append(command_item(source, label, found, settings))
        return items

    def _container(self, source: Source, role: str, spec: dict[str, Any], container: dict[str, Any],
                   path: tuple[Any, ...], settings: Settings) -> Container | None:
        from kvplan.check.kubernetes import expand

        parallel = _parallelism(mapping_of(spec.get("parallelism")))
        image = Image(str(container["image"])) if container.get("image") else None
        env = {"DP_SIZE": str(parallel["data"]), "TP_SIZE": str(parallel["tensor"]),
               "DP_SIZE_LOCAL": str(parallel["dataLocal"]),
               **{str(e.get("name")): str(e.get("value")) for e in list_of(container.get("env"))
                  if isinstance(e, dict) and e.get("value") is not None}}
        command = str(container.get("modelCommand") or "custom")
        if command not in self.COMMANDS:
            raise source.error(f"the chart refuses modelCommand {command!r}; it takes {', '.join(self.COMMANDS)}",
                               *path, "modelCommand")
        args = words_of(source, container.get("args"), *path, "args")
        if command == "custom":
            whole = joined(words_of(source, container.get("command"), *path, "command"), args)
        else:
            whole = joined(self._chart_words(source, role, parallel, command, (role, "parallelism")), args)
        whole.words = [expand(word, env) for word in whole.words]
        engine = settings.knobs.get("engine", (self.ENGINE if command == "imageDefault" else None,))[0]
        launch = server_launch(whole, image, None if engine is None else str(engine).lower())
        if launch is None:
            return None
        count, count_line = self._gpus(source, container, path, parallel)
        gpu, gpu_line, notes = _role_gpu(source, spec, role)
        workers = parallel["workers"] if source.document.get("multinode") else 1
        return Container(str(container.get("name") or "vllm"), launch, image, source.line(*path, "image"),
                         None if count is None else count * workers, count_line, gpu, gpu_line,
                         env={k: v for k, v in env.items() if k not in ("DP_SIZE", "TP_SIZE", "DP_SIZE_LOCAL")},
                         notes=notes)

    def _chart_words(self, source: Source, role: str, parallel: dict[str, int], command: str,
                     at: tuple[Any, ...]) -> Launch:
        """The arguments vllmServe and imageDefault write before the container's args."""
        document = source.document
        model_line = source.line("modelArtifacts", "uri")
        head = registry.dialect(self.ENGINE).launcher.split() if command == "vllmServe" else ["--model"]
        words, lines = [*head, model_of(document)], [model_line] * (len(head) + 1)
        proxied = role == "decode" and value_at(document, ("routing", "proxy", "enabled")) is not False
        port = value_at(document, ("routing", "proxy", "targetPort") if proxied else ("routing", "servicePort"))
        words += ["--port", str(port or (8200 if proxied else 8000))]
        lines += [source.line("routing", "servicePort")] * 2
        for flag, key, keys in (("--tensor-parallel-size", "tensor", ("tensor",)),
                                ("--data-parallel-size", "data", ("data", "dataLocal")),
                                ("--data-parallel-size-local", "dataLocal", ("dataLocal", "data"))):
            if parallel[key] > 1:
                line = next((source.line(*at, k) for k in keys if source.line(*at, k)), source.line(*at))
                words += [flag, str(parallel[key])]
                lines += [line, line]
        words += ["--served-model-name", str(value_at(document, ("modelArtifacts", "name")) or words[len(head)])]
        lines += [source.line("modelArtifacts", "name") or model_line] * 2
        return Launch(words, lines, source.line(role), source.text)

    def _gpus(self, source: Source, container: dict[str, Any], path: tuple[Any, ...],
              parallel: dict[str, int]) -> tuple[int | None, int | None]:
        """The container's GPU resource as given; without one, dataLocal x tensor as the chart fills it in."""
        for key in ("limits", "requests"):
            resources = mapping_of(value_at(container, ("resources", key)))
            resource = gpu_resource(resources)
            if resource is not None:
                at = (*path, "resources", key, resource)
                return gpu_count_of(resources[resource], source, *at), source.line(*at)
        if value_at(source.document, ("accelerator", "type")) == "cpu":
            return None, None
        return parallel["dataLocal"] * parallel["tensor"], source.line(path[0], "parallelism") or source.line(*path)


def model_of(document: dict[str, Any]) -> str:
    """modelArtifacts.uri as the chart's argsByProtocol writes it: hf://MODEL, pvc://CLAIM/PATH (the mount path
    and PATH), pvc+hf://.../NAMESPACE/MODEL; {{ .Values.x }} rendered from the values themselves."""
    uri = render(str(value_at(document, ("modelArtifacts", "uri")) or ""), document)
    protocol, _, rest = uri.partition("://")
    if protocol == "pvc":
        mount = str(value_at(document, ("modelArtifacts", "mountPath")) or "/model-cache")
        return f"{mount}/{rest.split('/', 1)[1] if '/' in rest else ''}"
    if protocol == "pvc+hf":
        return "/".join(rest.split("/")[-2:])
    return rest.strip("\"'") if protocol == "hf" else uri


def render(text: str, document: dict[str, Any]) -> str:
    """{{ .Values.a.b }} replaced by that value of the same file (a value it does not hold stays as written)."""
    def value(match: re.Match[str]) -> str:
        found = value_at(document, tuple(match.group(1).split(".")))
        return match.group(0) if found is None or isinstance(found, (dict, list)) else str(found)

    return TEMPLATE.sub(value, text)


def _parallelism(given: dict[str, Any]) -> dict[str, int]:
    """tensor, data, dataLocal and workers as the chart's helpers derive each from the others."""
    def number(key: str) -> int:
        value = given.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0

    tensor, data, local, workers = number("tensor"), number("data"), number("dataLocal"), number("workers")
    return {"tensor": tensor or 1,
            "data": data or (local * workers if local and workers else local) or 1,
            "dataLocal": local or (data // workers if data and workers else data) or 1,
            "workers": workers or (data // local if data and local else 1)}


def _role_gpu(source: Source, spec: dict[str, Any], role: str) -> tuple[str | None, int | None, tuple[str, ...]]:
    """The GPU a role's acceleratorTypes (labelKey, labelValues) pins its pods to."""
    from kvplan.check.gpus import label_gpu

    types = mapping_of(spec.get("acceleratorTypes"))
    values = list_of(types.get("labelValues"))
    if not types.get("labelKey") or not values:
        return None, None, ()
    gpu, note = label_gpu(str(types["labelKey"]), str(values[0]), {})
    return gpu, source.line(role, "acceleratorTypes", "labelValues", 0), (note,) if note else ()
