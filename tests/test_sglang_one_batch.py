"""A pasted `python -m sglang.bench_one_batch ...` (0.5.23: sglang.benchmark.one_batch) is SGLang's launcher:
benchmark/one_batch.py cli_main parses ServerArgs and BenchArgs on one parser and load_model builds the server's
ModelRunner (alloc_memory_pool) from the ServerArgs, so those are read as a launch_server line's; BenchArgs
(--batch-size, --input-len, --output-len, --profile, ...) size no pool and are passed over with a note."""

from __future__ import annotations

import pytest

from kvplan.deployment.launch import parse_command
from kvplan.errors import KvplanError

# the usage line of SGLang 0.5.23 benchmark/one_batch.py's docstring, with two ServerArgs flags added
LINE = ("python -m {module} --model-path meta-llama/Meta-Llama-3-8B-Instruct --batch-size 1 12 14 "
        "--input-len 256 512 --output-len 32 256 --run-name test_run --mem-fraction-static 0.8 --tp-size 2 "
        "--profile")


@pytest.mark.parametrize("module", ["sglang.bench_one_batch", "sglang.benchmark.one_batch"])
def test_the_server_flags_are_read_and_the_benchmarks_passed_over(module):
    draft = parse_command(LINE.format(module=module))
    dep = draft.deployment()
    assert dep.engine == "sglang"
    assert (dep.model, dep.gpu_memory_utilization, dep.tensor_parallel_size) == (
        "meta-llama/Meta-Llama-3-8B-Instruct", 0.8, 2)
    note = next(n for n in draft.notes if n.startswith(f"python -m {module}: its own flags"))
    assert "--batch-size, --input-len, --output-len, --run-name, --profile are passed over" in note
    assert ("0.5.23 ships it as sglang.benchmark.one_batch" in note) == (module == "sglang.bench_one_batch")


def test_a_flag_neither_takes_is_still_refused():
    with pytest.raises(KvplanError, match="--batch-sizes: unknown SGLang flag"):
        parse_command("python -m sglang.bench_one_batch --model-path m --batch-sizes 4")


def test_an_equals_value_and_no_benchmark_flag():
    draft = parse_command("python -m sglang.benchmark.one_batch --model-path m --batch-size=8 --context-length 4096")
    assert draft.deployment().max_model_len == 4096
    assert any("its own flags --batch-size are passed over" in n for n in draft.notes)
    plain = parse_command("python -m sglang.benchmark.one_batch --model-path m")
    assert not any("its own flags" in n for n in plain.notes)
