"""Option types shared by commands, defined once."""

from __future__ import annotations

from contextvars import ContextVar
from typing import TYPE_CHECKING, Annotated, Any

import typer

from kvplan import registry

if TYPE_CHECKING:
    from kvplan.deployment import Deployment

ModelArg = Annotated[str, typer.Argument(help="Bundled id, local config.json / model directory, or Hub repo id.",
                                         show_default=False)]
JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON for scripts instead of a table.")]
RevisionOpt = Annotated[str | None, typer.Option("--revision", help="Hub branch, tag or commit.")]
ModelOpt = Annotated[str | None, typer.Option("--model", "-m", help="Bundled id, local config.json or directory, or "
                                                               "Hub id.", show_default=False)]
EngineOpt = Annotated[str | None, typer.Option("--engine", help=f"{', '.join(registry.names()[:-1])} or "
                                                                f"{registry.names()[-1]}.")]
VllmVersionOpt = Annotated[str | None, typer.Option("--vllm-version", help="Era of vLLM's accounting, e.g. 0.11; "
                                                                           "default the newest.")]
ConfigOpt = Annotated[str | None, typer.Option(
    "--config", help="The engine's --config file: vLLM (or SGLang) flag names as keys, or with --engine trtllm "
    "trtllm-serve's LLM-API options YAML (kv_cache_config: ...); flags given here win over it.")]
TokenOpt = Annotated[str | None, typer.Option("--token", help="Hub token for gated or private repos.",
                                              envvar="HF_TOKEN", show_envvar=False)]

# The launch command pasted after `--`, split off by the entry point before typer sees the arguments; read by the
# commands that build a Deployment (module attribute TAKES_PASTED = True).
PASTED: ContextVar[list[str] | None] = ContextVar("pasted", default=None)
# The context of a command that takes a pasted launch line: click leaves the engine's flags to the command.
TAKES_LAUNCH_LINE = {"ignore_unknown_options": True, "allow_extra_args": True}


def deployment_of(ctx: typer.Context, config: str | None, **own: tuple[Any, str]) -> Deployment:
    """The Deployment a command's doors describe: its own options (field=(value, the flag as typed); unset ones
    left out), the engine flags typer left in ctx.args, a --config file, and the launch command pasted after --."""
    from kvplan.deployment.front_doors import from_cli

    return from_cli({name: given for name, given in own.items() if given[0] is not None}, list(ctx.args), config,
                    PASTED.get())
