"""Round 3, tried as a user: what broke when kvplan was installed from a fresh clone and used from a shell."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

ENV = {**os.environ, "COLUMNS": "120", "NO_COLOR": "1"}


def _closed_pipe_run(args: list[str]) -> subprocess.CompletedProcess[bytes]:
    """python -m kvplan ARGS with stdout a pipe whose reader has already gone (as `| head -1` leaves it once
    head has its line): the first write that reaches the pipe fails with EPIPE."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run([sys.executable, "-m", "kvplan", *args], stdout=write_end, stderr=subprocess.PIPE,
                              env=ENV, timeout=60, check=False)
    finally:
        os.close(write_end)


@pytest.mark.parametrize("args", [["models", "list"], ["--help"], ["estimate", "--help"],
                                  ["estimate", "--model", "Qwen/Qwen2.5-VL-7B-Instruct", "--gpu", "h100"]])
def test_a_closed_pipe_ends_0_without_a_word(args: list[str]) -> None:
    # `kvplan models list | head -1` and `kvplan --help | head -1` ended 1, kvplan's "computed but cannot serve":
    # rich's Console.on_broken_pipe raises SystemExit(1) (rich 15.0.0 console.py), while kvplan's own writes
    # (the estimate's) already ended 0 on a BrokenPipeError
    result = _closed_pipe_run(args)
    assert result.returncode == 0
    assert result.stderr == b""


def test_models_list_to_a_file_is_whole() -> None:
    # the same command not cut short: the table's 97 bundled rows and the closing note, all of them
    result = subprocess.run([sys.executable, "-m", "kvplan", "models", "list"], capture_output=True, env=ENV,
                            timeout=60, check=False)
    assert result.returncode == 0
    text = result.stdout.decode()
    assert "97 model specs" in text  # the title: model_specs/ holds 97 files
    assert sum(line.startswith("│ ") for line in text.splitlines()) == 97
    assert text.rstrip().endswith("($KVPLAN_SPEC_DIR)")  # the note printed after the table, last


def test_check_schema_is_the_same_whatever_the_hash_seed() -> None:
    # The dashed and alias twins of each knob were added by iterating a set of strings, so their order followed
    # PYTHONHASHSEED: two runs of `kvplan check --schema` printed "gpu-memory-bytes" and "gpu-memory" in either
    # order. Now in the order the knob declares them: its dashed name first, then its aliases (x-spellings).
    outputs = []
    for seed in ("1", "2", "3"):
        result = subprocess.run([sys.executable, "-m", "kvplan", "check", "--schema"], capture_output=True,
                                env={**ENV, "PYTHONHASHSEED": seed}, timeout=60, check=False)
        assert result.returncode == 0
        outputs.append(result.stdout)
    assert outputs[0] == outputs[1] == outputs[2]
    properties = json.loads(outputs[0])["properties"]["deployments"]["items"]["properties"]
    names = list(properties)
    # gpu_memory_bytes declares the spellings ["gpu-memory-bytes", "gpu-memory"] (its x-spellings, above)
    assert properties["gpu_memory_bytes"]["x-spellings"][:2] == ["gpu-memory-bytes", "gpu-memory"]
    assert names.index("gpu_memory_bytes") < names.index("gpu-memory-bytes") < names.index("gpu-memory")


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
def test_a_bad_torch_dtype_in_a_vision_config_names_the_file_and_key(tmp_path, capsys, engine: str) -> None:
    # Qwen2.5-VL's bundled config with torch_dtype "float1000": under vLLM the plan stopped at the encoder budget's
    # dtype_bytes and said only "dtype: unknown dtype 'float1000'", with no file named (SGLang and TensorRT-LLM named
    # it, at the weights). Now the config reader refuses it for every engine, naming the file and the key.
    from pathlib import Path

    from kvplan.cli.app import main

    spec = json.loads((Path(__file__).parent.parent / "model_specs" / "Qwen__Qwen2.5-VL-7B-Instruct.json").read_text())
    config = spec["config"]
    config["torch_dtype"] = "float1000"
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    assert main(["estimate", "--model", str(path), "--gpu", "h100", "--engine", engine]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"kvplan: error: {path}: torch_dtype: unknown dtype 'float1000'; known: bfloat16,")


def test_a_qwen_vl_video_at_a_two_billion_token_context_is_counted_at_once(tmp_path, capsys) -> None:
    # Qwen2.5-VL's bundled config with max_position_embeddings 2,147,483,647 and max_pixels 1: the video item's
    # frames were counted one by one up to max_model_len before the 14 taken (qwen2_vl.py _MAX_FRAMES_PER_VIDEO),
    # some 4 G steps: the estimate ran for minutes (killed at 20 s). By hand: max_pixels 1 holds no 28 x 28 merged
    # patch (patch 14 x spatial_merge_size 2), so the grid is 1 token; 14 frames over temporal_patch_size 2 are 7
    # grids: 7 tokens an item, and the encoder's 8,192-token budget takes 8,192 // 7 = 1,170 of them.
    import time
    from pathlib import Path

    from kvplan.cli.app import main

    spec = json.loads((Path(__file__).parent.parent / "model_specs" / "Qwen__Qwen2.5-VL-7B-Instruct.json").read_text())
    config = spec["config"]
    config["max_position_embeddings"] = 2**31 - 1
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    started = time.monotonic()
    code = main(["estimate", "--model", str(path), "--gpu", "h100", "--json", "--mm-processor-kwargs",
                 '{"max_pixels": 1}'])
    assert time.monotonic() - started < 10
    assert code in (0, 1)
    notes = json.loads(capsys.readouterr().out)["notes"]
    assert any("cache budget 8,192 tokens, profiled with 1170 video item(s) of 7 tokens" in note for note in notes)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs Linux's /dev/full (every write: ENOSPC)")
@pytest.mark.parametrize("args", [["gpus"], ["models", "list"],
                                  ["estimate", "--model", "Qwen/Qwen2.5-VL-7B-Instruct", "--gpu", "h100"],
                                  ["estimate", "--model", "Qwen/Qwen2.5-VL-7B-Instruct", "--gpu", "h100", "--json"]])
def test_output_to_a_full_disk_is_one_line_not_a_traceback(args: list[str]) -> None:
    # `kvplan gpus > file` on a full disk printed rich's or print_json's OSError traceback (exit 1); now the
    # one line kvplan gives for what it cannot do, exit 2 (OSError errno 28's strerror, as the C library words it)
    with open("/dev/full", "w") as full:
        result = subprocess.run([sys.executable, "-m", "kvplan", *args], stdout=full, stderr=subprocess.PIPE,
                                env=ENV, timeout=60, check=False)
    assert result.returncode == 2
    assert result.stderr.decode() == "kvplan: error: cannot write the output: No space left on device\n"


def test_a_closed_stdout_keeps_the_exit_code() -> None:
    # started with descriptor 1 closed (`kvplan estimate ... >&-`), sys.stdout is None: the first write raised
    # AttributeError with a traceback. The plan is written nowhere and the exit code stays the plan's: 0, Qwen2.5-7B
    # at its full 131,072 tokens fits on an H100 (README's exit codes: 0 one max_model_len request fits).
    result = subprocess.run([sys.executable, "-m", "kvplan", "estimate", "--model", "Qwen/Qwen2.5-7B", "--gpu",
                             "h100"], stderr=subprocess.PIPE, env=ENV, timeout=60, check=False,
                            preexec_fn=lambda: os.close(1))
    assert result.returncode == 0
    assert result.stderr == b""


@pytest.mark.parametrize(("kwargs", "message"), [
    ('{"max_dynamic_patch": 100000000}', "max_dynamic_patch must be an integer from 1 to 1,000,000, got 100000000"),
    ('{"max_dynamic_patch": 0}', "max_dynamic_patch must be an integer from 1 to 1,000,000, got 0"),
    ('{"max_dynamic_patch": 5000}', "max_dynamic_patch 5,000 is above the 4,096 kvplan plans for"),
])
def test_internvl_tile_counts_out_of_range_say_the_range(capsys, kwargs: str, message: str) -> None:
    # 100,000,000 tiles were refused as 'must be a positive integer', which it is; the message now gives the
    # bound (1,000,000: models/fields.py's bound on a config's image_size, kept for every InternVL integer)
    from pathlib import Path

    from kvplan.cli.app import main

    config = Path(__file__).parent / "fixtures" / "internvl" / "internvl3-8b.json"
    assert main(["estimate", "--model", str(config), "--gpu", "h100", "--mm-processor-kwargs", kwargs]) == 2
    assert capsys.readouterr().err == f"kvplan: error: --mm-processor-kwargs: {message}\n"


def test_explain_from_a_closed_stdin_is_one_line() -> None:
    # `kvplan explain - <&-`: sys.stdin is None and read_source's sys.stdin.buffer raised AttributeError with a
    # traceback; a closed stdin now reads as an empty one, which explain refuses in its one line (exit 2)
    result = subprocess.run([sys.executable, "-m", "kvplan", "explain", "-", "--gpu", "h100"], capture_output=True,
                            env=ENV, timeout=60, check=False, preexec_fn=lambda: os.close(0))
    assert result.returncode == 2
    assert result.stderr.decode() == "kvplan: error: no vLLM / SGLang / TensorRT-LLM startup lines found in stdin\n"


@pytest.mark.parametrize(("model", "kwargs", "unread"), [
    # Gemma 3's processor is planned without pan-and-scan (multimodal.Gemma3 reads no key): both named
    ("google/gemma-3-27b-it", '{"do_pan_and_scan": true, "foo": 1}', "do_pan_and_scan, foo"),
    # Qwen2.5-VL's video is its image grid repeated (QwenVL.video_tokens): videos_kwargs is not read, max_pixels is
    ("Qwen/Qwen2.5-VL-7B-Instruct", '{"max_pixels": 1000000, "videos_kwargs": {"max_pixels": 5}}',
     "videos_kwargs.max_pixels"),
    # Qwen3-VL reads videos_kwargs (Qwen3VL.video_tokens): nothing to name
    ("Qwen/Qwen3-VL-8B-Instruct", '{"max_pixels": 1000000, "videos_kwargs": {"max_pixels": 50000}}', None),
])
def test_mm_processor_kwargs_the_plan_does_not_read_are_named(capsys, model: str, kwargs: str,
                                                              unread: str | None) -> None:
    # vLLM 0.33.0 gemma3_mm.py get_num_crops: do_pan_and_scan gives the profiled image more crops, and kvplan
    # planned the same single image without a word
    from kvplan.cli.app import main

    assert main(["estimate", "--model", model, "--gpu", "h100", "--json", "--mm-processor-kwargs", kwargs]) in (0, 1)
    notes = [n for n in json.loads(capsys.readouterr().out)["notes"] if "not read by kvplan's model" in n]
    if unread is None:
        assert notes == []
    else:
        assert len(notes) == 1
        assert notes[0].startswith(f"--mm-processor-kwargs {unread}: not read by kvplan's model of ")
