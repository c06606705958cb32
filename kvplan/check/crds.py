"""Custom resources that state a model server without a pod's command: KubeAI's Model (kubeai.org/v1: url, engine,
args, resourceProfile) and KServe's InferenceService whose predictor names a model format (the Hugging Face
runtime: storageUri, --model_id, its other args handed to vLLM). An InferenceService with its own containers and a
ServingRuntime are read as pods (check.kubernetes)."""

from __future__ import annotations

from typing import Any

from kvplan import registry
from kvplan.check.commands import Container, Launch, command_item, gpu_count_of, gpu_resource, mapping_of, value_at
from kvplan.check.item import Item
from kvplan.check.source import Settings, Source, annotation_settings


def _model_of(url: str) -> str | None:
    """hf://ORG/NAME -> ORG/NAME; other schemes (ollama://, s3://, pvc://) name no Hub model."""
    return url.removeprefix("hf://").strip("/") or None if url.startswith("hf://") else None


def _serve(source: Source, name: str, engine: str, model: str, model_path: tuple[Any, ...], args: Any,
           args_path: tuple[Any, ...]) -> tuple[list[str], list[int | None]]:
    """The engine's launch words for a model and args, each with its line."""
    dialect = registry.dialect(engine)
    head = [*dialect.launcher.split(), *([dialect.model_flag, model] if dialect.model_flag else
                                         [model] if dialect.positional_model else ["--model", model])]
    line = source.line(*model_path)
    words = [str(a) for a in args] if isinstance(args, list) else []
    return head + words, [line] * len(head) + [source.line(*args_path, i) for i in range(len(words))]


class KubeAI:
    """KubeAI's Model: the engine (VLLM, SGLang, ...) serving url's model with args on resourceProfile's GPUs."""

    name, label = "kubeai", "KubeAI Model"
    EMPTY = "its engine is not one kvplan models (OLlama, FasterWhisper, Infinity), or its url is not hf://"

    def detect(self, document: Any) -> bool:
        return (isinstance(document, dict) and str(document.get("apiVersion", "")).startswith("kubeai.org/")
                and document.get("kind") == "Model")

    def items(self, source: Source) -> list[Item]:
        from kvplan.check.gpus import profile_gpu

        spec = mapping_of(source.document.get("spec"))
        engine = str(spec.get("engine") or "").lower()
        model = _model_of(str(spec.get("url") or ""))
        if engine not in registry.names() or model is None:
            return []
        settings = annotation_settings(source, value_at(source.document, ("metadata", "annotations")),
                                       ("metadata", "annotations"))
        words, lines = _serve(source, "", engine, model, ("spec", "url"), spec.get("args"), ("spec", "args"))
        gpu, count, note = profile_gpu(str(spec.get("resourceProfile") or "cpu"))
        here = source.line("spec", "resourceProfile")
        name = str(value_at(source.document, ("metadata", "name")) or "model")
        container = Container(name, Launch(words, lines, source.line("spec"), source.text), None, None, count, here,
                              gpu, here, notes=(note,) if note else ())
        return [command_item(source, name, container, settings)]


class KServe:
    """KServe's InferenceService whose predictor.model names a format: the Hugging Face runtime's vLLM backend
    (kserve/huggingfaceserver: its own args model_id, model_name, ...; the rest go to vLLM's engine args)."""

    name, label = "kserve", "KServe InferenceService"
    EMPTY = "its predictor names no Hugging Face model (storageUri hf://... or --model_id)"
    OWN_ARGS = ("--model_name", "--model_id", "--model_dir", "--model_revision", "--tokenizer_revision", "--backend",
                "--task", "--return_probabilities", "--disable_lower_case", "--disable_special_tokens",
                "--max_length", "--http_port", "--grpc_port", "--workers", "--predictor_host")

    def detect(self, document: Any) -> bool:
        return (isinstance(document, dict) and str(document.get("apiVersion", "")).startswith("serving.kserve.io/")
                and document.get("kind") == "InferenceService"
                and isinstance(value_at(document, ("spec", "predictor", "model")), dict))

    def items(self, source: Source) -> list[Item]:
        path = ("spec", "predictor", "model")
        spec = mapping_of(value_at(source.document, path))
        settings = annotation_settings(source, value_at(source.document, ("metadata", "annotations")),
                                       ("metadata", "annotations"))
        args = [str(a) for a in spec.get("args") or [] if isinstance(a, (str, int, float))]
        model = next((a.split("=", 1)[1] for a in args if a.startswith("--model_id=")), None) or _model_of(
            str(spec.get("storageUri") or ""))
        if model is None:
            return []
        kept = [i for i, a in enumerate(args) if a.split("=", 1)[0] not in self.OWN_ARGS]
        return [self._item(source, settings, model, path, [args[i] for i in kept], kept)]

    def _item(self, source: Source, settings: Settings, model: str, path: tuple[Any, ...], args: list[str],
              indexes: list[int]) -> Item:
        engine = registry.DEFAULT  # the Hugging Face runtime's default backend
        words, lines = _serve(source, "", engine, model, (*path, "storageUri"), [], (*path, "args"))
        words += args
        lines += [source.line(*path, "args", i) for i in indexes]
        limits = mapping_of(value_at(source.document, (*path, "resources", "limits")))
        resource = gpu_resource(limits)
        count_path = (*path, "resources", "limits", resource)
        count = gpu_count_of(limits.get(resource), source, *count_path) if resource else None
        name = str(value_at(source.document, ("metadata", "name")) or "inferenceservice")
        from kvplan.check.kubernetes import node_gpu

        gpu, gpu_line, notes = node_gpu(source, mapping_of(value_at(source.document, ("spec", "predictor"))),
                                        ("spec", "predictor"))
        container = Container(name, Launch(words, lines, source.line(*path), source.text), None, None, count,
                              source.line(*count_path), gpu, gpu_line, notes=notes)
        return command_item(source, name, container, settings)
