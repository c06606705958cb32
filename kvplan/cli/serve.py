"""kvplan serve: the web page and the HTTP API (kvplan/serve; the optional `serve` extra). uvicorn is handed the
app by its import path, so the command line does not import the server package (which imports the CLI's
document helpers)."""

import ipaddress
import sys
from typing import Annotated

import typer

HELP = "Serve the calculator as a web page and an HTTP API (the serve extra: FastAPI and uvicorn)."
EPILOG = (
    "Loopback only unless --host says otherwise (then a warning is printed). The page is at /, the API at "
    "/api/estimate, /api/size, /api/simulate, /api/check, /api/models and /api/gpus, its schema at /docs.  "
    "Examples:  kvplan serve · kvplan serve --port 9000 · "
    "curl 'http://127.0.0.1:8765/api/estimate?model=Qwen/Qwen2.5-7B&gpu=rtx3090&max-model-len=32K'"
)

TAKES_PASTED = False
APP = "kvplan.serve.app:create_app"


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def serve(
    host: Annotated[str, typer.Option("--host", help="Address to bind; anything but loopback is reachable by "
                                      "others.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="TCP port.", min=0, max=65535)] = 8765,
) -> int:
    from kvplan.errors import KvplanError

    try:
        import fastapi  # noqa: F401
        import uvicorn
    except ImportError:
        raise KvplanError("needs FastAPI and uvicorn: pip install 'kvplan[serve]'", "kvplan serve") from None
    if not is_loopback(host):
        sys.stderr.write(f"kvplan: warning: serving on {host}, not loopback: anyone who can reach this address can "
                         "use the API, and a model path in a request is read from this machine's disk\n")
    shown = f"[{host}]" if ":" in host else host
    sys.stderr.write(f"kvplan: serving http://{shown}:{port}/ (API docs at /docs); Ctrl-C stops\n")
    uvicorn.run(APP, factory=True, host=host, port=port, log_level="warning")
    return 0


COMMAND = serve
