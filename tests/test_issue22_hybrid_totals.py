"""Issue 22's hybrid totals: Kimi-Linear (KDA with its low-rank gate beside MLA), Falcon-H1 (attention and Mamba-2
side by side) and granite-4.0-h-small (Mamba-2 and attention, each with experts and a shared MLP), counted module by
module as vLLM 0.33.0 builds them and checked against the Hub's exact totals.

Published totals (the Hub's safetensors parameter counts as public GitHub files record them):
- moonshotai/Kimi-Linear-48B-A3B-Instruct 49,122,681,728: AlexsJones/llmfit llmfit-core/data/hf_models.json
  @5bdc9df9 parameters_raw, and a public report of the checkpoint's 20,493 safetensors tensors, shape by shape
  (GitHub code index file id 62691149540, "参数总量 49,122,681,728"), which also quotes its config.json
  (tests/fixtures/configs/issue22/, see SOURCES.md there).
- tiiuae/Falcon-H1-0.5B-Base 521,411,104 (llmfit @5bdc9df9) and tiiuae/Falcon-H1-Tiny-90M-Instruct 91,131,072
  (llmfit @0aa83cfa).
- ibm-granite/granite-4.0-h-small 32,207,337,984: debaditc/kvfit src/kvfit/data/models.json @bd4ccabf num_params
  ("exact params from HF safetensors", its scripts/build_registry.py), the same count llama.cpp reports as n-params
  for unsloth's GGUF of it (file id 37074310570).
"""

from __future__ import annotations

from conftest import load_fixture

from kvplan.models.hf_config import parse_config
from kvplan.models.layers import KdaLowRankGateState, LatentAttention
from kvplan.models.model import SpecSource

KIMI_LINEAR = "issue22/moonshotai__Kimi-Linear-48B-A3B-Instruct.json"
KIMI_MLA = [3, 7, 11, 15, 19, 23, 26]  # full_attn_layers 4, 8, ..., 24, 27 (1-based)

# tiiuae/Falcon-H1-0.5B-Base's config.json as Megatron-Bridge's Falcon-H1 bridge test quotes it
# (FALCON_H1_500M_CONFIG, file id 54893243323). The quote leaves out mamba_d_ssm; transformers' FalconH1Config
# validate_architecture requires mamba_d_head x mamba_n_heads to equal it, so it is 24 x 64 = 1,536 here.
FALCON_H1_05B = {
    "architectures": ["FalconH1ForCausalLM"], "model_type": "falcon_h1", "attention_bias": False,
    "attention_in_multiplier": 1.0, "attention_out_multiplier": 0.9375, "attn_layer_indices": None,
    "embedding_multiplier": 5.656854249492381, "head_dim": 64, "hidden_act": "silu", "hidden_size": 1024,
    "intermediate_size": 2048, "key_multiplier": 0.39062499999999994, "lm_head_multiplier": 0.0390625,
    "mamba_chunk_size": 128, "mamba_conv_bias": True, "mamba_d_conv": 4, "mamba_d_head": 64, "mamba_d_ssm": 1536,
    "mamba_d_state": 128, "mamba_expand": 2, "mamba_n_groups": 1, "mamba_n_heads": 24,
    "mamba_norm_before_gate": False, "mamba_proj_bias": False, "mamba_rms_norm": False, "mamba_use_mlp": True,
    "max_position_embeddings": 16384, "mlp_bias": False, "mlp_multipliers": [0.8838834764831844, 0.5859375],
    "num_attention_heads": 8, "num_hidden_layers": 36, "num_key_value_heads": 2, "projectors_bias": False,
    "rms_norm_eps": 1e-5, "rope_scaling": None, "rope_theta": 100000000000.0, "ssm_in_multiplier": 1.25,
    "ssm_multipliers": [0.3535533905932738, 0.25, 0.3535533905932738, 0.5, 0.3535533905932738],
    "ssm_out_multiplier": 0.23570226039551587, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "vocab_size": 32784,
}

# tiiuae/Falcon-H1-Tiny-90M-Instruct's config as a public Rust loader test quotes it ("Values mirror the real
# checkpoint", file id 54570484031); intermediate_size 768 and max_position_embeddings 262,144 as a public
# evaluation contract quotes Falcon-H1-Tiny-90M-Base's (file id 65991692644).
FALCON_H1_TINY = {
    "architectures": ["FalconH1ForCausalLM"], "model_type": "falcon_h1", "vocab_size": 32768, "hidden_size": 512,
    "intermediate_size": 768, "num_hidden_layers": 24, "num_attention_heads": 8, "num_key_value_heads": 2,
    "head_dim": 64, "rms_norm_eps": 1e-05, "rope_theta": 100000000000.0, "max_position_embeddings": 262144,
    "mamba_d_conv": 4, "mamba_d_ssm": 768, "mamba_d_state": 64, "mamba_d_head": 32, "mamba_n_heads": 24,
    "mamba_n_groups": 1, "mamba_conv_bias": True, "mamba_proj_bias": False, "mamba_rms_norm": False,
    "mamba_norm_before_gate": False, "embedding_multiplier": 0.11083984375, "lm_head_multiplier": 0.078125,
    "attention_in_multiplier": 1.0, "attention_out_multiplier": 1.0, "key_multiplier": 1.0,
    "ssm_in_multiplier": 1.0, "ssm_out_multiplier": 1.0, "tie_word_embeddings": True, "attention_bias": False,
    "projectors_bias": False, "torch_dtype": "bfloat16",
}

# ibm-granite/granite-4.0-h-small's config.json as debaditc/kvfit src/kvfit/data/models.json @bd4ccabf keeps it
# ("a trimmed copy of its published config.json"); attention at 5, 15, 25 and 35 of 40 layers
GRANITE_LAYERS = (["mamba"] * 5 + ["attention"] + ["mamba"] * 9 + ["attention"] + ["mamba"] * 9 + ["attention"]
                  + ["mamba"] * 9 + ["attention"] + ["mamba"] * 4)
GRANITE_H_SMALL = {
    "architectures": ["GraniteMoeHybridForCausalLM"], "model_type": "granitemoehybrid", "hidden_size": 4096,
    "intermediate_size": 768, "layer_types": GRANITE_LAYERS, "mamba_d_conv": 4, "mamba_d_head": 64,
    "mamba_d_state": 128, "mamba_expand": 2, "mamba_n_groups": 1, "mamba_n_heads": 128,
    "max_position_embeddings": 131072, "num_attention_heads": 32, "num_experts_per_tok": 10,
    "num_hidden_layers": 40, "num_key_value_heads": 8, "num_local_experts": 72, "shared_intermediate_size": 1536,
    "tie_word_embeddings": True, "vocab_size": 100352, "torch_dtype": "bfloat16",
}


def parsed(config: dict[str, object]):
    return parse_config(config, "test", SpecSource("local", "config.json"))


def test_kimi_linear_kda_layer_by_hand():
    # vLLM 0.33.0 model_executor/layers/mamba/gdn/kimi_gdn_linear_attn.py KimiGatedDeltaNetAttention (the config
    # names no use_full_rank_gate), hidden 2,304, 32 heads x 128 = 4,096, conv 4; the checkpoint's own tensors in
    # brackets (the report, file id 62691149540):
    # - in_proj_qkvgfab: q, k, v [3 x 4,096 x 2,304], beta [b_proj 32 x 2,304], f_a [128 x 2,304]:
    #   2,304 x (12,288 + 32 + 128) = 28,680,192
    # - f_b_proj [4,096 x 128] 524,288; g_a_proj [128 x 2,304] 294,912; g_b_proj [4,096 x 128] 524,288
    # - o_proj [2,304 x 4,096] 9,437,184                                           -> 39,460,864 in linears
    # - dt_bias [4,096], q/k/v_conv1d [3 x 4,096 x 1 x 4] 49,152, A_log [1, 1, 32, 1] 32, o_norm [128]: 53,408
    spec = load_fixture(KIMI_LINEAR)
    kda = spec.layers[0]
    assert isinstance(kda, KdaLowRankGateState) and (kda.heads, kda.head_size, kda.conv_kernel) == (32, 128, 4)
    layer = spec.params.by_layer[0]
    assert layer.mixer == 39_460_864
    assert layer.loose == 53_408 + 2 * 2304  # and the layer's two RMSNorms
    assert layer.mlp == 3 * 2304 * 9216 == 63_700_992  # first_k_dense_replace 1: layer 0 is a dense MLP


def test_kimi_linear_total_is_the_hubs():
    # vLLM 0.33.0 models/kimi_k3/nvidia/model.py KimiLinearForCausalLM, by hand:
    kda = 39_460_864 + 53_408  # 20 KDA layers (above)
    # 7 MLA layers, q_lora_rank null: q_proj 2,304 x 32 x 192 = 14,155,776; kv_a_proj_with_mqa 2,304 x 576 =
    # 1,327,104; kv_a_layernorm 512; kv_b_proj 512 x 32 x (128 + 128) = 4,194,304; o_proj 32 x 128 x 2,304
    mla = 14_155_776 + 1_327_104 + 512 + 4_194_304 + 9_437_184
    # 26 MoE layers (KimiMoE): 256 experts x 3 x 2,304 x 1,024, the router 256 x 2,304, gate.e_score_correction_bias
    # of 256 (built whatever the config says), one shared expert 3 x 2,304 x 1,024
    moe = 256 * 3 * 2304 * 1024 + 256 * 2304 + 256 + 3 * 2304 * 1024
    dense = 3 * 2304 * 9216
    norms = 27 * 2 * 2304 + 2304  # two per layer and the final norm
    embeddings = 163840 * 2304  # and as many in the untied lm_head
    total = 2 * embeddings + 20 * kda + 7 * mla + dense + 26 * moe + norms
    assert total == 49_122_681_728  # the Hub's count for moonshotai/Kimi-Linear-48B-A3B-Instruct
    spec = load_fixture(KIMI_LINEAR)
    assert spec.params.total == total
    assert spec.params.exact and not spec.notes
    assert spec.params.by_layer[3].mixer == mla - 512
    assert spec.params.experts == 26 * 256 * 3 * 2304 * 1024


def test_kimi_linear_caches_by_hand():
    # the KDA state from the same fields as Kimi-K3's (vLLM 0.33.0 mamba_utils.py kda_state_shape: conv
    # (4 - 1, 3 x 4,096 / tp), recurrent (32 / tp, 128, 128); kda_state_dtype: conv in the model dtype, bfloat16,
    # the recurrent state float32 under auto)
    spec = load_fixture(KIMI_LINEAR)
    state = spec.layers[0]
    assert state.state_page_bytes(1) == 3 * 12288 * 2 + 32 * 128 * 128 * 4 == 2_170_880
    assert state.state_page_bytes(2) == 3 * 6144 * 2 + 16 * 128 * 128 * 4 == 1_085_440
    # the 7 MLA layers cache kv_lora_rank 512 + qk_rope_head_dim 64 values a token: 7 x 576 x 2 B = 8,064, the
    # B/token llama.cpp's KV buffer measured for this model in the public report of file id 66234883408
    assert [i for i, layer in enumerate(spec.layers) if isinstance(layer, LatentAttention)] == KIMI_MLA
    assert spec.kv_bytes_per_token(2) == 8_064


def test_kimi_linear_maximum_length_is_vllms_config_default():
    # the config has model_max_length 1,048,576 but no max_position_embeddings; vLLM 0.33.0 reads it through its
    # own KimiLinearConfig (transformers_utils/config.py _CONFIG_REGISTRY kimi_linear), whose
    # max_position_embeddings defaults to 4,096, and derives max_model_len from that (config/model.py
    # _get_and_verify_max_len: model_max_length only admits a user's longer max_model_len)
    assert load_fixture(KIMI_LINEAR).max_context == 4096


def test_falcon_h1_05b_by_hand():
    # vLLM 0.33.0 falcon_h1.py FalconH1ParallelHybrid, every one of 36 layers:
    # - attention (bias-free qkv_proj, o_proj): q 1,024 x 8 x 64 = 524,288, k and v 2 x 1,024 x 2 x 64 = 262,144,
    #   o 524,288 -> 1,310,720
    # - MambaMixer2 (d_ssm 1,536, 1 group, state 128): in_proj 1,024 x (1,536 + 1,792 + 24) = 3,432,448; conv1d
    #   (1,536 + 2 x 128 = 1,792) x 4 + its bias 1,792 (mamba_conv_bias) = 8,960; A, D, dt_bias 3 x 24 = 72; no
    #   gated norm (mamba_rms_norm false); out_proj 1,536 x 1,024 = 1,572,864 -> 5,014,344
    # - FalconH1MLP (bias-free): 3 x 1,024 x 2,048 = 6,291,456; input_layernorm and pre_ff_layernorm 2 x 1,024
    # - the µP multipliers (mlp_multipliers, ssm_multipliers' mup_vector buffer, non-persistent) are no parameters
    layer = 1_310_720 + 5_014_344 + 6_291_456 + 2048
    total = 36 * layer + 2 * 32784 * 1024 + 1024  # embeddings and the untied lm_head, final_layernorm
    assert total == 521_411_104  # the Hub's count for tiiuae/Falcon-H1-0.5B-Base
    spec = parsed(FALCON_H1_05B)
    assert spec.params.total == total
    assert spec.params.exact and not spec.notes
    assert spec.params.by_layer[0].mlp == 6_291_456


def test_falcon_h1_tiny_by_hand():
    # 24 layers, hidden 512: attention q 512 x 512, k and v 2 x 512 x 128, o 512 x 512 = 655,360; Mamba-2 (d_ssm
    # 768, state 64, conv channels 768 + 128 = 896): in_proj 512 x (768 + 896 + 24) = 864,256, conv 896 x 4 + 896,
    # 3 x 24, out_proj 768 x 512 = 393,216 -> 1,262,024; MLP 3 x 512 x 768 = 1,179,648; two norms 1,024
    layer = 655_360 + 1_262_024 + 1_179_648 + 1024
    total = 24 * layer + 32768 * 512 + 512  # the lm_head tied (tie_word_embeddings true)
    assert total == 91_131_072  # the Hub's count for tiiuae/Falcon-H1-Tiny-90M-Instruct
    spec = parsed(FALCON_H1_TINY)
    assert spec.params.total == total and spec.params.lm_head == 0
    assert spec.params.exact


def test_granite_h_small_by_hand():
    # vLLM 0.33.0 granitemoehybrid.py, hidden 4,096, 40 layers:
    # - 36 Mamba-2 mixers (128 heads x 64 = 8,192, 1 group, state 128, conv channels 8,448): in_proj 4,096 x
    #   (8,192 + 8,448 + 128) = 68,681,728, conv 8,448 x 4 + bias 8,448 = 42,240, A, D, dt_bias 3 x 128, gated
    #   norm 8,192, out_proj 8,192 x 4,096 = 33,554,432 -> 102,286,976
    # - 4 attention layers (32 heads x 128, 8 KV heads): 2 x 4,096^2 + 2 x 4,096 x 1,024 = 41,943,040
    # - every layer: block_sparse_moe 72 x 3 x 4,096 x 768 = 679,477,248 and its bias-free router 4,096 x 72 =
    #   294,912, shared_mlp 3 x 4,096 x 1,536 = 18,874,368, two RMSNorms 8,192 -> 698,654,720
    # - embeddings 100,352 x 4,096 = 411,041,792 (lm_head tied), final norm 4,096
    total = 411_041_792 + 36 * 102_286_976 + 4 * 41_943_040 + 40 * 698_654_720 + 4096
    assert total == 32_207_337_984  # the Hub's count for ibm-granite/granite-4.0-h-small
    spec = parsed(GRANITE_H_SMALL)
    assert spec.params.total == total
    assert spec.params.experts == 40 * 679_477_248
    assert spec.params.exact and not spec.notes


def test_kimi_linear_is_bundled_as_published():
    # model_specs/moonshotai__Kimi-Linear-48B-A3B-Instruct.json carries the same config.json (SOURCES.md here)
    from kvplan.models.sources import resolve

    spec = resolve("moonshotai/Kimi-Linear-48B-A3B-Instruct")
    assert spec.params.total == 49_122_681_728 and spec.kv_bytes_per_token(2) == 8_064
