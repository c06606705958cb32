"""kvplan estimate imports only what its deployment uses (the start-up budget of benchmarks/startup.py). The
modules below are loaded at the call that needs them, never at the top of a module on the estimate path: a test
fails here if someone imports one of them eagerly again. Each lazy module is also shown to load for the flag or
model that needs it, so the list names real modules and the probe sees them."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

PROBE = """
import sys
from kvplan.cli.app import main
code = main({args!r})
sys.stderr.write("LOADED=" + ",".join(sorted(m for m in sys.modules if m.startswith("kvplan"))) + "\\n")
sys.exit(code)
"""

# the commands benchmarks/startup.py times: a bundled model that fits, --json, a pasted launch line, one that does
# not fit (its levers are planned)
FITS = ["estimate", "--model", "Qwen/Qwen2.5-7B", "--gpu", "rtx3090", "--max-model-len", "32768"]
ESTIMATES = [
    FITS,
    [*FITS, "--json"],
    ["estimate", "--gpu", "rtx3090", "--", "vllm", "serve", "Qwen/Qwen2.5-7B", "--max-model-len", "32768", "--port",
     "8000"],
    ["estimate", "--model", "Qwen/Qwen2.5-7B", "--gpu", "rtx3090"],
]
OTHER_COMMANDS = ("kvplan.check", "kvplan.simulate", "kvplan.serve", "kvplan.verify", "kvplan.sizing",
                  "kvplan.explain", "kvplan.calibration")
# the other engines, their dialects too: `vllm serve` is found in vLLM's, the first the search loads
OTHER_ENGINES = ("kvplan.engines.sglang", "kvplan.engines.trtllm", "kvplan.engines.simple")
QWEN = ["--model", "Qwen/Qwen2.5-7B"]
# lazy module -> what makes an estimate import it
LAZY: dict[str, list[str]] = {
    "kvplan.models.hub": [],  # a model nothing local names
    "kvplan.engines.log_lines": [],  # explain's vocabulary; no estimate reads a log
    "kvplan.models.compressed_attention": ["--model", "deepseek-ai/DeepSeek-V4-Flash"],
    "kvplan.engines.vllm.multimodal": ["--model", "Qwen/Qwen2.5-VL-7B-Instruct"],
    "kvplan.engines.vllm.lora": [*QWEN, "--enable-lora"],
    "kvplan.engines.vllm.offload": [*QWEN, "--cpu-offload-gb", "4"],
    "kvplan.engines.vllm.kv_offload": [*QWEN, "--kv-offloading-size", "16"],
    "kvplan.engines.vllm.tier": [*QWEN, "--kv-offloading-size", "16"],
    "kvplan.engines.vllm.lmcache": [*QWEN, "--kv-transfer-config", '{"kv_connector": "LMCacheConnectorV1"}'],
}


def loaded(args: list[str]) -> set[str]:
    result = subprocess.run([sys.executable, "-c", PROBE.format(args=args)], capture_output=True, text=True,
                            timeout=120)
    lines = [line for line in result.stderr.splitlines() if line.startswith("LOADED=")]
    assert lines, result.stderr
    return set(lines[0].removeprefix("LOADED=").split(","))


@pytest.mark.parametrize("args", ESTIMATES, ids=["fits", "json", "pasted", "levers"])
def test_estimate_leaves_the_lazy_modules_unloaded(args):
    modules = loaded(args)
    eager = sorted(m for m in modules if m in LAZY or m.startswith(tuple(f"{p}." for p in LAZY)))
    eager += sorted(m for m in modules if m.startswith(OTHER_COMMANDS + OTHER_ENGINES))
    assert not eager, f"imported eagerly on the estimate path: {eager}"
    assert "kvplan.engines.vllm.budget" in modules  # the probe ran an estimate
    assert ("kvplan.levers" in modules) == (args is ESTIMATES[-1])  # levers only where the plan does not fit


def test_every_lazy_module_exists():
    missing = [m for m in (*LAZY, *OTHER_COMMANDS, *OTHER_ENGINES) if importlib.util.find_spec(m) is None]
    assert not missing


@pytest.mark.parametrize("module", [m for m, extra in LAZY.items() if extra])
def test_a_lazy_module_loads_where_it_is_needed(module):
    assert module in loaded(["estimate", "--gpu", "h100", *LAZY[module]])


def test_command_annotations_are_objects_not_strings():
    """typer 0.20 (utils.get_params_from_function) reads a command's annotations on every run: strings (a
    `from __future__ import annotations` in a command module) are compiled and evaluated twice each, 10 M of the
    estimate's instructions (kvplan/cli/app.py)."""
    from importlib import import_module

    from kvplan.cli.app import COMMANDS

    functions = [import_module("kvplan.cli.app")._root]
    for name in COMMANDS:
        module = import_module(f"kvplan.cli.{name}")
        functions += ([info.callback for info in module.app.registered_commands] if name == "models"
                      else [module.COMMAND])
    strings = [f"{function.__module__}.{function.__name__}({parameter})"
               for function in functions for parameter, annotation in function.__annotations__.items()
               if isinstance(annotation, str)]
    assert len(functions) > len(COMMANDS) and not strings
