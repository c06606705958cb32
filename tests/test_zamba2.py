"""Zamba2: a Mamba-2 backbone with shared transformer blocks at its 'hybrid' positions, read as vLLM 0.33.0
model_executor/models/zamba2.py builds it (kvplan.models.shared_blocks, layers.SharedBlockHybrid).

The config is Zyphra/Zamba2-2.7B's as published in transformers' format: every field below down to n_mamba_heads is
the Hub's huggingface.co/Zyphra/Zamba2-2.7B-Instruct-v2/blob/main/config.json (adapter_rank 128, attention_head_dim
160, attention_hidden_size 5120, chunk_size 256, hidden_size 2560, hybrid_layer_ids 6 ... 51, intermediate_size
10240, layers_block_type, mamba_d_conv 4, mamba_d_state 64, mamba_expand 2, mamba_headdim 64, mamba_ngroups 1,
n_mamba_heads 80); num_attention_heads 32, num_key_value_heads 32, num_mem_blocks 2, vocab_size 32000 and bfloat16
are those of the same model's earlier config (huggingface.co/Zyphra/Zamba2-2.7B-instruct, blob d3e3e112); the stored
copy of the v2 file ends before them. No exact published parameter total was found: the Hub lists the
Zamba2-2.7B-instruct safetensors at 4.94 GB + 384 MB (main), which the 2 B x 2,662,214,560 = 5.32 GB below matches
to the listing's rounding; the count is still marked approximate.
"""

from __future__ import annotations

import pytest

from kvplan.api import gpu_choices
from kvplan.deployment import Deployment
from kvplan.engines import plan_deployment
from kvplan.errors import KvplanError
from kvplan.models.hf_config import parse_config
from kvplan.models.layers import FullAttention, Mamba2State, SharedBlockHybrid
from kvplan.models.model import ModelSpec, SpecSource

GiB = 2**30
HYBRID_IDS = [6, 12, 18, 24, 30, 36, 42, 47, 51]
WORDS = ["hybrid" if index in HYBRID_IDS else "mamba" for index in range(54)]
ZAMBA2_2_7B = {
    "adapter_rank": 128, "add_bias_linear": False, "architectures": ["Zamba2ForCausalLM"],
    "attention_head_dim": 160, "attention_hidden_size": 5120, "chunk_size": 256, "ffn_hidden_size": 10240,
    "hidden_act": "gelu", "hidden_size": 2560, "hybrid_layer_ids": HYBRID_IDS, "intermediate_size": 10240,
    "kv_channels": 80, "layers_block_type": WORDS, "mamba_d_conv": 4, "mamba_d_state": 64, "mamba_expand": 2,
    "mamba_headdim": 64, "mamba_ngroups": 1, "max_position_embeddings": 4096, "model_type": "zamba2",
    "n_mamba_heads": 80, "num_attention_heads": 32, "num_hidden_layers": 54, "num_key_value_heads": 32,
    "num_mem_blocks": 2, "torch_dtype": "bfloat16", "vocab_size": 32000,
}
# Mamba-2 of every layer: inner 2 x 2,560 = 5,120, 80 heads x 64, 1 group, state 64, conv 4, bf16 states
MIXER = Mamba2State(5120, 80, 64, 1, 64, 4, 256, conv_bytes=2)
# each hybrid position's attention: 32 heads over 2 x 2,560 = 5,120 channels, head dim 160, one KV head per head
ATTENTION = FullAttention(32, 160)


def zamba2(**changes: object) -> ModelSpec:
    return parse_config({**ZAMBA2_2_7B, **changes}, "zamba2-2.7b", SpecSource("local", "zamba2-2.7b.json"))


def test_each_hybrid_position_caches_its_own_kv_beside_its_mamba2_state():
    spec = zamba2()
    hybrid = SharedBlockHybrid(ATTENTION, MIXER)
    assert spec.layers == tuple(hybrid if index in HYBRID_IDS else MIXER for index in range(54))
    # Zamba2Attention gives every invocation its own Attention (attn.{j}): 9 attention caches and 54 Mamba-2
    # states in the pool, not 2 (one per shared block)
    caches = [cache for layer in spec.layers for cache in layer.cache_layers()]
    assert (sum(cache.holds_kv for cache in caches), sum(cache.paged_state for cache in caches)) == (9, 54)
    # per token: 9 positions x 2 (K, V) x 32 heads x 160 x 2 B = 184,320 B; TP 2: 16 heads per rank
    assert spec.kv_bytes_per_token(2) == 184_320
    assert spec.kv_bytes_per_token(2, tp=2) == 92_160
    # per sequence and layer: conv (4 - 1) x (5,120 + 2 x 1 x 64) x 2 B = 31,488 B + SSM 80 x 64 x 64 x 2 B =
    # 655,360 B: 686,848 B. TP 2: the one group replicated to both ranks (vLLM 0.33.0 mamba_utils.py
    # extra_groups_for_head_shards), conv 3 x (5,120 + 2 x 2 x 64) / 2 x 2 B = 16,128 + SSM 40 x 64 x 64 x 2 B =
    # 327,680: 343,808 B
    assert MIXER.state_page_bytes(1) == 686_848
    assert spec.layers[6].state_page_bytes(2) == 343_808


def test_parameters_count_the_shared_blocks_once_and_the_adapters_per_position():
    # h 2,560, I 10,240, adapter rank 128, attention width 5,120.
    # Mamba-2 decoder (54 of them): in_proj 2,560 x (2 x 5,120 + 2 x 64 + 80) = 26,746,880; conv1d 5,248 x 4 +
    # 5,248 bias = 26,240; A, D, dt_bias 240; gated norm 5,120; out_proj 5,120 x 2,560 = 13,107,200; input norm
    # 2,560: 39,888,240 each, 2,153,964,960 in all.
    # Shared block (2 of them): input norm 5,120; qkv_proj 5,120 x 15,360 = 78,643,200; o_proj 5,120 x 2,560 =
    # 13,107,200; pre_ff norm 2,560; gate_up 2,560 x 20,480 = 52,428,800; down 10,240 x 2,560 = 26,214,400:
    # 170,401,280 each, 340,802,560.
    # Per hybrid position (9): linear 2,560 x 2,560 = 6,553,600; gate_up adapter 2,560 x 128 + 128 x 20,480 =
    # 2,949,120: 9,502,720 each, 85,524,480.
    # Embeddings 32,000 x 2,560 = 81,920,000, tied lm_head; final norm 2,560.
    # Total 2,153,964,960 + 340,802,560 + 85,524,480 + 81,920,000 + 2,560 = 2,662,214,560.
    spec = zamba2()
    assert spec.params.total == 2_662_214_560
    assert spec.params.lm_head == 0
    # one shared block instead of two: one block's 170,401,280 fewer, the adapters unchanged
    assert zamba2(num_mem_blocks=1).params.total == 2_662_214_560 - 170_401_280
    # q, k and v adapters at each position: 9 x 3 x (5,120 x 128 + 128 x 5,120) = 35,389,440 more
    assert zamba2(use_shared_attention_adapter=True).params.total == 2_662_214_560 + 35_389_440


def plan(spec: ModelSpec, **knobs):
    dep = Deployment.from_mapping({"gpu": "h100-sxm", "kv_cache_memory_bytes": 10 * GiB, "max_model_len": 4096,
                                   **knobs})
    return plan_deployment(spec, dep, gpu_choices(dep)[0])


def test_vllm_pool_of_nine_attention_caches_and_fifty_four_states():
    # vLLM 0.10.2, 10 GiB of KV cache. Attention 20,480 B per token per layer; block size 16 x cdiv(686,848,
    # 16 x 20,480) = 48 tokens, page 48 x 20,480 = 983,040 B, the state page padded by 296,192 B = 43.12%.
    # 63 cache layers, 9 attention and 54 Mamba: group size 9, 1 + 6 = 7 groups; a block id spans 9 pages =
    # 8,847,360 B; 10 GiB // that = 1,213 blocks; tokens 1,213 // 7 x 48 = 8,304. At 4,096 tokens: cdiv(4,096, 48)
    # = 86 attention blocks + 6 state blocks = 92 per request; 1,213 / 92 = 13.18.
    result = plan(zamba2(), engine_version="0.10.2")
    cap = result.capacity
    assert (result.engine.block_size, result.layout.num_groups, result.layout.block_bytes) == (48, 7, 8_847_360)
    assert (cap.num_blocks, cap.tokens, cap.blocks_per_request, cap.max_concurrency) == (1213, 8304, 92, 13.18)
    assert any("Padding mamba page size by 43.12%" in note for note in result.notes)


@pytest.mark.parametrize(("changes", "key"), [
    ({"layers_block_type": ["mlp", *WORDS[1:]]}, "layers_block_type"),
    ({"hybrid_layer_ids": [6, 12]}, "hybrid_layer_ids"),
    ({"attention_head_dim": 128}, "attention_head_dim"),
    ({"mamba_headdim": 32}, "mamba_headdim"),
])
def test_a_layout_other_than_zamba2config_derives_is_refused_by_name(changes, key):
    with pytest.raises(KvplanError, match=key):
        zamba2(**changes)

