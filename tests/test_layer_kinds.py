"""Layer kinds are siblings under one protocol, and what varies by kind lives on the kind: the flat-pool
conversion, the block formula render shows, blocks per request, and which parameter rule counts the mixer."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, replace
from itertools import product

import pytest
from conftest import load_fixture

from kvplan.capacity import pool_layout
from kvplan.cli.render import formula
from kvplan.deployment import Deployment
from kvplan.engines import plan_deployment
from kvplan.models.layers import (
    ChunkedLocal,
    FullAttention,
    LatentAttention,
    SlidingWindow,
    StateOnly,
    page_tensors_bytes,
)
from kvplan.models.sources import resolve
from kvplan.plan import GpuChoice
from kvplan.units import GB, GiB

FULL = FullAttention(8, 128)
SLIDING = SlidingWindow(8, 128, 4096)
CHUNKED = ChunkedLocal(8, 128, 8192)
MLA = LatentAttention(576)
STATE = StateOnly(5 * 2**20)
KINDS = (FULL, SLIDING, CHUNKED, MLA, STATE)


@pytest.mark.parametrize(("layer", "other"), list(product(KINDS, KINDS)))
def test_no_kind_is_an_instance_of_another(layer, other):
    # A sliding layer taken for a full one would be flattened, grouped and costed as one.
    assert isinstance(layer, type(other)) == (layer is other)


def test_specs_are_values():
    assert SlidingWindow(8, 128, 4096) == SLIDING and hash(SlidingWindow(8, 128, 4096)) == hash(SLIDING)
    assert SLIDING != FULL  # same geometry, different kind
    assert ChunkedLocal(8, 128, 4096) != SlidingWindow(8, 128, 4096)
    # capacity groups equal specs with a Counter
    assert Counter([FULL, FullAttention(8, 128), SLIDING, SLIDING]) == {FULL: 2, SLIDING: 2}
    # models.model.layer_runs reads the fields with asdict
    assert asdict(SLIDING) == {"kv_heads": 8, "head_dim": 128, "window": 4096, "value_dim": None}
    assert asdict(CHUNKED) == {"kv_heads": 8, "head_dim": 128, "chunk": 8192}
    assert asdict(MLA) == {"latent_dim": 576, "nope_head_dim": None} and asdict(STATE) == {"state_bytes": 5 * 2**20}


def test_as_full_is_what_a_flat_pool_holds():
    # SGLang and TensorRT-LLM cache every token in every layer: windowed kinds become full attention of the same
    # geometry; full, MLA and state-only layers are unchanged.
    assert FULL.as_full() == FULL
    assert SLIDING.as_full() == FullAttention(8, 128) and type(SLIDING.as_full()) is FullAttention
    assert CHUNKED.as_full() == FullAttention(8, 128) and type(CHUNKED.as_full()) is FullAttention
    assert MLA.as_full() is MLA
    assert STATE.as_full() is STATE
    for layer in KINDS:
        assert layer.drops_old_tokens == (layer.as_full() != layer)
        assert layer.as_full().kind in ("full", "mla", "none")


def test_block_formula_per_kind():
    # Qwen2.5-7B: 2 x 28 x 4 x 128 x 16 x 2 = 917,504 B (the figure the CLI prints).
    assert FullAttention(4, 128).block_formula(28, 1, 16, 2) == (
        "2 x 28 layers x 4 KV heads x 128 head dim x 16 tokens x 2 B = 917,504 B")
    # TP 4 over 8 KV heads: 2 per rank; 2 x 80 x 2 x 128 x 16 x 2 = 1,310,720 B.
    assert FULL.block_formula(80, 4, 16, 2) == "2 x 80 layers x 2 KV heads x 128 head dim x 16 tokens x 2 B = 1,310,720 B"
    # One KV head at TP 4 is replicated, not split: max(1, 1 // 4) = 1; 2 x 18 x 1 x 256 x 16 x 2 = 294,912 B.
    assert FullAttention(1, 256).block_formula(18, 4, 16, 2).startswith("2 x 18 layers x 1 KV heads x 256 head dim")
    # A window or a chunk changes how many blocks a request holds, not a block's bytes:
    # 2 x 32 x 8 x 128 x 16 x 2 = 2,097,152 B; chunked at TP 2, fp8: 2 x 36 x 4 x 128 x 16 x 1 = 589,824 B.
    assert SLIDING.block_formula(32, 1, 16, 2) == FULL.block_formula(32, 1, 16, 2) == (
        "2 x 32 layers x 8 KV heads x 128 head dim x 16 tokens x 2 B = 2,097,152 B")
    assert CHUNKED.block_formula(36, 2, 16, 1) == "2 x 36 layers x 4 KV heads x 128 head dim x 16 tokens x 1 B = 589,824 B"
    # DeepSeek-V2-Lite MLA: latent 512 (kv_lora_rank) + 64 (qk_rope_head_dim) = 576, no K/V factor, no TP split:
    # 27 x 576 x 64 x 2 = 1,990,656 B at TP 8 as at TP 1.
    v2 = load_fixture("deepseek-ai__DeepSeek-V2-Lite.json").layers[0]
    assert v2 == MLA
    assert v2.block_formula(27, 8, 64, 2) == v2.block_formula(27, 1, 64, 2) == (
        "27 layers x 576 latent x 64 tokens x 2 B = 1,990,656 B (MLA: no K/V factor, whole on every rank)")
    # mamba-2.8b: one whole state per block, at the config's float32 (4 B): conv (conv_kernel 4 - 1) x intermediate
    # 5120 = 15,360 elements, ssm 5120 x state_size 16 = 81,920 elements; (15,360 + 81,920) x 4 = 389,120 B per layer.
    mamba = load_fixture("state-spaces__mamba-2.8b-hf.json").layers[0]
    assert mamba.block_formula(64, 1, 16, 2) == ("64 layers x (conv 3x5120 x 4 B + ssm 5120x16 x 4 B = 389,120 B) = "
                                                 "24,903,680 B (one whole state per block, whatever the context)")


def test_blocks_per_request_per_kind():
    # Full and MLA keep every token: cdiv(context, block). 100,000 / 16 = 6,250; 100,001 needs one more.
    assert FULL.blocks_per_request(100_000, 16, 2048) == 6_250
    assert FULL.blocks_per_request(100_001, 16, 2048) == 6_251
    assert MLA.blocks_per_request(163_840, 64, 8192) == 2_560  # 163,840 / 64
    # Sliding 4096: cdiv(min(window - 1 + mnbt, context), block) + 1.
    # mnbt 2048, context 100,000: min(6,143, 100,000) = 6,143; cdiv(6,143, 16) = 384; + 1 = 385.
    assert SLIDING.blocks_per_request(100_000, 16, 2048) == 385
    # A context shorter than the window: min(6,143, 1,000) = 1,000; cdiv(1,000, 16) = 63; + 1 = 64.
    assert SLIDING.blocks_per_request(1_000, 16, 2048) == 64
    # Chunked 8192: cdiv(min(chunk + mnbt, context), block). min(10,240, 100,000) / 16 = 640.
    assert CHUNKED.blocks_per_request(100_000, 16, 2048) == 640
    # context 5,000: cdiv(5,000, 16) = 313 (no extra block, unlike sliding).
    assert CHUNKED.blocks_per_request(5_000, 16, 2048) == 313
    assert STATE.blocks_per_request(100_000, 16, 2048) == 0


def test_per_token_bytes_per_kind():
    # K/V kinds: 2 x heads per rank x head dim x bytes; 8 heads at TP 2 -> 4: 2 x 4 x 128 x 2 = 2,048.
    for layer in (FULL, SLIDING, CHUNKED):
        assert layer.bytes_per_token(2, tp=2) == 2_048 and layer.page_bytes(16, 2, tp=2) == 16 * 2_048
    # MLA: the latent once, whole on every rank: 576 x 2 = 1,152.
    assert MLA.bytes_per_token(2, tp=8) == 1_152
    assert STATE.bytes_per_token(2) == STATE.page_bytes(16, 2) == 0 and not STATE.holds_kv


class Rules:
    """A stand-in parameter counter that says which rule a kind picked, and with what."""

    def kv_attention(self, kv_heads, head_dim, value_dim=None, sliding=False):
        return 1_000_000 + kv_heads * 1000 + head_dim

    def latent_attention(self):
        return 2

    def state_mixer(self):
        return 3


def test_each_kind_picks_its_parameter_rule():
    assert [layer.mixer_params(Rules()) for layer in KINDS] == [1_008_128, 1_008_128, 1_008_128, 2, 3]
    assert [layer.has_mlp for layer in KINDS] == [True, True, True, True, False]


def test_render_formula_comes_from_the_kind():
    # DeepSeek-V2-Lite at TP 2: 27 MLA layers x 576 x 16 tokens x 2 B = 497,664 B, the latent not split by TP.
    dep = Deployment(engine="simple", gpu_memory_bytes=80 * GB, tensor_parallel_size=2, kv_cache_memory_bytes=GiB,
                     max_model_len=4096)
    plan = plan_deployment(resolve("deepseek-ai/DeepSeek-V2-Lite"), dep, GpuChoice("custom", "custom", 80 * GB, 2))
    assert formula(plan) == ("block bytes = 27 layers x 576 latent x 16 tokens x 2 B = 497,664 B "
                             "(MLA: no K/V factor, whole on every rank)")
    # One kind of differing sizes is one group whose block spans every page (2 x 65,536 + 2 x 32,768 = 196,608 B):
    # no single spec's product describes it, so render sums each spec's own product (issue 19: a draft's line).
    mixed = pool_layout([FULL, FULL, FullAttention(4, 128), FullAttention(4, 128)], 16, 2, 1)
    assert mixed.num_groups == 1 and mixed.block_bytes == 196_608 and not mixed.single_spec
    text = formula(replace(plan, layout=mixed, tensor_parallel=1))
    assert text == ("block bytes = (2 x 2 layers x 8 KV heads x 128 head dim x 16 tokens x 2 B = 131,072 B) + "
                    "(2 x 2 layers x 4 KV heads x 128 head dim x 16 tokens x 2 B = 65,536 B) = 196,608 B")


@pytest.mark.parametrize("layer, block, kv_bytes, tp, expected", [
    # K and V of (16 tokens x 4 heads x 128) at 2 B: 2 x 16 x 4 x 128 x 2 = 32,768 B (Qwen2.5-7B, one layer)
    (FullAttention(4, 128), 16, 2, 1, 32_768),
    # TP 8 over 4 KV heads replicates: one head per rank, 2 x 16 x 1 x 128 x 2 = 8,192 B
    (FullAttention(4, 128), 16, 2, 8, 8_192),
    # gemma-3 sliding layers: 16 KV heads x 128, fp8: 2 x 16 x 16 x 128 x 1 = 65,536 B
    (SlidingWindow(16, 128, 1024), 16, 1, 1, 65_536),
    # DeepSeek-V3 MLA latent 512 + 64 rope = 576, block 64, 2 B: 64 x 576 x 2 = 73,728 B
    (LatentAttention(576), 64, 2, 4, 73_728),
    (StateOnly(), 16, 2, 1, 0),
])
def test_page_tensors_add_up_to_the_page(layer, block, kv_bytes, tp, expected):
    tensors = layer.page_tensors(block, kv_bytes, tp)
    assert page_tensors_bytes(tensors) == expected == layer.page_bytes(block, kv_bytes, tp)
