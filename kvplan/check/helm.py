"""The Helm values of vLLM's production-stack chart."""

from __future__ import annotations

from typing import Any

from kvplan.check.commands import (
    GPU_RESOURCE,
    Container,
    Launch,
    command_item,
    gpu_count_of,
    mapping_of,
    selector_gpu,
    value_at,
)
from kvplan.check.item import KNOWN_FLAGS, Image, Item, Problem
from kvplan.check.source import Settings, Source, read_settings


class HelmValues:
    """Values of vLLM's production-stack Helm chart (vllm-project/production-stack, helm/values.yaml): each
    servingEngineSpec.modelSpec entry is one vLLM deployment, its command built as the chart's
    deployment-vllm-multi.yaml template builds it."""

    name, label = "helm-values", "production-stack Helm values"
    EMPTY = "every modelSpec is disabled (enabled: false)"
    # vllmConfig keys the chart turns into flags (camelCase -> flag), as its template does
    FLAGS = {"maxModelLen": "--max-model-len", "dtype": "--dtype", "tensorParallelSize": "--tensor-parallel-size",
             "maxNumSeqs": "--max-num-seqs", "gpuMemoryUtilization": "--gpu_memory_utilization",
             "maxLoras": "--max_loras", "runner": "--runner", "convert": "--convert"}
    RAY_FLAGS = {"pipelineParallelSize": "--pipeline-parallel-size"}
    SWITCHES = {"enableChunkedPrefill": "chunked-prefill", "enablePrefixCaching": "prefix-caching"}
    OTHER_KEYS = ("extraArgs", "v0", "prometheusMultiprocDir")  # read by the chart, not flags of their own

    def detect(self, document: Any) -> bool:
        return isinstance(document, dict) and isinstance(value_at(document, ("servingEngineSpec", "modelSpec")), list)

    def items(self, source: Source) -> list[Item]:
        if not self.detect(source.document):
            raise source.error("expected servingEngineSpec.modelSpec, a list of model specs")
        settings = read_settings(source)
        items = []
        for index, spec in enumerate(source.document["servingEngineSpec"]["modelSpec"]):
            path: tuple[Any, ...] = ("servingEngineSpec", "modelSpec", index)
            if not isinstance(spec, dict):
                raise source.error("expected a mapping (name, modelURL, vllmConfig, ...)", *path)
            if spec.get("enabled") is False:
                continue
            items.append(self._item(source, spec, path, settings))
        return items

    def _item(self, source: Source, spec: dict[str, Any], path: tuple[Any, ...], settings: Settings) -> Item:
        config = spec.get("vllmConfig") or {}
        if not isinstance(config, dict):
            raise source.error("expected a mapping of vLLM settings", *path, "vllmConfig")
        if not spec.get("modelURL"):
            raise source.error("no modelURL: the chart needs the model to serve", *path)
        here = source.line(*path, "modelURL")
        words, lines = ["vllm", "serve", str(spec["modelURL"])], [here, here, here]
        extra: dict[str, int] = {}

        def add(flag: str, key: str, value: Any = None) -> None:
            line = source.line(*path, "vllmConfig", key) or source.line(*path, key)
            words.extend([flag] if value is None else [flag, str(value)])
            lines.extend([line] * (1 if value is None else 2))

        ray = isinstance(spec.get("raySpec"), dict) and spec["raySpec"].get("enabled")
        for key, value in config.items():
            key = str(key)
            if key in self.RAY_FLAGS and ray:  # the chart's Ray template renders it (raySpec.enabled)
                add(self.RAY_FLAGS[key], key, value)
            elif key in self.FLAGS:
                add(self.FLAGS[key], key, value)
            elif key in self.SWITCHES:
                add(f"--enable-{self.SWITCHES[key]}" if value else f"--no-enable-{self.SWITCHES[key]}", key)
            elif key not in self.OTHER_KEYS:
                # the chart drops any other key without a word: the setting never reaches vLLM
                extra[f"vllmConfig.{key}"] = source.line(*path, "vllmConfig", key) or 0
        if spec.get("enableLoRA"):
            add("--enable-lora", "enableLoRA")
        extra_args = config.get("extraArgs")
        if extra_args is not None and not isinstance(extra_args, list):
            raise source.error("expected a list of command-line words", *path, "vllmConfig", "extraArgs")
        for offset, argument in enumerate(extra_args or []):
            words.append(str(argument))
            lines.append(source.line(*path, "vllmConfig", "extraArgs", offset))
        repository, tag = spec.get("repository"), spec.get("tag")
        image = Image(f"{repository}:{tag}" if tag else str(repository)) if repository else None
        count_path = (*path, "requestGPU")
        limits = mapping_of(value_at(spec, ("resources", "limits")))
        if GPU_RESOURCE in limits:  # a resources block wins over requestGPU
            count_path = (*path, "resources", "limits", GPU_RESOURCE)
        count = limits.get(GPU_RESOURCE) if GPU_RESOURCE in limits else spec.get("requestGPU")
        gpu, gpu_line, notes = selector_gpu(source, spec.get("nodeSelectorTerms"), (*path, "nodeSelectorTerms"))
        container = Container(
            str(spec.get("name") or f"modelSpec[{path[-1]}]"), Launch(words, lines, source.line(*path)), image,
            source.line(*path, "repository") or source.line(*path, "tag"),
            None if ray else gpu_count_of(count, source, *count_path), source.line(*count_path), gpu, gpu_line,
            notes=notes, extra_lines=extra,
            problems=[Problem(KNOWN_FLAGS, f"{key}: the chart passes no such setting to vLLM, so it has no effect; "
                              "give the flag in vllmConfig.extraArgs", key) for key in extra])
        return command_item(source, container.name, container, settings)
