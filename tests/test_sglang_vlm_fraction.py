"""SGLang lowers its default mem_fraction_static for a model with a vision_config (adjust_mem_fraction_for_vlm:
0.5.9 / 0.5.11 server_args.py, 0.5.19 / 0.5.23 arg_groups/memory_hook.py, the same rule): x 0.95 x
clamp(1 - 0.1 x (c - 1), 0.8, 1.05), c = num_hidden_layers x hidden_size^2 / (24 x 1024^2), the two read with
getattr on the transformers vision config (24 and 1024 where it has no such attribute). A given fraction is left as
it is.

The base on an H100 (81,559 MiB, kvplan/data/gpus.json) at 32K: chunked prefill 8,192 and CUDA-graph batch 256
(under 90 GiB), reserve 512 + 1.5 x 8,192 + 2 x 256 + 1 x 1 / 8 x 1,024 = 13,440 MiB; a multimodal model captures
no prefill graphs (backend.py), so round(68,119 / 81,559, 3) = 0.835 (tests/test_sglang_rules.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvplan.deployment import Deployment
from kvplan.engines import plan_deployment
from kvplan.hardware import find_gpu
from kvplan.models.hf_config import parse_config
from kvplan.models.model import ModelSpec, SpecSource
from kvplan.plan import GpuChoice, Plan

FIXTURES = Path(__file__).parent / "fixtures"
GEMMA4_31B = FIXTURES / "configs" / "frontier" / "nvidia__Gemma-4-31B-IT-NVFP4" / "config.json"
QWEN25_VL_7B = FIXTURES / "configs" / "Qwen__Qwen2.5-VL-7B-Instruct.json"
BASE = 0.835


def spec(path: Path, **vision_changes) -> ModelSpec:
    data = json.loads(path.read_text())
    data.pop("quantization_config", None)
    vision = {**data["vision_config"], **vision_changes}
    data["vision_config"] = {key: value for key, value in vision.items() if value is not None}
    return parse_config(data, path.parent.name, SpecSource("local", str(path)))


def plan(model: ModelSpec, version: str | None = None, fraction: float | None = None) -> Plan:
    gpu = find_gpu("h100")
    dep = Deployment(engine="sglang", engine_version=version, gpu=gpu.id, max_model_len=32_768,
                     gpu_memory_utilization=fraction)
    return plan_deployment(model, dep, GpuChoice.of(gpu, 1))


def cut_note(result: Plan) -> str:
    return next(note for note in result.notes if note.startswith("vision tower:"))


@pytest.mark.parametrize("version", ["0.5.11", "0.5.19", "0.5.23"])  # 0.5.9 registers no Gemma 4
def test_gemma4_31b(version):
    # vision_config num_hidden_layers 27, hidden_size 1152: c = 27 x 1,327,104 / 25,165,824 = 1.423828125,
    # 1 - 0.1 x 0.423828125 = 0.9576171875 (within 0.8-1.05); SGLang multiplies 0.835 by 0.95 x 0.9576171875
    result = plan(spec(GEMMA4_31B), version)
    assert result.engine.gpu_memory_utilization == BASE * (0.95 * 0.9576171875)
    note = cut_note(result)
    assert "0.835 to 0.7596298339843749" in note and "27 layers (vision_config num_hidden_layers)" in note


@pytest.mark.parametrize("version", ["0.5.9", "0.5.11", "0.5.19", "0.5.23"])
def test_qwen25_vl_7b_reads_24_layers_not_its_depth(version):
    # vision_config gives depth 32 and hidden_size 1280, no num_hidden_layers; transformers'
    # Qwen2_5_VLVisionConfig (5.19.0, 5.6.0, 4.57.1) declares none either, so SGLang's getattr gives 24:
    # c = 24 x 1,638,400 / 25,165,824 = 1.5625, 1 - 0.05625 = 0.94375
    result = plan(spec(QWEN25_VL_7B), version)
    assert result.engine.gpu_memory_utilization == BASE * (0.95 * 0.94375)
    assert "24 layers (SGLang's default: Qwen2_5_VLVisionConfig has no num_hidden_layers)" in cut_note(result)


def test_a_given_fraction_is_not_lowered():
    result = plan(spec(GEMMA4_31B), "0.5.23", fraction=0.8)
    assert result.engine.gpu_memory_utilization == 0.8
    assert not any(note.startswith("vision tower:") for note in result.notes)


def test_a_large_tower_is_held_at_the_lower_bound():
    # 60 layers of 1152: c = 60 x 1,327,104 / 25,165,824 = 3.1640625, 1 - 0.21640625 = 0.78359375, raised to 0.8
    result = plan(spec(GEMMA4_31B, num_hidden_layers=60), "0.5.23")
    assert result.engine.gpu_memory_utilization == BASE * (0.95 * 0.8)


def test_a_left_out_size_takes_the_class_default():
    # without num_hidden_layers, transformers 5.19.0 Gemma4VisionConfig's default 16: c = 16 x 1,327,104 /
    # 25,165,824 = 0.84375, 1 + 0.015625 = 1.015625 (within 0.8-1.05)
    result = plan(spec(GEMMA4_31B, num_hidden_layers=None), "0.5.23")
    assert result.engine.gpu_memory_utilization == BASE * (0.95 * 1.015625)
    assert "16 layers (Gemma4VisionConfig's default)" in cut_note(result)
