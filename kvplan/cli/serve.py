"""kvplan serve: the web page and the HTTP API (kvplan/serve; the optional `serve` extra)."""

from __future__ import annotations

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


def serve(
    host: Annotated[str, typer.Option("--host", help="Address to bind; anything but loopback is reachable by "
                                      "others.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="TCP port.", min=0, max=65535)] = 8765,
) -> int:
    from kvplan.errors import KvplanError

    try:
        import fastapi  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        raise KvplanError("needs FastAPI and uvicorn: pip install 'kvplan[serve]'", "kvplan serve") from None
    from kvplan.serve.server import serve as run

    run(host, port)
    return 0


COMMAND = serve
