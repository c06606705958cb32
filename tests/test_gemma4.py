"""Gemma 4 (issue 22, part 3): full-attention layers with their own KV heads and head dim, and vLLM's page sizes
equalised through the block size, checked against the public vLLM 0.23 startup log of gemma-4-31b-it (Kaggle,
max_model_len 32768, max_num_seqs 20, max_num_batched_tokens 8192, prefix caching on: "Available KV cache memory:
28.41 GiB", "GPU KV cache size: 97,541 tokens", "Maximum concurrency for 32,768 tokens per request: 2.98x")."""

from __future__ import annotations

import json
from pathlib import Path

import kvplan
from kvplan.capacity import pool_layout
from kvplan.models.hf_config import parse_config
from kvplan.models.layers import FullAttention, SlidingWindow
from kvplan.models.model import SpecSource

FRONTIER = Path(__file__).parent / "fixtures" / "configs" / "frontier"
GEMMA4_31B = FRONTIER / "nvidia__Gemma-4-31B-IT-NVFP4"  # the published text_config of gemma-4-31b-it
LOGGED_KV_BYTES = 30_504_930_508  # 28.41 GiB


def spec(path: Path):
    return parse_config(json.loads((path / "config.json").read_text()), path.name, SpecSource("local", str(path)))


def test_full_layers_have_their_own_geometry():
    # text_config: sliding layers num_key_value_heads 16 x head_dim 256 (window 1024), full layers
    # num_global_key_value_heads 4 x global_head_dim 512, every 6th layer; K and V both cached (attention_k_eq_v
    # loads K into both slots, vLLM 0.33.0 gemma4.py)
    model = spec(GEMMA4_31B)
    assert set(model.layers) == {SlidingWindow(16, 256, 1024), FullAttention(4, 512)}
    assert model.attention == "sliding:50+full:10"
    # 50 x 2 x 16 x 256 x 2 B + 10 x 2 x 4 x 512 x 2 B
    assert model.kv_bytes_per_token(2) == 50 * 16_384 + 10 * 8_192 == 901_120


def test_pages_equalised_through_the_block_size():
    # sliding page 16 tokens x 16,384 B = 262,144; full 16 x 8,192 = 131,072, which divides it: vLLM
    # (unify_kv_cache_spec_page_size) gives the full layers 32-token blocks, 262,144 B. Equal pages, 50 + 10
    # layers: groups of 10 (5 sliding, 1 full), a block across a group 10 x 262,144 = 2,621,440 B
    layout = pool_layout(list(spec(GEMMA4_31B).layers), 16, 2, 1)
    assert layout.num_groups == 6 and layout.padding_layers == 0
    assert layout.page_bytes == 262_144 and layout.block_bytes == 2_621_440
    full = next(group for group in layout.groups if group.layer.kind == "full")
    assert full.tokens_per_block == 32
    # one request of 32,768 tokens: full cdiv(32,768, 32) = 1,024 blocks; each sliding group
    # cdiv(1,023 + 8,192, 16) + 1 = 577 (SlidingWindowSpec); 1,024 + 5 x 577 = 3,909
    assert layout.blocks_per_request(32_768, 8_192) == 3_909


def test_the_vllm_023_log_replays_to_the_block():
    # the log ran google's bfloat16 checkpoint (KV bfloat16 under auto); this NVFP4 copy of its text_config names
    # an FP8 KV cache in its config.json (kv_cache_scheme), so the log's KV dtype is given
    plan = kvplan.estimate(str(GEMMA4_31B), gpu="h100", max_model_len=32_768, max_num_seqs=20,
                           kv_cache_memory_bytes=LOGGED_KV_BYTES, engine_version="0.23", kv_cache_dtype="bfloat16")
    # 30,504,930,508 // 2,621,440 = 11,636 blocks; 11,636 / 3,909 = 2.9767: the logged 2.98x, and
    # int(2.9767 x 32,768) = 97,541, the logged token count (vLLM's get_kv_cache_capacity)
    assert plan.capacity.num_blocks == 11_636
    assert plan.capacity.blocks_per_request == 3_909
    assert plan.capacity.max_concurrency == 2.98
    assert int(plan.capacity.num_blocks / plan.capacity.blocks_per_request * 32_768) == 97_541


def test_gemma4_26b_moe_block_beside_the_mlp():
    # 26B-A4B: every layer a dense MLP (intermediate_size 2,112) and 128 experts x 704 (enable_moe_block; vLLM
    # 0.33.0 gemma4.py builds both where num_experts is set), 8 per token (top_k_experts)
    model = spec(FRONTIER / "google__gemma-4-26B-A4B")
    assert model.moe is not None and model.moe.experts_per_token == 8
    assert model.params.experts == 30 * 128 * 3 * 2816 * 704
    assert set(model.layers) == {SlidingWindow(8, 256, 1024), FullAttention(2, 512)}
