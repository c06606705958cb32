"""Issue 19: --no-enable-chunked-prefill is read as vLLM reads it (a knob, not an ignored flag)."""

from __future__ import annotations

import json

import pytest
from conftest import run_cli as run

pytestmark = pytest.mark.usefixtures("cli_offline")


def test_no_chunked_prefill_raises_the_batched_tokens_or_is_refused(capsys):
    # vLLM 0.33 EngineArgs: with chunked prefill off, an unset max_num_batched_tokens becomes max_model_len
    _, out, _ = run(capsys, "estimate", "--model", "Qwen/Qwen2.5-7B", "--gpu", "h100", "--max-model-len", "32768",
                    "--no-enable-chunked-prefill", "--json")
    assert json.loads(out)["engine"]["max_num_batched_tokens"] == 32768  # 8,192 with it on (the H100 tier)
    code, _, err = run(capsys, "estimate", "--model", "Qwen/Qwen2.5-7B", "--gpu", "h100", "--max-model-len", "32768",
                       "--no-enable-chunked-prefill", "--max-num-batched-tokens", "4096")
    assert code == 2 and "max_num_batched_tokens (4096) is smaller than max_model_len (32768)" in err
