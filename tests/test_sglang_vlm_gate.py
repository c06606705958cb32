"""When SGLang runs adjust_mem_fraction_for_vlm on its default mem_fraction_static, and its fallback where the GPU's
memory size is unknown (kvplan/engines/sglang/defaults.py text_only_reason, unknown_gpu_fraction; releases.py).

SGLang 0.5.23 arg_groups/memory_hook.py handle_gpu_memory_settings cuts the default fraction only where
model_config.is_multimodal (configs/model_config.py ModelConfig.__init__): enable_multimodal (left unset: off for
Gemma3ForConditionalGeneration, Llama4ForConditionalGeneration, Step3VLForConditionalGeneration, Inkling), not
is_lm_only (config.json's language_model_only, from 0.5.18), and the architecture in multimodal_model_archs or a text
sub-config (from 0.5.10). The base on an H100 at 32K is 0.835 (tests/test_sglang_vlm_fraction.py: reserve 13,440 MiB
of 81,559, round(68,119 / 81,559, 3))."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from kvplan.deployment import Deployment
from kvplan.engines import plan_deployment
from kvplan.engines.sglang import budget
from kvplan.engines.sglang.defaults import text_only_reason, unknown_gpu_fraction
from kvplan.hardware import find_gpu
from kvplan.models.hf_config import parse_config
from kvplan.models.model import ModelSpec, SpecSource
from kvplan.plan import GpuChoice, Plan

CONFIGS = Path(__file__).parent / "fixtures" / "configs"
GEMMA3_27B = CONFIGS / "google__gemma-3-27b-it.json"
LLAMA4_SCOUT = CONFIGS / "meta-llama__Llama-4-Scout-17B-16E-Instruct.json"
QWEN35_27B = CONFIGS / "issue7" / "Qwen__Qwen3.5-27B.json"
KIMI_K3 = CONFIGS / "frontier" / "moonshotai__Kimi-K3" / "config.json"
BASE = 0.835
# With prefill CUDA graphs kept (a model SGLang does not treat as multimodal, or a multimodal architecture in the
# release's multimodal_breakable_cuda_graph_supported_model_archs: backend.py): 58 captured sizes up to the chunked
# 8,192 (4-32 by 4: 8, 48-256 by 16: 14, 288-512 by 32: 8, 576-1,024 by 64: 8, 1,280-4,096 by 256: 12, 4,608-8,192 by
# 512: 8) x 8 MiB = 464 MiB more reserve: round((81,559 - 13,904) / 81,559, 3) = round(0.82952, 3)
BASE_GRAPHS = 0.83


def spec(path: Path, **extra) -> ModelSpec:
    data = json.loads(path.read_text())
    data.pop("quantization_config", None)
    data.update(extra)
    return parse_config(data, path.parent.name, SpecSource("local", str(path)))


def plan(model: ModelSpec, version: str | None = None, tp: int = 1) -> Plan:
    gpu = find_gpu("h100")
    dep = Deployment(engine="sglang", engine_version=version, gpu=gpu.id, max_model_len=32_768,
                     tensor_parallel_size=tp)
    return plan_deployment(model, dep, GpuChoice.of(gpu, tp))


def vision_notes(result: Plan) -> list[str]:
    return [note for note in result.notes if note.startswith("vision tower:")]


def test_gemma3_is_served_text_only_so_no_cut():
    # mm_disabled_models: Gemma 3 is text-only unless --enable-multimodal, so is_multimodal is False: no cut, and
    # the multimodal rule keeps no prefill graph off, so their 464 MiB are reserved (BASE_GRAPHS)
    result = plan(spec(GEMMA3_27B))
    assert result.engine.gpu_memory_utilization == BASE_GRAPHS
    notes = vision_notes(result)
    assert len(notes) == 1 and "keeps its default mem_fraction_static" in notes[0]
    assert "Gemma3ForConditionalGeneration is served text-only unless --enable-multimodal" in notes[0]


def test_llama4_is_served_text_only_so_no_cut():
    notes = vision_notes(plan(spec(LLAMA4_SCOUT), tp=4))
    assert len(notes) == 1 and "Llama4ForConditionalGeneration is served text-only" in notes[0]


def test_config_language_model_only_from_0_5_18():
    # Qwen3.5-27B's vision_config: hidden_size 1,152 and no num_hidden_layers (SGLang's 24):
    # c = 24 x 1,152^2 / (24 x 1,024^2) = 1.265625, 1 - 0.0265625 = 0.9734375, 0.83 x 0.95 x 0.9734375 (its
    # prefill graphs kept from 0.5.16: Qwen3_5ForConditionalGeneration is in the breakable allowlist, BASE_GRAPHS)
    cut = BASE_GRAPHS * (0.95 * 0.9734375)
    assert round(cut, 6) == 0.767555
    assert plan(spec(QWEN35_27B), "0.5.18").engine.gpu_memory_utilization == cut
    # the checkpoint declaring language_model_only: is_lm_only from 0.5.18 (0.5.17's ModelConfig does not read it)
    text_only = spec(QWEN35_27B, language_model_only=True)
    result = plan(text_only, "0.5.18")
    assert result.engine.gpu_memory_utilization == BASE_GRAPHS
    assert "config.json sets language_model_only" in vision_notes(result)[0]
    assert plan(text_only, "0.5.17").engine.gpu_memory_utilization == cut


def test_a_text_subconfig_makes_an_unlisted_architecture_multimodal():
    # KimiK3ForConditionalGeneration is not in multimodal_model_archs, but its config nests text_config, so
    # hf_config is not hf_text_config (has_multimodal_subconfig, from 0.5.10): the cut applies
    tower = spec(KIMI_K3).tower
    assert tower is not None and tower.text_subconfig == "text_config"
    assert text_only_reason("KimiK3ForConditionalGeneration", tower, (0, 5, 23)) is None
    # 0.5.9 reads the architecture list alone (no sub-config test): not multimodal there
    reason = text_only_reason("KimiK3ForConditionalGeneration", tower, (0, 5, 9))
    assert reason is not None and "not in SGLang's multimodal_model_archs" in reason
    # made up: the same tower without a sub-config is not multimodal in any release
    assert text_only_reason("KimiK3ForConditionalGeneration", replace(tower, text_subconfig=""), (0, 5, 23))


def test_mimo_v2_needs_both_vision_and_audio_from_0_5_12():
    # made up from the K3 tower: MiMoV2ForCausalLM (in the list) with a vision_config and no audio_config is served
    # text-only from 0.5.12; with an audio_config too it is multimodal
    tower = spec(KIMI_K3).tower
    assert tower is not None and not tower.has_audio
    assert text_only_reason("MiMoV2ForCausalLM", tower, (0, 5, 12)) is not None
    assert text_only_reason("MiMoV2ForCausalLM", tower, (0, 5, 11)) is None
    assert text_only_reason("MiMoV2ForCausalLM", replace(tower, has_audio=True), (0, 5, 23)) is None
    # an audio tower without vision_config is served text-only too: 0.5.23 model_config.py asks for both
    assert text_only_reason("MiMoV2ForCausalLM", replace(tower, has_audio=True, has_vision=False), (0, 5, 23))


def test_unknown_gpu_memory_fraction_by_release(monkeypatch):
    # gpu_mem None: 0.88 in 0.5.9 server_args.py ... 0.5.19 memory_hook.py, 0.95 from 0.5.20 memory_hook.py
    assert [unknown_gpu_fraction(r) for r in ((0, 5, 9), (0, 5, 19), (0, 5, 20), (0, 5, 23))] == [0.88, 0.88, 0.95,
                                                                                                    0.95]
    # through the plan, a GPU whose size server_args cannot read (a text model: no vision cut after it)
    monkeypatch.setattr(budget, "gpu_mib", lambda gpu: 0.0)
    text = spec(QWEN35_27B, language_model_only=True)
    assert plan(text, "0.5.23").engine.gpu_memory_utilization == 0.95
    assert plan(text, "0.5.19").engine.gpu_memory_utilization == 0.88
