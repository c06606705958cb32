"""Kubernetes workloads whose containers run a model server (Deployment, StatefulSet, Pod, Job, LeaderWorkerSet,
...; any number of documents per file)."""

from __future__ import annotations

import re
from typing import Any

from kvplan.check.commands import (
    Container,
    command_item,
    gpu_count_of,
    gpu_resource,
    joined,
    labelled_gpu,
    list_of,
    mapping_of,
    selector_gpu,
    server_launch,
    unresolved,
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
        # KServe: a runtime's containers, and an InferenceService predictor's own containers
        "ServingRuntime": ("spec",), "ClusterServingRuntime": ("spec",), "InferenceService": ("spec", "predictor"),
        "StormService": ("spec", "template", "spec", "roles"),  # AIBrix: a pod template per role (_pods)
    }

    def detect(self, document: Any) -> bool:
        return isinstance(document, dict) and "apiVersion" in document and document.get("kind") in self.POD_SPECS

    def items(self, source: Source) -> list[Item]:
        document = source.document
        if not self.detect(document):
            return []
        settings = annotation_settings(source, value_at(document, ("metadata", "annotations")), ("metadata", "annotations"))
        name = str(value_at(document, ("metadata", "name")) or document["kind"])
        items = []
        for path, pod, label in self._pods(document, name):
            items += self._pod_items(source, document, settings, path, pod, label)
        return items

    def _pods(self, document: dict[str, Any], name: str) -> list[tuple[tuple[Any, ...], dict[str, Any], str]]:
        """Each pod spec of the document, with its path and the name its deployments take."""
        if document["kind"] == "StormService":  # AIBrix: one pod template per role (prefill, decode, ...)
            roles = value_at(document, ("spec", "template", "spec", "roles"))
            found = []
            for index, role in enumerate(roles if isinstance(roles, list) else []):
                pod = value_at(role, ("template", "spec")) if isinstance(role, dict) else None
                if isinstance(pod, dict):
                    role_path = ("spec", "template", "spec", "roles", index, "template", "spec")
                    found.append((role_path, pod, f"{name}/{role.get('name') or index}"))
            return found
        path: tuple[Any, ...] = self.POD_SPECS[document["kind"]]
        pod = value_at(document, path)
        if document["kind"] == "LeaderWorkerSet" and pod is None:
            path = ("spec", "leaderWorkerTemplate", "workerTemplate", "spec")
            pod = value_at(document, path)
        return [(path, pod, name)] if isinstance(pod, dict) else []

    def _pod_items(self, source: Source, document: dict[str, Any], settings: Any, path: tuple[Any, ...],
                   pod: dict[str, Any], name: str) -> list[Item]:
        size = value_at(document, ("spec", "leaderWorkerTemplate", "size")) if document["kind"] == "LeaderWorkerSet" else 1
        pods = gpu_count_of(size, source, "spec", "leaderWorkerTemplate", "size") or 1
        gpu, gpu_line, notes = node_gpu(source, pod, path)
        # LeaderWorkerSet gives each pod its group's size and the leader's index (0) as variables
        given = {"LWS_GROUP_SIZE": str(pods), "LWS_WORKER_INDEX": "0"} if document["kind"] == "LeaderWorkerSet" else {}
        replicas = value_at(document, ("spec", "replicas")) if document["kind"] == "StatefulSet" else None
        replicas = replicas if isinstance(replicas, int) and not isinstance(replicas, bool) else None
        engine = settings.knobs.get("engine", (None,))[0]
        engine = str(engine).lower() if engine is not None else None
        containers = pod.get("containers") or []
        if not isinstance(containers, list):
            raise source.error("expected a list of containers", *path, "containers")
        items = []
        serving = []
        for index, spec in enumerate(containers):
            if not isinstance(spec, dict):
                raise source.error("expected a mapping", *path, "containers", index)
            container = self._container(source, spec, (*path, "containers", index), pods, given, engine,
                                        replicas)
            if container is not None:
                container.gpu, container.gpu_line, container.notes = gpu, gpu_line, notes
                serving.append(container)
        for container in serving:
            label = name if len(serving) == 1 else f"{name}/{container.name}"
            items.append(command_item(source, label, container, settings))
        return items

    def _container(self, source: Source, spec: dict[str, Any], path: tuple[Any, ...], pods: int,
                   given: dict[str, str], engine: str | None, replicas: int | None = None) -> Container | None:
        """env: an entry with neither value nor valueFrom is set to the empty string (the Kubernetes API's
        EnvVar.value: 'Defaults to ""'); one with valueFrom is known at deploy time only and left out."""
        image = Image(str(spec["image"])) if spec.get("image") else None
        entries = [e for e in list_of(spec.get("env")) if isinstance(e, dict)
                   and (e.get("value") is not None or e.get("valueFrom") is None)]
        env = {**given, **{str(e.get("name")): "" if e.get("value") is None else str(e["value"]) for e in entries}}
        command = words_of(source, spec.get("command"), *path, "command")
        args = words_of(source, spec.get("args"), *path, "args")
        whole = joined(command, args)
        whole.words = [expand(word, env) for word in whole.words]
        launch = server_launch(whole, image, engine)
        if launch is None:
            return None
        limits = mapping_of(value_at(spec, ("resources", "limits")))
        requests = mapping_of(value_at(spec, ("resources", "requests")))
        resource = gpu_resource(limits) or gpu_resource(requests) or "nvidia.com/gpu"
        count_key = "limits" if resource in limits else "requests"
        count = (limits if count_key == "limits" else requests).get(resource)
        count_path = (*path, "resources", count_key, resource)
        per_pod = gpu_count_of(count, source, *count_path)
        if pods == 1:  # one engine over several pods of a StatefulSet (or a Deployment): --nnodes N, a pod each
            pods = nodes_of(launch.words) or (replicas if replicas and nodes_of(launch.words, True) else 1)
        note = f"the GPU count is {unresolved(count)}, a value set at deploy time" if unresolved(count) else ""
        return Container(str(spec.get("name") or "container"), launch, image, source.line(*path, "image"),
                         None if per_pod is None else per_pod * pods, source.line(*count_path),
                         env={k: v for k, v in env.items() if k not in given}, gpu_count_note=note)


def nodes_of(words: list[str], given: bool = False) -> int | None:
    """The node count a multi-node launch names (--nnodes N, the flag vLLM and SGLang share); given: whether it
    names one at all (a count that waits for a variable included)."""
    for index, word in enumerate(words):
        name, equals, inline = word.partition("=")
        if name == "--nnodes":
            value = inline if equals else (words[index + 1] if index + 1 < len(words) else "")
            return 1 if given else (int(value) if value.isdigit() and int(value) > 0 else None)
    return None


def expand(word: str, env: dict[str, str]) -> str:
    """A command or args word as Kubernetes expands it: $(VAR) takes the container's env value, $$ is a $, and
    a $(VAR) of no env value (none, or valueFrom) stays as written."""
    return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
                  lambda m: "$" if m.group(0) == "$$" else env.get(m.group(1), m.group(0)), word)


def node_gpu(source: Source, pod: dict[str, Any], path: tuple[Any, ...]) -> tuple[str | None, int | None,
                                                                                   tuple[str, ...]]:
    """The GPU product a pod is pinned to by nodeSelector or a required node affinity (check.gpus's labels)."""
    found = labelled_gpu(source, mapping_of(pod.get("nodeSelector")), (*path, "nodeSelector"))
    if found[0] is not None or found[2]:
        return found
    terms_path = (*path, "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution",
                  "nodeSelectorTerms")
    return selector_gpu(source, value_at(pod, terms_path[len(path):]), terms_path)
