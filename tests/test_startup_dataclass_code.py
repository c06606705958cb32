"""The CLI's store of the code dataclasses compiles for kvplan's classes (kvplan/cli/dataclass_code.py): a warm store
compiles nothing, and what comes out of it is the code compiling gives, so every class and every byte printed is
the same as without the store. Each run is a fresh process whose bytecode goes under PYTHONPYCACHEPREFIX (a
temporary folder), as the interpreter's own .pyc files do there."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

ESTIMATE = ["estimate", "--model", "Qwen/Qwen2.5-7B", "--gpu", "rtx3090", "--max-model-len", "32768"]

# One run; then on stderr: how many texts the store compiled, and a digest of every method dataclasses generated
# for a kvplan class (marshal's bytes of its code object: equal only for the same code). Marshal format 2, which
# writes no object references: from format 3 marshal.c w_ref marks an object shared by its reference count, which
# differs between a code object just compiled and one loaded from the store (CPython 3.10's digests differed so).
PROBE = """
import hashlib, marshal, sys
from kvplan.cli import dataclass_code
if {disabled!r}:
    dataclass_code.install = lambda: None
from kvplan.cli.app import main
code = main({args!r})
digests = {{}}
for name, module in sorted(sys.modules.items()):
    if not name.startswith("kvplan"):
        continue
    for cls in list(vars(module).values()):
        if isinstance(cls, type) and cls.__module__ == name and "__dataclass_fields__" in vars(cls):
            for method in ("__init__", "__repr__", "__eq__", "__hash__", "__setattr__", "__delattr__"):
                function = getattr(vars(cls).get(method), "__wrapped__", vars(cls).get(method))
                if getattr(getattr(function, "__code__", None), "co_filename", "") == "<string>":
                    digests[f"{{name}}.{{cls.__qualname__}}.{{method}}"] = hashlib.sha256(
                        marshal.dumps(function.__code__, 2)).hexdigest()
store = dataclass_code._store
sys.stderr.write("PROBE=" + __import__("json").dumps({{"compiled": store.compiled if store else None,
                                                        "digests": digests}}) + "\\n")
sys.exit(code)
"""


def run(prefix, args=ESTIMATE, disabled=False, write=True):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    env["PYTHONPYCACHEPREFIX"] = str(prefix)
    env["COLUMNS"] = "120"
    if not write:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    result = subprocess.run([sys.executable, "-c", PROBE.format(args=args, disabled=disabled)], capture_output=True,
                            text=True, timeout=120, env=env)
    lines = [line for line in result.stderr.splitlines() if line.startswith("PROBE=")]
    assert lines, result.stderr
    return result.returncode, result.stdout, json.loads(lines[0].removeprefix("PROBE="))


def stores(prefix):
    return sorted(prefix.rglob("*.dataclasses.*.marshal"))


@pytest.fixture(scope="module")
def without_store(tmp_path_factory):
    """The estimate as it was before the store: dataclasses compiling every text itself."""
    prefix = tmp_path_factory.mktemp("plain")
    code, out, probe = run(prefix, disabled=True)
    assert not stores(prefix) and probe["compiled"] is None
    return code, out, probe["digests"]


def test_a_warm_store_compiles_nothing_and_changes_nothing(tmp_path, without_store):
    code, out, digests = without_store
    cold = run(tmp_path)
    assert cold[2]["compiled"] > 0 and stores(tmp_path)
    warm = run(tmp_path)
    assert warm[2]["compiled"] == 0
    for result in (cold, warm):
        assert result[:2] == (code, out)  # exit code and every byte printed
        assert result[2]["digests"] == digests  # every generated method: the same code object
    # the store's files sit with kvplan's own bytecode, one per module that builds dataclasses
    assert any(path.name.startswith("kvplan.models.layers.dataclasses.") for path in stores(tmp_path))
    assert all(path.parent.name == "kvplan" for path in stores(tmp_path))


def test_nothing_is_written_where_bytecode_is_not(tmp_path, without_store):
    assert run(tmp_path, write=False)[:2] == without_store[:2]
    assert not stores(tmp_path)
    assert run(tmp_path, write=False)[2]["compiled"] > 0


def test_a_damaged_store_is_ignored_and_rewritten(tmp_path, without_store):
    run(tmp_path)
    damaged = stores(tmp_path)
    damaged[0].write_bytes(b"not marshal")
    damaged[1].write_bytes(damaged[1].read_bytes()[:40])  # cut short
    again = run(tmp_path)
    assert again[:2] == without_store[:2] and again[2]["digests"] == without_store[2]
    assert again[2]["compiled"] > 0
    assert run(tmp_path)[2]["compiled"] == 0


def test_only_kvplan_texts_are_stored(tmp_path):
    """An API caller's dataclasses (here modules named elsewhere and kvplanx) pass through to exec, not stored."""
    script = """
import sys, types
from dataclasses import dataclass
from kvplan.cli import dataclass_code
dataclass_code.install()
for name in ("elsewhere", "kvplanx", "kvplan.fake"):
    module = sys.modules[name] = types.ModuleType(name)
    exec("from dataclasses import dataclass\\n@dataclass(frozen=True)\\nclass Point:\\n    x: int\\n    y: int = 2",
         vars(module))
    assert repr(module.Point(1)) == "Point(x=1, y=2)" and hash(module.Point(1)) == hash((1, 2))
    assert module.Point.__init__.__annotations__ == {"x": int, "y": int, "return": None}
print(sorted(dataclass_code._store.used))
dataclass_code.save()
"""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(tmp_path)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "['kvplan.fake']"
    assert [path.name.split(".dataclasses.")[0] for path in stores(tmp_path)] == ["kvplan.fake"]
