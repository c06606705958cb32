"""kvplan simulate's inputs: length distributions, traces (with per-line errors), arrival times on the step
clock, and the command line end to end."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from kvplan.cli.app import main
from kvplan.errors import KvplanError
from kvplan.simulate import traces
from kvplan.simulate.allocators import make_allocator
from kvplan.simulate.distributions import LogNormal, Uniform, Zipf, parse_distribution
from kvplan.simulate.pool import Pool, StepTime
from kvplan.simulate.scheduler import simulate
from kvplan.simulate.sharing import ParallelSamples, Single
from kvplan.simulate.traces import read_trace
from kvplan.simulate.workload import Request, Workload, synthetic

FIXTURES = Path(__file__).parent / "fixtures" / "simulate"


def test_distributions_read_and_describe():
    assert parse_distribution("uniform:200-400", "x") == Uniform(200, 400)
    assert parse_distribution("lognormal:1155,0.5", "x") == LogNormal(1155, 0.5)
    for text in ("fixed:64", "uniform:200-400", "lognormal:1155,0.5", "zipf:1.1,1-900"):
        assert parse_distribution(text, "x").describe() == text


def test_lognormal_mean_is_in_tokens():
    # mu = ln(300) - 0.5^2 / 2 makes the mean 300; the mean of 20,000 draws has a standard error of
    # 300 x sqrt(e^0.25 - 1) / sqrt(20,000) = 1.1 tokens, so 2% (6 tokens) is five standard errors.
    rng = random.Random(7)
    draws = [LogNormal(300, 0.5).sample(rng) for _ in range(20_000)]
    assert abs(sum(draws) / len(draws) - 300) < 6


def test_zipf_favours_short_lengths():
    # theta 1 over 1..2: P(1) = 1 / (1 + 1/2) = 2/3
    rng = random.Random(7)
    draws = [Zipf(1.0, 1, 2).sample(rng) for _ in range(30_000)]
    assert abs(draws.count(1) / len(draws) - 2 / 3) < 0.01


@pytest.mark.parametrize("text", ["uniform:5-3", "fixed:0", "lognormal:300", "zipf:0,1-5", "poisson:3", "fixed:x",
                                  "zipf:1,1-99999999"])
def test_bad_distributions_are_refused(text):
    with pytest.raises(KvplanError, match="--prompt-len"):
        parse_distribution(text, "--prompt-len")


def test_azure_trace():
    workload = read_trace(str(FIXTURES / "azure_conv_head.csv"))
    requests = workload.requests
    # the fixture's 20 rows: ContextTokens sum to 11,540 and GeneratedTokens to 1,674 (summed with awk)
    assert len(requests) == 20
    assert sum(r.prompt for r in requests) == 11_540 and sum(r.output for r in requests) == 1_674
    # first row 18:15:46.6805900, last 18:15:59.7056780: 13.025088 s apart
    assert requests[0].arrival == 0 and requests[-1].arrival == pytest.approx(13.025088, abs=1e-6)
    assert (requests[0].prompt, requests[0].output) == (374, 44)


def test_vidur_and_jsonl_traces():
    vidur = read_trace(str(FIXTURES / "vidur.csv")).requests
    assert [(r.arrival, r.prompt, r.output) for r in vidur] == [(0.0, 100, 20), (0.5, 200, 40), (2.0, 300, 60)]
    jsonl = read_trace(str(FIXTURES / "requests.jsonl")).requests
    assert [r.sharing for r in jsonl] == [ParallelSamples(5), Single(), Single()]
    assert [(r.prefix_id, r.prefix_len) for r in jsonl] == [(None, 0), (0, 1024), (0, 1024)]
    assert jsonl[-1].arrival == 1.5


@pytest.mark.parametrize("content, where, what", [
    ("prompt_len,output_len\n100,20\n200,-4\n", ":3", "output_len must be 0 to"),
    ("prompt_len,output_len\n100,20\n200\n", ":3", "1 fields where the header has 2"),
    ("prompt,out\n1,2\n", ":2", "no known columns"),
    ("prompt_len,output_len\n1.5,2\n", ":2", "whole number"),
    ('{"prompt_len": 10, "output_len": 3}\n[1, 2]\n', ":2", "JSON object"),
    ('{"prompt_len": 10, "output_len": 3}\n{"prompt_len": 10\n', ":2", "not JSON"),
    ('{"prompt_len": 10, "output_len": 3, "n": 2, "beam_width": 2}\n', ":1", "not both"),
    ('{"prompt_len": 10, "output_len": 3, "prefix_id": 1}\n', ":1", "no prefix_len"),
    ("TIMESTAMP,ContextTokens,GeneratedTokens\nyesterday,10,3\n", ":2", "cannot read TIMESTAMP"),
    ("", "", "empty"),
])
def test_bad_trace_lines_are_named(tmp_path, content, where, what):
    path = tmp_path / ("trace.jsonl" if content.startswith("{") else "trace.csv")
    path.write_text(content)
    with pytest.raises(KvplanError) as caught:
        read_trace(str(path))
    assert caught.value.where == f"{path}{where}" and what in caught.value.message


def test_missing_trace():
    with pytest.raises(KvplanError, match="cannot read the trace"):
        read_trace("no-such-trace.csv")


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs /dev/zero")
def test_endless_trace_is_refused_at_the_cap():
    # /dev/zero stats as 0 bytes and never ends: at most MAX_TRACE_BYTES + 1 bytes may be read before the refusal.
    # 1 GiB of address space is room for the capped read (256 MB, and its text) but not for reading on forever.
    def one_gib_of_address_space() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (2**30, 2**30))

    result = subprocess.run([sys.executable, "-m", "kvplan", "simulate", "--model", "Qwen/Qwen2.5-7B", "--gpu",
                             "rtx3090", "--trace", "/dev/zero"], capture_output=True, text=True, timeout=120,
                            preexec_fn=one_gib_of_address_space)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == ("kvplan: error: /dev/zero: the trace is over 256,000,000 bytes, more than the 1,000,000 "
                             "requests simulate plays can fill; cut it to the requests to play\n")


def test_trace_cap_counts_bytes_read(tmp_path, monkeypatch):
    # "prompt_len,output_len\n" (22 B) + "10,3\n" (5 B) = 27 B: read at a cap of 27, refused at 26
    path = tmp_path / "trace.csv"
    path.write_bytes(b"prompt_len,output_len\n10,3\n")
    monkeypatch.setattr(traces, "MAX_TRACE_BYTES", 27)
    assert [(r.prompt, r.output) for r in read_trace(str(path)).requests] == [(10, 3)]
    monkeypatch.setattr(traces, "MAX_TRACE_BYTES", 26)
    with pytest.raises(KvplanError, match="over 26 bytes"):
        read_trace(str(path))


def test_arrivals_on_the_step_clock():
    # Arrivals 10 s apart, a step of 10 ms: each request is alone. One of output O runs O steps (its prefill step
    # samples the first token, O - 1 decode steps follow), idle time runs no steps: 20 + 40 + 60 = 120 steps.
    the_pool = Pool(1000 * 32, 16, 32, 2048, 256, 8192)
    workload = Workload([Request(i, 10.0 * i, 100 * (i + 1), 20 * (i + 1)) for i in range(3)])
    outcome = simulate(workload, the_pool, make_allocator("paged", the_pool), StepTime(10, 0, "test")).to_dict()
    assert outcome["steps"] == 120 and outcome["peak_running"] == 1 and outcome["completed"] == 3
    # all at once instead: they overlap
    together = simulate(workload, the_pool, make_allocator("paged", the_pool)).to_dict()
    assert together["peak_running"] == 3 and together["steps"] == 60


def test_poisson_arrivals_and_clipping():
    # 2,000 arrivals at 5/s: the mean gap is 0.2 s, its standard error 0.2 / sqrt(2,000) = 0.0045 s
    workload = synthetic(2000, parse_distribution("fixed:10", "p"), parse_distribution("fixed:5", "o"), rate=5.0,
                         seed=1)
    gaps = [b.arrival - a.arrival for a, b in zip(workload.requests, workload.requests[1:], strict=False)]
    assert min(gaps) >= 0 and abs(sum(gaps) / len(gaps) - 0.2) < 0.02
    clipped = Workload([Request(0, 0.0, 5000, 100), Request(1, 0.0, 4000, 500)]).clipped(4096)
    assert [(r.prompt, r.output) for r in clipped.requests] == [(4095, 1), (4000, 96)]
    assert clipped.description["clipped_to_max_model_len"] == 2


def cli(capsys, *args):
    code = main(["simulate", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_cli_json(capsys):
    code, out, _ = cli(capsys, "--model", "Qwen/Qwen2.5-7B", "--gpu", "rtx3090", "--max-model-len", "4096",
                       "--requests", "300", "--json")
    assert code == 0
    document = json.loads(out)
    assert {"pool_bytes", "block_size", "workload", "allocators"} <= set(document)
    # Qwen2.5-7B: 2 x 28 layers x 4 KV heads x 128 x 16 tokens x 2 B = 917,504 B a block
    assert document["block_size"] == 16 and document["block_bytes"] == 917_504
    assert document["pool_bytes"] == document["num_blocks"] * 917_504
    assert document["scheduler"]["max_model_len"] == 4096
    keys = {"name", "completed", "steps", "peak_running", "mean_running", "preemptions", "token_states_pct",
            "reserved_pct", "internal_fragmentation_pct", "external_fragmentation_pct", "shared_saved_pct",
            "utilization_pct"}
    assert [a["name"] for a in document["allocators"]] == ["contiguous-max", "contiguous-pow2", "contiguous-oracle",
                                                           "paged"]
    assert all(keys <= set(a) and a["completed"] == 300 for a in document["allocators"])
    assert document["workload"]["requests"] == 300


def test_cli_pasted_command_and_pool_size(capsys):
    code, out, _ = cli(capsys, "--kv-cache-memory", "1GiB", "--requests", "20", "--allocators", "paged", "--json",
                       "--max-num-seqs", "8")
    assert code == 2  # no model
    main_args = ["simulate", "--kv-cache-memory", "1GiB", "--requests", "20", "--allocators", "paged", "--json", "--",
                 "vllm", "serve", "Qwen/Qwen2.5-7B", "--max-model-len", "4096", "--max-num-seqs", "8"]
    assert main(main_args) == 0
    document = json.loads(capsys.readouterr().out)
    # 2^30 B // 917,504 B = 1,170 blocks
    assert document["pool_bytes"] == 2**30 and document["num_blocks"] == 1170
    assert document["scheduler"]["max_num_seqs"] == 8 and document["allocators"][0]["peak_running"] == 8


def test_cli_text_has_table_and_chart(capsys):
    code, out, _ = cli(capsys, "--model", "Qwen/Qwen2.5-7B", "--gpu", "rtx3090", "--max-model-len", "4096",
                       "--requests", "200", "--n", "2")
    assert code == 0
    assert "allocator" in out and "contiguous-oracle" in out and "averaged over the steps in which a request waited" in out
    assert out.count("allocated |") == 4 and out.count("real KV   |") == 4


@pytest.mark.parametrize("args, where", [
    (["--prompt-len", "gauss:3"], "--prompt-len"),
    (["--allocators", "buddy"], "--allocators"),
    (["--n", "2", "--beam-width", "2"], "--beam-width"),
    (["--requests", "0"], "--requests"),
    (["--rate", "-1"], "--rate"),
    (["--step-time", "fast"], "--step-time"),
    (["--trace", str(FIXTURES / "bad_line.csv")], "bad_line.csv:3"),
    (["--plot", "chart.txt"], "--plot"),
    (["--gpu", "h100,rtx3090"], "--gpu"),
    (["--beam-width", "-1"], "error: --beam-width"),
    (["--kv-cache-memory", "1000B"], "error: --kv-cache-memory"),
])
def test_cli_bad_input_is_one_line(capsys, args, where):
    code, out, err = cli(capsys, "--model", "Qwen/Qwen2.5-7B", "--gpu", "rtx3090", *args)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("kvplan: error: ") and where in err


def test_cli_plot_without_matplotlib(tmp_path):
    target = tmp_path / "chart.png"
    probe = ("import sys; sys.modules['matplotlib'] = None\nfrom kvplan.cli.app import main\n"
             "sys.exit(main(['simulate', '--model', 'Qwen/Qwen2.5-7B', '--gpu', 'rtx3090', '--requests', '10', "
             f"'--plot', {str(target)!r}]))")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "matplotlib" in result.stderr and result.stderr.count("\n") == 1
    assert not target.exists()


def test_cli_plot_writes_a_png(tmp_path):
    pytest.importorskip("matplotlib")  # the test extra installs it
    target = tmp_path / "chart.png"
    result = subprocess.run([sys.executable, "-m", "kvplan.cli.app", "simulate", "--model", "Qwen/Qwen2.5-7B",
                             "--gpu", "rtx3090", "--requests", "50", "--plot", str(target)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and target.stat().st_size > 10_000


def test_a_reservation_larger_than_the_pool_is_said_in_words(capsys):
    # contiguous-max reserves max_model_len 4,096 tokens x 57,344 B (Qwen2.5-7B) = 234,881,024 B per request, more
    # than a 200 MiB (209,715,200 B) pool: all 5 requests are turned away, while paging runs them (110 tokens each).
    code, out, _ = cli(capsys, "--model", "Qwen/Qwen2.5-7B", "--gpu", "rtx3090", "--max-model-len", "4096",
                       "--kv-cache-memory", "200MiB", "--requests", "5", "--prompt-len", "fixed:100",
                       "--output-len", "fixed:10", "--allocators", "contiguous-max,paged")
    assert code == 0
    assert "contiguous-max turned away 5 request(s): what it reserves for one is more than the whole pool" in out
    assert "paged turned away" not in out
