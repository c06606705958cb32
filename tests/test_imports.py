"""The fast paths stay light: torch, huggingface_hub, numpy, pydantic, YAML and rich stay out of estimate (and
of the JSON listings). pydantic alone costs ~110 ms of start-up, rich's import and layout more than the whole
budget of estimate (benchmarks/startup.py); estimate draws its panel itself (kvplan/cli/panel.py)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

PROBE = """
import sys
from kvplan.cli.app import main
code = main({args!r})
heavy = sorted(m for m in ("torch", "huggingface_hub", "numpy", "pydantic", "yaml", "rich") if m in sys.modules)
sys.stderr.write("HEAVY=" + ",".join(heavy) + "\\n")
sys.exit(code)
"""


@pytest.mark.parametrize("args", [
    ["models", "list", "--json"],
    ["gpus", "--json"],
    ["estimate", "--model", "Qwen/Qwen2.5-7B", "--gpu", "rtx3090"],
    ["estimate", "--model", "Qwen/Qwen2.5-7B", "--gpu", "rtx3090", "--json"],
    ["estimate", "--model", "meta-llama/Llama-3.1-70B", "--gpu", "rtx3090", "--json"],  # with levers
    ["estimate", "--gpu", "h100", "--json", "--", "vllm", "serve", "Qwen/Qwen2.5-7B", "--port", "8000", "-tp", "2"],
])
def test_no_heavy_imports(args):
    result = subprocess.run([sys.executable, "-c", PROBE.format(args=args)], capture_output=True, text=True,
                            timeout=120)
    heavy = [line for line in result.stderr.splitlines() if line.startswith("HEAVY=")]
    assert heavy == ["HEAVY="], result.stderr
    assert result.returncode in (0, 1)
    if "--json" in args:
        json.loads(result.stdout)
