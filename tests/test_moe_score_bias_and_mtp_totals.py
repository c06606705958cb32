"""Round 4: Nemotron-3 Ultra's MTP module, the routers' e_score_correction_bias weighed at the dtype each engine
holds it in, and what is left of Kimi-K2-Instruct's Hub total.

- vLLM 0.33.0 nemotron_h_mtp.py NemotronHMultiTokenPredictor reads config.mtp_hybrid_override_pattern; Ultra's
  config.json writes mtp_layers_block_type ['attention', 'moe'] instead, which its NemotronHConfig
  (configuration_nemotron_h.py, the auto_map class) turns into "*E" (_list_to_pattern: mamba M, moe E, attention *).
- e_score_correction_bias: vLLM 0.33.0 allocates it in float32 (deepseek_v2.py DeepseekV2MoE, nemotron_h.py
  NemotronHMoE, glm4_moe.py, minimax_m2.py, models/kimi_k3/nvidia/model.py KimiMoE: torch.empty(experts,
  dtype=torch.float32)); SGLang 0.5.23 as well (deepseek_v2.py MoEGate, nemotron_h.py, glm4_moe.py, minimax_m2.py)
  but kimi_linear.py KimiMoE, which writes torch.empty(num_experts) and takes the loader's default dtype (the model's);
  TensorRT-LLM's DeepseekV3Gate float32 at its default CUTLASS MoE backend.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from kvplan.models.hf_config import parse_config
from kvplan.models.model import SpecSource
from kvplan.models.sources import resolve
from kvplan.weights import SCORE_BIAS, ScoreBiasByModelFile, ScoreBiasFloat32, weight_layout

ULTRA = "nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16"  # model_specs/, the Hub's config.json


def test_nemotron3_ultra_mtp_module_by_hand():
    # hidden 8,192; 64 query heads and 2 KV heads of 128; 512 routed experts of 5,120 (relu2, no gate) behind the
    # 2,048-wide latent projections; a shared expert of 10,240; one norm of hidden per block
    attention = 2 * 8192 * 8192 + 2 * 8192 * 256 + 8192  # q, o; k, v; the block's norm
    experts = 512 * 2 * 2048 * 5120
    moe = experts + 8192 * 512 + 512 + 2 * 8192 * 2048 + 2 * 8192 * 10240 + 8192  # router, score bias, latent
    #   projections, shared expert, norm
    assert (attention, moe) == (138_420_224, 10_942_947_840)
    # the "*E" layers with enorm, hnorm, eh_proj (2 x hidden -> hidden) and final_layernorm
    mtp = attention + moe + 2 * 8192 + 2 * 8192 * 8192 + 8192
    assert mtp == 11_215_610_368
    spec = resolve(ULTRA)
    assert spec.params.mtp == mtp
    # the main model stays as it was counted (no published total of Ultra's was found to check it against)
    assert spec.params.total == 549_308_993_536


def test_ultra_mtp_needs_the_list_form_read():
    # without mtp_layers_block_type no MTP module is counted (as before this round)
    spec = resolve(ULTRA)
    assert spec.params.mtp > 0
    data = json.loads((Path(__file__).parent.parent / "model_specs" / f"{ULTRA.replace('/', '__')}.json").read_text())
    config = dict(data["config"])
    del config["mtp_layers_block_type"]
    bare = parse_config(config, "u", SpecSource("local", "u"), allow_unmodelled=True)
    assert bare.params.mtp == 0


def test_score_bias_counted_per_moe_layer():
    # DeepSeek-V3: topk_method noaux_tc, 256 experts in the 58 MoE layers (first_k_dense_replace 3); Kimi-K2: 384 in
    # 60 (first_k_dense_replace 1); Nemotron-3 Nano: 128 in its 23 'E' blocks
    for name, layers, experts in (("deepseek-ai/DeepSeek-V3", 58, 256), ("moonshotai/Kimi-K2-Instruct", 60, 384),
                                  ("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", 23, 128)):
        by_layer = resolve(name).params.by_layer
        assert sum(layer.score_bias for layer in by_layer) == layers * experts, name
        assert sum(1 for layer in by_layer if layer.score_bias) == layers, name


def test_score_bias_weighed_at_float32_by_hand():
    # Nano BF16 served at bf16: 2,944 biases 2 B more each in every engine (nemotron_h.py's float32 in vLLM and
    # SGLang, TensorRT-LLM's float32 default): 5,888 B over 52 layers
    spec = resolve("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16")
    assert ScoreBiasFloat32().extra(spec, 2) == 2_944 * 2 == 5_888
    assert ScoreBiasByModelFile().extra(spec, 2) == 5_888
    assert ScoreBiasFloat32().extra(spec, 4) == 0  # --dtype float32: held as every other weight
    plain = replace(spec, params=replace(spec.params, by_layer=tuple(replace(layer, score_bias=0)
                                                                      for layer in spec.params.by_layer)))
    for engine in ("vllm", "sglang", "trtllm"):
        grown = (weight_layout(spec, 2, None, engine=engine).per_layer
                 - weight_layout(plain, 2, None, engine=engine).per_layer) * 52
        assert abs(grown - 5_888) < 52, (engine, grown)  # each layer's whole-byte share


def test_sglang_kimi_linear_holds_it_at_the_model_dtype():
    # SGLang 0.5.23 kimi_linear.py: torch.empty(num_experts), the default dtype; vLLM's KimiMoE float32.
    # Kimi-Linear: 26 MoE layers x 256 experts = 6,656 biases, 13,312 B more on vLLM only
    spec = resolve("moonshotai/Kimi-Linear-48B-A3B-Instruct")
    assert sum(layer.score_bias for layer in spec.params.by_layer) == 26 * 256 == 6_656
    assert SCORE_BIAS["sglang"].extra(spec, 2) == 0
    assert SCORE_BIAS.get("vllm", ScoreBiasFloat32()).extra(spec, 2) == 13_312


def test_fp8_layouts_weigh_the_bias_as_before():
    # DeepSeek-V3's FP8 checkpoint: the quantized layout weighs every decoder parameter at 1 B, the bias too
    spec = resolve("deepseek-ai/DeepSeek-V3")
    plain = replace(spec, params=replace(spec.params, by_layer=tuple(replace(layer, score_bias=0)
                                                                      for layer in spec.params.by_layer)))
    assert weight_layout(spec, 2, "fp8", engine="vllm").per_layer == weight_layout(plain, 2, "fp8",
                                                                                     engine="vllm").per_layer


def test_kimi_k2_instruct_residual_is_bf16():
    # What is left open: kvplan's 1,026,408,232,448 and the FP8 block scales (62,495,192) leave 3,416 = 61 x 56 of
    # the Hub's 1,026,470,731,056 (llmfit hf_models.json @5bdc9df9). The checkpoint index's total_size
    # 1,029,173,256,720 B (a public parameters page, GitHub code index file id 71553780238, next to its total
    # 1,026,408,235,864 = kvplan's count + 3,416 without the scales) says what they are stored as: the FP8
    # linears at 1 B, embeddings, lm_head, norms and routers at 2 B, the 23,040 score biases and the scales at 4 B
    # come to 6,832 B short of it, 2 B for each of the 3,416: they are BF16 (not F32 scales, not FP8 weights)
    hidden, heads, layers, experts, vocab = 7168, 64, 61, 384, 163840
    attention = hidden * 1536 + 1536 * heads * 192 + hidden * 576 + 512 * heads * 256 + heads * 128 * hidden
    fp8 = layers * attention + 60 * (experts + 1) * 3 * hidden * 2048 + 3 * hidden * 18432
    bf16 = layers * (1536 + 512 + 2 * hidden) + 60 * experts * hidden + 2 * vocab * hidden + hidden
    biases = 60 * experts
    assert fp8 + bf16 + biases == resolve("moonshotai/Kimi-K2-Instruct").params.total == 1_026_408_232_448
    def scales(rows: int, cols: int) -> int:  # 128 x 128 blocks, one F32 weight_scale_inv each
        return -(-rows // 128) * -(-cols // 128)

    per_attention = (scales(1536, hidden) + scales(heads * 192, 1536) + scales(576, hidden) + scales(heads * 256, 512)
                     + scales(hidden, heads * 128))
    per_expert = 2 * scales(2048, hidden) + scales(hidden, 2048)
    scales_all = layers * per_attention + 60 * (experts + 1) * per_expert + 2 * scales(18432, hidden) \
        + scales(hidden, 18432)
    assert (per_attention, per_expert, scales_all) == (6_200, 2_688, 62_495_192)
    scales = scales_all
    assert resolve("moonshotai/Kimi-K2-Instruct").params.total + scales + 3_416 == 1_026_470_731_056
    assert 1_029_173_256_720 - (fp8 + 2 * bf16 + 4 * biases + 4 * scales) == 6_832 == 2 * 3_416


def test_nano_bf16_weights_meet_its_index_total_size():
    # nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16's model.safetensors.index.json: total_size 63,155,886,464 B
    # (tests/test_frontier_hub_totals.py's sources), its 2,944 gate.e_score_correction_bias F32: kvplan's
    # 31,577,940,288 parameters at 2 B with those 2,944 at 4 B are that total exactly
    spec = resolve("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16")
    assert spec.params.total == 31_577_940_288
    assert (31_577_940_288 - 2_944) * 2 + 2_944 * 4 == 63_155_886_464
    layout = weight_layout(spec, 2, None, engine="vllm")
    held = layout.embeddings + layout.lm_head + layout.per_layer * 52  # the final norm spread over the layers
    assert 0 <= 63_155_886_464 - held < 52, held  # each layer's whole-byte share
