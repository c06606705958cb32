"""Every reference config parses to the KV layout derived by hand from its keys.

Columns: layers, KV-holding layers, kinds {kind: count}, KV heads, head dim, KV bytes per token at
2 bytes summed over layers, and max context. Bytes per token = sum over KV layers of 2 x kv_heads x head_dim x 2
(MLA: latent x 2, no K/V factor)."""

from __future__ import annotations

import pytest
from conftest import CONFIGS, load_fixture

from kvplan.models.layers import ChunkedLocal, LatentAttention, SlidingWindow

EXPECTED = {
    # qwen2: use_sliding_window false => full everywhere. 24 x 2*2*64*2 = 12,288. torch_dtype float32 (re-save).
    "Qwen__Qwen2.5-0.5B-Instruct__resaved-tf4.49.json": (24, 24, {"full": 24}, 2, 64, 12_288, 32768),
    # 36 x 2*2*128*2 = 36,864
    "Qwen__Qwen2.5-3B.json": (36, 36, {"full": 36}, 2, 128, 36_864, 32768),
    # 28 x 2*4*128*2 = 57,344 (the seed formula's per-token figure)
    "Qwen__Qwen2.5-7B.json": (28, 28, {"full": 28}, 4, 128, 57_344, 131072),
    "Qwen__Qwen2.5-7B-Instruct.json": (28, 28, {"full": 28}, 4, 128, 57_344, 32768),
    # 64 x 2*8*128*2 = 262,144; max_window_layers 70 > 64 is irrelevant (use_sliding_window false)
    "Qwen__Qwen2.5-32B.json": (64, 64, {"full": 64}, 8, 128, 262_144, 131072),
    "Qwen__Qwen2.5-32B-Instruct.json": (64, 64, {"full": 64}, 8, 128, 262_144, 131072),
    # LM keys at the top level beside vision_config; mrope keeps max_position_embeddings 128000
    "Qwen__Qwen2.5-VL-7B-Instruct.json": (28, 28, {"full": 28}, 4, 128, 57_344, 128000),
    # explicit head_dim 128: 36 x 2*8*128*2 = 147,456
    "Qwen__Qwen3-8B.json": (36, 36, {"full": 36}, 8, 128, 147_456, 40960),
    # explicit head_dim 128 (not 2048/32 = 64): 48 x 2*4*128*2 = 98,304
    "Qwen__Qwen3-30B-A3B.json": (48, 48, {"full": 48}, 4, 128, 98_304, 40960),
    # bloom: n_embed 14336 / 112 heads = 128, MHA: 70 x 2*112*128*2 = 4,014,080; no length key => 2048
    "bigscience__bloom.json": (70, 70, {"full": 70}, 112, 128, 4_014_080, 2048),
    # MLA: 27 x (512 + 64) x 2 = 31,104; yarn: 4096 x 40 = 163,840
    "deepseek-ai__DeepSeek-V2-Lite.json": (27, 27, {"mla": 27}, 1, 576, 31_104, 163840),
    # OPT MHA: 24 x 2*32*64*2 = 196,608
    "facebook__opt-1.3b.json": (24, 24, {"full": 24}, 32, 64, 196_608, 2048),
    # Gemma 2 alternates by model_type: even layers slide (4096). 42 x 2*8*256*2 = 344,064
    "google__gemma-2-9b-it.json": (42, 42, {"sliding": 21, "full": 21}, 8, 256, 344_064, 8192),
    # MQA: 18 x 2*1*256*2 = 18,432
    "google__gemma-2b-it.json": (18, 18, {"full": 18}, 1, 256, 18_432, 8192),
    # pattern 6: layers 5, 11, 17, 23 global => 22 sliding + 4 full; 26 x 2*1*256*2 = 26,624
    "google__gemma-3-1b-it.json": (26, 26, {"sliding": 22, "full": 4}, 1, 256, 26_624, 32768),
    # text_config, default pattern 6 => 52 + 10; 62 x 2*16*128*2 = 507,904; gemma3 ignores rope factor 8
    "google__gemma-3-27b-it.json": (62, 62, {"sliding": 52, "full": 10}, 16, 128, 507_904, 131072),
    "google__gemma-3-27b-it__resaved-tf4.56.2.json": (62, 62, {"sliding": 52, "full": 10}, 16, 128, 507_904,
                                                      131072),
    # MHA: 40 x 2*40*128*2 = 819,200
    "meta-llama__Llama-2-13b-hf.json": (40, 40, {"full": 40}, 40, 128, 819_200, 2048),
    "meta-llama__Llama-2-7b-hf.json": (32, 32, {"full": 32}, 32, 128, 524_288, 4096),
    # 80 x 2*8*128*2 = 327,680; llama3 rope keeps 131072
    "meta-llama__Llama-3.1-70B.json": (80, 80, {"full": 80}, 8, 128, 327_680, 131072),
    "meta-llama__Llama-3.1-8B.json": (32, 32, {"full": 32}, 8, 128, 131_072, 131072),
    # explicit head_dim 64: 16 x 2*8*64*2 = 32,768
    "meta-llama__Llama-3.2-1B-Instruct.json": (16, 16, {"full": 16}, 8, 64, 32_768, 131072),
    "meta-llama__Llama-3.2-3B-Instruct.json": (28, 28, {"full": 28}, 8, 128, 114_688, 131072),
    # chunked 8192 with every 4th layer global NoPE (no_rope_layers empty): 36 + 12; 48 x 2*8*128*2 = 196,608
    "meta-llama__Llama-4-Scout-17B-16E-Instruct.json": (48, 48, {"chunked": 36, "full": 12}, 8, 128, 196_608,
                                                        10485760),
    "meta-llama__Meta-Llama-3-70B.json": (80, 80, {"full": 80}, 8, 128, 327_680, 8192),
    "meta-llama__Meta-Llama-3-8B.json": (32, 32, {"full": 32}, 8, 128, 131_072, 8192),
    # window 2047 on every layer; 3072/32 = 96: 32 x 2*32*96*2 = 393,216
    "microsoft__Phi-3-mini-4k-instruct.json": (32, 32, {"sliding": 32}, 32, 96, 393_216, 4096),
    # window 4096 on every layer: 32 x 2*8*128*2 = 131,072
    "mistralai__Mistral-7B-v0.1.json": (32, 32, {"sliding": 32}, 8, 128, 131_072, 32768),
    # sliding_window null => full
    "mistralai__Mixtral-8x7B-v0.1.json": (32, 32, {"full": 32}, 8, 128, 131_072, 32768),
    # d_model 4096 / n_heads 32 = 128, MHA: 32 x 2*32*128*2 = 524,288; max_seq_len 2048
    "mosaicml__mpt-7b-instruct__resaved.json": (32, 32, {"full": 32}, 32, 128, 524_288, 2048),
    # n_embd 1280 / n_head 20 = 64: 36 x 2*20*64*2 = 184,320; n_positions 1024
    "openai-community__gpt2-large.json": (36, 36, {"full": 36}, 20, 64, 184_320, 1024),
    "openai-community__gpt2.json": (12, 12, {"full": 12}, 12, 64, 36_864, 1024),
    # layer_types 12 sliding (128) + 12 full; head_dim 64 explicit: 24 x 2*8*64*2 = 49,152; yarn 4096 x 32
    "openai__gpt-oss-20b.json": (24, 24, {"sliding": 12, "full": 12}, 8, 64, 49_152, 131072),
    # pure SSM: no KV
    "state-spaces__mamba-2.8b-hf.json": (64, 0, {"mamba1": 64}, 0, 0, 0, 2048),
    # new_decoder_architecture true => num_kv_heads 8 (multi_query ignored); 14848/232 = 64: 80 x 2*8*64*2
    "tiiuae__falcon-180B-chat.json": (80, 80, {"full": 80}, 8, 64, 163_840, 2048),
    # multi_query, old architecture => 1 KV head; 4544/71 = 64: 32 x 2*1*64*2 = 8,192
    "tiiuae__falcon-7b-instruct.json": (32, 32, {"full": 32}, 1, 64, 8_192, 2048),
    "tiiuae__falcon-7b-instruct__2023-04-RWForCausalLM.json": (32, 32, {"full": 32}, 1, 64, 8_192, 2048),
}


def test_every_reference_config_is_covered():
    assert sorted(p.name for p in CONFIGS.glob("*.json")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_layout(name):
    layers, kv_layers, kinds, kv_heads, head_dim, per_token, max_context = EXPECTED[name]
    spec = load_fixture(name)
    assert spec.num_layers == layers
    assert spec.num_kv_layers == kv_layers
    counted: dict[str, int] = {}
    for layer in spec.layers:
        counted[layer.kind] = counted.get(layer.kind, 0) + 1
    assert counted == kinds
    assert spec.num_kv_heads == kv_heads
    assert spec.head_dim == head_dim
    assert spec.kv_bytes_per_token(2) == per_token
    assert spec.max_context == max_context


def test_sliding_window_positions():
    gemma2 = load_fixture("google__gemma-2-9b-it.json")
    assert isinstance(gemma2.layers[0], SlidingWindow) and gemma2.layers[0].window == 4096
    assert gemma2.layers[1].kind == "full"
    gemma3 = load_fixture("google__gemma-3-1b-it.json")
    assert [i for i, layer in enumerate(gemma3.layers) if layer.kind == "full"] == [5, 11, 17, 23]
    oss = load_fixture("openai__gpt-oss-20b.json")
    assert oss.layers[0].kind == "sliding" and oss.layers[0].window == 128
    scout = load_fixture("meta-llama__Llama-4-Scout-17B-16E-Instruct.json")
    assert [i for i, layer in enumerate(scout.layers) if layer.kind == "full"][:3] == [3, 7, 11]
    assert isinstance(scout.layers[0], ChunkedLocal) and scout.layers[0].chunk == 8192


def test_mla_is_one_latent_whatever_the_tp():
    layer = load_fixture("deepseek-ai__DeepSeek-V2-Lite.json").layers[0]
    assert isinstance(layer, LatentAttention)
    # 16 tokens x 576 x 2 bytes = 18,432 per layer per block, on every TP rank
    assert layer.page_bytes(16, 2, tp=1) == layer.page_bytes(16, 2, tp=8) == 18_432


def test_kv_heads_replicate_when_fewer_than_tp():
    layer = load_fixture("google__gemma-2b-it.json").layers[0]  # 1 KV head
    # max(1, 1 // 4) = 1 head per rank: 2 x 1 x 256 x 2 = 1,024 bytes per token per layer
    assert layer.bytes_per_token(2, tp=4) == 1024


def test_block_requests_per_kind():
    # sliding 4096, prefill chunk 8192, context 8192: cdiv(min(4095 + 8192, 8192), 16) + 1 = 513
    assert SlidingWindow(8, 256, 4096).blocks_per_request(8192, 16, 8192) == 513
    # chunked 8192, chunk 2048 prefill, context 100k: cdiv(8192 + 2048, 16) = 640
    assert ChunkedLocal(8, 128, 8192).blocks_per_request(100_000, 16, 2048) == 640


def test_dtype_and_nested_quirks():
    assert load_fixture("Qwen__Qwen2.5-0.5B-Instruct__resaved-tf4.49.json").dtype == "float32"
    assert load_fixture("google__gemma-3-27b-it__resaved-tf4.56.2.json").dtype == "bfloat16"  # 'dtype' key
    oss = load_fixture("openai__gpt-oss-20b.json")
    assert oss.quantization is not None and oss.quantization.method == "mxfp4" and oss.quantization.bits == 4
    v2 = load_fixture("deepseek-ai__DeepSeek-V2-Lite.json")
    assert v2.moe is not None and v2.moe.num_experts == 64 and v2.moe.dense_layers == (0,)
