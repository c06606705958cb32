"""Which texts kvplan explain takes for an engine's startup log (the engines' own record formats, not the engines'
names in prose), and what it says of figures no engine prints. Log lines are quoted from tests/fixtures/explain
(sources in SOURCES.md) or rebuilt in the engines' own formats, as each comment says."""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from kvplan.errors import KvplanError
from kvplan.explain import explain, read_log
from kvplan.explain.render import render

ROOT = Path(__file__).parent.parent
LOGS = Path(__file__).parent / "fixtures" / "explain"
NOT_A_LOG = "no vLLM / SGLang / TensorRT-LLM startup lines found in notes.md"
# The engines named in prose, the way a README or a chat message names them.
PROSE = """\
Start the server with `python -m sglang.launch_server --model-path Qwen/Qwen2.5-7B` or `trtllm-serve MODEL`.
SGLang prints 'KV Cache is allocated. #tokens: N' and its server_args=ServerArgs(...); vLLM prints its
non-default args: {...}. The [TensorRT-LLM] logs are noisier; [TRT-LLM] too.
"""


def gemma2(old: str, new: str) -> str:
    text = (LOGS / "gemma-2-9b-h100-v0.19.log").read_text(encoding="utf-8")
    assert old in text
    return text.replace(old, new)


def test_prose_that_names_the_engines_is_no_log():
    with pytest.raises(KvplanError) as caught:
        explain(PROSE, "notes.md")
    assert str(caught.value) == NOT_A_LOG


def test_the_readme_is_one_line_and_exit_2():
    # The project's own README names all three engines and quotes their flags, but holds no log line.
    result = subprocess.run([sys.executable, "-m", "kvplan.cli.app", "explain", "README.md"], capture_output=True,
                            text=True, timeout=120, cwd=ROOT)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == "kvplan: error: no vLLM / SGLang / TensorRT-LLM startup lines found in README.md\n"


@pytest.mark.parametrize("line, engine", [
    # S10 (sglang PR #11309) as printed: "[%(asctime)s{prefix}] %(message)s", the date as %Y-%m-%d %H:%M:%S
    ("[2025-10-07 23:17:19 DP0 TP0] KV Cache is allocated. #tokens: 975424, KV size: 43.67 GB", "sglang"),
    # the same record under the other date formats SGLang releases used (%m-%d %H:%M:%S, %H:%M:%S)
    ("[10-07 23:17:19 TP0] Memory pool end. avail mem=37.71 GB", "sglang"),
    ("[23:17:19 TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=62.9 GB", "sglang"),
    # T06 (TensorRT-LLM docs/source/reference/memory.md): the C++ runtime's "[TensorRT-LLM][INFO] "
    ("[TensorRT-LLM][INFO] Number of blocks in KV cache primary pool: 4060", "trtllm"),
    # the Python logger's "[time] [TRT-LLM] [I] ", and the banner the package prints on import
    ("[06/19/2024-13:00:22] [TRT-LLM] [I] Loading engine from ./plan/visual_encoder.plan", "trtllm"),
    ("[TensorRT-LLM] TensorRT-LLM version: 0.10.0", "trtllm"),
])
def test_engine_records_are_recognised(line, engine):
    assert read_log(line + "\n").engine == engine


@pytest.mark.parametrize("line", [
    "KV Cache is allocated. #tokens: 975424, KV size: 43.67 GB",  # SGLang's message without its stamp
    "[2025-10-07 23:17:19] Deployed with SGLang's server_args defaults",  # a stamp, but no SGLang message
    "The [TensorRT-LLM] runtime printed [INFO] lines",  # the tag, not followed by a level
    "$ python -m sglang.launch_server --model deepseek-ai/DeepSeek-V3.2-Exp --tp 8",  # a command, not its log
    "non-default args: {...}",  # vLLM's phrase with nothing read from it
])
def test_a_mention_is_not_a_record(line):
    assert read_log(line + "\n").engine is None


@pytest.mark.parametrize("printed", ["infx", "9" * 400 + "x", "nanx"])
def test_a_concurrency_no_engine_prints_is_said_to_be_unusable(printed):
    # Gemma-2 (llm-d v0.19.0): "Maximum concurrency for 8,192 tokens per request: 20.60x", with the figure garbled;
    # 400 nines overflow a float to inf. The replay still matches the blocks and tokens the log prints.
    result = explain(gemma2("request: 20.60x", "request: " + printed), "gemma.log")
    assert result.run.first("capacity", "max_concurrency") is None
    assert [check.figure for check in result.checks] == ["num_blocks", "tokens"]
    assert result.exit_code == 0
    text = render(result)
    assert "infx" not in text and "nanx" not in text
    assert "line 19: the logged max concurrency cannot be used" in text
    assert "not in the log: concurrency" not in text


def test_a_concurrency_line_for_zero_tokens_is_said_to_be_no_length():
    result = explain(gemma2("for 8,192 tokens per request", "for 0 tokens per request"), "gemma.log")
    assert "the concurrency line's 0 tokens per request is no request length: it is not used" in result.notes


def test_a_model_with_no_blocks_per_request_has_no_concurrency_to_compare():
    # state-spaces/mamba-2.8b-hf under vLLM's V0 era (v0.6): 64 Mamba layers, no attention, and V0 keeps the states
    # outside the block pool, so a request holds 0 blocks. vLLM's concurrency (blocks / blocks per request) has no
    # value; kvplan says so instead of printing "0.00x" (or "infx"). v0.6.3: the first release whose registry has
    # MambaForCausalLM (vllm-0.6.3 wheel, model_executor/models/registry.py)
    text = gemma2("(v0.19.0)", "(v0.6.3)").replace("version 0.19.0", "version 0.6.3")
    text = text.replace("'max_model_len': 8192", "'max_model_len': 2048").replace("max_seq_len=8192",
                                                                                 "max_seq_len=2048")
    result = explain(text.replace("for 8,192 tokens", "for 2,048 tokens"), "gemma.log",
                     model="state-spaces/mamba-2.8b-hf")
    assert result.replay is not None and result.replay.capacity.blocks_per_request == 0
    assert "max_concurrency" not in [check.figure for check in result.checks]
    assert ("kvplan's model of this deployment holds no KV blocks per request, so it has no max concurrency to set "
            "against the log's 20.6") in result.notes
    assert "0.00x" not in render(result)


def test_a_utilization_beyond_one_makes_no_budget():
    # V0 (vllm#10517 C02) prints no budget line: kvplan derives it as total x utilization, but only from a
    # utilization an engine accepts; 1e308 would make it infinite.
    text = (LOGS / "v0.6-llama-3.1-8b-rtx3090-20k-c02.log").read_text(encoding="utf-8")
    assert "gpu_memory_utilization=0.90" in text
    run = read_log(text.replace("gpu_memory_utilization=0.90", "gpu_memory_utilization=" + "9" * 400))
    assert run.first("memory", "budget_bytes") is None
    assert read_log(text).first("memory", "budget_bytes") == int(round(23.58 * 2**30) * 0.90)


def test_a_flag_beyond_64_bits_is_noted_not_a_traceback():
    result = explain(gemma2("'max_model_len': 8192", "'max_model_len': " + "9" * 400), "gemma.log")
    assert any("max_model_len: 99999999999999999999... is beyond any engine's 64-bit integers" in note
               for note in result.notes)


def test_garbled_literals_print_no_python_warning():
    # "1if 1else 2" makes Python's parser warn (SyntaxWarning: invalid decimal literal) on stderr before it fails.
    line = "(APIServer pid=1) INFO 04-22 15:56:27 [utils.py:233] non-default args: {'max_num_seqs': 1if 1else 2}\n"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        read_log(line)
    assert [str(w.message) for w in caught if issubclass(w.category, SyntaxWarning)] == []


def test_notes_name_the_file_line_in_crlf_files_and_under_progress_bars():
    # The Gemma-2 log as stored: lines 2-5 end in CRLF and line 20 is a progress bar redrawn with carriage returns.
    # Its concurrency line is line 19 of the file, whatever the line ends (the CLI reads the bytes as they are).
    raw = (LOGS / "gemma-2-9b-h100-v0.19.log").read_bytes().decode("utf-8")
    assert raw.count("\r\n") == 4 and "request: 20.60x" in raw.splitlines()[18]
    result = explain(raw.replace("request: 20.60x", "request: infx"), "gemma.log")
    assert any(note.startswith("line 19: the logged max concurrency") for note in result.run.notes)
