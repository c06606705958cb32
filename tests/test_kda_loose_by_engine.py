"""Kimi-Linear's KDA dt_bias, q/k/v conv1d and A_log by engine (kvplan/weights.py KdaLoose): vLLM 0.33.0 and SGLang
0.5.23 allocate them in float32 (tests/test_kda_float32_params.py); TensorRT-LLM creates A_log and dt_bias in float32
but ends KimiKDALinearAttention.__init__ with _meta_safe_cast_dtype(self, torch.bfloat16), casting every floating
parameter of the module to bfloat16 (_torch/modules/kimi_kda/kimi_kda_mixer.py; the production module
modeling_kimi_linear.py's KimiLinearDecoderLayer builds does the same), so TensorRT-LLM holds them at 2 bytes.

By hand (tests/test_kda_float32_params.py): 20 KDA layers x 53,280 = 1,065,600 such parameters; the decoder's
48,367,707,008 parameters at bf16 are 96,735,414,016 B over 27 layers, 3,582,793,111 B a layer; vLLM and SGLang add
1,065,600 x 2 B: 3,582,872,045 B a layer. The routers' e_score_correction_bias (26 MoE layers x 256 = 6,656)
vLLM and TensorRT-LLM (its default CUTLASS MoE backend) hold in float32, 13,312 B more: vLLM 3,582,872,538 and
TensorRT-LLM 3,582,793,604 B a layer; SGLang 0.5.23 kimi_linear.py at the model dtype (kvplan/weights.py
ScoreBiasByModelFile): 3,582,872,045. Under --dtype float32 TensorRT-LLM still holds them at 2 B:
(48,367,707,008 x 4 - 1,065,600 x 2) // 27 = 193,468,696,832 // 27 = 7,165,507,290 B a layer."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kvplan.deployment import Deployment
from kvplan.engines import plan_deployment
from kvplan.hardware import find_gpu
from kvplan.models.sources import resolve
from kvplan.plan import GpuChoice
from kvplan.weights import weight_layout

KIMI_LINEAR = "moonshotai/Kimi-Linear-48B-A3B-Instruct"
DECODER = 48_367_707_008


def test_the_layer_bytes_by_hand():
    assert DECODER * 2 // 27 == 3_582_793_111
    assert (DECODER * 2 + 1_065_600 * 2) // 27 == 3_582_872_045
    assert (DECODER * 2 + 1_065_600 * 2 + 6_656 * 2) // 27 == 3_582_872_538
    assert (DECODER * 2 + 6_656 * 2) // 27 == 3_582_793_604
    assert (DECODER * 4 - 1_065_600 * 2) // 27 == 7_165_507_290


@pytest.mark.parametrize("engine, per_layer", [("vllm", 3_582_872_538), ("sglang", 3_582_872_045),
                                               ("trtllm", 3_582_793_604), (None, 3_582_872_538)])
def test_bf16_kda_parameters_by_engine(engine, per_layer):
    assert weight_layout(resolve(KIMI_LINEAR), 2, None, engine=engine).per_layer == per_layer


def test_trtllm_casts_them_to_bf16_under_float32():
    spec = resolve(KIMI_LINEAR)
    assert weight_layout(spec, 4, None, engine="trtllm").per_layer == 7_165_507_290
    assert weight_layout(spec, 4, None, engine="vllm").per_layer == DECODER * 4 // 27


def test_a_trtllm_plan_weighs_them_as_the_checkpoint():
    # the whole plan: TensorRT-LLM's weights term equals that of the same spec without float32 parameters
    spec = resolve(KIMI_LINEAR)
    plain = replace(spec, params=replace(spec.params, by_layer=tuple(replace(layer, float32=0)
                                                                      for layer in spec.params.by_layer)))
    gpu = find_gpu("h200")

    def weights(model, engine: str) -> int:
        dep = Deployment(engine=engine, gpu=gpu.id, max_model_len=4_096)
        return plan_deployment(model, dep, GpuChoice.of(gpu, 1)).memory.weights_bytes

    assert weights(spec, "trtllm") == weights(plain, "trtllm")
    assert weights(spec, "vllm") - weights(plain, "vllm") == 3_582_872_538 * 27 - 3_582_793_604 * 27
