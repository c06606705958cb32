"""The typer app and the entry point that turns user mistakes into one line and exit code 2."""

from __future__ import annotations

import sys

import typer

from kvplan.cli import estimate, gpus, models
from kvplan.cli.output import error_line
from kvplan.errors import KvplanError

app = typer.Typer(
    name="kvplan", no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
    help="Plan KV-cache capacity for vLLM, SGLang and TensorRT-LLM before you rent the GPU.",
)
app.command("estimate", help=estimate.HELP, epilog=estimate.EPILOG)(estimate.estimate)
app.command("gpus", help="List the GPU catalogue (memory as the CUDA runtime reports it).")(gpus.list_gpus)
app.add_typer(models.app, name="models")


def main(argv: list[str] | None = None) -> int:
    try:
        result = app(args=argv, prog_name="kvplan", standalone_mode=False)
    except KvplanError as exc:
        error_line(str(exc))
        return 2
    except Exception as exc:  # click's exceptions, from click or from typer's vendored copy of it
        kinds = {cls.__name__ for cls in type(exc).__mro__}
        if "NoArgsIsHelpError" in kinds:
            exc.show()  # type: ignore[attr-defined]
            return 0
        if "UsageError" in kinds:
            ctx = getattr(exc, "ctx", None)
            command = ctx.command_path if ctx else "kvplan"
            error_line(f"{exc.format_message()} (see '{command} --help')")  # type: ignore[attr-defined]
            return 2
        if "ClickException" in kinds:
            error_line(exc.format_message())  # type: ignore[attr-defined]
            return 2
        if "Abort" in kinds:
            return 130
        raise
    except BrokenPipeError:
        return 0
    return result if isinstance(result, int) else 0


def run() -> None:
    sys.exit(main())


if __name__ == "__main__":
    run()
