"""kvplan size's input: targets, prices (flags and hostile files), the flags it adds, and its exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from kvplan.cli.app import main
from kvplan.errors import KvplanError
from kvplan.sizing.prices import parse_price_flags, read_price_file
from kvplan.sizing.targets import Target, parse_targets


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kvplan.cli.app", "size", *args], capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize(("text", "expected"), [
    ("32@8K", Target(32, 8192)),  # vLLM's human-readable integers: K = 2^10
    ("4@128k", Target(4, 128_000)),  # k = 10^3
    (" 1 @ 32768 ", Target(1, 32768)),
    ("1K@2K", Target(1024, 2048)),
])
def test_targets(text, expected):
    assert parse_targets([text]) == (expected,)


def test_several_targets_by_repeat_or_comma():
    assert parse_targets(["32@8K,4@128K", "1@1K"]) == (Target(32, 8192), Target(4, 131072), Target(1, 1024))


@pytest.mark.parametrize("text", ["32", "@8K", "32@", "0@8K", "32@0", "-1@8K", "x@8K", "32@8K@1", "32@1.5K",
                                  "3000000000@8K", "32@" + "9" * 30, ""])
def test_bad_targets(text):
    with pytest.raises(KvplanError) as error:
        parse_targets([text])
    assert error.value.where == "--target" and "\n" not in str(error.value)


def test_bad_target_on_the_command_line_is_one_line_exit_2():
    started = time.monotonic()
    result = run("-m", "Qwen/Qwen2.5-7B", "--target", "32at8K")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and "--target" in result.stderr and "32@8K" in result.stderr
    assert time.monotonic() - started < 10  # a start-up, not a search (a bound for a loaded CI box, not a timing)


def test_prices_from_flags():
    # ids and aliases resolve to catalogue ids: h100 is the H100 SXM, a100-80gb the A100 80GB SXM
    assert parse_price_flags(["h100=2.9,a100-80gb=1.8", "l40s=$0.9"]) == {"h100-sxm": 2.9, "a100-80gb-sxm": 1.8,
                                                                          "l40s": 0.9}


@pytest.mark.parametrize("text", ["h100", "h100=", "h100=cheap", "h100=-1", "h100=inf", "h100=nan", "h100=1e9",
                                  "nosuchgpu=1", "h100=1,h100-sxm=2", "=2"])
def test_bad_price_flags(text):
    with pytest.raises(KvplanError) as error:
        parse_price_flags([text])
    assert "\n" not in str(error.value)


def test_prices_file(tmp_path):
    path = tmp_path / "prices.yaml"
    path.write_text("h100: 2.9\nl40s: 0.9\n")
    assert read_price_file(str(path)) == {"h100-sxm": 2.9, "l40s": 0.9}


BOMB = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
    f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n"
    for i in range(8))


@pytest.mark.parametrize(("content", "says"), [
    ("h100: 2.9\nh100: 3.1\n", "given twice"),
    ("h100: 2.9\nh100-sxm: 3.1\n", "priced twice"),
    ("h100: true\n", "got bool"),
    ("h100: [1, 2]\n", "got list"),
    ("h100: -3\n", "from 0 to"),
    ("h100: .inf\n", "from 0 to"),
    ("h100: .nan\n", "from 0 to"),
    ("h100: cheap\n", "cannot read"),
    ("nosuchgpu: 1\n", "unknown GPU"),
    ("- h100\n- 2.9\n", "got list"),
    ("", "found 0"),
    ("~\n", "got nothing"),
    ("h100: 1\n---\nl4: 1\n", "one YAML document"),
    ("h100: [unclosed\n", "invalid YAML"),
    ("!!python/object/apply:os.system ['true']\n", "invalid YAML"),
    (BOMB, "expands to more than"),
])
def test_hostile_price_files(tmp_path, content, says):
    path = tmp_path / "prices.yaml"
    path.write_text(content)
    with pytest.raises(KvplanError) as error:
        read_price_file(str(path))
    assert says in str(error.value) and str(path) in str(error.value) and "\n" not in str(error.value)


def test_price_file_too_big_or_not_text(tmp_path):
    big = tmp_path / "big.yaml"
    big.write_text("h100: 2.9\n" + "#" * (2**20 + 10))
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"\xff\xfe\x00\x01")
    for path, says in ((big, "over"), (binary, "not UTF-8"), (tmp_path, "directory"), (tmp_path / "no", "no such")):
        with pytest.raises(KvplanError, match=says):
            read_price_file(str(path))


def test_hostile_price_file_on_the_command_line(tmp_path):
    path = tmp_path / "prices.yaml"
    path.write_text(BOMB)
    result = run("-m", "Qwen/Qwen2.5-7B", "--target", "32@8K", "--prices", str(path), "--json")
    assert result.returncode == 2 and result.stdout == "" and result.stderr.count("\n") == 1
    assert str(path) in result.stderr


def cli(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["size", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize(("args", "says"), [
    (["--target", "1@8K", "--gpus", "h100,nosuch"], "--gpus: unknown GPU 'nosuch'"),
    (["--target", "1@8K", "--gpus", "h100,l4", "--price", "h100=2"], "no price for l4"),
    (["--target", "1@8K", "--price", "h100=2", "--prices", "p.yaml"], "not both"),
    (["--target", "1@8K", "--kv-cache-dtype", "fp7"], "unknown KV cache dtype"),
    (["--target", "1@8K", "--quantization", "gguf"], "weight formats"),
    (["--target", "1@8K", "--max-gpus", "0"], "--max-gpus"),
    (["--target", "1@8K", "--max-gpus", "100000"], "--max-gpus"),
    (["--target", "1@8K", "--engine", "simple"], "simple engine"),
    (["--target", "1@256K"], "greater than the derived max_model_len"),
    (["--target", "1@8K", "--max-model-len", "4096"], "below the largest target context"),
    # vLLM 0.18+ takes any block size a kernel block divides (engines/vllm/blocks.py, issue 18 section 2.10)
    (["--target", "1@8K", "--block-size", "7"], "need a multiple of 16 tokens"),
    (["--target", "1@8K", "-tp", "3"], "must be divisible by tensor parallel size (3)"),
    (["--target", "1@8K", "-tp", "4", "--gpus-per-node", "2"], "within one node"),
    (["--target", "1@8K", "--kv-cache-dtype", "fp8", "--", "vllm", "serve", "Qwen/Qwen2.5-7B", "--kv-cache-dtype",
      "auto"], "fixes the KV cache dtype"),
])
def test_bad_input_is_one_line_exit_2(capsys, args, says):
    with_model = args if "--" in args else ["-m", "Qwen/Qwen2.5-7B", *args]
    code, out, err = cli(capsys, *with_model)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and says in err, err


def test_nothing_fits_exit_1_with_the_closest_and_their_limits(capsys):
    # Llama-3.1-70B (141 GB of bf16 weights) on at most two L4s (22 GiB each): the weights alone do not fit
    code, out, _ = cli(capsys, "-m", "meta-llama/Llama-3.1-70B", "--target", "1@8K", "--gpus", "l4", "--max-gpus",
                       "2", "--json")
    document = json.loads(out)
    assert code == 1 and document["options"] == []
    assert document["closest"][0]["limits"][0].startswith("weights do not fit")
    code, out, _ = cli(capsys, "-m", "meta-llama/Llama-3.1-70B", "--target", "1@8K", "--gpus", "l4", "--max-gpus", "2")
    assert code == 1 and "No deployment searched meets 1 x 8,192 tokens" in out and "weights do not fit" in out


def test_json_document(capsys):
    code, out, _ = cli(capsys, "-m", "Qwen/Qwen2.5-7B", "--target", "32@8K", "--target", "4@32K", "--gpus",
                       "l40s,h100", "--price", "h100=2.9,l40s=0.9", "--json")
    document = json.loads(out)
    assert code == 0
    assert document["target"] == [{"requests": 32, "context": 8192}, {"requests": 4, "context": 32768}]
    assert document["searched"] > 0 and document["options"]
    required = {"gpu", "count", "tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size",
                "kv_cache_dtype", "quantization", "requests", "kv_tokens", "cost_per_hour", "command"}
    for option in document["options"] + document["best_per_gpu"]:
        assert required <= set(option)
        assert option["cost_per_hour"] == pytest.approx({"h100-sxm": 2.9, "l40s": 0.9}[option["gpu"]] * option["count"])
        assert option["command"].startswith("vllm serve Qwen/Qwen2.5-7B ") and "--max-model-len 32768" in option["command"]
    costs = [option["cost_per_hour"] for option in document["options"]]
    assert costs == sorted(costs)


def test_human_output_lists_commands_and_the_count(capsys):
    code, out, _ = cli(capsys, "-m", "Qwen/Qwen2.5-7B", "--target", "32@8K", "--gpus", "l4,h100", "--top", "1")
    assert code == 0
    assert "  1  vllm serve Qwen/Qwen2.5-7B" in out and "Best of each other GPU type" in out
    assert "searched " in out and "candidates" in out


def test_pasted_command_fixes_what_it_names(capsys):
    code, out, _ = cli(capsys, "--target", "16@16K", "--gpus", "h100", "--json", "--", "python", "-m",
                       "sglang.launch_server", "--model-path", "Qwen/Qwen2.5-14B", "--tp-size", "2")
    document = json.loads(out)
    assert code == 0 and document["options"]
    assert all(o["tensor_parallel_size"] == 2 and o["command"].startswith("python -m sglang.launch_server")
               and "--tp-size 2" in o["command"] for o in document["options"])
