"""kvplan explain as a user runs it: real subprocesses, exit codes 0 / 1 / 2, the table, JSON, stdin."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

LOGS = Path(__file__).parent / "fixtures" / "explain"
GEMMA2 = str(LOGS / "gemma-2-9b-h100-v0.19.log")


def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kvplan.cli.app", "explain", *args], capture_output=True,
                          text=True, timeout=120, input=stdin)


def test_table_for_a_log_that_replays():
    # gemma-2-9b on an H100, vLLM 0.19.0 (llm-d-planner): the figures of the log, and the replay that matches.
    result = run(GEMMA2)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "google/gemma-2-9b-it · vLLM 0.19.0 (V1 engine)" in out
    assert "54.12" in out and "17.22" in out and "21,110" in out and "168,880" in out and "20.60x" in out
    assert "kvplan gives vLLM's figures to the block" in out
    assert "the term that explains it: budget (x utilization)" in out


def test_json_document():
    result = run(GEMMA2, "--json")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    log = document["log"]
    assert (log["engine"], log["version"], log["model"]) == ("vllm", "0.19.0", "google/gemma-2-9b-it")
    assert log["flags"]["max_model_len"] == 8192 and log["flags"]["tensor_parallel_size"] == 1
    assert log["memory"]["kv_cache_bytes"] == round(54.12 * 2**30)
    assert log["capacity"] == {"tokens": 168_880, "max_concurrency": 20.6, "concurrency_context": 8192,
                               "block_size": None, "num_blocks": 21_110, "padding_layers": None,
                               "mamba_padding_percent": None}
    # the replay is the estimate JSON with the logged KV memory; the scratch one is a full prediction
    assert document["replay"]["memory"]["kv_cache_bytes"] == round(54.12 * 2**30)
    assert document["scratch"]["gpu"]["id"] == "h100-sxm"
    assert {t["term"] for t in document["terms"]} == {"total", "budget", "weights", "activation", "non_torch",
                                                      "cuda_graphs", "kv_cache"}
    assert document["verdict"]["replay_matches"] is True


def test_stdin_and_unresolved_model():
    # Y03 names a local path that does not exist here: everything read is printed, the model problem is said,
    # and the exit code is 1 (not explained), not 2 (the log itself was readable).
    result = run("-", "--json", stdin=(LOGS / "qwen3.6-27b-hybrid-tp2-y03.log").read_text(encoding="utf-8"))
    assert result.returncode == 1, result.stderr
    document = json.loads(result.stdout)
    assert document["source"] == "stdin"
    assert document["model"]["error"] and "--model" in document["model"]["error"]
    assert document["log"]["capacity"]["tokens"] == 289_661 and document["replay"] is None
    table = run("-", stdin=(LOGS / "qwen3.6-27b-hybrid-tp2-y03.log").read_text(encoding="utf-8"))
    assert table.returncode == 1 and "tokens 289,661" in table.stdout and "no such file" in table.stdout


def test_model_option_replaces_the_logged_model():
    # vllm#10517 names no model in its log lines; the comment says meta-llama/Llama-3.1-8B-Instruct on an RTX 3090.
    log = str(LOGS / "v0.6-llama-3.1-8b-rtx3090-20k-c02.log")
    assert run(log).returncode == 1
    result = run(log, "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "rtx3090")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1,952" in result.stdout and "1.56x" in result.stdout


def test_sglang_log_is_recognised():
    result = run(str(LOGS / "sglang-deepseek-v3.2-s10.log"))
    assert result.returncode == 1
    assert "only vLLM logs are reconciled" in result.stdout


@pytest.mark.parametrize("args, message", [
    (["no-such.log"], "cannot read the log"),
    ([str(LOGS)], "cannot read the log"),  # a directory
    (["PROSE"], "no vLLM / SGLang / TensorRT-LLM startup lines found in"),  # a file that is no log at all
    ([GEMMA2, "--gpu", "h1000"], "unknown GPU"),
])
def test_bad_input_is_one_line_and_exit_2(args, message, tmp_path):
    prose = tmp_path / "notes.txt"
    prose.write_text("We restarted the server on Tuesday; it was slow.\n", encoding="utf-8")
    result = run(*[str(prose) if arg == "PROSE" else arg for arg in args])
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in result.stderr


def test_empty_stdin_is_exit_2():
    result = run("-", stdin="")
    assert result.returncode == 2 and "no vLLM / SGLang / TensorRT-LLM startup lines found in stdin" in result.stderr


def test_explain_takes_no_pasted_command():
    result = subprocess.run([sys.executable, "-m", "kvplan.cli.app", "explain", GEMMA2, "--", "vllm", "serve", "x"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "launch command" in result.stderr


def test_a_model_the_user_names_that_cannot_be_read_is_their_error(tmp_path):
    broken = tmp_path / "config.json"
    broken.write_text("not json")
    result = run(GEMMA2, "--model", str(broken))
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith(f"kvplan: error: --model {broken}: invalid JSON") and result.stderr.count("\n") == 1
