"""Gemma 4's KV-shared full-attention layers under attention_k_eq_v hold a V slot in SGLang alone
(kvplan/models/resident.py SharedLayerValue): SGLang 0.5.23 srt/models/gemma4_causal.py Gemma4Attention builds its
whole QKVParallelLinear for every layer, the KV-shared ones included (is_kv_shared_layer only redirects the cache
layer and skips saving KV), while vLLM 0.33.0 and TensorRT-LLM build a Q projection alone there. params.py counts
such a layer's q, k and o, so SGLang's extra is V's kv heads x head dim x hidden.

No shipped Gemma 4 has both (E2B and E4B: num_kv_shared_layers 20 with attention_k_eq_v false), so the contrast is
gemma-4-31b-it's config (tests/fixtures/configs/frontier/nvidia__Gemma-4-31B-IT-NVFP4, its quantization dropped) with
num_kv_shared_layers 20: layers 40-59 read earlier layers' KV; its full-attention layers are every 6th (5, 11, ...,
59), num_global_key_value_heads 4 x global_head_dim 512, hidden 5,376. By hand:
- layers 5, 11, 17, 23, 29, 35 compute their own K: the V slot every engine fills from K, 6 x 2,048 x 5,376 =
  66,060,288 parameters (132,120,576 B in bf16);
- layers 41, 47, 53, 59 are KV-shared: SGLang's V slot, 4 x 2,048 x 5,376 = 44,040,192 parameters (88,080,384 B);
- SGLang holds 110,100,480 parameters (220,200,960 B) beyond the count, vLLM and TensorRT-LLM 66,060,288."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from kvplan.deployment import Deployment
from kvplan.engines import plan_deployment
from kvplan.hardware import find_gpu
from kvplan.models.hf_config import parse_config
from kvplan.models.model import ModelSpec, SpecSource
from kvplan.models.resident import SharedLayerValue, ValueFromKey
from kvplan.plan import GpuChoice
from kvplan.weights import resident_params

GEMMA4_31B = Path(__file__).parent / "fixtures" / "configs" / "frontier" / "nvidia__Gemma-4-31B-IT-NVFP4"
SLOT = 4 * 512 * 5_376  # 11,010,048 parameters a layer


def shared(k_eq_v: bool = True) -> ModelSpec:
    data = json.loads((GEMMA4_31B / "config.json").read_text())
    data.pop("quantization_config", None)
    data["text_config"] = {**data["text_config"], "num_kv_shared_layers": 20, "attention_k_eq_v": k_eq_v}
    return parse_config(data, "gemma-4-31b-it", SpecSource("local", "gemma-4-31b-it"))


def test_the_slots_by_hand():
    assert SLOT == 11_010_048
    assert (6 * SLOT, 4 * SLOT, 10 * SLOT) == (66_060_288, 44_040_192, 110_100_480)


def test_the_shared_layers_are_typed_apart():
    spec = shared()
    assert spec.resident == (ValueFromKey((5, 11, 17, 23, 29, 35), (2_048,) * 6, 5_376),
                             SharedLayerValue((41, 47, 53, 59), (2_048,) * 4, 5_376))
    assert any("counted in SGLang's weights alone" in note for note in spec.notes)


@pytest.mark.parametrize("engine, extra", [("sglang", 110_100_480), ("vllm", 66_060_288), ("trtllm", 66_060_288)])
def test_the_parameters_each_engine_holds(engine, extra):
    spec = shared()
    held = resident_params(spec, engine)
    assert held.total - spec.params.total == extra
    # a KV-shared full layer: q 32 x 512, k 4 x 512, o 32 x 512 in the count (x 5,376 = 187,170,816); SGLang's v too
    assert spec.params.by_layer[41].mixer == 187_170_816
    assert held.by_layer[41].mixer == 187_170_816 + (SLOT if engine == "sglang" else 0)


def _weights(spec: ModelSpec, engine: str, version: str | None) -> int:
    gpu = find_gpu("h200")
    dep = Deployment(engine=engine, engine_version=version, gpu=gpu.id, max_model_len=32_768,
                     max_num_batched_tokens=8_192)
    return plan_deployment(spec, dep, GpuChoice.of(gpu, 1)).memory.weights_bytes


@pytest.mark.parametrize("engine, version, extra", [("sglang", "0.5.23", 220_200_960), ("vllm", "0.33.0", 132_120_576),
                                                    ("trtllm", None, 132_120_576)])
def test_the_weights_term(engine, version, extra):
    # bf16, 2 B a parameter; spreading the decoder over 60 layers as whole bytes a layer rounds each layer's share, so
    # the difference of two plans may move either way by under 60 B
    spec = shared()
    gained = _weights(spec, engine, version) - _weights(replace(spec, resident=()), engine, version)
    assert abs(gained - extra) < 60


def test_without_attention_k_eq_v_nothing_is_added():
    # E2B / E4B-style: the checkpoint ships v_proj, every layer's V is counted, no engine holds more
    spec = shared(k_eq_v=False)
    assert spec.resident == ()
    assert resident_params(spec, "sglang") is spec.params
