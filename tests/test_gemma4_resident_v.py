"""Gemma 4's V slot: the full-attention layers of an attention_k_eq_v checkpoint ship k_proj only, so the published
parameter count leaves V out, but every supported engine builds the whole fused QKV projection there and copies K into
the V slot (vLLM 0.19.0 / 0.23.0 / 0.33.0 gemma4.py, SGLang 0.5.11 / 0.5.23 gemma4_causal.py, TensorRT-LLM
modeling_gemma4.py; kvplan/models/resident.py). The count stays the checkpoint's; the weights term gains the slot.

gemma-4-31b-it's text_config (tests/fixtures/configs/frontier/nvidia__Gemma-4-31B-IT-NVFP4, the published one):
hidden 5,376, 60 layers of which every 6th (5, 11, ..., 59) is full attention with num_global_key_value_heads 4 x
global_head_dim 512. The V slot by hand: 10 layers x 4 x 512 x 5,376 = 110,100,480 parameters, 220,200,960 B in
bfloat16 (0.205 GiB)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from kvplan.calibration import engines as calibration
from kvplan.deployment import Deployment
from kvplan.engines import plan_deployment
from kvplan.hardware import find_gpu
from kvplan.models.hf_config import parse_config
from kvplan.models.model import ModelSpec, SpecSource
from kvplan.models.resident import ValueFromKey
from kvplan.plan import GpuChoice
from kvplan.weights import resident_params

FRONTIER = Path(__file__).parent / "fixtures" / "configs" / "frontier"
GEMMA4_31B = FRONTIER / "nvidia__Gemma-4-31B-IT-NVFP4"
GEMMA4_26B = FRONTIER / "google__gemma-4-26B-A4B"
V_SLOT_PARAMS = 10 * 4 * 512 * 5_376  # 110,100,480
V_SLOT_BYTES = 2 * V_SLOT_PARAMS  # 220,200,960 B in bfloat16
FULL_LAYERS = tuple(range(5, 60, 6))


def config(path: Path) -> dict:
    return json.loads((path / "config.json").read_text())


def parsed(data: dict, name: str = "gemma-4-31b-it") -> ModelSpec:
    return parse_config(data, name, SpecSource("local", name))


def bf16_31b() -> ModelSpec:
    """gemma-4-31b-it as google ships it: the NVFP4 copy's config.json without its quantization."""
    data = config(GEMMA4_31B)
    data.pop("quantization_config", None)
    return parsed(data)


def test_the_v_slot_is_typed_beside_the_published_count():
    spec = bf16_31b()
    assert spec.resident == (ValueFromKey(FULL_LAYERS, (4 * 512,) * 10, 5_376),)
    assert spec.resident[0].params() == V_SLOT_PARAMS == 110_100_480
    held = resident_params(spec)
    assert held.total - spec.params.total == 110_100_480
    # a full layer's projections as the checkpoint ships them: q 32 x 512, k 4 x 512, o 32 x 512, each x 5,376
    # = 5,376 x 34,816 = 187,170,816; the engine holds v too: + 2,048 x 5,376 = 198,180,864. A sliding layer
    # (16 KV heads x 256, its own v_proj) is not touched.
    assert spec.params.by_layer[5].mixer == 187_170_816
    assert held.by_layer[5].mixer == 198_180_864
    assert held.by_layer[4] == spec.params.by_layer[4]


def test_without_attention_k_eq_v_the_checkpoint_ships_v_and_nothing_is_added():
    data = config(GEMMA4_31B)
    data.pop("quantization_config", None)
    data["text_config"] = {**data["text_config"], "attention_k_eq_v": False}
    separate = parsed(data)
    assert separate.resident == ()
    # the count then holds v_proj itself: the same 110,100,480 more than the attention_k_eq_v checkpoint's
    assert separate.params.total - bf16_31b().params.total == 110_100_480


def _weights(spec: ModelSpec, engine: str, version: str, tp: int = 1, gpu: str = "h200") -> int:
    found = find_gpu(gpu)
    dep = Deployment(engine=engine, engine_version=version, gpu=found.id, tensor_parallel_size=tp,
                     max_model_len=32_768, max_num_batched_tokens=8_192)
    return plan_deployment(spec, dep, GpuChoice.of(found, tp)).memory.weights_bytes


@pytest.mark.parametrize("engine, version", [("vllm", "0.19.0"), ("vllm", "0.23.0"), ("vllm", "0.33.0"),
                                             ("sglang", "0.5.11"), ("sglang", "0.5.23"), ("trtllm", None)])
def test_every_engine_holds_the_v_slot(engine, version):
    spec = bf16_31b()
    published = replace(spec, resident=())  # the checkpoint's parameters alone
    assert _weights(spec, engine, version) - _weights(published, engine, version) == V_SLOT_BYTES


def test_the_v_slot_is_split_over_tensor_parallel_ranks():
    # QKVParallelLinear gives each of 2 ranks 2 of the 4 KV heads of V: 10 x 2 x 512 x 5,376 x 2 B = 110,100,480 B
    spec = bf16_31b()
    published = replace(spec, resident=())
    assert _weights(spec, "vllm", "0.33.0", tp=2) - _weights(published, "vllm", "0.33.0", tp=2) == 110_100_480


def test_a_quantized_checkpoint_keeps_the_v_slot_in_k_s_format():
    # nvidia's NVFP4 copy ignores every layer's self_attn (quantization_config ignore "...layers.N.self_attn*"), so
    # K, and the V slot filled from it, stay bfloat16: the same 220,200,960 B
    spec = parsed(config(GEMMA4_31B))
    assert spec.quantization is not None
    published = replace(spec, resident=())
    assert _weights(spec, "vllm", "0.33.0") - _weights(published, "vllm", "0.33.0") == V_SLOT_BYTES


def test_gemma4_26b_a4b():
    # 30 layers, full attention every 6th: 5 layers x num_global_key_value_heads 2 x 512 x hidden 2,816
    # = 14,417,920 parameters, 28,835,840 B in bfloat16, less what spreading the decoder's bytes over 30 layers as
    # whole bytes a layer (WeightLayout.per_layer) drops: under 30 B
    spec = parsed(config(GEMMA4_26B), "gemma-4-26B-A4B")
    assert spec.resident[0].params() == 5 * 2 * 512 * 2_816 == 14_417_920
    gained = _weights(spec, "vllm", "0.19.0", gpu="a100-80gb") - _weights(
        replace(spec, resident=()), "vllm", "0.19.0", gpu="a100-80gb")
    assert 28_835_840 - 30 < gained <= 28_835_840 + 30


def test_y13_names_the_v_slot_and_its_weights_term():
    # Y13 (vLLM 0.23.0, gemma-4-31b-it, RTX PRO 6000): "Model loading took 58.99 GiB". kvplan's weights term:
    # the bfloat16 checkpoint, 2 B x 31,273,088,816 parameters (kvplan's count: the Hub's 31,273,086,512 for the
    # model's re-uploads plus the tower's std_bias / std_scale, tests/test_frontier_hub_totals.py) spread over the
    # layers as whole bytes a layer, plus the V slot's 220,200,960 B and the RoPE cos/sin cache of
    # 2 x 262,144 x 512 x 2 B = 536,870,912 B (rope_cache_bytes): 2 x 31,273,088,816 + 220,200,960 + 536,870,912 =
    # 63,303,249,504, less 52 B of the spread: 63,303,249,452 B = 58.96 GiB, 0.03 GiB under the log (58.75 GiB
    # without the V slot).
    entry = next(e for e in calibration.entries() if e["id"] == "Y13")
    plan = calibration.vllm_plan(entry)
    assert plan.memory.weights_bytes == 63_303_249_452
    assert any("110,100,480 parameters beyond the checkpoint's count" in note for note in plan.notes)
