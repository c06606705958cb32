"""Request bodies are capped: read up to MAX_BODY_BYTES, then answered 413 before any endpoint sees them."""

from __future__ import annotations

import json
from typing import Any

MAX_BODY_BYTES = 256 * 1024  # a large Kubernetes manifest is tens of KiB


class BodyLimit:
    """ASGI middleware: buffers the body up to the cap and replays it to the app."""

    def __init__(self, app: Any, limit: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length", b"0")
        if not declared.isdigit() or int(declared) > self.limit:
            await self._refuse(send)
            return
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.limit:
                await self._refuse(send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        replayed = False

        async def replay() -> dict[str, Any]:
            nonlocal replayed
            if replayed:
                return await receive()  # after the body: a disconnect, when the client goes
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)

    async def _refuse(self, send: Any) -> None:
        payload = json.dumps({"error": f"request body over {self.limit // 1024} KiB", "field": "body"}).encode()
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]})
        await send({"type": "http.response.body", "body": payload})
