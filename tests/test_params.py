"""Parameter counts from the config against published exact counts (configs/INDEX.md in the kvplan
reference set: safetensors index totals and the Hub API's safetensors.total)."""

from __future__ import annotations

import json

import pytest
from conftest import fixture_dict, load_fixture

from kvplan.models import sources
from kvplan.models.hf_config import parse_config
from kvplan.models.model import SpecSource

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
    # INDEX.md: model.safetensors.index.json total_size 5,012,344,832 bytes in bfloat16.
    "google__gemma-2b-it.json": 2_506_172_416,
    # INDEX.md: pytorch_model.bin.index.json total_size 13,298,573,312 bytes in 16 bits (194 tensors). MPT's
    # `no_bias` drops the LayerNorm biases too: 65 norms x 4,096 fewer than a LayerNorm with bias.
    "mosaicml__mpt-7b-instruct__resaved.json": 6_649_286_656,
    # params/README.md: microsoft/phi-2's model.safetensors.index.json, total_size 5,559,367,680 bytes in float16.
    "params/microsoft__phi-2.json": 2_779_683_840,
}

# Falcon checkpoints store the tied lm_head a second time (the indexes list lm_head.weight beside
# word_embeddings); vLLM ties it to the embeddings when the config does not say otherwise, so it is loaded once.
# Published total (index total_size / 2, bfloat16) and the vocab x hidden copy the count leaves out:
FALCON_PUBLISHED = {
    # INDEX.md: falcon-7b-instruct pytorch_model.bin.index.json 14,434,379,520 bytes (= HF count of falcon-7b)
    "tiiuae__falcon-7b-instruct.json": (7_217_189_760, 65_024 * 4_544),
    # the April 2023 remote-code revision of the same checkpoint ("RefinedWebModel", n_head, n_layer)
    "tiiuae__falcon-7b-instruct__2023-04-RWForCausalLM.json": (7_217_189_760, 65_024 * 4_544),
    # INDEX.md: falcon-180B-chat model.safetensors.index.json 359,045,130,240 bytes
    "tiiuae__falcon-180B-chat.json": (179_522_565_120, 65_024 * 14_848),
    # params/README.md: falcon-40b ("RefinedWeb", n_head_kv 8) pytorch_model.bin.index.json 83,671,941,120 bytes
    "params/tiiuae__falcon-40b__RefinedWeb.json": (41_835_970_560, 65_024 * 8_192),
}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_published_count(name):
    params = load_fixture(name).params
    assert params.total == PUBLISHED[name]
    assert params.exact


@pytest.mark.parametrize("name", sorted(FALCON_PUBLISHED))
def test_falcon_counts_the_tied_head_once(name):
    published, stored_twice = FALCON_PUBLISHED[name]
    params = load_fixture(name).params
    assert params.total == published - stored_twice
    assert params.lm_head == 0 and params.exact


def test_falcon_40b_refinedweb_is_not_counted_as_a_gated_mlp():
    # Falcon-40B by hand: per layer fused qkv 8,192 x (128 + 2 x 8) x 64 + dense 8,192^2 + MLP 2 x 8,192 x 32,768
    # (4h, not gated) + ln_attn and ln_mlp 2 x 2 x 8,192 = 679,510,016; x 60 + embeddings 65,024 x 8,192
    # + final LayerNorm 16,384 = 41,303,293,952 (a gated MLP would add 60 x 268,435,456, 38% too many).
    assert load_fixture("params/tiiuae__falcon-40b__RefinedWeb.json").params.total == 41_303_293_952


def test_jamba_experts_every_other_layer_and_an_mlp_after_every_mamba_layer():
    # AI21-Jamba-1.5-Mini (Hub card: 51.6B parameters), by hand. Attention at layers 4, 12, 20, 28
    # (period 8, offset 4): q, o 2 x 4,096^2 + k, v 2 x 4,096 x 1,024 = 41,943,040 each. The 28 Mamba mixers
    # (inner 2 x 4,096 = 8,192, dt rank 256, state 16, conv 4): in_proj 4,096 x 16,384 + conv 8,192 x 4 + bias
    # 8,192 + x_proj 8,192 x 288 + dt_proj 256 x 8,192 + 8,192 + A 8,192 x 16 + D 8,192 + out_proj 8,192 x 4,096
    # + dt/B/C RMSNorms 256 + 16 + 16 = 105,308,448 each. Experts at odd layers (period 2, offset 1): 16 layers x
    # (16 experts x 3 x 4,096 x 14,336 + router 4,096 x 16) = 45,098,205,184; dense MLPs at the 16 even layers
    # 3 x 4,096 x 14,336 = 176,160,768 each; 2 RMSNorms per layer 32 x 8,192; untied embeddings 2 x 65,536 x 4,096;
    # final norm 4,096. Total 51,570,323,328.
    params = load_fixture("params/ai21labs__AI21-Jamba-1.5-Mini.json").params
    assert params.experts == 16 * 16 * 3 * 4_096 * 14_336
    assert params.total == 51_570_323_328
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
    # Qwen2.5-VL-7B: the tower by hand (models/tower_params.py qwen2_5_vl): patch embedding 3 x 2 x 14^2 x 1,280 =
    # 1,505,280; 32 blocks of 2 x 1,280 (norms) + 1,280 x 3,840 + 3,840 (qkv) + 1,280^2 + 1,280 (proj)
    # + 2 x (1,280 x 3,420 + 3,420) (gate, up) + 3,420 x 1,280 + 1,280 (down) = 19,702,200; the merger 1,280
    # + 5,120^2 + 5,120 + 5,120 x 3,584 + 3,584 = 44,574,464: 676,550,144, the visual module a public
    # count prints beside its 8,292,166,656 total (7,615,616,512, Qwen2.5-7B's, for the text).
    vl = load_fixture("Qwen__Qwen2.5-VL-7B-Instruct.json")
    assert vl.params.vision == 1_505_280 + 32 * 19_702_200 + 44_574_464 == 676_550_144
    assert vl.params.total == 8_292_166_656 and vl.params.exact


def test_unverified_families_say_so():
    # OPT: the only published figure found (1,310,916,608 in a scraped catalogue) fits no OPT layout, so the
    # count stays unverified; gpt-oss: the Hub counts MXFP4 bytes, not parameters; mamba: no published total.
    for name in ("facebook__opt-1.3b.json", "openai__gpt-oss-20b.json", "state-spaces__mamba-2.8b-hf.json",
                 "meta-llama__Llama-4-Scout-17B-16E-Instruct.json"):
        spec = load_fixture(name)
        assert not spec.params.exact
        assert any(note.startswith("parameter count approximate") for note in spec.notes)


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


def test_falcon_bias_switch_adds_every_linear_bias():
    # Falcon's `bias` covers attention and MLP alike. falcon-7b-instruct with bias true, by hand, per layer:
    # fused qkv (71 + 2) x 64 = 4,672 + dense 4,544 + dense_h_to_4h 18,176 + dense_4h_to_h 4,544 = 31,936; x 32.
    config = fixture_dict("tiiuae__falcon-7b-instruct.json")
    without = parse_config(config, "falcon", SpecSource("local", "test")).params.total
    with_bias = parse_config({**config, "bias": True}, "falcon", SpecSource("local", "test")).params.total
    assert with_bias - without == 32 * 31_936


def test_sparse_attention_indexer_is_counted():
    # DeepSeek-V3.2's lightning indexer, per layer by hand: wq_b 1,536 x 64 x 128 + wk 7,168 x 128 + k_norm
    # LayerNorm 2 x 128 + weights_proj 7,168 x 64 = 13,959,424; x 61 layers.
    spec_file = sources.find_spec_file("deepseek-ai/DeepSeek-V3.2")
    assert spec_file is not None
    config = json.loads(spec_file.path.read_text())["config"]
    plain = {key: value for key, value in config.items() if not key.startswith("index_")}
    with_indexer = parse_config(config, "v32", SpecSource("local", "test")).params.total
    assert with_indexer - parse_config(plain, "v32", SpecSource("local", "test")).params.total == 61 * 13_959_424


@pytest.mark.parametrize(("model_id", "expected"), [
    ("mosaicml/mpt-7b-instruct", PUBLISHED["mosaicml__mpt-7b-instruct__resaved.json"]),
    ("microsoft/phi-2", PUBLISHED["params/microsoft__phi-2.json"]),
    ("tiiuae/falcon-40b", 41_835_970_560 - 65_024 * 8_192),
    ("tiiuae/falcon-7b-instruct", 7_217_189_760 - 65_024 * 4_544),
])
def test_bundled_trims_keep_what_the_count_reads(model_id, expected):
    # A bundled spec keeps only the keys the parser read when it was written; a rule added later (MPT's
    # no_bias, say) must find its key there too. Same published figures as above.
    spec_file = sources.find_spec_file(model_id)
    assert spec_file is not None
    params = sources.read_spec_file(spec_file).params
    assert params.total == expected and params.exact


def test_gated_delta_net_layers_and_gated_attention():
    # Qwen3-Next-80B-A3B, by hand (the loaded model; the Hub's 81.3B also holds the MTP layer). Gated DeltaNet
    # layers (36; every 4th of 48 is full attention): q, k 2 x 16 x 128 and v, z 2 x 32 x 128 projections from
    # 2,048 = 25,165,824 + b, a gates 2,048 x 64 + conv (2 x 2,048 + 4,096) x 4 + dt bias and A 2 x 32 + norm 128
    # + out 4,096 x 2,048 = 33,718,464. Full attention (12): q with its output gate 2,048 x 16 x 256 x 2 + k, v
    # 2 x 2,048 x 2 x 256 + o 4,096 x 2,048 + q/k norms 2 x 256 = 27,263,488. Every layer: 512 experts
    # 3 x 2,048 x 512 each + router 2,048 x 512 + shared expert 3 x 2,048 x 512 + its gate 2,048 + 2 norms
    # x 2,048 = 1,614,813,184. Untied embeddings 2 x 151,936 x 2,048, final norm 2,048. Total 79,674,391,296.
    params = load_fixture("params/Qwen__Qwen3-Next-80B-A3B-Thinking.json").params
    assert params.total == 79_674_391_296
    assert params.exact  # with its MTP layer, the Hub's total (tests/test_hybrid_params.py)
