"""Record every figure kvplan prints over a broad grid, so that a change meant to move code and not behaviour can
be shown to move nothing: `python benchmarks/snapshot.py OUT.json` before and after, then compare the two files
(or their sha256, which the script prints).

The grid: every bundled model on every engine at TP 1/2/8, PP 1/2 and block 16/64 on an H100 (the JSON document,
or the one-line error), each bundled model's text panel on vLLM, the calibration tables, `check examples/` as JSON,
`explain` on every fixture log, `size` on the README's case, and a simulate run."""

from __future__ import annotations

import hashlib
import io
import json
import sys
from contextlib import redirect_stdout
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ENGINES = ("vllm", "sglang", "trtllm", "simple")


def _entry_main(args: list[str]) -> int:
    from kvplan.cli.app import main

    return main(args)


def _run(args: list[str]) -> dict[str, object]:
    out, err = io.StringIO(), io.StringIO()
    from contextlib import redirect_stderr

    with redirect_stdout(out), redirect_stderr(err):
        try:
            code = _entry_main(args)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    return {"code": code, "out": out.getvalue(), "err": err.getvalue()}


def estimate_grid() -> dict[str, object]:
    from kvplan.api import estimates
    from kvplan.deployment import Deployment
    from kvplan.errors import KvplanError
    from kvplan.models.sources import spec_files

    grid: dict[str, object] = {}
    for spec_file in spec_files():
        model = spec_file.id
        for engine in ENGINES:
            for tp in (1, 2, 8):
                for pp in (1, 2):
                    for block in (16, 64):
                        key = f"{model}|{engine}|tp{tp}|pp{pp}|b{block}"
                        try:
                            dep = Deployment.from_mapping({"model": model, "gpu": "h100", "engine": engine,
                                                           "tensor_parallel_size": tp, "pipeline_parallel_size": pp,
                                                           "block_size": block}, "snapshot")
                            grid[key] = [e.to_dict() for e in estimates(dep, suggest=True)]
                        except KvplanError as exc:
                            grid[key] = f"error: {exc}"
    return grid


def panels() -> dict[str, object]:
    from kvplan.models.sources import spec_files

    return {f.id: _run(["estimate", "--model", f.id, "--gpu", "h100", "--context", "4K,32K"])
            for f in spec_files()}


def calibration_tables() -> dict[str, object]:
    return _run_script(ROOT / "benchmarks" / "calibration.py")


def _run_script(path: Path) -> dict[str, object]:
    import runpy

    out = io.StringIO()
    with redirect_stdout(out):
        runpy.run_path(str(path), run_name="__main__")
    return {"out": out.getvalue()}


def explains() -> dict[str, object]:
    logs = sorted((ROOT / "tests" / "fixtures" / "explain").glob("*.log"))
    return {log.name: _run(["explain", str(log), "--gpu", "h100", "--json"]) for log in logs}


def others() -> dict[str, object]:
    examples = str(ROOT / "examples")
    return {
        "check": _run(["check", examples, "--format", "json"]),
        "size": _run(["size", "-m", "meta-llama/Llama-3.1-70B", "--target", "32@8K", "--target", "4@128K", "--gpus",
                      "h100,a100-80gb,l40s,h200", "--price", "h100=2.9,a100-80gb=1.8,l40s=0.9,h200=3.6", "--top",
                      "3", "--json"]),
        "simulate": _run(["simulate", "--model", "Qwen/Qwen2.5-7B", "--gpu", "rtx3090", "--max-model-len", "8192",
                          "--trace", str(ROOT / "examples" / "traces" / "AzureLLMInferenceTrace_conv.csv"),
                          "--json"]),
        "pasted": _run(["estimate", "--gpu", "h100", "--json", "--", "vllm", "serve", "Qwen/Qwen2.5-7B",
                        "--max-model-len", "32768", "-tp", "2", "--enable-prefix-caching"]),
        "sglang-pasted": _run(["estimate", "--gpu", "h100", "--json", "--", "python", "-m", "sglang.launch_server",
                               "--model-path", "Qwen/Qwen2.5-7B", "--tp-size", "2", "--context-length", "32768"]),
        "trtllm-pasted": _run(["estimate", "--gpu", "h100", "--json", "--", "trtllm-serve", "Qwen/Qwen2.5-7B",
                               "--tp_size", "2", "--max_seq_len", "32768"]),
    }


def snapshot() -> dict[str, object]:
    return {"estimates": estimate_grid(), "panels": panels(), "calibration": calibration_tables(),
            "explain": explains(), "others": others()}


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python benchmarks/snapshot.py OUT.json")
    text = json.dumps(snapshot(), indent=1, sort_keys=True, default=str).replace(str(ROOT), "<root>")
    Path(sys.argv[1]).write_text(text, encoding="utf-8")
    print(f"sha256 {hashlib.sha256(text.encode()).hexdigest()}  ({len(text):,} characters)")
