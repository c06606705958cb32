"""The FastAPI app: each endpoint reads the request into the CLI's front doors (request.py), calls the core
(documents.py) and answers with the CLI's --json document; every user mistake is a 4xx in one shape (errors.py)."""

from __future__ import annotations

import json
import logging
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException

from kvplan.errors import KvplanError
from kvplan.serve import bounded, documents, responses, schema
from kvplan.serve.errors import ApiError
from kvplan.serve.limits import BodyLimit
from kvplan.serve.request import FLAGS_FIELD, from_items
from kvplan.serve.request import Request as Inputs

STATIC = Path(__file__).parent / "static"
EXIT_HEADER = "X-Kvplan-Exit-Code"  # what the CLI would exit with: 1 when the deployment cannot serve
log = logging.getLogger("kvplan.serve")


class Json(Response):
    """json.dumps as the CLI prints it (a document the CLI prints, inf and nan included, is served as is)."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return json.dumps(content).encode()


def _answer(document: Any, exit_code: int) -> Json:
    return Json(document, headers={EXIT_HEADER: str(exit_code)})


def _error(exc: ApiError) -> Json:
    return Json(exc.body(), status_code=exc.status)


def _located(inputs: Inputs, call: Callable[[], documents.Answer]) -> Json:
    try:
        answer = call()
    except KvplanError as exc:
        raise ApiError(exc.message, inputs.field_of(exc.where)) from None
    return _answer(answer.document, answer.exit_code)


async def _body(request: Request) -> dict[str, Any]:
    raw = await request.body()
    try:
        body = json.loads(raw or b"null")
    except (ValueError, RecursionError):
        raise ApiError("the body is not valid JSON", "body") from None
    if not isinstance(body, dict):
        raise ApiError("expected a JSON object", "body")
    return body


def _from_body(command: str, body: dict[str, Any]) -> Inputs:
    flags = body.pop(FLAGS_FIELD, {})
    if not isinstance(flags, dict):
        raise ApiError("expected an object of engine flags, e.g. {\"max-model-len\": 32768}", FLAGS_FIELD)
    return from_items(command, body.items(), flags.items())


def _from_query(command: str, request: Request) -> Inputs:
    return from_items(command, request.query_params.multi_items())


def _run(command: str, inputs: Inputs) -> Json:
    if command == "estimate":
        return _located(inputs, lambda: documents.estimate(inputs))
    lever = {"simulate": inputs.fields.get("--requests", "requests"), "size": inputs.fields.get("--gpus", "gpus")}
    return _answer(*bounded.run(command, inputs, lever=lever.get(command)))


def _working(inputs: Inputs) -> Json:
    """The page's answer: the estimate document, with the working the CLI's panel shows and the command."""
    from kvplan.cli.estimate import json_document
    from kvplan.cli.render import formula, knobs_line, pool_line

    try:
        results = documents.estimate_results(inputs)
    except KvplanError as exc:
        raise ApiError(exc.message, inputs.field_of(exc.where)) from None
    working = [{"formula": formula(r.plan), "pool": pool_line(r.plan), "knobs": knobs_line(r.plan)} for r in results]
    fits = all(result.plan.capacity.fits for result in results)
    return _answer({"estimate": json_document(results), "working": working, "command": shlex.join(inputs.cli())},
                   0 if fits else 1)


def _endpoints(command: str) -> tuple[Callable[..., Json], Callable[..., Any]]:
    def get(request: Request) -> Json:
        return _run(command, _from_query(command, request))

    async def post(request: Request) -> Json:
        from starlette.concurrency import run_in_threadpool

        inputs = _from_body(command, await _body(request))
        # off the event loop, as the GET is: a Hub download or a worker's wait must not stall other requests
        return await run_in_threadpool(_run, command, inputs)

    return get, post


DOCUMENTS: dict[str, Callable[[], Any]] = {"estimate": responses.estimate_document, "size": responses.size,
                                           "simulate": responses.simulate}


def _routes(app: FastAPI) -> None:
    for command in ("estimate", "size", "simulate"):
        get, post = _endpoints(command)
        summary = f"kvplan {command} --json"
        answers = responses.answers(DOCUMENTS[command](), f"The document `kvplan {command} --json` prints.")
        app.get(f"/api/{command}", summary=summary, openapi_extra=schema.query_parameters(command),
                responses=answers)(get)
        app.post(f"/api/{command}", summary=summary, openapi_extra=schema.request_body(command),
                 responses=answers)(post)

    @app.get("/api/estimate/working", summary="The estimate, its working and the CLI command (the page's call)",
             openapi_extra=schema.query_parameters("estimate"),
             responses=responses.answers(responses.working(), "The estimate, the panel's lines, the command."))
    def working(request: Request) -> Json:
        return _working(_from_query("estimate", request))

    @app.post("/api/check", summary="kvplan check --format json, on one file's text", openapi_extra=schema.check_body(),
              responses=responses.answers(responses.check(), "The findings `kvplan check --format json` prints; "
                                          "the exit header is check's (1 a rule failed, 2 the file is invalid)."))
    async def check(request: Request) -> Json:
        body = await _body(request)
        for key in body:
            if key not in ("text", "name", "kind", "gpu", "select", "ignore"):
                raise ApiError("unknown field; give text, and optionally name, kind, gpu, select, ignore", key)
            if not isinstance(body[key], str):
                raise ApiError("expected a string", key)
        if "text" not in body:
            raise ApiError("the file's text is required", "text")
        name = body.get("name") or ("config.json" if body["text"].lstrip().startswith("{") else "deployment.yaml")
        if "/" in name or "\\" in name or name.startswith(".") or len(name) > 100:
            raise ApiError("a file name without folders, e.g. serve.yaml", "name")
        answer = documents.check(body["text"], name, body.get("gpu"), body.get("kind"), body.get("select"),
                                 body.get("ignore"))
        return _answer(answer.document, answer.exit_code)

    @app.get("/api/models", summary="kvplan models list --json",
             responses=responses.answers(responses.models(), "The rows `kvplan models list --json` prints."))
    def models() -> Json:
        return _answer(documents.models().document, 0)

    @app.get("/api/gpus", summary="kvplan gpus --json",
             responses=responses.answers(responses.gpus(), "The catalogue `kvplan gpus --json` prints."))
    def gpus() -> Json:
        return _answer(documents.gpus().document, 0)

    @app.get("/", include_in_schema=False)
    def page() -> HTMLResponse:
        return HTMLResponse((STATIC / "index.html").read_text(encoding="utf-8"))


def _handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError) -> Json:
        return _error(exc)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> Json:
        return _error(ApiError(str(exc.detail), None, exc.status_code))

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> Json:
        first = exc.errors()[0] if exc.errors() else {}
        return _error(ApiError(str(first.get("msg", "invalid request")),
                               ".".join(str(part) for part in first.get("loc", ())[1:]) or None, 400))

    @app.exception_handler(Exception)
    async def bug(request: Request, exc: Exception) -> Json:
        log.exception("kvplan serve: internal error on %s", request.url.path)
        return _error(ApiError(f"internal error ({type(exc).__name__}); this is a bug in kvplan, please report it",
                               None, 500))


def create_app() -> Any:
    """The ASGI app: FastAPI inside the body-size cap."""
    from kvplan import __version__

    app = FastAPI(title="kvplan", version=__version__,
                  description="KV-cache capacity as vLLM, SGLang and TensorRT-LLM allocate it. Each /api endpoint "
                              "answers with the document the matching `kvplan ... --json` command prints; "
                              f"the {EXIT_HEADER} header carries that command's exit code.")
    _routes(app)
    _handlers(app)
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    return BodyLimit(app)
