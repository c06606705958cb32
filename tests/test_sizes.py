"""Sizes on the command line: vLLM's reading of one-letter suffixes, GB and GiB spelled out, and bare numbers that
are too small to be meant as bytes."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kvplan.errors import KvplanError
from kvplan.units import parse_size


@pytest.mark.parametrize(("text", "size"), [
    # vLLM's human_readable_int (vllm/engine/arg_utils.py, the type of --kv-cache-memory-bytes): an uppercase
    # suffix is binary, a lowercase one decimal
    ("24G", 24 * 1_073_741_824),  # 25,769,803,776
    ("24g", 24_000_000_000),
    ("512M", 512 * 1_048_576),  # 536,870,912
    ("512m", 512_000_000),
    ("2T", 2 * 1_099_511_627_776),
    ("25.6g", 25_600_000_000),  # decimals are allowed with the decimal suffixes
    # spelled-out units, in any case
    ("24GB", 24_000_000_000),
    ("24gb", 24_000_000_000),
    ("24GiB", 25_769_803_776),
    ("24gib", 25_769_803_776),
    ("1.5GiB", 1_610_612_736),  # 1.5 x 1,073,741,824
    ("80 GB", 80_000_000_000),
    ("4096MiB", 4_294_967_296),
    # bytes: a bare number of at least 1 MiB, with or without underscores; an explicit B; zero
    ("25769803776", 25_769_803_776),
    ("1_048_576", 1_048_576),
    ("24B", 24),
    ("0", 0),
])
def test_sizes(text, size):
    assert parse_size(text, "--gpu-memory") == size


@pytest.mark.parametrize(("text", "message"), [
    ("24", "--gpu-memory: '24' has no unit, so it would be 24 bytes; did you mean 24GiB?"),
    ("1048575", "so it would be 1,048,575 bytes; did you mean 1048575GiB?"),  # one byte under 1 MiB
    ("24.5", "'24.5' has no unit, and a byte count is a whole number; did you mean 24.5GiB?"),
    ("24.5G", "vLLM refuses a decimal number with the binary suffix G; write 24.5GiB or 24.5g"),
    ("24 parsecs", "unknown unit 'parsecs'"),
    ("-5GB", "cannot read '-5GB' as a size"),
    ("", "cannot read '' as a size"),
    ("1025TiB", "more than 1,024 TiB"),
    ("9" * 5000, "is more than 1,024 TiB"),
])
def test_refused_sizes(text, message):
    with pytest.raises(KvplanError) as caught:
        parse_size(text, "--gpu-memory")
    assert message in str(caught.value) and str(caught.value).startswith("--gpu-memory: ")
    assert len(str(caught.value)) < 200  # a 5000-digit input is not echoed back whole


def test_error_names_the_flag():
    result = subprocess.run([sys.executable, "-m", "kvplan.cli.app", "estimate", "--model", "Qwen/Qwen2.5-7B",
                             "--gpu-memory", "24"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert result.stderr == "kvplan: error: --gpu-memory: '24' has no unit, so it would be 24 bytes; did you mean 24GiB?\n"


def test_the_limit_is_said_in_a_unit_kvplan_reads():
    # 2^50 B is the most a size may be: the message names it in TiB, so the limit itself can be typed back
    assert parse_size("1024TiB", "--gpu-memory") == 2**50
    with pytest.raises(KvplanError) as caught:
        parse_size("1125899906842625", "--gpu-memory")  # 2^50 + 1 B
    limit = str(caught.value).split("more than ")[1].split(";")[0]
    assert limit == "1,024 TiB" and parse_size(limit.replace(",", "").replace(" ", ""), "size") == 2**50
