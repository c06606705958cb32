"""Parser rules that the reference configs do not exercise, on small hand-written configs (not real models):
each config carries only the keys a rule reads, and each expectation is derived in the comment."""

from __future__ import annotations

import pytest

from kvplan.errors import KvplanError
from kvplan.models.hf_config import parse_config
from kvplan.models.model import SpecSource

BASE = {"model_type": "test", "hidden_size": 1024, "num_attention_heads": 8, "num_hidden_layers": 8,
        "vocab_size": 1000, "intermediate_size": 4096}


def parse(**overrides):
    return parse_config({**BASE, **overrides}, "test/model", SpecSource("local", "config.json"))


LETTERS = {"full": "F", "sliding": "S", "chunked": "C", "mla": "M", "none": "-", "mamba1": "-", "mamba2": "-", "gdn": "-",
           "shortconv": "-", "shared": "-"}


def kinds(spec):
    return "".join(LETTERS[layer.kind] for layer in spec.layers)


def test_head_dim_precedence():
    assert parse(head_dim=256).head_dim == 256  # explicit wins
    assert parse(head_dim=None, attention_head_dim=96).head_dim == 96  # null head_dim is skipped
    assert parse(hidden_size_per_head=80).head_dim == 80
    assert parse().head_dim == 1024 // 8


def test_kv_head_aliases():
    assert parse(num_key_value_heads=2).num_kv_heads == 2
    assert parse(multi_query_group_num=2).num_kv_heads == 2  # ChatGLM
    assert parse(n_head_kv=4).num_kv_heads == 4  # Falcon RW
    assert parse(multi_query=True).num_kv_heads == 1
    assert parse(multi_query=True, new_decoder_architecture=True).num_kv_heads == 8  # ignored: MHA
    assert parse(attn_config={"kv_n_heads": 2}).num_kv_heads == 2  # MPT
    assert parse().num_kv_heads == 8  # absent: MHA


def test_nested_language_configs():
    text = dict(BASE)
    for key in ("text_config", "llm_config", "language_config"):
        spec = parse_config({"model_type": "wrapper", key: {**text, "num_hidden_layers": 5}}, "w", SpecSource("local", "c"))
        assert spec.num_layers == 5
    omni = parse_config({"model_type": "omni", "thinker_config": {"text_config": {**text, "num_hidden_layers": 3}}},
                        "o", SpecSource("local", "c"))
    assert omni.num_layers == 3


def test_sliding_window_rules():
    assert kinds(parse(sliding_window=512)) == "SSSSSSSS"  # Mistral-7B-v0.1 style: every layer
    assert kinds(parse(sliding_window=512, use_sliding_window=False)) == "FFFFFFFF"  # Qwen2: off
    # Qwen2 with the window on: layers at or after max_window_layers slide
    assert kinds(parse(sliding_window=512, use_sliding_window=True, max_window_layers=6)) == "FFFFFFSS"
    assert kinds(parse(sliding_window=512, sliding_window_pattern=4)) == "SSSFSSSF"  # every 4th global
    assert kinds(parse(sliding_window=512, _sliding_window_pattern=2)) == "SFSFSFSF"
    types = ["sliding_attention", "full_attention"] * 4
    assert kinds(parse(sliding_window=128, layer_types=types)) == "SFSFSFSF"


def test_chunked_local_attention():
    # no_rope_layers empty => every 4th layer is global
    assert kinds(parse(attention_chunk_size=8192, no_rope_layers=[])) == "CCCFCCCF"
    assert kinds(parse(attention_chunk_size=8192, no_rope_layers=[1, 0, 1, 0, 1, 0, 1, 0])) == "CFCFCFCF"


def test_mla_latent_width():
    spec = parse(kv_lora_rank=512, qk_rope_head_dim=64, qk_nope_head_dim=128, v_head_dim=128, num_key_value_heads=8)
    assert kinds(spec) == "MMMMMMMM"
    assert spec.kv_bytes_per_token(2) == 8 * 576 * 2  # no K/V factor, KV heads ignored


def test_hybrids():
    # Nemotron-H: only '*' holds KV
    assert kinds(parse(hybrid_override_pattern="M-M*M-M*")) == "---F---F"
    # Jamba: attention where i % period == offset
    assert kinds(parse(attn_layer_period=4, attn_layer_offset=2)) == "--F---F-"
    # Qwen3-Next: layer_types with linear attention
    assert kinds(parse(layer_types=["linear_attention"] * 3 + ["full_attention"] + ["linear_attention"] * 3
                       + ["full_attention"])) == "---F---F"
    # pure Mamba: no heads, a state size; per-sequence state (2048 x 3 + 2048 x 16) x 4 B per layer
    mamba = parse_config({"model_type": "mamba", "hidden_size": 1024, "n_layer": 4, "vocab_size": 100,
                          "state_size": 16, "conv_kernel": 4, "expand": 2, "intermediate_size": 2048}, "m",
                         SpecSource("local", "c"))
    assert kinds(mamba) == "----" and mamba.layers[0].state_bytes == (2048 * 3 + 2048 * 16) * 4


def test_max_context_rules():
    assert parse(max_position_embeddings=4096).max_context == 4096
    assert parse(n_positions=1024, max_position_embeddings=2048).max_context == 1024  # smallest key wins
    yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}
    assert parse(max_position_embeddings=32768, rope_scaling=yarn).max_context == 131072
    linear = {"type": "linear", "factor": 2.0}
    assert parse(max_position_embeddings=4096, rope_scaling=linear).max_context == 8192
    llama3 = {"rope_type": "llama3", "factor": 8.0}
    assert parse(max_position_embeddings=131072, rope_scaling=llama3).max_context == 131072
    assert parse().max_context == 2048  # no key: vLLM's fallback


@pytest.mark.parametrize("overrides, key", [
    ({"num_key_value_heads": 3}, "num_key_value_heads"),  # does not divide 8 heads
    ({"hybrid_override_pattern": "M*"}, "hybrid_override_pattern"),  # wrong length
    ({"layer_types": ["full_attention"] * 7}, "layer_types"),
    ({"layer_types": ["sliding_attention"] * 8}, "sliding_window"),  # sliding layers without a window
    ({"hidden_size": 1000, "num_attention_heads": 7}, "hidden_size"),  # no integer head_dim
    ({"num_hidden_layers": True}, "num_hidden_layers"),  # a bool is not a count
])
def test_inconsistent_configs_name_the_key(overrides, key):
    with pytest.raises(KvplanError) as raised:
        parse(**overrides)
    assert key in str(raised.value) and "config.json" in str(raised.value)
