"""Parameter counts of the hybrid families against the Hub's exact totals (the `safetensors.total` the Hub API gives, as
the AlexsJones/llmfit catalogue llmfit-core/data/hf_models.json @5bdc9df records them in `parameters_raw`), each
derived by hand from the model file vLLM 0.33.0 builds. The configs are the published ones as public GitHub files
quote them (named at each test; a field a quote leaves out is said where it is filled in)."""

from __future__ import annotations

from conftest import load_fixture

from kvplan.models.hf_config import parse_config
from kvplan.models.model import SpecSource
from kvplan.units import GiB
from kvplan.weights import weight_layout

# Granite-4.0-H: attention at 5, 15, 25 and 35 of 40 layers
GRANITE_LAYERS = (["mamba"] * 5 + ["attention"] + ["mamba"] * 9 + ["attention"] + ["mamba"] * 9 + ["attention"]
                  + ["mamba"] * 9 + ["attention"] + ["mamba"] * 4)

# ibm-granite/granite-4.0-h-micro's config.json as a public Swift fit-check test quotes it (GitHub code index file
# id 60797780217): 40 layers, hidden 2,048, 32 heads, 8 KV heads, Mamba-2 64 heads x 64, state 128, 1 group,
# conv 4, expand 2, num_local_experts 0, shared_intermediate_size 8,192. vocab_size 100,352 and tied embeddings:
# the family's, as a public quote of granite-4.0-h-tiny's and granite-4.0-h-1b's configs gives them (file id
# 65865534003); intermediate_size 8,192 as a Granite-4-H adapter test quotes it (file id 67669076662).
GRANITE_H_MICRO = {
    "architectures": ["GraniteMoeHybridForCausalLM"], "model_type": "granitemoehybrid", "num_hidden_layers": 40,
    "hidden_size": 2048, "num_attention_heads": 32, "num_key_value_heads": 8, "mamba_n_heads": 64,
    "mamba_d_head": 64, "mamba_d_state": 128, "mamba_n_groups": 1, "mamba_d_conv": 4, "mamba_expand": 2,
    "num_local_experts": 0, "num_experts_per_tok": 0, "shared_intermediate_size": 8192, "intermediate_size": 8192,
    "layer_types": GRANITE_LAYERS, "max_position_embeddings": 131072, "vocab_size": 100352,
    "tie_word_embeddings": True, "torch_dtype": "bfloat16",
}

# granite-4.0-h-tiny's config.json as the public quote (file id 65865534003) gives it
GRANITE_H_TINY = {
    "model_type": "granitemoehybrid", "hidden_size": 1536, "num_hidden_layers": 40, "num_attention_heads": 12,
    "num_key_value_heads": 4, "intermediate_size": 512, "shared_intermediate_size": 1024, "num_local_experts": 64,
    "num_experts_per_tok": 6, "vocab_size": 100352, "tie_word_embeddings": True, "mamba_d_state": 128,
    "mamba_n_groups": 1, "mamba_n_heads": 48, "mamba_d_head": 64, "mamba_expand": 2, "mamba_d_conv": 4,
    "mamba_chunk_size": 256, "max_position_embeddings": 131072, "layer_types": GRANITE_LAYERS,
}


def parsed(config: dict[str, object]):
    return parse_config(config, "test", SpecSource("local", "config.json"))


def test_granite_h_micro_every_layer_has_its_shared_mlp():
    # vLLM 0.33.0 granitemoehybrid.py: both decoder layers carry shared_mlp (GraniteMoeSharedMLP, input_linear
    # hidden -> 2 x shared_intermediate_size and output_linear back, no bias) after input_layernorm and
    # post_attention_layernorm; block_sparse_moe only where num_local_experts > 0 (here 0: dense). By hand:
    # - embeddings 100,352 x 2,048 = 205,520,896 (lm_head tied)
    # - 36 Mamba-2 mixers: in_proj 2,048 x (4,096 + 4,352 + 64) = 17,432,576, conv (4,096 + 2 x 128) x 4 + bias
    #   4,352 = 21,760, A, D, dt_bias 3 x 64, gated norm 4,096, out_proj 4,096 x 2,048 = 8,388,608: 25,847,232
    # - 4 attention layers: q, o 2 x 2,048^2 + k, v 2 x 2,048 x 8 x 64 = 10,485,760
    # - 40 layers x (shared MLP 3 x 2,048 x 8,192 = 50,331,648 + 2 RMSNorms 4,096), final norm 2,048
    # 205,520,896 + 36 x 25,847,232 + 4 x 10,485,760 + 40 x 50,335,744 + 2,048 = 3,191,396,096, the Hub's count for
    # ibm-granite/granite-4.0-h-micro. Without the Mamba layers' MLP it was 1,379,383,040 (2.57 GiB in bf16).
    spec = parsed(GRANITE_H_MICRO)
    assert spec.moe is None  # num_local_experts 0 is a dense model, not a refusal
    assert spec.params.total == 3_191_396_096
    assert spec.params.exact and not spec.notes
    mamba, attention = spec.params.by_layer[0], spec.params.by_layer[5]
    assert mamba.mlp == attention.mlp == 50_331_648


def test_granite_h_micro_weights_against_s08s_load():
    # S08 (kvplan/engines/sglang/data/calibration.yaml, SGLang bench_one_batch): free 15.24 GiB before the weights,
    # 9.26 after: 5.98 GiB taken by the load. kvplan's bf16 weights: 3,191,396,096 x 2 = 6,382,792,192 B = 5.94 GiB
    # (the other 0.04 GiB is what SGLang allocates beside the weights in that window); 2.57 GiB before.
    layout = weight_layout(parsed(GRANITE_H_MICRO), 2, None)
    total = layout.embeddings + layout.lm_head + 40 * layout.per_layer + layout.vision
    assert total == 6_382_792_192
    assert round(total / GiB, 2) == 5.94 and round(15.24 - 9.26, 2) == 5.98


def test_granite_h_tiny_experts_beside_the_shared_mlp():
    # granitemoehybrid.py with num_local_experts 64: block_sparse_moe (GraniteMoeMoE: 64 experts of 3 x 1,536 x 512
    # and a 1,536 x 64 router, granitemoe.py GateLinear without bias) beside the shared MLP in every layer. By hand:
    # - embeddings 100,352 x 1,536 = 154,140,672 (tied)
    # - 36 Mamba-2 mixers (48 heads x 64 = 3,072 inner, conv 3,328): in_proj 1,536 x 6,448 = 9,904,128 + conv
    #   3,328 x 5 = 16,640 + 144 + norm 3,072 + out_proj 3,072 x 1,536 = 4,718,592: 14,642,576
    # - 4 attention layers (head 128): 2 x 1,536^2 + 2 x 1,536 x 512 = 6,291,456
    # - 40 layers x (experts 150,994,944 + router 98,304 + shared MLP 3 x 1,536 x 1,024 = 4,718,592 + norms 3,072)
    # - final norm 1,536
    # = 6,939,037,248, the Hub's count for ibm-granite/granite-4.0-h-tiny.
    spec = parsed(GRANITE_H_TINY)
    assert spec.moe is not None and spec.moe.shared_intermediate_size == 1024
    assert spec.params.experts == 40 * 64 * 3 * 1536 * 512
    assert spec.params.total == 6_939_037_248


def test_lfm2_short_convolutions_and_the_adjusted_mlp():
    # LiquidAI/LFM2-1.2B's config.json as the Swift fit-check test quotes it (file id 60797780217): 16 layers,
    # full_attn_idxs 2, 5, 8, 10, 12, 14, hidden 2,048, 32 heads, 8 KV heads, conv_L_cache 3; the rest are
    # transformers' Lfm2Config defaults (vocab_size 65,536, intermediate_size 12,288, conv_bias false,
    # block_auto_adjust_ff_dim true, block_multiple_of 256, block_ffn_dim_multiplier 1.0). vLLM 0.33.0 models/lfm2.py,
    # by hand:
    # - embeddings 65,536 x 2,048 = 134,217,728, the lm_head always tied (tie_weights)
    # - 10 ShortConv mixers (layers/mamba/short_conv.py): in_proj 2,048 x 3 x 2,048 + conv 2,048 x 3 + out_proj
    #   2,048^2 = 16,783,360
    # - 6 attention layers: 10,485,760 + q_layernorm and k_layernorm 2 x 64 = 10,485,888
    # - 16 MLPs (Lfm2MLP): int(2 x 12,288 / 3) = 8,192, a multiple of 256: 3 x 2,048 x 8,192 = 50,331,648, and
    #   operator_norm, ffn_norm 2 x 2,048; embedding_norm 2,048 after the last layer
    # = 1,170,340,608, the Hub's count for LiquidAI/LFM2-1.2B.
    layer_types = ["full_attention" if i in (2, 5, 8, 10, 12, 14) else "conv" for i in range(16)]
    spec = parsed({"model_type": "lfm2", "num_hidden_layers": 16, "hidden_size": 2048, "num_attention_heads": 32,
                   "num_key_value_heads": 8, "conv_L_cache": 3, "layer_types": layer_types,
                   "max_position_embeddings": 128000, "vocab_size": 65536, "intermediate_size": 12288})
    assert spec.intermediate_size == 8192
    assert spec.params.by_layer[0].mixer + spec.params.by_layer[0].loose == 16_783_360 + 4_096
    assert spec.params.total == 1_170_340_608
    assert spec.params.exact


def test_lfm2_without_the_ff_dim_adjustment():
    # LiquidAI/LFM2-2.6B's config.json as the public quote (file id 65865534003) gives it, less the block_* fields it
    # leaves out: with Lfm2Config's default adjustment its MLPs are int(2 x 10,752 / 3) = 7,168 wide and the model
    # 134,217,728 + 22 x 16,783,360 + 8 x 10,485,888 + 30 x (3 x 2,048 x 7,168 + 4,096) + 2,048 = 1,908,669,440;
    # with block_auto_adjust_ff_dim false they keep 10,752: 30 x 3 x 2,048 x 3,584 = 660,602,880 more,
    # 2,569,272,320, the Hub's count for LiquidAI/LFM2-2.6B (so its config turns the adjustment off).
    attention = (2, 5, 9, 13, 17, 21, 24, 27)
    config = {"model_type": "lfm2", "hidden_size": 2048, "num_hidden_layers": 30, "num_attention_heads": 32,
              "num_key_value_heads": 8, "intermediate_size": 10752, "vocab_size": 65536, "tie_embedding": True,
              "conv_L_cache": 3, "conv_dim": 2048, "max_position_embeddings": 128000,
              "layer_types": ["full_attention" if i in attention else "conv" for i in range(30)]}
    assert parsed(config).params.total == 1_908_669_440
    assert parsed({**config, "block_auto_adjust_ff_dim": False}).params.total == 2_569_272_320


def test_nemotron_h_one_block_a_layer():
    # NVIDIA-Nemotron-Nano-9B-v2's config.json as public files quote it (file ids 58647227636, 71543829462): 56
    # layers 'M-M-M-MM-M-M-M*-M-M-M*-M-M-M-M*-M-M-M-M*-M-MM-M-M-M-M-M-', hidden 4,480, intermediate 15,680, 40 heads
    # x 128, 8 KV heads, Mamba-2 128 heads x 80, 8 groups, state 128, conv 4, vocab 131,072; untied, conv bias and
    # no other bias (NemotronHConfig's defaults). vLLM 0.33.0 nemotron_h.py, one block after one norm a layer:
    # - 27 Mamba-2 blocks: in_proj 4,480 x (10,240 + 12,288 + 128) = 101,498,880 + conv 12,288 x 5 = 61,440 + 384
    #   + norm 10,240 + out_proj 10,240 x 4,480 = 45,875,200: 147,446,144
    # - 4 attention blocks: 2 x 4,480 x 5,120 + 2 x 4,480 x 1,024 = 55,050,240
    # - 25 MLP blocks (relu2, up and down): 2 x 4,480 x 15,680 = 140,492,800
    # - 56 norms of 4,480, the final norm, untied embeddings 2 x 131,072 x 4,480
    # = 8,888,227,328, the Hub's count for nvidia/NVIDIA-Nemotron-Nano-9B-v2.
    pattern = "M-M-M-MM-M-M-M*-M-M-M*-M-M-M-M*-M-M-M-M*-M-MM-M-M-M-M-M-"
    spec = parsed({"model_type": "nemotron_h", "num_hidden_layers": 56, "hidden_size": 4480,
                   "intermediate_size": 15680, "num_attention_heads": 40, "num_key_value_heads": 8, "head_dim": 128,
                   "vocab_size": 131072, "hybrid_override_pattern": pattern, "mamba_num_heads": 128,
                   "mamba_head_dim": 80, "n_groups": 8, "ssm_state_size": 128, "conv_kernel": 4,
                   "tie_word_embeddings": False})
    assert spec.params.total == 8_888_227_328


def test_qwen3_next_with_its_mtp_layer_is_the_hub_total():
    # tests/test_params.py derives the loaded Qwen3-Next-80B-A3B by hand: 79,674,391,296. The checkpoint also holds
    # the MTP layer vLLM 0.33.0 qwen3_next_mtp.py loads apart: fc 2 x 2,048 -> 2,048 = 8,388,608, one full-attention
    # decoder layer (27,263,488 + experts, router, shared expert and norms 1,614,813,184) and three RMSNorms (norm,
    # pre_fc_norm_hidden, pre_fc_norm_embedding) 6,144 = 1,650,471,424; the sum, 81,324,862,720, is the Hub's count
    # for Qwen/Qwen3-Next-80B-A3B-Instruct (same geometry as the -Thinking config here).
    params = load_fixture("params/Qwen__Qwen3-Next-80B-A3B-Thinking.json").params
    mtp = 8_388_608 + 27_263_488 + 1_614_813_184 + 3 * 2_048
    assert params.total + mtp == 81_324_862_720


def test_bamba_attention_by_index_and_an_mlp_in_every_layer():
    # ibm-ai-platform/Bamba-9B as a public test quotes its config (file id 65760752905): 32 layers, attention at
    # attn_layer_indices 9, 18, 27, hidden 4,096, 32 heads, state 128; the other fields (8 KV heads, intermediate
    # 14,336, vocab 128,256, 128 Mamba heads x 64, 1 group, conv 4, expand 2, untied) are not in a stored copy.
    # vLLM 0.22.0 bamba.py (its last release with Bamba): layers_block_type from attn_layer_indices, Mamba-2 elsewhere,
    # and a BambaMLP after two RMSNorms in both layer kinds. By hand:
    # - 29 Mamba-2 mixers: in_proj 4,096 x (8,192 + 8,448 + 128) = 68,681,728 + conv 8,448 x 5 = 42,240 + 384
    #   + norm 8,192 + out_proj 8,192 x 4,096 = 33,554,432: 102,286,976
    # - 3 attention layers 2 x 4,096^2 + 2 x 4,096 x 1,024 = 41,943,040; 32 MLPs 3 x 4,096 x 14,336 = 176,160,768
    # - 64 norms and the final one of 4,096, untied embeddings 2 x 128,256 x 4,096
    # = 9,780,235,392, which is the Hub's count for ibm-ai-platform/Bamba-9B-v1.
    spec = parsed({"model_type": "bamba", "num_hidden_layers": 32, "num_attention_heads": 32, "hidden_size": 4096,
                   "mamba_d_state": 128, "attn_layer_indices": [9, 18, 27], "num_key_value_heads": 8,
                   "intermediate_size": 14336, "vocab_size": 128256, "mamba_n_heads": 128, "mamba_d_head": 64,
                   "mamba_n_groups": 1, "mamba_d_conv": 4, "mamba_expand": 2, "tie_word_embeddings": False})
    assert [i for i, layer in enumerate(spec.layers) if layer.kind == "full"] == [9, 18, 27]
    assert spec.params.total == 9_780_235_392
