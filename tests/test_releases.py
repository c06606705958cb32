"""Releases as an axis of their own: every engine takes --engine-version within the releases its table covers and
refuses others with the range, defaults to the newest covered (the newest on PyPI when the tables were written:
`pip index versions` on 2026-12-01 listed vllm 0.33.0, sglang 0.5.23, tensorrt-llm 1.2.1), says which in the
panel, and reads the release a pinned server image runs."""

from __future__ import annotations

import json

import pytest

from kvplan import registry
from kvplan.cli.app import main


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize(("engine", "newest"), [("vllm", "0.33.0"), ("sglang", "0.5.23"), ("trtllm", "1.2.1")])
def test_the_default_is_the_newest_release(engine: str, newest: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["estimate", "--model", "Qwen/Qwen2.5-7B", "--gpu", "h100", "--engine", engine, "--json"],
                       capsys)
    assert code == 0 and json.loads(out)["engine"]["version"] == newest
    code, out, _ = run(["estimate", "--model", "Qwen/Qwen2.5-7B", "--gpu", "h100", "--engine", engine], capsys)
    assert f"{engine} {newest} ·" in out.splitlines()[0]  # the panel's header says which release


@pytest.mark.parametrize(("engine", "version", "message"), [
    ("vllm", "99.0", "vLLM 99.0 is not a release kvplan knows: it covers 0.6.0 to 0.33.0"),
    ("vllm", "0.1", "vLLM 0.1 is not a release kvplan knows: it covers 0.6.0 to 0.33.0"),
    ("vllm", "0.20.9", "vLLM 0.20.9 is not a release kvplan knows"),  # 0.20 had .0, .1 and .2 only
    ("sglang", "0.1", "SGLang 0.1 is not a release kvplan knows: it covers 0.4.6 to 0.5.23"),
    ("trtllm", "0.21.0", "TensorRT-LLM 0.21.0 is not a release kvplan knows: it covers 1.2.0 to 1.2.1"),
    ("simple", "1.0", "The engine has no releases"),
    ("vllm", "next", "cannot read 'next' as a vLLM release"),
])
def test_an_unknown_release_is_refused_with_the_range(engine: str, version: str, message: str,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["estimate", "--model", "Qwen/Qwen2.5-7B", "--gpu", "h100", "--engine", engine,
                          "--engine-version", version], capsys)
    assert code == 2 and out == "" and message in err and len(err.strip().splitlines()) == 1


def test_a_minor_release_stands_for_its_patches(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["estimate", "--model", "Qwen/Qwen2.5-7B", "--gpu", "h100", "--engine", "sglang",
                        "--engine-version", "0.5", "--json"], capsys)
    assert code == 0 and json.loads(out)["engine"]["version"] == "0.5"


@pytest.mark.parametrize(("command", "release", "era"), [
    # vLLM's image tags are its releases; v0.11.0 plans with the v0.8-v0.16 accounting (releases.py ERAS)
    (["docker", "run", "--gpus", "all", "vllm/vllm-openai:v0.11.0", "--model", "Qwen/Qwen2.5-7B",
      "--max-model-len", "8192"], "0.11.0", "vLLM accounting era: V1, v0.8-v0.16"),
    (["docker", "run", "lmsysorg/sglang:v0.5.4", "python3", "-m", "sglang.launch_server", "--model-path",
      "Qwen/Qwen2.5-7B"], "0.5.4", None),
])
def test_a_pinned_image_names_the_release(command: list[str], release: str, era: str | None,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["estimate", "--gpu", "h100", "--json", "--", *command], capsys)
    plan = json.loads(out)
    assert code == 0 and plan["engine"]["version"] == release
    assert era is None or era in plan["notes"]


def test_a_floating_image_and_an_explicit_version(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["estimate", "--gpu", "h100", "--json", "--", "docker", "run", "vllm/vllm-openai:latest",
                        "--model", "Qwen/Qwen2.5-7B"], capsys)
    assert code == 0 and json.loads(out)["engine"]["version"] == "0.33.0"
    # kvplan's own --engine-version wins over the tag
    code, out, _ = run(["estimate", "--gpu", "h100", "--engine-version", "0.20", "--json", "--", "docker", "run",
                        "vllm/vllm-openai:v0.11.0", "--model", "Qwen/Qwen2.5-7B"], capsys)
    assert code == 0 and json.loads(out)["engine"]["version"] == "0.20"


def test_each_table_is_ordered_and_its_changes_fall_inside_it() -> None:
    for name in registry.names():
        releases = registry.releases(name)
        if releases is None:
            continue
        parts = [tuple(int(p) for p in release.split(".")) for release in releases.covered]
        assert parts == sorted(parts) and len(set(parts)) == len(parts), name
        for change in releases.changes:
            assert parts[0][:len(change.release)] <= change.release <= parts[-1][:len(change.release)], (name, change)
