"""kvplan explain: read a vLLM startup log, replay it through kvplan and predict it from scratch, term by term."""

from typing import Annotated

import typer

from kvplan.cli.options import JsonFlag, TokenOpt

HELP = "Why vLLM printed the KV cache it did: a startup log, replayed and predicted term by term."
EPILOG = (
    "LOG is a vLLM startup log (or '-' for stdin), whole or an excerpt: kvplan reads the version, the non-default "
    "args, the engine config, the memory lines and the KV cache size, concurrency and block lines. "
    "Examples:  kvplan explain vllm.log · docker logs vllm 2>&1 | kvplan explain - · "
    "kvplan explain vllm.log --model ./qwen/config.json --gpu h100 --json.  "
    "Exit codes: 0 the replay from the logged KV memory gives vLLM's blocks and tokens; 1 read, but it does not "
    "(or cannot be replayed: unknown model, SGLang or TensorRT-LLM log); 2 unreadable or nothing recognisable."
)

TAKES_PASTED = False
ENDS_AT_ONCE = True  # reads and prints, leaves nothing open (kvplan.cli.app.end)


def explain(
    log: Annotated[str, typer.Argument(help="The startup log file, or '-' for stdin.", show_default=False)],
    model: Annotated[str | None, typer.Option("--model", "-m", help="Model to use instead of the one the log names "
                                              "(logs often name a local path): bundled id, config.json or Hub id.",
                                              show_default=False)] = None,
    gpu: Annotated[str | None, typer.Option("--gpu", help="Catalogue GPU, when the log's total memory does not "
                                            "settle it.")] = None,
    json_output: JsonFlag = False,
    token: TokenOpt = None,
) -> int:
    from kvplan.explain import explain as explain_log
    from kvplan.explain import read_source

    text, source = read_source(log)
    explanation = explain_log(text, source, model, gpu, token)
    if json_output:
        from kvplan.cli.output import print_json

        print_json(explanation.to_dict())
    else:
        import sys

        from kvplan.explain.render import render

        sys.stdout.write(render(explanation))
    return explanation.exit_code


COMMAND = explain
