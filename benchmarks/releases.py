"""Each engine's releases on PyPI against the table kvplan keeps (kvplan/engines/<name>/releases.py): the ones
covered, and the ones not yet, newer first. Needs PyPI (https://pypi.org/pypi/<package>/json).

    python benchmarks/releases.py

To add a release: read its wheel (`pip download --no-deps vllm==X -d DIR`) against the rules the table's
changes name, record each rule that moved as a Change (with the file or PR), add the release to COVERED,
regenerate tests/oracle/cases.jsonl for it, and the architectures it registers (benchmarks/architecture_registries.py
over every covered release's wheel, into kvplan/engines/<name>/data/architectures.json)."""

from __future__ import annotations

import json
import re
import sys
from urllib.request import urlopen

from kvplan import registry
from kvplan.deployment.launch import release_tuple

PACKAGES = {"vllm": "vllm", "sglang": "sglang", "trtllm": "tensorrt-llm"}  # engine -> its PyPI package


def pypi_releases(package: str) -> list[str]:
    with urlopen(f"https://pypi.org/pypi/{package}/json", timeout=30) as response:
        data = json.load(response)
    final = [v for v, files in data["releases"].items() if files and re.fullmatch(r"\d+\.\d+\.\d+", v)]
    return sorted(final, key=lambda v: release_tuple(v) or ())


def main() -> int:
    missing_any = False
    for engine, package in PACKAGES.items():
        table = registry.releases(engine)
        if table is None:
            continue
        covered = set(table.covered)
        on_pypi = pypi_releases(package)
        newer = [v for v in on_pypi if (release_tuple(v) or ()) > (release_tuple(table.newest) or ())]
        within = [v for v in on_pypi if v not in covered and v not in newer
                  and (release_tuple(v) or ()) >= (release_tuple(table.covered[0]) or ())]
        print(f"{table.label} ({package}): {len(covered)} covered, {table.covered[0]} to {table.newest}; "
              f"PyPI's newest {on_pypi[-1]}")
        print(f"  not yet covered, newer: {', '.join(reversed(newer)) or 'none'}")
        print(f"  inside the range but not in the table: {', '.join(within) or 'none'}")
        missing_any = missing_any or bool(newer)
    return 1 if missing_any else 0


if __name__ == "__main__":
    sys.exit(main())
