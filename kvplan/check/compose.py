"""docker-compose files: services whose command runs a model server, or whose image is vLLM's server."""

from __future__ import annotations

from typing import Any

from kvplan.check.commands import (
    Container,
    command_item,
    gpu_count_of,
    joined,
    list_of,
    mapping_of,
    server_launch,
    value_at,
    words_of,
)
from kvplan.check.item import Image, Item
from kvplan.check.source import Source, read_settings


class Compose:
    """docker-compose services whose command runs a model server (or whose image is vLLM's server)."""

    name, label = "compose", "docker-compose file"
    EMPTY = "no service runs a model server kvplan knows (an engine's launcher, or an image that names one)"

    def detect(self, document: Any) -> bool:
        services = document.get("services") if isinstance(document, dict) else None
        return isinstance(services, dict) and all(isinstance(s, dict) or s is None for s in services.values())

    def items(self, source: Source) -> list[Item]:
        if not self.detect(source.document):
            raise source.error("expected services:, a mapping of service names to services")
        settings = read_settings(source)
        engine = settings.knobs.get("engine", (None,))[0]
        engine = str(engine).lower() if engine is not None else None
        items = []
        for name, service in source.document["services"].items():
            if not isinstance(service, dict):
                continue
            path = ("services", name)
            image = Image(str(service["image"])) if service.get("image") else None
            # Docker splits a string entrypoint or command as a shell would, then runs entrypoint + command
            launch = server_launch(joined(words_of(source, service.get("entrypoint"), *path, "entrypoint", split=True),
                                          words_of(source, service.get("command"), *path, "command", split=True)),
                                   image, engine)
            if launch is None:
                continue
            count, count_line = self._gpus(source, service, path)
            env = service.get("environment")
            if isinstance(env, list):
                env = dict(str(e).split("=", 1) for e in env if "=" in str(e))
            env = mapping_of(env)
            container = Container(str(name), launch, image, source.line(*path, "image"), count, count_line,
                                  env={str(k): str(v) for k, v in env.items() if v is not None})
            items.append(command_item(source, str(name), container, settings))
        return items

    def _gpus(self, source: Source, service: dict[str, Any], path: tuple[Any, ...]) -> tuple[int | None, int | None]:
        devices = value_at(service, ("deploy", "resources", "reservations", "devices"))
        for index, device in enumerate(devices if isinstance(devices, list) else []):
            if not isinstance(device, dict) or "gpu" not in list_of(device.get("capabilities")):
                continue
            here = (*path, "deploy", "resources", "reservations", "devices", index)
            if isinstance(device.get("device_ids"), list):
                return len(device["device_ids"]), source.line(*here, "device_ids")
            count = device.get("count")
            if count == "all" or count is None:
                return None, None
            return gpu_count_of(count, source, *here, "count"), source.line(*here, "count")
        return None, None
