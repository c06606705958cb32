"""TensorRT-LLM's knobs on DeepSeek-V4's FP8 context-MLA workspace reserve on SM 90 (tests/test_issue22_trtllm_fp8_sm90.py
has the default case). KvCacheCreator.configure_kv_cache_capacity (_torch/pyexecutor/_util.py@00043967) reserves only
where get_mla_context_workspace_kv_len_cap gives an L_cap: its workspace_can_exceed_profile is
(kv_cache_config.enable_block_reuse and not enable_chunked_prefill) or (enable_chunked_prefill and a workspace the chunk
does not bound); TrtllmAttention.runtime_workspace_is_chunked_prefill_bounded (trtllm.py@017aa0ca) is False for NVFP4
DSA alone, so for DeepSeek-V4 chunked prefill, or block reuse off, leaves no reserve. L_cap is
min(max_batch_size, max_num_tokens) x max_seq_len, or kv_cache_config.fp8_context_mla_kv_len_cap floored at
max_seq_len and capped at that; the reserve is min(w x L_cap, share x w / (k + w)).

By hand, Flash at TP 8 on an H200 with --kv_cache_dtype fp8: w = 8 x (64 + 448 + 512) = 8,192 B a token, k = 322,437
(the issue-22 test). The free memory's share is 116,299,228,988 B (tests/test_trtllm_deepseek_v4.py's BF16 share: the
KV dtype does not change what is used before it; max_seq_len 32,768 leaves it too). The split share x w / (k + w)
reserves 116,299,228,988 - 116,299,228,988 x 322,437 // 330,629 = 116,299,228,988 - 113,417,681,138 = 2,881,547,850 B.
- block reuse off, or chunked prefill on: no reserve, the quota is the share, 116,299,228,988 B;
- max_seq_len 32,768 with fp8_context_mla_kv_len_cap 65,536: L_cap = min(max(65,536, 32,768), 2,048 x 32,768) =
  65,536, w x L_cap = 536,870,912 B < 2,881,547,850: the quota is 116,299,228,988 - 536,870,912 = 115,762,358,076;
- the cap 1,000 is floored at max_seq_len 32,768: 8,192 x 32,768 = 268,435,456 B, quota 116,030,793,532;
- without the cap at 32,768: L_cap = 2,048 x 32,768 = 67,108,864, w x L_cap = 549,755,813,888 B: the split wins,
  113,417,681,138."""

from __future__ import annotations

from pathlib import Path

import pytest

import kvplan
from kvplan.deployment.launch import parse_command
from kvplan.errors import KvplanError

FLASH = Path(__file__).parent / "fixtures" / "configs" / "frontier" / "deepseek-ai__DeepSeek-V4-Flash"
SHARE = 116_299_228_988
W = 8 * (64 + 448 + 512)
SPLIT = SHARE - SHARE * 322_437 // (322_437 + W)


def _kv(**flags) -> tuple[int, str]:
    plan = kvplan.estimate(str(FLASH), gpu="h200", tensor_parallel_size=8, engine="trtllm", kv_cache_dtype="fp8",
                           **flags).to_dict()
    note = next(n for n in plan["notes"] if "KVCacheManagerV2's GPU quota" in n)
    return plan["memory"]["kv_cache_bytes"], note


def test_the_split_by_hand():
    assert (W, SPLIT) == (8_192, 2_881_547_850)
    assert 8_192 * 2_048 * 32_768 == 549_755_813_888 > SPLIT


def test_default_reserves_the_split():
    assert _kv()[0] == SHARE - SPLIT == 113_417_681_138
    assert _kv(max_model_len=32_768)[0] == 113_417_681_138


@pytest.mark.parametrize("flags", [{"enable_prefix_caching": False}, {"enable_chunked_prefill": True}])
def test_block_reuse_off_or_chunked_prefill_reserves_nothing(flags):
    kv, note = _kv(**flags)
    assert kv == SHARE == 116_299_228_988
    assert "reserves no context-MLA workspace" in note
    assert ("without block reuse" in note) if "enable_prefix_caching" in flags else ("chunked prefill bounds" in note)


def test_block_reuse_on_given_is_the_default():
    assert _kv(enable_prefix_caching=True, enable_chunked_prefill=False)[0] == 113_417_681_138


def test_the_cap_override_reserves_w_x_l_cap():
    kv, note = _kv(max_model_len=32_768, fp8_context_mla_kv_len_cap=65_536)
    assert kv == SHARE - 8_192 * 65_536 == 115_762_358_076
    assert "L_cap = 65,536 tokens (fp8_context_mla_kv_len_cap 65,536" in note


def test_the_cap_override_is_floored_at_max_seq_len():
    assert _kv(max_model_len=32_768, fp8_context_mla_kv_len_cap=1_000)[0] == SHARE - 8_192 * 32_768 == 116_030_793_532


def test_a_cap_above_the_worst_case_is_the_default():
    assert _kv(max_model_len=32_768, fp8_context_mla_kv_len_cap=10**12)[0] == 113_417_681_138


def test_the_knobs_from_trtllm_options(tmp_path):
    config = tmp_path / "extra.yaml"
    config.write_text("kv_cache_config:\n  enable_block_reuse: false\n  fp8_context_mla_kv_len_cap: 65536\n"
                      "enable_chunked_prefill: true\n")
    dep = parse_command(["trtllm-serve", str(FLASH), "--config", str(config)]).deployment()
    assert (dep.enable_prefix_caching, dep.enable_chunked_prefill, dep.fp8_context_mla_kv_len_cap) == (False, True,
                                                                                                      65_536)
    assert dep.where("fp8_context_mla_kv_len_cap").endswith("extra.yaml:3: kv_cache_config.fp8_context_mla_kv_len_cap")
    flag = parse_command(["trtllm-serve", str(FLASH), "--enable_chunked_prefill"]).deployment()
    assert flag.enable_chunked_prefill is True


def test_a_bad_cap_is_one_line(tmp_path):
    config = tmp_path / "extra.yaml"
    config.write_text("kv_cache_config:\n  fp8_context_mla_kv_len_cap: many\n")
    with pytest.raises(KvplanError) as error:
        parse_command(["trtllm-serve", str(FLASH), "--config", str(config)]).deployment()
    assert "extra.yaml:2" in str(error.value.where) + str(error.value)


def test_chunked_prefill_elsewhere_stays_a_note():
    # only DeepSeek-V4's workspace reserve reads it; for other models its activation bound is not modelled
    plan = kvplan.estimate("Qwen/Qwen2.5-7B", gpu="h100", engine="trtllm", enable_chunked_prefill=True).to_dict()
    assert any("enable_chunked_prefill is accepted but not modelled here" in n for n in plan["notes"])


def test_the_cap_elsewhere_is_named_as_not_read():
    # only DeepSeek-V4's workspace reserve reads it: given for another model it is said to be unread, not dropped
    plan = kvplan.estimate("Qwen/Qwen2.5-7B", gpu="h100", engine="trtllm", fp8_context_mla_kv_len_cap=65_536).to_dict()
    assert any("fp8_context_mla_kv_len_cap is not read here" in n for n in plan["notes"])
    assert not any("fp8_context_mla_kv_len_cap" in n for n in kvplan.estimate(
        "Qwen/Qwen2.5-7B", gpu="h100", engine="trtllm").to_dict()["notes"])
    # DeepSeek-V4 reads it: no such note
    assert not any("is not read here" in n for n in kvplan.estimate(
        str(FLASH), gpu="h200", tensor_parallel_size=8, engine="trtllm", kv_cache_dtype="fp8", max_model_len=32_768,
        fp8_context_mla_kv_len_cap=65_536).to_dict()["notes"])
