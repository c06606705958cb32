"""Simulate and size run in a worker process with a time cap: a request that would run for minutes is stopped,
not left holding a core. One worker per request (nothing is kept between requests), at most WORKERS at once."""

from __future__ import annotations

import multiprocessing
import threading
import traceback
from typing import Any

from kvplan.errors import KvplanError
from kvplan.serve.errors import ApiError
from kvplan.serve.request import Request

SECONDS = 20.0
WORKERS = 2  # this machine's cores; a third request at once is told to retry
_slots = threading.BoundedSemaphore(WORKERS)


def _work(conn: Any, name: str, request: Request) -> None:
    from kvplan.serve import documents

    try:
        answer = getattr(documents, name)(request)
        conn.send(("ok", answer.document, answer.exit_code))
    except ApiError as exc:
        conn.send(("api", exc.message, exc.field, exc.status))
    except KvplanError as exc:
        conn.send(("user", exc.message, exc.where))
    except Exception:  # a bug: the parent answers 500 with no traceback in the body
        conn.send(("bug", traceback.format_exc()))
    finally:
        conn.close()


def run(name: str, request: Request, lever: str | None = None) -> tuple[Any, int]:
    """documents.NAME(request) in a fresh process: (document, exit code), or the request's ApiError; lever: the
    field to name when it runs past the cap."""
    seconds = SECONDS
    if not _slots.acquire(blocking=False):
        raise ApiError(f"{WORKERS} {name} requests are running; try again in a few seconds", None, 503)
    try:
        context = multiprocessing.get_context("spawn")  # a fork of a threaded server may inherit held locks
        receiver, sender = context.Pipe(duplex=False)
        worker = context.Process(target=_work, args=(sender, name, request), daemon=True)
        worker.start()
        sender.close()
        if not receiver.poll(seconds):
            worker.kill()
            worker.join()
            raise ApiError(f"{name} ran past {seconds:g} s and was stopped; ask for less (kvplan {name} has no cap)",
                           lever, 422)
        try:
            result = receiver.recv()
        except EOFError:
            result = ("bug", f"the {name} worker exited with code {worker.exitcode}")
        worker.join()
    finally:
        _slots.release()
    kind = result[0]
    if kind == "ok":
        return result[1], result[2]
    if kind == "api":
        raise ApiError(result[1], result[2], result[3])
    if kind == "user":
        raise ApiError(result[1], request.field_of(result[2]))
    raise RuntimeError(result[1])
