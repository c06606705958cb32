"""Round 3: the frontier families' parameter totals against the Hub's published counts, each derived module by
module from the config as vLLM 0.33.0 builds the model, and what the Hub counts beside it (MTP layers vLLM's main
model does not load, FP8 block scales, buffers a checkpoint's index leaves out) by hand.

Published totals: the Hub's safetensors parameter counts as AlexsJones/llmfit llmfit-core/data/hf_models.json
@5bdc9df9 (2026-05-12) records them in parameters_raw:
- MiniMaxAI/MiniMax-M2.5 and MiniMaxAI/MiniMax-M2.7 228,703,644,928 (FP8 checkpoints, weight_block_size 128 x 128);
- zai-org/GLM-5 and zai-org/GLM-5.1 753,864,139,008 (BF16);
- nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16 31,577,937,344, nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-BF16
  123,611,012,096. For Nano the checkpoint's model.safetensors.index.json metadata says total_parameters
  31,577,937,344 and total_size 63,155,886,464 bytes (public reports of the index, GitHub code index file ids
  59232690034 and 67321099968); its MoE layers' gate.e_score_correction_bias is an F32 tensor of n_routed_experts
  (the Nano NVFP4 tensor table pinned to the checkpoint's headers, file id 70759093397).
"""

from __future__ import annotations

import json
from pathlib import Path

from conftest import fp8_block_scales as scales  # an FP8 linear's 128 x 128 block scales (weight_scale_inv)

from kvplan.models.hf_config import parse_config
from kvplan.models.model import SpecSource
from kvplan.models.sources import resolve

FRONTIER = Path(__file__).parent / "fixtures" / "configs" / "frontier"


def frontier(name: str):
    data = json.loads((FRONTIER / name / "config.json").read_text())
    return parse_config(data, name, SpecSource("local", name))


# MiniMax-M2.5 / M2.7 (config: hidden 3,072, 48 heads and 8 KV heads of 128, 62 layers, 256 experts of 1,536,
# vocab 200,064, untied, use_routing_bias, qk_norm_type per_layer), vLLM 0.33.0 minimax_m2.py:
H, Q, KV, INNER, EXPERTS, LAYERS, VOCAB = 3072, 48 * 128, 8 * 128, 1536, 256, 62, 200064
ATTENTION = H * Q + 2 * H * KV + Q * H  # q, k, v, o: 44,040,192
QK_NORMS = Q + KV  # MiniMaxText01RMSNormTP(head_dim x heads) and (head_dim x KV heads): 7,168
MOE = EXPERTS * 3 * H * INNER + EXPERTS * H + EXPERTS  # w1 / w3 / w2, the router gate, e_score_correction_bias
MINIMAX_LAYER = ATTENTION + QK_NORMS + MOE + 2 * H
MINIMAX = LAYERS * MINIMAX_LAYER + 2 * VOCAB * H + H


def test_minimax_m2_layer_by_hand():
    assert ATTENTION == 44_040_192 and MOE == 3_624_665_344
    assert MINIMAX_LAYER == 3_668_718_848
    assert MINIMAX == 228_689_764_864
    for name in ("MiniMaxAI/MiniMax-M2.5", "MiniMaxAI/MiniMax-M2.7"):
        params = resolve(name).params
        assert params.total == MINIMAX
        assert params.by_layer[0].loose == QK_NORMS + EXPERTS * H + EXPERTS + 2 * H
        assert params.exact


def test_minimax_m2_hub_total_adds_the_fp8_block_scales():
    # every attention and expert linear is FP8 (modules_to_not_convert: gate, e_score_correction_bias, lm_head);
    # one weight_scale_inv entry per 128 x 128 block (out x in): q (6,144 x 3,072) 1,152, k and v 192 each, o 1,152;
    # w1 / w3 (1,536 x 3,072) 288 each, w2 (3,072 x 1,536) 288
    attention = scales(Q, H) + 2 * scales(KV, H) + scales(H, Q)
    experts = EXPERTS * (2 * scales(INNER, H) + scales(H, INNER))
    assert (attention, experts) == (2_688, 221_184)
    # the Hub's 228,703,644,928 for MiniMaxAI/MiniMax-M2.5 and M2.7 (llmfit hf_models.json @5bdc9df9): no MTP
    # weights are shipped (vLLM 0.33.0 has no MTP model for MiniMaxM2ForCausalLM either)
    assert MINIMAX + LAYERS * (attention + experts) == 228_703_644_928


def test_minimax_m2_without_routing_bias_builds_no_score_bias():
    # vLLM 0.33.0 minimax_m2.py MiniMaxM2MoE: e_score_correction_bias only where use_routing_bias
    data = json.loads((FRONTIER / "MiniMaxAI__MiniMax-M2.5" / "config.json").read_text())
    data["use_routing_bias"] = False
    spec = parse_config(data, "m", SpecSource("local", "m"))
    assert spec.params.total == MINIMAX - LAYERS * EXPERTS


# GLM-5 / GLM-5.1 (glm_moe_dsa; vLLM 0.33.0 deepseek_v2.py DeepseekV2ForCausalLM): hidden 6,144, 64 heads, q_lora_rank
# 2,048, kv_lora_rank 512, qk_nope 192, qk_rope 64, v_head_dim 256; the indexer 32 heads of 128; 256 experts of
# 2,048 and one shared expert, first_k_dense_replace 3 (dense MLPs of 12,288), 78 layers, vocab 154,880, untied.
GH, GHEADS = 6144, 64
MLA = (GH * 2048 + 2048 + 2048 * GHEADS * 256  # q_a_proj, q_a_layernorm, q_b_proj (nope + rope 256)
       + GH * (512 + 64) + 512 + 512 * GHEADS * (192 + 256)  # kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj
       + GHEADS * 256 * GH)  # o_proj
INDEXER = 2048 * 32 * 128 + GH * 128 + 2 * 128 + GH * 32  # wq_b, wk, k_norm (LayerNorm: weight and bias), weights_proj
GLM_MOE = 256 * 3 * GH * 2048 + 256 * GH + 256 + 3 * GH * 2048  # experts, router, score bias (noaux_tc), shared
GLM_MOE_LAYER = MLA + INDEXER + GLM_MOE + 2 * GH
GLM_DENSE_LAYER = MLA + INDEXER + 3 * GH * 12288 + 2 * GH
GLM = 3 * GLM_DENSE_LAYER + 75 * GLM_MOE_LAYER + 2 * 154880 * GH + GH


def test_glm5_main_model_by_hand():
    assert (MLA, INDEXER) == (165_022_208, 9_371_904)
    assert GLM_MOE_LAYER == 9_877_404_672
    assert GLM == 743_911_218_432
    for name in ("zai-org/GLM-5", "zai-org/GLM-5.1"):
        spec = resolve(name)
        assert spec.params.total == GLM and spec.params.exact
        assert spec.mtp_layers == 1


def test_glm5_hub_total_is_the_main_model_and_its_mtp_layer():
    # num_nextn_predict_layers 1: the checkpoint's layer 78, which vLLM's main model does not build (it loads it
    # only as the MTP draft: 0.33.0 deepseek_mtp.py DeepSeekMultiTokenPredictorLayer, enorm and hnorm of hidden,
    # eh_proj 2 x hidden -> hidden without bias, shared_head.norm, and one DeepseekV2DecoderLayer, a MoE layer);
    # embed_tokens and shared_head.head are shared with the main model and not shipped again
    mtp = 2 * GH + 2 * GH * GH + GH + GLM_MOE_LAYER
    assert mtp == 9_952_920_576  # also GLM-5.2's MTP layer (kvplan/models/families.py)
    assert GLM + mtp == 753_864_139_008  # the Hub's zai-org/GLM-5 and GLM-5.1


# Nemotron-3 (nemotron_h; vLLM 0.33.0 nemotron_h.py): the main models by hand in tests/test_bundled_specs_issue7.py
# (Nano 31,577,940,288) and tests/test_latent_moe.py (Super 120,668,707,840)
NANO, SUPER = 31_577_940_288, 120_668_707_840


def test_nemotron3_nano_index_total_leaves_out_the_score_bias():
    spec = resolve("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16")
    assert spec.params.total == NANO
    # 23 'E' layers, each with gate.e_score_correction_bias of 128 (F32; vLLM builds it as a parameter,
    # NemotronHMoE's router): the checkpoint stores them (total_size 63,155,886,464 = 2 x 31,577,937,344 BF16
    # bytes + 4 x 2,944 F32 bytes) but its index's total_parameters, the Hub's 31,577,937,344, does not count them
    bias = 23 * 128
    pattern = json.loads((FRONTIER / "nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B-BF16" / "config.json").read_text())[
        "hybrid_override_pattern"]
    assert pattern.count("E") == 23
    assert NANO - bias == 31_577_937_344
    assert 2 * (NANO - bias) + 4 * bias == 63_155_886_464


def test_nemotron3_super_hub_total_adds_its_mtp_layers():
    spec = frontier("nvidia__NVIDIA-Nemotron-3-Super-120B-A12B-FP8")
    assert spec.params.total == SUPER
    # mtp_hybrid_override_pattern '*E', num_nextn_predict_layers 1 (vLLM 0.33.0 nemotron_h_mtp.py
    # NemotronHMultiTokenPredictor: one layer per pattern character). hidden 4,096.
    # '*' NemotronHMTPAttentionDecoderLayer with the start projections: its norm, q / o 2 x 4,096 x 4,096, k / v
    # 2 x 4,096 x 256, enorm and hnorm, eh_proj 8,192 -> 4,096 without bias
    attention = 4096 + 2 * 4096 * 4096 + 2 * 4096 * 256 + 2 * 4096 + 2 * 4096 * 4096
    # 'E' NemotronHMTPMoEDecoderLayer with the end norm: its norm, the latent MoE as in the main model (512 experts
    # up / down 1,024 x 2,688, router 4,096 x 512 and its score bias of 512, fc1 / fc2_latent_proj 2 x 4,096 x 1,024,
    # the shared expert 2 x 4,096 x 5,376), final_layernorm
    moe = 4096 + 512 * 2 * 1024 * 2688 + 4096 * 512 + 512 + 2 * 4096 * 1024 + 2 * 4096 * 5376 + 4096
    assert attention + moe == 2_942_325_248
    # the Hub's 123,611,012,096 counts the main model and the MTP layers less the 40 + 1 MoE layers' score biases
    # (F32 buffers its index leaves out, as Nano's)
    assert SUPER + attention + moe - 41 * 512 == 123_611_012_096


# Qwen3-VL-235B-A22B and Qwen3.5 / Qwen3.6: the Hub's totals (llmfit hf_models.json @5bdc9df9) Qwen/Qwen3-VL-235B-A22B-
# Instruct 235,670,022,896; Qwen/Qwen3.5-27B and Qwen/Qwen3.6-27B 27,781,427,952; Qwen/Qwen3.5-35B-A3B and
# Qwen/Qwen3.6-35B-A3B 35,951,822,704; Qwen/Qwen3.5-122B-A10B 125,086,497,008; Qwen/Qwen3.5-397B-A17B 403,397,928,944.


def qwen3_vl_tower(out: int, deepstack: int) -> int:
    """vLLM 0.33.0 qwen3_vl.py Qwen3_VisionTransformer at these checkpoints' sizes (hidden 1,152, depth 27, MLP
    4,304, patch 16, temporal 2, 2,304 learned positions, merge 2 x 2 -> 4,608)."""
    patch_embed = 3 * 2 * 16 * 16 * 1152 + 1152  # Conv3d with bias: 1,770,624
    positions = 2304 * 1152
    block = (4 * 1152 + 1152 * 3 * 1152 + 3 * 1152 + 1152 * 1152 + 1152  # two LayerNorms, qkv, proj
             + 1152 * 4304 + 4304 + 4304 * 1152 + 1152)  # linear_fc1, linear_fc2
    assert block == 15_239_504
    mlp = 4608 * 4608 + 4608 + 4608 * out + out
    return patch_embed + positions + 27 * block + 2 * 1152 + mlp + deepstack * (2 * 4608 + mlp)


def test_qwen3_vl_235b_is_the_hubs():
    # the qwen3_vl_moe wrapper builds Qwen3-VL's tower (out_hidden_size 4,096, three deepstack mergers): 576,388,336,
    # Qwen3-VL-8B's; the text model's q_norm / k_norm of 128 in each of its 94 layers were left out before
    spec = frontier("Qwen__Qwen3-VL-235B-A22B-Instruct")
    assert spec.params.vision == qwen3_vl_tower(4096, 3) == 576_388_336
    assert spec.params.total == 235_670_022_896 and spec.params.exact
    assert resolve("Qwen/Qwen3-VL-235B-A22B-Instruct").params.total == 235_670_022_896


def test_qwen3_5_27b_tower_and_mtp_layer_by_hand():
    spec = frontier("Qwen__Qwen3.5-27B")
    assert spec.params.vision == qwen3_vl_tower(5120, 0) == 460_730_096  # deepstack_visual_indexes []
    # the MTP layer (mtp_num_hidden_layers 1; vLLM 0.33.0 qwen3_5_mtp.py), hidden 5,120: fc 10,240 -> 5,120 without
    # bias, pre_fc_norm_hidden, pre_fc_norm_embedding and the closing norm; one full-attention Qwen3_5DecoderLayer:
    # q_proj with its output gate 5,120 x 2 x 24 x 256, k / v 5,120 x 4 x 256 each, o 24 x 256 x 5,120, q_norm /
    # k_norm of 256, the MLP 3 x 5,120 x 17,408 and two norms
    layer = (5120 * 2 * 24 * 256 + 2 * 5120 * 4 * 256 + 24 * 256 * 5120 + 2 * 256
             + 3 * 5120 * 17408 + 2 * 5120)
    mtp = 2 * 5120 * 5120 + 3 * 5120 + layer
    assert mtp == 424_699_392
    assert spec.params.total + mtp == 27_781_427_952  # the Hub's Qwen3.5-27B and Qwen3.6-27B
    assert spec.params.exact and spec.mtp_layers == 1
    assert resolve("Qwen/Qwen3.5-27B").params.total == spec.params.total


def test_qwen3_5_moe_hub_totals_add_one_mtp_layer():
    # the MoE checkpoints' MTP layer: the same fc and three norms beside one full-attention MoE decoder layer (its
    # experts, router, shared expert and the shared expert's gate), counted as kvplan counts that layer of the model
    hub = {"Qwen__Qwen3.5-35B-A3B": 35_951_822_704, "Qwen__Qwen3.5-122B-A10B": 125_086_497_008,
           "Qwen__Qwen3.5-397B-A17B": 403_397_928_944}
    for name, total in hub.items():
        config = json.loads((FRONTIER / name / "config.json").read_text())["text_config"]
        spec = frontier(name)
        hidden, full = config["hidden_size"], config["layer_types"].index("full_attention")
        layer = spec.params.by_layer[full]
        mtp = 2 * hidden * hidden + 3 * hidden + layer.mixer + layer.mlp + layer.experts + layer.loose
        assert spec.params.total + mtp == total, name
        assert spec.params.vision == qwen3_vl_tower(config["hidden_size"], 0), name
        assert resolve(name.replace("__", "/")).params.total == spec.params.total


# Gemma 4 (vLLM 0.33.0 gemma4.py): the Hub's totals of the text-and-vision re-uploads (llmfit hf_models.json
# @5bdc9df9): TrevorJS/gemma-4-26B-A4B-it-uncensored (and coder3101/..-heretic) 25,805,933,872;
# llmfan46/gemma-4-31B-it-uncensored-heretic (and unsloth/gemma-4-31B-it-unsloth-bnb-4bit) 31,273,086,512. Google's own
# google/gemma-4-26B-A4B(-it) 26,544,131,376 and google/gemma-4-31B(-it) 32,682,372,656 are each exactly one more
# vocab x hidden table (262,144 x 2,816 = 738,197,504; 262,144 x 5,376 = 1,409,286,144), which neither vLLM
# (tie_word_embeddings: lm_head is embed_tokens) nor the re-uploads hold.
STD = 2 * 1152  # the vision tower's std_bias / std_scale (standardize): buffers vLLM loads, outside the Hub totals


def test_gemma4_26b_layer_by_hand():
    spec = frontier("google__gemma-4-26B-A4B")
    hidden, experts = 2816, 128
    # a sliding layer (head_dim 256): q 16 x 256, k and v 8 x 256, o; q_norm and k_norm of 256
    sliding = 2816 * 16 * 256 + 2 * 2816 * 8 * 256 + 16 * 256 * 2816
    # the MoE block beside the dense MLP (2,112): 128 experts (gate_up and down of 704), Gemma4Router's proj,
    # scale and per_expert_scale; seven RMSNorms in the layer (input, post-attention, pre- / post-feedforward,
    # post_feedforward_layernorm_1 / _2, pre_feedforward_layernorm_2)
    mlp = 3 * hidden * 2112
    routed = experts * 3 * hidden * 704
    loose = hidden * experts + hidden + experts + 7 * hidden + 2 * 256
    layer = spec.params.by_layer[0]
    assert (layer.mixer, layer.mlp, layer.experts, layer.loose) == (sliding, mlp, routed, loose)
    # a full layer (global_head_dim 512, attention_k_eq_v: k_proj only, 2 KV heads): q / o 16 x 512, k 2 x 512
    full = spec.params.by_layer[5]
    assert full.mixer == 2816 * 16 * 512 + 2816 * 2 * 512 + 16 * 512 * 2816
    assert full.loose == loose - 2 * 256 + 2 * 512


def test_gemma4_totals_are_the_hubs_less_the_std_buffers():
    for name, hub in (("google__gemma-4-26B-A4B", 25_805_933_872), ("nvidia__Gemma-4-31B-IT-NVFP4", 31_273_086_512)):
        spec = frontier(name)
        assert spec.params.total - STD == hub, name
        assert spec.params.exact, name
    assert 25_805_933_872 + 262144 * 2816 == 26_544_131_376
    assert 31_273_086_512 + 262144 * 5376 == 32_682_372_656


def test_gemma4_per_layer_inputs_stay_approximate():
    # the E2B / E4B models' per-layer input embeddings (hidden_size_per_layer_input) are not counted
    data = json.loads((FRONTIER / "google__gemma-4-26B-A4B" / "config.json").read_text())
    data["text_config"]["hidden_size_per_layer_input"] = 256
    spec = parse_config(data, "g", SpecSource("local", "g"))
    assert not spec.params.exact
    assert "hidden_size_per_layer_input not counted" in spec.params.note


def test_kimi_k25_moonvit_by_hand():
    # vLLM 0.33.0 kimi_k25.py / kimi_k25_vit.py at Kimi-K2.5's vision_config (vt_hidden_size 1,152, 27 layers, MLP
    # 4,304, patch 14, 64 x 64 positions, merge 2 x 2, no norm_type / bias keys: LayerNorms and biases throughout)
    patch_embed = 3 * 14 * 14 * 1152 + 1152  # Conv2dLayer with patch_embed_proj_bias
    positions = 64 * 64 * 1152  # Learnable2DInterpPosEmbDivided_fixed.weight (the time table is a buffer)
    block = (2 * 2 * 1152 + 1152 * 3 * 1152 + 3 * 1152 + 1152 * 1152 + 1152  # norm0 / norm1, wqkv, wo
             + 1152 * 4304 + 4304 + 4304 * 1152 + 1152)  # mlp fc0 / fc1
    final_norm = 2 * 1152
    # patchmerger: pre_norm LayerNorm(1,152), linear_1 4,608 -> 4,608 and linear_2 4,608 -> 7,168 with biases
    projector = 2 * 1152 + 4608 * 4608 + 4608 + 4608 * 7168 + 7168
    assert (patch_embed, block, projector) == (678_528, 15_239_504, 54_277_888)
    tower = patch_embed + positions + 27 * block + final_norm + projector
    assert tower == 471_143_920
    for spec in (frontier("moonshotai__Kimi-K2.5"), resolve("moonshotai/Kimi-K2.5")):
        assert spec.params.vision == tower
        # the text model is Kimi-K2's (model_type kimi_k2), not matched to a published total yet
        assert spec.params.total == resolve("moonshotai/Kimi-K2-Instruct").params.total + tower
        assert not spec.params.exact and "the vision tower" not in spec.params.note


def test_nemotron3_super_mtp_draft_holds_its_module():
    # vLLM loads the '*E' MTP module as the draft under speculative_config method mtp: its 2,942,325,248 parameters
    # (above) at bfloat16 on the last stage, not one average decoder layer; one attention layer's KV beside the target's
    from dataclasses import replace

    from kvplan.deployment import Deployment
    from kvplan.engines import plan_deployment
    from kvplan.plan import GpuChoice
    from kvplan.units import GB, GiB

    data = json.loads((FRONTIER / "nvidia__NVIDIA-Nemotron-3-Super-120B-A12B-FP8" / "config.json").read_text())
    data.pop("quantization_config", None)  # as the BF16 checkpoint
    spec = parse_config(data, "super", SpecSource("local", "super"))
    assert spec.params.mtp == 2_942_325_248
    base = Deployment(gpu_memory_bytes=141 * GB, tensor_parallel_size=8, kv_cache_memory_bytes=10 * GiB)
    gpu = GpuChoice("custom", "custom", 141 * GB, 8)
    plain = plan_deployment(spec, base, gpu)
    mtp = plan_deployment(spec, replace(base, speculative_config={"method": "mtp", "num_speculative_tokens": 1}), gpu)
    grown = mtp.memory.weights_bytes - plain.memory.weights_bytes
    # 2 B a parameter over TP 8 (as the target's decoder layers are split), give or take the layers' whole-byte spread
    assert abs(grown - 2 * 2_942_325_248 // 8) < 1_000, grown
    assert any("the MTP module's 2,942,325,248 parameters" in note for note in mtp.notes)


def test_deepseek_v3_hub_total_is_the_main_model_scales_and_mtp_layer():
    # deepseek-ai/DeepSeek-V3 (and R1, V3.1: same layout) on the Hub: 684,531,386,000 (llmfit hf_models.json
    # @5bdc9df9). hidden 7,168, 128 heads, q_lora 1,536, kv_lora 512, rope 64, nope 128, v 128, 256 experts of 2,048
    # and one shared, first_k_dense_replace 3 (dense 18,432), 61 layers, vocab 129,280.
    mla = (7168 * 1536 + 1536 + 1536 * 128 * 192 + 7168 * 576 + 512 + 512 * 128 * 256 + 128 * 128 * 7168)
    moe = 256 * 3 * 7168 * 2048 + 256 * 7168 + 256 + 3 * 7168 * 2048  # experts, router, score bias, shared expert
    layer = mla + moe + 2 * 7168
    assert (mla, layer) == (187_107_328, 11_507_286_272)
    spec = resolve("deepseek-ai/DeepSeek-V3")
    assert spec.params.total == 671_026_419_200 and spec.params.by_layer[-1].mixer + spec.params.by_layer[-1].mlp \
        + spec.params.by_layer[-1].experts + spec.params.by_layer[-1].loose == layer
    # FP8 128 x 128 block scales: attention q_a 12 x 56, q_b 192 x 12, kv_a 5 x 56, kv_b 256 x 4, o 56 x 128;
    # each expert and the shared one 2 x 16 x 56 + 56 x 16; a dense MLP 2 x 144 x 56 + 56 x 144
    attention = scales(1536, 7168) + scales(128 * 192, 1536) + scales(576, 7168) + scales(128 * 256, 512) \
        + scales(7168, 128 * 128)
    experts = 257 * (2 * scales(2048, 7168) + scales(7168, 2048))
    dense = 2 * scales(18432, 7168) + scales(7168, 18432)
    assert (attention, experts, dense) == (11_448, 690_816, 24_192)
    main = 61 * attention + 58 * experts + 3 * dense
    # the MTP layer (layer 61, loaded only as vLLM's deepseek_mtp draft) ships its own embed_tokens and
    # shared_head.head copies beside enorm, hnorm, eh_proj (BF16: no scales) and shared_head.norm
    mtp = layer + 2 * 7168 + 2 * 7168 * 7168 + 7168 + 2 * 129280 * 7168
    assert mtp == 13_463_426_304
    assert spec.params.total + main + mtp + attention + experts == 684_531_386_000
