"""Option types shared by commands, defined once."""

from __future__ import annotations

from contextvars import ContextVar
from typing import Annotated

import typer

ModelArg = Annotated[str, typer.Argument(help="Bundled id, local config.json / model directory, or Hub repo id.",
                                         show_default=False)]
JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON for scripts instead of a table.")]
RevisionOpt = Annotated[str | None, typer.Option("--revision", help="Hub branch, tag or commit.")]
ConfigOpt = Annotated[str | None, typer.Option(
    "--config", help="The engine's --config file: vLLM (or SGLang) flag names as keys, or with --engine trtllm "
    "trtllm-serve's LLM-API options YAML (kv_cache_config: ...); flags given here win over it.")]
TokenOpt = Annotated[str | None, typer.Option("--token", help="Hub token for gated or private repos.",
                                              envvar="HF_TOKEN", show_envvar=False)]

# The launch command pasted after `--`, split off by the entry point before typer sees the arguments; read by the
# commands that build a Deployment (module attribute TAKES_PASTED = True).
PASTED: ContextVar[list[str] | None] = ContextVar("pasted", default=None)
