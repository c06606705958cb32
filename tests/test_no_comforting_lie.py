"""Issue 19, "no door tells a comforting lie": each bullet as a user meets it, with the figure it must give.
Each test fails with its fix taken out (checked once by hand)."""

from __future__ import annotations

import json

import pytest
from conftest import run_cli as run

from kvplan.cli.app import main

pytestmark = pytest.mark.usefixtures("cli_offline")


def test_a_kv_size_larger_than_the_gpu_offers_a_smaller_one_and_no_longest_fit(capsys):
    # Qwen2.5-7B on an RTX 3090 (23.56 GiB): 40 GiB of KV beside 14.22 GiB of weights cannot be allocated
    code, out, _ = run(capsys, "estimate", "--model", "Qwen/Qwen2.5-7B", "--gpu", "rtx3090",
                       "--kv-cache-memory-bytes", "40GiB", "--json")
    plan = json.loads(out)
    assert plan["capacity"]["max_model_len_that_fits"] == 0  # was 131,072
    flags = [lever["flags"] for lever in plan["levers"]]
    assert "--max-model-len 131072" not in flags  # the current max_model_len is no change
    # the size vLLM profiles itself at utilization 0.92 for this deployment, in whole MiB: 5,982 MiB = 6,272,581,632 B
    # (tests/test_cli.py's pool, 6,272,962,063 B, floored)
    assert "--kv-cache-memory-bytes 6272581632" in flags
    _, out, _ = run(capsys, "estimate", "--model", "Qwen/Qwen2.5-7B", "--gpu", "rtx3090", "--kv-cache-memory-bytes",
                    "40GiB")
    assert "longest fit  none: no request fits" in out


def test_explain_names_no_term_that_prints_as_zero():
    from kvplan.explain.reconcile import Explanation, Term
    from kvplan.explain.record import LoggedRun
    from kvplan.explain.render import verdict
    from kvplan.units import GiB

    gap = int(-0.05 * GiB)
    terms = [Term("kv_cache", 50 * GiB, 50 * GiB + gap, 0),
             Term("weights", 10 * GiB, 10 * GiB + int(0.003 * GiB), -1)]  # prints "+0.00"
    explanation = Explanation(LoggedRun(), "log", terms=terms)
    assert explanation.explained_by is None  # was "weights"
    assert verdict(explanation)[0] == ("From scratch kvplan's KV cache is -0.05 GiB from the log's; the terms the "
                                       "log prints do not account for it.")


def test_explain_without_a_readable_model_says_why_not_see_the_notes(capsys, tmp_path):
    from pathlib import Path

    log = (Path(__file__).parent / "fixtures" / "explain" / "gemma-2-9b-h100-v0.19.log").read_text()
    path = tmp_path / "local.log"
    path.write_text(log.replace("google/gemma-2-9b-it", "/models/gemma"))
    code, out, _ = run(capsys, "explain", str(path), "--gpu", "h100")
    assert code == 1 and "notes:" not in out and "(see the notes)" not in out
    assert "Replay: not possible without the model's config (see model: above); pass --model" in out


def test_a_draft_models_formula_adds_up_with_its_own_heads(capsys):
    # Llama-3.1-8B (32 layers, 8 KV heads x 128) with Llama-3.2-1B as its draft (16 layers, 8 x 64), TP 2:
    # 2 x 32 x 4 x 128 x 16 x 2 = 1,048,576 B plus 2 x 16 x 4 x 64 x 16 x 2 = 262,144 B: 1,310,720 B a block
    _, out, _ = run(capsys, "estimate", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "h100", "-tp", "2",
                    "--max-model-len", "8192", "--speculative-config",
                    '{"model":"meta-llama/Llama-3.2-1B-Instruct","num_speculative_tokens":3}')
    text = " ".join(line.strip("│ ") for line in out.splitlines())
    assert ("block bytes = (2 x 32 layers x 4 KV heads x 128 head dim x 16 tokens x 2 B = 1,048,576 B) + (2 x 16 "
            "layers x 4 KV heads x 64 head dim x 16 tokens x 2 B = 262,144 B) = 1,310,720 B") in " ".join(text.split())


def test_fp8_below_its_minimum_capability_is_refused_by_release(capsys):
    # Fp8Config.get_min_capability: 80 in vLLM 0.13.0, 75 from 0.14.0; the T4 is 7.5
    code, _, err = run(capsys, "estimate", "--model", "Qwen/Qwen2.5-7B", "--gpu", "t4", "-q", "fp8",
                       "--max-model-len", "4096", "--vllm-version", "0.13")
    assert code == 2 and "Minimum capability: 80. Current capability: 75." in err
    assert run(capsys, "estimate", "--model", "Qwen/Qwen2.5-7B", "--gpu", "t4", "-q", "fp8", "--max-model-len",
               "4096", "--vllm-version", "0.14")[0] == 0


def test_awq_on_a_checkpoint_that_is_not_awq_is_refused_and_size_prints_no_such_line(capsys):
    code, _, err = run(capsys, "estimate", "--model", "Qwen/Qwen2.5-7B", "--gpu", "h100", "-q", "awq")
    assert code == 2 and "Cannot find the config file for awq" in err
    from kvplan import size

    sizing = size("Qwen/Qwen2.5-7B", "1@4K", gpus="t4", max_gpus=1, quantization="awq")
    assert sizing.options and all("--quantization" not in o.command() for o in sizing.options)
    assert sizing.options[0].command() == "vllm serve '<AWQ-checkpoint-of-Qwen/Qwen2.5-7B>' --max-model-len 4096"


def test_the_header_counts_data_parallel(capsys):
    _, out, _ = run(capsys, "estimate", "--model", "Qwen/Qwen2.5-7B", "--gpu", "h200", "-dp", "8")
    assert "8x NVIDIA H200 · vllm 0.33.0 · TP 1 PP 1 DP 8" in out.splitlines()[0]


def test_sglang_hint_uses_sglangs_knob_names(tmp_path):
    from kvplan.check import Options, check_paths

    path = tmp_path / "d.yaml"
    # an RTX 4090 (SGLang 0.5.23's fraction 0.704 leaves 1.26 GiB of KV cache: an L4's 22.5 GiB now leaves none)
    path.write_text("deployments:\n  - name: long\n    engine: sglang\n    model: meta-llama/Llama-3.1-8B\n"
                    "    gpu: rtx4090\n    max_model_len: 131072\n")
    found = [f for f in check_paths([str(path)], Options()).findings if f.rule == "KV011"]
    assert found and found[0].status == "fail"
    assert found[0].message.endswith("(fix: lower --context-length to the estimated maximum the message quotes, or "
                                     "raise --mem-fraction-static)")


def test_importing_a_bundled_id_is_refused_without_force(capsys, tmp_path, monkeypatch):
    from pathlib import Path

    monkeypatch.setenv("KVPLAN_SPEC_DIR", str(tmp_path / "specs"))
    config = Path(__file__).parent / "fixtures" / "check" / "qwen2.5-7b"
    code, _, err = run(capsys, "models", "import", str(config), "--id", "Qwen/Qwen2.5-7B")
    assert code == 2 and "is a bundled spec's id" in err and not (tmp_path / "specs").exists()
    code, out, _ = run(capsys, "models", "import", str(config), "--id", "Qwen/Qwen2.5-7B", "--force")
    assert code == 0 and "overrides the bundled spec" in " ".join(out.split())


def test_an_empty_select_is_refused(capsys):
    code, _, err = run(capsys, "check", "--select", "", "examples/")
    assert code == 2 and "--select: no rule ids given" in err


def test_check_help_has_balanced_unnested_parentheses(capsys):
    run(capsys, "check", "--help")
    main(["check", "--help"])
    text = capsys.readouterr().out
    depth = 0
    for char in text:
        depth += {"(": 1, ")": -1}.get(char, 0)
        assert 0 <= depth <= 1, text
    assert depth == 0
    from kvplan.check.kinds import kinds

    flat = " ".join(text.split())
    assert all(kind.name in flat for kind in kinds())
