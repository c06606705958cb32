"""The typer app and the entry point that turns user mistakes into one line and exit code 2. Each command's
module is imported only when that command runs.

The command modules (and this one) do without `from __future__ import annotations`: typer reads a command's
annotations on every run, and as strings typer 0.20 utils.get_params_from_function would compile and evaluate
each twice (inspect.signature(eval_str=True), then typing.get_type_hints): 10 M instructions of an estimate."""

import contextlib
import gc
import os
import re
import sys
from typing import Annotated, NoReturn

import typer

from kvplan.cli import dataclass_code
from kvplan.errors import KvplanError

app = typer.Typer(
    name="kvplan", no_args_is_help=True, pretty_exceptions_enable=False,
    help="Plan KV-cache capacity for vLLM, SGLang and TensorRT-LLM before you rent the GPU.",
)


def _version(value: bool) -> None:
    if value:
        from kvplan import __version__

        sys.stdout.write(f"kvplan {__version__}\n")
        raise typer.Exit()


@app.callback()
def _root(version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                                help="Print the version and exit.")] = False) -> None:
    pass


COMMANDS = ("estimate", "check", "verify", "simulate", "size", "explain", "gpus", "models", "serve")
_registered: set[str] = set()
_ends_at_once = False  # the command last registered to run sets ENDS_AT_ONCE (see end())


def _register(args: list[str]) -> bool:
    """Only the command being run is imported (all of them for help and completion). True when that command reads
    a pasted launch command."""
    from importlib import import_module

    wanted = next((a for a in args if not a.startswith("-")), None)
    for name in [wanted] if wanted in COMMANDS else COMMANDS:
        if name in _registered:
            continue
        _registered.add(name)
        module = import_module(f"kvplan.cli.{name}")
        if name == "models":
            app.add_typer(module.app, name="models")
        else:
            app.command(name, help=module.HELP, epilog=getattr(module, "EPILOG", None),
                        context_settings=getattr(module, "CONTEXT", None))(module.COMMAND)
    command = import_module(f"kvplan.cli.{wanted}") if wanted in COMMANDS else None
    global _ends_at_once
    _ends_at_once = bool(getattr(command, "ENDS_AT_ONCE", False))
    return bool(getattr(command, "TAKES_PASTED", False))


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    for stream, mode in (("stdin", "r"), ("stdout", "w"), ("stderr", "w")):
        if getattr(sys, stream) is None:  # started with the descriptor closed (<&-, >&-): the first read or
            # write raised AttributeError on None; the process's null stream is left for the interpreter to close
            setattr(sys, stream, open(os.devnull, mode))  # noqa: SIM115
    pasted = None
    if "--" in args:
        split = args.index("--")
        args, pasted = args[:split], args[split + 1:]
    dataclass_code.install()
    paused = not gc.isenabled()  # the entry points start with the garbage collector off
    try:
        takes_pasted = _register(args)
        if paused and not _ends_at_once:
            gc.enable()  # a command that holds memory for long (verify's pool, serve) collects as usual
        if pasted is not None and not takes_pasted:
            raise KvplanError("only a command that builds a deployment (estimate, verify, simulate, size) reads a "
                              "launch command after '--'", "--")
        from kvplan.cli.options import PASTED

        PASTED.set(pasted)  # every call: an in-process caller's earlier command must not linger
        result = app(args=args, prog_name="kvplan", standalone_mode=False)
    except KvplanError as exc:
        from kvplan.cli.output import error_line

        error_line(str(exc))
        return 2
    except BrokenPipeError:
        return 0
    except SystemExit as exc:
        # rich 15.0.0 console.py Console.on_broken_pipe: on a closed pipe (kvplan models list | head -1, --help | head)
        # it points stdout at os.devnull and raises SystemExit(1) while handling the BrokenPipeError; 1 is kvplan's
        # "computed but cannot serve", so a closed pipe ends 0 here as it does for kvplan's own writes above
        if isinstance(exc.__context__, BrokenPipeError):
            return 0
        raise
    except OSError as exc:  # not a BrokenPipeError (above): the output cannot be written (a full disk: ENOSPC)
        return _output_failed(exc)
    except Exception as exc:  # click's exceptions, from click or from typer's vendored copy of it
        return _click_exit(exc)
    finally:
        dataclass_code.save()
    return result if isinstance(result, int) else 0


def _output_failed(exc: OSError) -> int:
    """One line for an OSError that reached the entry point. Without a file name it came from writing stdout
    (files kvplan reads fail as KvplanError naming them); stdout is then pointed at os.devnull, so that the
    buffered rest does not fail again at exit with the interpreter's 'Exception ignored' report."""
    from kvplan.cli.output import error_line

    if exc.filename:
        error_line(f"{exc.filename}: {exc.strerror or exc}")
        return 2
    with contextlib.suppress(OSError, ValueError, AttributeError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    error_line(f"cannot write the output: {exc.strerror or exc}")
    return 2


def _click_exit(exc: Exception) -> int:
    from kvplan.cli.output import error_line

    kinds = {cls.__name__ for cls in type(exc).__mro__}
    if "NoArgsIsHelpError" in kinds:
        exc.show()  # type: ignore[attr-defined]
        return 0
    if "Exit" in kinds:
        return int(getattr(exc, "exit_code", 0) or 0)
    if "UsageError" in kinds:
        ctx = getattr(exc, "ctx", None)
        command = ctx.command_path if ctx else "kvplan"
        message = re.sub(r"( Did you mean [^?]*\?)\1+", r"\1", exc.format_message())  # type: ignore[attr-defined]
        # typer and click each suggest the same names; one suggestion is enough
        message = re.sub(r"(Did you mean [^?]*\?) \(Did you mean one of: [^)]*\)", r"\1", message)
        error_line(f"{message} (see '{command} --help')")
        return 2
    if "ClickException" in kinds:
        error_line(exc.format_message())  # type: ignore[attr-defined]
        return 2
    if "Abort" in kinds:
        return 130
    raise exc


def end(code: int) -> NoReturn:
    """The entry points' exit. After a command whose module sets ENDS_AT_ONCE = True (it reads and prints, and
    leaves nothing open), with no atexit handler registered and no thread but this one, the process ends with
    os._exit once stdout and stderr are flushed: the interpreter's shutdown (a garbage collection over every
    module, then their teardown) was 39 M instructions of an estimate's 441 M (benchmarks/startup.py
    --instructions). Anything else, or a flush that fails (a closed pipe), takes the ordinary sys.exit.

    Such a command also runs with the garbage collector off, as the entry points start: its collections over the
    modules being imported were another 19 M, and freeing what it leaves is the operating system's work at exit
    (size, simulate, check and estimate on the README's examples peak within 0.5 MB of their RSS with it on)."""
    import atexit
    import threading

    handlers = getattr(atexit, "_ncallbacks", None)  # CPython's count; without it, assume some are registered
    if _ends_at_once and handlers is not None and handlers() == 0 and threading.active_count() == 1:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
        else:
            os._exit(code)
    sys.exit(code)


def run() -> None:
    from kvplan.cli.interrupt import INTERRUPTED

    gc.disable()  # as kvplan.__main__ does (typer is already imported here)
    try:
        code = main()
    except KeyboardInterrupt:  # one outside click's own handling, as in a command module's import
        code = INTERRUPTED
    end(code)


if __name__ == "__main__":
    run()
