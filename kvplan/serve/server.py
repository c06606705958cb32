"""Run the app on uvicorn: loopback unless told otherwise, and a warning when it is told otherwise."""

from __future__ import annotations

import ipaddress
import sys

LOOPBACK_NAMES = ("localhost",)


def is_loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def serve(host: str, port: int) -> None:
    import uvicorn

    from kvplan.serve.app import create_app

    if not is_loopback(host):
        sys.stderr.write(f"kvplan: warning: serving on {host}, not loopback: anyone who can reach this address can "
                         "use the API, and a model path in a request is read from this machine's disk\n")
    shown = f"[{host}]" if ":" in host else host
    sys.stderr.write(f"kvplan: serving http://{shown}:{port}/ (API docs at /docs); Ctrl-C stops\n")
    uvicorn.run(create_app(), host=host, port=port, log_level="warning")
