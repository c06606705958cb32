"""Parameter counts from the config against published exact counts (configs/INDEX.md in the kvplan
reference set: safetensors index totals and the Hub API's safetensors.total)."""

from __future__ import annotations

import pytest
from conftest import load_fixture

PUBLISHED = {
    "Qwen__Qwen2.5-0.5B-Instruct__resaved-tf4.49.json": 494_032_768,
    "Qwen__Qwen2.5-3B.json": 3_085_938_688,
    "Qwen__Qwen2.5-7B.json": 7_615_616_512,
    "Qwen__Qwen2.5-7B-Instruct.json": 7_615_616_512,
    "Qwen__Qwen2.5-32B.json": 32_763_876_352,
    "Qwen__Qwen3-8B.json": 8_190_735_360,
    "meta-llama__Llama-3.1-8B.json": 8_030_261_248,
    "meta-llama__Meta-Llama-3-8B.json": 8_030_261_248,
    "meta-llama__Llama-3.1-70B.json": 70_553_706_496,
    "meta-llama__Meta-Llama-3-70B.json": 70_553_706_496,
    "meta-llama__Llama-3.2-1B-Instruct.json": 1_235_814_400,
    "meta-llama__Llama-3.2-3B-Instruct.json": 3_212_749_824,
    "mistralai__Mistral-7B-v0.1.json": 7_241_732_096,
    "mistralai__Mixtral-8x7B-v0.1.json": 46_702_792_704,
    "google__gemma-2-9b-it.json": 9_241_705_984,
    "google__gemma-3-1b-it.json": 999_885_952,
    "microsoft__Phi-3-mini-4k-instruct.json": 3_821_079_552,
    "deepseek-ai__DeepSeek-V2-Lite.json": 15_706_484_224,
    "bigscience__bloom.json": 176_247_271_424,
}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_published_count(name):
    params = load_fixture(name).params
    assert params.total == PUBLISHED[name]
    assert params.exact


def test_llama2_7b_differs_only_by_stored_rotary_buffers():
    # INDEX.md: the checkpoint's 6,738,417,664 includes 32 layers x 64 inv_freq buffers = 2,048 non-parameters.
    assert load_fixture("meta-llama__Llama-2-7b-hf.json").params.total == 6_738_417_664 - 32 * 64


def test_qwen3_moe_count():
    # Qwen3-30B-A3B, by hand: per layer q 2048x4096 + k,v 2 x 2048x512 + o 4096x2048 + q/k norm 2x128
    # + experts 128 x 3 x 2048 x 768 + router 2048x128 + 2 norms x 2048 = 623,120,640; x 48 = 29,909,790,720;
    # + untied embeddings 2 x 151936 x 2048 = 622,329,856 + final norm 2048 = 30,532,122,624.
    params = load_fixture("Qwen__Qwen3-30B-A3B.json").params
    assert params.total == 30_532_122_624
    assert params.experts == 48 * 128 * 3 * 2048 * 768


def test_multimodal_counts_keep_the_vision_tower():
    # gemma-3-27b-it: text 27,009,346,304 + SigLIP tower and projector 423,060,336 = 27,432,406,640,
    # the published total of google/gemma-3-27b-it.
    spec = load_fixture("google__gemma-3-27b-it.json")
    assert spec.params.vision == 423_060_336
    assert spec.params.total == 27_432_406_640
    # Qwen2.5-VL keeps its vision tower in the count too (estimated, so not exact)
    vl = load_fixture("Qwen__Qwen2.5-VL-7B-Instruct.json")
    assert vl.params.vision > 0 and not vl.params.exact


def test_unverified_families_say_so():
    for name in ("facebook__opt-1.3b.json", "mosaicml__mpt-7b-instruct__resaved.json", "openai__gpt-oss-20b.json",
                 "state-spaces__mamba-2.8b-hf.json", "tiiuae__falcon-7b-instruct.json"):
        spec = load_fixture(name)
        assert not spec.params.exact
        assert any("not checked" in note for note in spec.notes)


def test_gpt_oss_logical_count():
    # OpenAI's model card gives 20.91B total for gpt-oss-20b; derived: attention with biases and sinks
    # 26,550,144 + experts (with biases) 796,538,880 + router 92,192 + norms 5,760 = 823,186,976 per layer,
    # x 24 + untied embeddings 2 x 201,088 x 2,880 + final norm 2,880 = 20,914,757,184.
    assert load_fixture("openai__gpt-oss-20b.json").params.total == 20_914_757_184


def test_gpt2_small():
    # GPT-2 small's published 124,439,808 (the Hub's safetensors count for openai-community/gpt2):
    # wte 50,257 x 768 + wpe 1,024 x 768 + 12 x (c_attn 768 x 2,304 + 2,304 + c_proj 768^2 + 768
    # + mlp 2 x 768 x 3,072 + 3,072 + 768 + 2 LayerNorms x 1,536) + final LayerNorm 1,536; lm_head tied.
    assert load_fixture("openai-community__gpt2.json").params.total == 124_439_808
