"""The typer app and the entry point that turns user mistakes into one line and exit code 2."""

from __future__ import annotations

import sys

import click
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
    except click.exceptions.NoArgsIsHelpError as exc:
        exc.show()
        return 0
    except click.UsageError as exc:
        command = exc.ctx.command_path if exc.ctx else "kvplan"
        error_line(f"{exc.format_message()} (see '{command} --help')")
        return 2
    except click.ClickException as exc:
        error_line(exc.format_message())
        return 2
    except click.exceptions.Abort:
        return 130
    except BrokenPipeError:
        return 0
    return result if isinstance(result, int) else 0


def run() -> None:
    sys.exit(main())


if __name__ == "__main__":
    run()
