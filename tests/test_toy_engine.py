"""Adding an engine is one folder and one registry line: a toy engine written here, in a folder of its own with a
budget, a dialect and its log lines, is planned by estimate (its own flags and its own launcher pasted), checked by
check in a Kubernetes manifest, and recognised by explain, with nothing else in kvplan told about it."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from kvplan import registry
from kvplan.cli.app import main

BUDGET = '''
from kvplan.engines import common
from kvplan.plan import EngineSettings, Memory

RESERVE = 2 * 2**30  # the toy's rule: the whole GPU less 2 GiB and the weights


class Toy:
    name = "toy"
    label = "Toy"
    versioned = False
    kv_log = "toy pool"
    flat_pool = False

    def settings(self, target):
        dep = target.deployment
        return EngineSettings("toy", self.label, self.kv_log, None, None, dep.block_size or 32,
                              common.check_max_model_len(target.spec, dep), dep.max_num_seqs, None)

    def stage_memory(self, target, settings, weights_bytes, decoder_layers, last):
        total = target.gpu.memory_bytes
        return Memory(total, total, weights_bytes, reserve_bytes=RESERVE,
                      kv_cache_bytes=total - weights_bytes - RESERVE)

    def notes(self, target, settings):
        return []


ENGINE = Toy()
'''
DIALECT = '''
from kvplan.deployment.dialect import Catalogue, Dialect, Program

DIALECT = Dialect(name="toy", label="Toy", catalogue_module="toy_engine.flags", programs=(Program("toy-serve"),),
                  positional_model=True, extra_spellings={"max_model_len": ("toy-len",)})
'''
FLAGS = '''
from kvplan.deployment.dialect import Catalogue

CATALOGUE = Catalogue(inert={"port": "value"})
'''
LOG_LINES = '''
from kvplan.engines.log_lines import LogLines

LOG_LINES = LogLines(record_start=r"\\[toy\\] ", recognised=r"\\[toy\\] pool: \\d+ tokens")
'''


@pytest.fixture
def toy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    folder = tmp_path / "toy_engine"
    folder.mkdir()
    for name, text in (("__init__", ""), ("budget", BUDGET), ("dialect", DIALECT), ("flags", FLAGS),
                       ("log_lines", LOG_LINES)):
        (folder / f"{name}.py").write_text(textwrap.dedent(text), encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    registry.register("toy", "toy_engine")  # the one registry line
    yield tmp_path
    registry.unregister("toy")
    from kvplan.deployment.values import _spelling_index

    _spelling_index.cache_clear()


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(args)
    return code, capsys.readouterr().out


def test_estimate_plans_with_the_toy_rule(toy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run(["estimate", "--engine", "toy", "--model", "Qwen/Qwen2.5-7B", "--gpu-memory", "40GiB",
                     "--toy-len", "4096", "--json"], capsys)
    assert code == 0, out
    plan = json.loads(out)
    # By hand: Qwen2.5-7B holds 28 layers x 4 KV heads x 128 x 2 (K and V) x 2 B = 57,344 B per token, 32-token
    # blocks of 1,835,008 B. The pool is 40 GiB - 2 GiB - the weights kvplan derives (the plan's own weights
    # term, a figure the estimate tests pin elsewhere); blocks are its floor over the block size.
    weights = plan["memory"]["weights_bytes"]
    pool = 40 * 2**30 - 2 * 2**30 - weights
    assert plan["engine"]["name"] == "toy" and plan["engine"]["max_model_len"] == 4096
    assert plan["kv"]["block_bytes"] == 1_835_008
    assert plan["capacity"]["num_blocks"] == pool // 1_835_008


def test_a_pasted_toy_launcher_is_read_with_its_own_flags(toy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run(["estimate", "--gpu-memory", "40GiB", "--json", "--", "toy-serve", "Qwen/Qwen2.5-7B",
                     "--toy-len", "8192", "--port", "9000"], capsys)
    assert code == 0, out
    plan = json.loads(out)
    assert plan["engine"]["name"] == "toy" and plan["engine"]["max_model_len"] == 8192
    assert any("not memory-relevant: --port" in note for note in plan["notes"])
    # a flag the toy's catalogue does not list is refused, naming the engine by its label
    assert main(["estimate", "--gpu-memory", "40GiB", "--", "toy-serve", "Qwen/Qwen2.5-7B", "--swap-space", "4"]) == 2
    assert "unknown Toy flag" in capsys.readouterr().err


def test_check_reads_a_manifest_that_runs_the_toy(toy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    manifest = toy / "toy.yaml"
    manifest.write_text(textwrap.dedent("""\
        apiVersion: apps/v1
        kind: Deployment
        metadata: {name: toy}
        spec:
          template:
            spec:
              containers:
                - name: server
                  image: example/toy:1
                  command: ["toy-serve", "Qwen/Qwen2.5-7B", "--toy-len", "4096", "--no-such-flag"]
                  resources: {limits: {nvidia.com/gpu: 1}}
        """), encoding="utf-8")
    code, out = run(["check", str(manifest), "--gpu", "h100", "--format", "json"], capsys)
    findings = json.loads(out)
    unknown = [f for f in findings if f["rule"] == "KV002"]
    assert code == 1 and unknown and "unknown Toy flag" in unknown[0]["message"]
    assert unknown[0]["line"] == 10  # the command's line


def test_explain_recognises_a_toy_log(toy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = toy / "toy.log"
    log.write_text("[toy] starting\n[toy] pool: 120000 tokens\n", encoding="utf-8")
    code, out = run(["explain", str(log), "--json"], capsys)
    document = json.loads(out)
    # recognised as the toy's (not "no startup lines found", exit 2), and, as for every engine but vLLM, not
    # reconciled: exit 1, as for an SGLang log
    assert code == 1 and document["log"]["engine"] == "toy"
    assert "this is a Toy log; only vLLM logs are reconciled" in document["notes"]
