"""Kimi-Linear's KDA layers hold dt_bias, the q/k/v conv1d and A_log in float32 whatever the model dtype (vLLM 0.33.0
model_executor/layers/mamba/gdn/kimi_gdn_linear_attn.py KimiGatedDeltaNetAttention.__init__: torch.empty(...,
dtype=torch.float32) for dt_bias and A_log, ColumnParallelLinear(params_dtype=torch.float32) for conv1d; SGLang
0.5.23 models/kimi_linear.py the same), so the weights term weighs them at 4 bytes, not the checkpoint's bf16
(kvplan/models/params.py _Mixers._kda_float32, kvplan/weights.py KdaLoose; TensorRT-LLM casts them to bfloat16,
tests/test_kda_loose_by_engine.py)."""

from __future__ import annotations

from dataclasses import replace

from kvplan.models.sources import resolve
from kvplan.weights import weight_layout

KIMI_LINEAR = "moonshotai/Kimi-Linear-48B-A3B-Instruct"  # model_specs/, the Hub's config.json


def test_kda_float32_parameters_by_hand():
    # linear_attn_config: 32 heads x head_dim 128 = 4,096, short_conv_kernel_size 4. A KDA layer: dt_bias 4,096,
    # conv1d 3 x 4,096 x 4 = 49,152, A_log 32 -> 53,280 float32 parameters (o_norm's 128 stay bf16); the MLA layers
    # (full_attn_layers 4, 8, ..., 24, 27) none. 20 KDA layers: 1,065,600.
    spec = resolve(KIMI_LINEAR)
    per_kda = 4096 + 3 * 4096 * 4 + 32
    assert per_kda == 53_280
    assert [layer.float32 for layer in spec.params.by_layer[:5]] == [per_kda, per_kda, per_kda, 0, per_kda]
    assert sum(layer.float32 for layer in spec.params.by_layer) == 20 * per_kda == 1_065_600


def test_kimi_linear_weights_hold_them_at_four_bytes():
    # decoder parameters: the Hub's 49,122,681,728 less the embeddings and the untied lm_head (163,840 x 2,304
    # each) = 48,367,707,008, at bf16 96,735,414,016 B; the float32 ones 2 B more each: + 1,065,600 x 2 =
    # 2,131,200 B (2.03 MiB); and the routers' e_score_correction_bias, float32 in vLLM 0.33.0 (KimiMoE,
    # kvplan/weights.py ScoreBiasFloat32): 26 MoE layers (first_k_dense_replace 1) x 256 experts = 6,656, 2 B more
    # each, 13,312 B. Spread over the 27 layers: 96,737,558,528 // 27 = 3,582,872,538 B a layer.
    spec = resolve(KIMI_LINEAR)
    decoder = 49_122_681_728 - 2 * 163_840 * 2_304
    assert decoder == 48_367_707_008
    layout = weight_layout(spec, 2, None)
    assert layout.per_layer == (decoder * 2 + 1_065_600 * 2 + 6_656 * 2) // 27 == 3_582_872_538
    assert layout.embeddings == layout.lm_head == 163_840 * 2_304 * 2
    # served in float32 (--dtype float32) they are held as every other weight: nothing more
    assert weight_layout(spec, 4, None).per_layer == decoder * 4 // 27


def test_layers_without_float32_parameters_weigh_as_before():
    # the same spec with no float32 parameters nor score bias (a made-up contrast): 96,735,414,016 // 27 =
    # 3,582,793,111 B a layer
    spec = resolve(KIMI_LINEAR)
    plain = replace(spec, params=replace(spec.params, by_layer=tuple(replace(layer, float32=0, score_bias=0)
                                                                      for layer in spec.params.by_layer)))
    assert weight_layout(plain, 2, None).per_layer == 96_735_414_016 // 27 == 3_582_793_111
