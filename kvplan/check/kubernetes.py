"""Kubernetes workloads whose containers run a model server (Deployment, StatefulSet, Pod, Job, LeaderWorkerSet,
...; any number of documents per file)."""

from __future__ import annotations

from typing import Any

from kvplan.check.commands import (
    GPU_PRODUCT_LABEL,
    GPU_RESOURCE,
    Container,
    catalogue_gpu,
    command_item,
    gpu_count_of,
    joined,
    list_of,
    mapping_of,
    selector_gpu,
    server_launch,
    value_at,
    words_of,
)
from kvplan.check.item import Image, Item
from kvplan.check.source import Source, annotation_settings


class Kubernetes:
    """Kubernetes workloads whose containers run a model server."""

    name, label = "kubernetes", "Kubernetes manifest"
    EMPTY = "no container runs a model server kvplan knows (an engine's launcher, or an image that names one)"
    # kind -> path from the document to the pod spec
    POD_SPECS: dict[str, tuple[str, ...]] = {
        "Pod": ("spec",), "Deployment": ("spec", "template", "spec"), "StatefulSet": ("spec", "template", "spec"),
        "ReplicaSet": ("spec", "template", "spec"), "DaemonSet": ("spec", "template", "spec"),
        "Job": ("spec", "template", "spec"), "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
        "LeaderWorkerSet": ("spec", "leaderWorkerTemplate", "leaderTemplate", "spec"),
    }

    def detect(self, document: Any) -> bool:
        return isinstance(document, dict) and "apiVersion" in document and document.get("kind") in self.POD_SPECS

    def items(self, source: Source) -> list[Item]:
        document = source.document
        if not self.detect(document):
            return []
        settings = annotation_settings(source, value_at(document, ("metadata", "annotations")), ("metadata", "annotations"))
        path = self.POD_SPECS[document["kind"]]
        pod = value_at(document, path)
        if document["kind"] == "LeaderWorkerSet" and pod is None:
            path = ("spec", "leaderWorkerTemplate", "workerTemplate", "spec")
            pod = value_at(document, path)
        if not isinstance(pod, dict):
            return []
        name = str(value_at(document, ("metadata", "name")) or document["kind"])
        size = value_at(document, ("spec", "leaderWorkerTemplate", "size")) if document["kind"] == "LeaderWorkerSet" else 1
        pods = gpu_count_of(size, source, "spec", "leaderWorkerTemplate", "size") or 1
        gpu, gpu_line, notes = node_gpu(source, pod, path)
        containers = pod.get("containers") or []
        if not isinstance(containers, list):
            raise source.error("expected a list of containers", *path, "containers")
        items = []
        serving = []
        for index, spec in enumerate(containers):
            if not isinstance(spec, dict):
                raise source.error("expected a mapping", *path, "containers", index)
            container = self._container(source, spec, (*path, "containers", index), pods)
            if container is not None:
                container.gpu, container.gpu_line, container.notes = gpu, gpu_line, notes
                serving.append(container)
        for container in serving:
            label = name if len(serving) == 1 else f"{name}/{container.name}"
            items.append(command_item(source, label, container, settings))
        return items

    def _container(self, source: Source, spec: dict[str, Any], path: tuple[Any, ...], pods: int) -> Container | None:
        image = Image(str(spec["image"])) if spec.get("image") else None
        command = words_of(source, spec.get("command"), *path, "command")
        args = words_of(source, spec.get("args"), *path, "args")
        launch = server_launch(joined(command, args), image)
        if launch is None:
            return None
        limits = mapping_of(value_at(spec, ("resources", "limits")))
        requests = mapping_of(value_at(spec, ("resources", "requests")))
        count_key = "limits" if GPU_RESOURCE in limits else "requests"
        count = (limits if count_key == "limits" else requests).get(GPU_RESOURCE)
        count_path = (*path, "resources", count_key, GPU_RESOURCE)
        per_pod = gpu_count_of(count, source, *count_path)
        env = {str(e.get("name")): str(e.get("value")) for e in list_of(spec.get("env"))
               if isinstance(e, dict) and e.get("value") is not None}
        return Container(str(spec.get("name") or "container"), launch, image, source.line(*path, "image"),
                         None if per_pod is None else per_pod * pods, source.line(*count_path), env=env)


def node_gpu(source: Source, pod: dict[str, Any], path: tuple[Any, ...]) -> tuple[str | None, int | None,
                                                                                   tuple[str, ...]]:
    """The GPU product a pod is pinned to by nodeSelector or a required node affinity."""
    selector = mapping_of(pod.get("nodeSelector"))
    if GPU_PRODUCT_LABEL in selector:
        gpu, note = catalogue_gpu(str(selector[GPU_PRODUCT_LABEL]))
        return gpu, source.line(*path, "nodeSelector", GPU_PRODUCT_LABEL), (note,) if note else ()
    terms_path = (*path, "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution",
                  "nodeSelectorTerms")
    return selector_gpu(source, value_at(pod, terms_path[len(path):]), terms_path)
