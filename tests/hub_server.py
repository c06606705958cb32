"""A small HTTP server on 127.0.0.1 that answers the requests huggingface_hub makes to download a file:
HEAD then GET on /{repo}/resolve/{revision}/{file}, with the commit and ETag headers the Hub sends."""

from __future__ import annotations

import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlparse

# Commit hashes as the Hub sends them in X-Repo-Commit: 40 hex digits, a different one per revision.
COMMITS = {revision: hashlib.sha1(f"kvplan test commit {revision}".encode()).hexdigest() for revision in ("main", "v1.0")}


class FakeHub:
    def __init__(self) -> None:
        self.files: dict[tuple[str, str], bytes] = {}  # (repo, revision) -> config.json bytes
        self.extra: dict[tuple[str, str, str], bytes] = {}  # (repo, revision, filename) -> bytes
        self.status: dict[str, tuple[int, str]] = {}  # repo -> (HTTP status, X-Error-Code)
        self.requests: list[str] = []
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_HEAD(self) -> None:  # noqa: N802
                hub.answer(self, body=False)

            def do_GET(self) -> None:  # noqa: N802
                hub.answer(self, body=True)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakeHub:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def serve_quant_config(self, repo: str, content: bytes, revision: str = "main") -> None:
        """ModelOpt's hf_quant_config.json beside the repo's config.json, as a ModelOpt checkpoint has it."""
        self.extra[(repo, revision, "hf_quant_config.json")] = content

    def answer(self, handler: BaseHTTPRequestHandler, body: bool) -> None:
        path = unquote(urlparse(handler.path).path)
        self.requests.append(f"{handler.command} {path}")
        parts = path.strip("/").split("/")
        if len(parts) < 5 or parts[2] != "resolve":
            return self.error(handler, 404, "EntryNotFound", "not a resolve URL")
        repo, revision, filename = "/".join(parts[:2]), parts[3], "/".join(parts[4:])
        if repo in self.status:
            status, code = self.status[repo]
            return self.error(handler, status, code, "denied" if status in (401, 403) else "missing")
        if revision not in COMMITS:
            return self.error(handler, 404, "RevisionNotFound", "Invalid rev id")
        content = self.files.get((repo, revision))
        if content is None:
            return self.error(handler, 404, "RepoNotFound", "Repository not found")
        if filename != "config.json":
            content = self.extra.get((repo, revision, filename))
            if content is None:
                return self.error(handler, 404, "EntryNotFound", "Entry not found")
        etag = hashlib.sha256(content).hexdigest()
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(content)))
        handler.send_header("ETag", f'"{etag}"')
        handler.send_header("X-Repo-Commit", COMMITS[revision])
        handler.end_headers()
        if body:
            handler.wfile.write(content)

    @staticmethod
    def error(handler: BaseHTTPRequestHandler, status: int, code: str, message: str) -> None:
        payload = json.dumps({"error": message}).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(payload)))
        handler.send_header("X-Error-Code", code)
        handler.send_header("X-Error-Message", message)
        handler.end_headers()
        if handler.command != "HEAD":
            handler.wfile.write(payload)


def safetensors_header(tensors: dict[str, tuple[str, list[int]]]) -> bytes:
    """The first bytes of a safetensors file: an 8-byte little-endian length, then the JSON header."""
    header, offset = {}, 0
    for name, (dtype, shape) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset]}
    payload = json.dumps(header).encode()
    return len(payload).to_bytes(8, "little") + payload
