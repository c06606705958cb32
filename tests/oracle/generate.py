"""Regenerate tests/oracle/cases.jsonl from the engines' own released code (not run by CI; see README.md here).

    python tests/oracle/generate.py --work-dir ../kvplan-oracle [--vllm 0.20.0,0.33.0] [--sglang 0.5.23]

For each release: `pip download --no-deps` its wheel, unzip only its Python package (no compiled modules), and run
the release range's adapter in a scratch venv (torch CPU and the pure-Python dependencies) with the release on
PYTHONPATH; the adapter prints one ORACLE line per deployment of deployments.py. Nothing of the engines is copied
into this repository: only the numbers their code returned, each with the function that returned them.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import deployments  # noqa: E402

# Every release where one of kvplan's vLLM rules changes (releases.py, budget.py, issue 18 section 2), and the
# ones around each boundary.
VLLM = ("0.8.5", "0.9.2", "0.10.2", "0.11.0", "0.12.0", "0.14.0", "0.15.0", "0.17.0", "0.18.0", "0.19.0", "0.20.0",
        "0.20.1", "0.21.0", "0.22.0", "0.24.0", "0.25.0", "0.26.0", "0.27.0", "0.28.0", "0.29.0", "0.31.0", "0.33.0")
# every SGLang release from 0.5.9 (0.5.10 as 0.5.10.post1: the 0.5.10 wheel lacks its jit_kernel files)
SGLANG = ("0.5.9", "0.5.10.post1", "0.5.11", "0.5.12", "0.5.13", "0.5.14", "0.5.15", "0.5.16", "0.5.17", "0.5.18",
          "0.5.19", "0.5.20", "0.5.21", "0.5.22", "0.5.23")
DEPENDENCIES = ("numpy", "packaging", "pydantic", "regex", "cbor2", "psutil", "pyzmq", "urllib3", "transformers",
                "aiohttp", "requests", "openai-harmony", "openai", "pillow", "pybase64", "cachetools", "msgspec",
                "cloudpickle", "uvloop", "py-cpuinfo", "prometheus_client", "xgrammar", "fastapi",
                "partial-json-parser", "llguidance", "einops", "orjson", "IPython", "gguf", "setproctitle", "blake3",
                "sentencepiece", "tiktoken", "mistral_common", "lm-format-enforcer", "diskcache")


def run(*command: str) -> None:
    print("+", " ".join(command), flush=True)
    subprocess.run(command, check=True)


def venv(work: Path, torch: str) -> Path:
    """The scratch venv: torch (a wheel path or a requirement) and the pure-Python dependencies."""
    python = work / "venv" / "bin" / "python"
    if not python.exists():
        run(sys.executable, "-m", "venv", str(work / "venv"))
        run(str(python), "-m", "pip", "install", "-q", torch, *DEPENDENCIES)
    return python


def unpack(work: Path, package: str, version: str) -> Path:
    """The release's Python package from its wheel, compiled modules left out."""
    target = work / "src" / f"{package}-{version}"
    if (target / package).is_dir():
        return target
    wheels = work / "wheels"
    wheel = next(wheels.glob(f"{package}-{version}-*.whl"), None)
    if wheel is None:
        run(sys.executable, "-m", "pip", "download", "--no-deps", f"{package}=={version}", "-d", str(wheels))
        wheel = next(wheels.glob(f"{package}-{version}-*.whl"))
    with zipfile.ZipFile(wheel) as archive:
        members = [name for name in archive.namelist() if name.startswith(package + "/") and not name.endswith(".so")]
        archive.extractall(target, members)
    return target


def oracle(python: Path, source: Path, module: str, version: str, cases_file: Path) -> list[dict[str, Any]]:
    """One release's answers: the adapter's ORACLE lines."""
    env = dict(os.environ, PYTHONPATH=f"{source}{os.pathsep}{HERE}")
    done = subprocess.run([str(python), "-m", module, version, str(cases_file)], env=env, capture_output=True,
                          text=True, timeout=3600)
    answers = [json.loads(line[7:]) for line in done.stdout.splitlines() if line.startswith("ORACLE ")]
    if not answers:
        print(done.stderr[-3000:], file=sys.stderr)
    return answers


def lines(engine: str, version: str, cases: list[dict[str, Any]], answers: list[dict[str, Any]],
          args_of: Any) -> list[dict[str, Any]]:
    by_id = {case["id"]: case for case in cases}
    found = []
    for answer in answers:
        if "error" in answer:
            print(f"{engine} {version} case {answer['id']}: {answer['error']}", file=sys.stderr)
            continue
        says = answer["engine_says"]
        if "num_blocks" in says and not {"tokens", "max_concurrency"} <= set(says):
            print(f"{engine} {version} case {answer['id']}: no logged token count caught", file=sys.stderr)
            continue
        found.append({"engine": engine, "version": version, "how": "ran", "source": answer["source"],
                      "args": args_of(by_id[answer["id"]], version), "engine_says": answer["engine_says"]})
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work-dir", type=Path, required=True, help="wheels, unpacked releases, the scratch venv")
    parser.add_argument("--vllm", default=",".join(VLLM), help="comma-separated vLLM releases")
    parser.add_argument("--sglang", default=",".join(SGLANG), help="comma-separated SGLang releases")
    parser.add_argument("--torch", default="torch==2.13.0", help="torch wheel path or requirement (CPU build)")
    parser.add_argument("--out", type=Path, default=HERE / "cases.jsonl")
    parser.add_argument("--jobs", type=int, default=2)
    options = parser.parse_args(argv)
    work = options.work_dir.resolve()
    work.mkdir(parents=True, exist_ok=True)
    python = venv(work, options.torch)
    jobs: list[tuple[str, str, Path, str, list[dict[str, Any]], Any]] = []
    vllm_cases = deployments.cases()
    sglang_cases = deployments.sglang_cases()
    for version in filter(None, options.vllm.split(",")):
        jobs.append(("vllm", version, unpack(work, "vllm", version), "vllm_adapter", vllm_cases,
                     deployments.kvplan_args))
    for version in filter(None, options.sglang.split(",")):
        jobs.append(("sglang", version, unpack(work, "sglang", version), "sglang_adapter", sglang_cases,
                     deployments.sglang_args))
    for engine, cases in (("vllm", vllm_cases), ("sglang", sglang_cases)):
        (work / f"{engine}-cases.json").write_text(json.dumps(cases))

    def one(job: tuple[str, str, Path, str, list[dict[str, Any]], Any]) -> list[dict[str, Any]]:
        engine, version, source, module, cases, args_of = job
        answers = oracle(python, source, module, version, work / f"{engine}-cases.json")
        print(f"{engine} {version}: {len(answers)} answers", flush=True)
        return lines(engine, version, cases, answers, args_of)

    with ThreadPoolExecutor(options.jobs) as pool:
        results = [line for found in pool.map(one, jobs) for line in found]
    with open(options.out, "w") as handle:
        for line in results:
            handle.write(json.dumps(line, sort_keys=True) + "\n")
    ran = sum(line["how"] == "ran" for line in results)
    print(f"{len(results)} cases ({ran} ran) written to {options.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
