"""Issue 20 part 6: check's KV044 says when a LoRA deployment's slots no longer leave one max_model_len request.
Qwen2.5-7B on an H100, 8 slots of rank 64: the A and B buffers are 2 x 1,291,845,632 B = 2,583,691,264 B (2.41 GiB)
of weights by hand (tests/test_lora_issue20.py by_hand(1) is 4 slots). A 131,072-token request needs 131,072 x
57,344 B = 7.00 GiB of KV cache; at utilization 0.34 the pool leaves it room without the slots and not with them."""

from __future__ import annotations

import textwrap

import pytest

from kvplan.check import Options, check_paths

SLOT_BYTES = 2 * 1_291_845_632


def findings(tmp_path, utilization: str, lora: bool = True):
    body = f"""\
    deployments:
      - name: adapters
        model: Qwen/Qwen2.5-7B
        gpu: h100
        max_model_len: 131072
        gpu_memory_utilization: {utilization}
        enable_lora: {str(lora).lower()}
        max_loras: 8
        max_lora_rank: 64
    """
    path = tmp_path / "fleet.yaml"
    path.write_text(textwrap.dedent(body))
    return {f.rule: f for f in check_paths([str(path)], Options()).findings}


@pytest.mark.parametrize(("utilization", "status", "words"), [
    ("0.34", "fail", "fits without them, not with them"),
    ("0.5", "pass", "still fits"),
])
def test_the_rule_weighs_the_slots(tmp_path, utilization, status, words):
    found = findings(tmp_path, utilization)["KV044"]
    assert found.status == status and words in found.message, found.message
    assert f"take {SLOT_BYTES / 2**30:.2f} GiB of weights" in found.message  # 2.41


def test_without_lora_the_rule_does_not_apply(tmp_path):
    assert "KV044" not in findings(tmp_path, "0.34", lora=False)


def test_too_small_even_without_lora_is_kv011s(tmp_path):
    found = findings(tmp_path, "0.30")["KV044"]  # 0.30 x 79.19 GiB = 23.76 GiB: under 7 GiB of KV after the weights
    assert found.status == "skip" and "even without LoRA" in found.message
