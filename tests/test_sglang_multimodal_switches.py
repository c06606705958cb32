"""SGLang's multimodal switches, read rather than noted: --enable-multimodal, --language-only, --language-model-only
and --disaggregation-mode (kvplan/engines/sglang/multimodal.py, defaults.py not_multimodal_reason /
text_only_reason / language_model_only_refusal, backend.py _GRAPHS_KEPT_FOR, towers.py; releases.py).

Sources, each release's wheel read (0.5.9-0.5.23):
- the vision cut's test: 0.5.9-0.5.18 server_args.py _handle_gpu_memory_settings (`model_config.is_multimodal and not
  self.language_only`, `and self.disaggregation_mode != "decode"` from 0.5.17, `and not self.language_model_only`
  from 0.5.18), 0.5.19 arg_groups/memory_hook.py, 0.5.20-0.5.23 its is_vlm;
- ModelConfig.is_multimodal (configs/model_config.py): enable_multimodal (--enable-multimodal; left unset, off for
  mm_disabled_models such as Gemma3ForConditionalGeneration), not is_lm_only, and the architecture list;
- the prefill CUDA graphs' multimodal rule and its allowlists (multimodal_breakable_cuda_graph_supported_model_archs
  from 0.5.16; 0.5.23 arg_groups/cuda_graph_hook.py);
- Qwen3VLForConditionalGeneration.__init__ (models/qwen3_vl.py, 0.5.18+): visual None under
  hf_config.language_model_only; Qwen2.5-VL (models/qwen2_5_vl.py) builds its tower under --language-only;
- --language-model-only's refusals (0.5.18 server_args.py _handle_language_model_only, 0.5.23
  arg_groups/model_hook.py handle_language_model_only, LANGUAGE_MODEL_ONLY_ARCHITECTURES).

The H100 at 32K (81,559 MiB): reserve 512 + 8,192 x 1.5 + 128 + 256 x 2 = 13,440 MiB (floor 10,240), so
round(68,119 / 81,559, 3) = 0.835 without prefill graphs; with them 58 sizes x 8 MiB = 464 MiB more,
round(67,655 / 81,559, 3) = 0.83 (tests/test_sglang_vlm_gate.py)."""

from __future__ import annotations

import pytest

from kvplan.api import estimate
from kvplan.deployment import Deployment
from kvplan.engines.sglang.defaults import MultimodalSwitches, language_model_only_refusal, language_only_refusal
from kvplan.errors import KvplanError

BASE, BASE_GRAPHS = 0.835, 0.83
# adjust_mem_fraction_for_vlm's factor 0.95 x (1 - 0.1 x (c - 1)), c = layers x hidden^2 / (24 x 1,024^2):
# Qwen2.5-VL-7B's vision_config has no num_hidden_layers (24 taken) and hidden_size 1,280: c = 1.5625,
# 0.95 x 0.94375 = 0.8965625
QWEN25_VL_CUT = BASE * (0.95 * (1 - 0.1 * (1280 ** 2 / 1024 ** 2 - 1)))
# gemma-3-27b-it's SigLIP: num_hidden_layers 27, hidden_size 1,152: c = 27 x 1,152^2 / (24 x 1,024^2) = 1.423828125
GEMMA3_CUT = BASE * (0.95 * (1 - 0.1 * (27 * 1152 ** 2 / (24 * 1024 ** 2) - 1)))
# Qwen3-VL-8B's tower (config vision_config: depth 27, hidden 1,152, intermediate 4,304, patch 16, temporal 2,
# 2,304 position embeddings, out_hidden 4,096, deepstack at 8, 16, 24), as transformers' Qwen3VLVisionModel holds it:
#   patch embed Conv3d 3 x 2 x 16 x 16 x 1,152 + 1,152 = 1,770,624; position table 2,304 x 1,152 = 2,654,208
#   a block: 2 LayerNorms 4 x 1,152, qkv 1,152 x 3,456 + 3,456, proj 1,152^2 + 1,152, fc1 1,152 x 4,304 + 4,304,
#     fc2 4,304 x 1,152 + 1,152 = 15,239,504; x 27 = 411,466,608
#   merger: LayerNorm 2 x 1,152, fc1 4,608^2 + 4,608, fc2 4,608 x 4,096 + 4,096 = 40,119,040
#   3 deepstack mergers (LayerNorm after the shuffle, 2 x 4,608): 3 x 40,125,952 = 120,377,856
QWEN3_VL_TOWER = 1_770_624 + 2_654_208 + 27 * 15_239_504 + 40_119_040 + 120_377_856
MiB = 2 ** 20


def sglang(model: str, version: str = "0.5.23", **knobs) -> object:
    return estimate(model, gpu="h100", engine="sglang", engine_version=version, max_model_len=32_768, **knobs)


def test_the_flags_are_read_from_a_pasted_launch_line():
    dep = Deployment.from_vllm_args(["python", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen2.5-VL-7B",
                                     "--enable-multimodal", "--language-only", "--disaggregation-mode", "decode"])
    assert (dep.enable_multimodal, dep.language_only, dep.disaggregation_mode) == (True, True, "decode")
    assert not any("accepted but not modelled" in note for note in dep.notes)
    dep = Deployment.from_vllm_args(["python", "-m", "sglang.launch_server", "--model-path", "x",
                                     "--language-model-only"])
    assert dep.language_model_only
    with pytest.raises(KvplanError, match="--disaggregation-mode: invalid choice 'both'"):
        Deployment.from_vllm_args(["python", "-m", "sglang.launch_server", "--model-path", "x",
                                   "--disaggregation-mode", "both"])


def test_enable_multimodal_makes_gemma3_multimodal():
    # without it Gemma 3 is text-only (mm_disabled_models): no cut, prefill graphs kept (0.83), no embedding cache
    plain = sglang("google/gemma-3-27b-it")
    assert plain.engine.gpu_memory_utilization == BASE_GRAPHS
    assert not any("embedding cache" in note for note in plain.notes)
    # with it: is_multimodal, so the multimodal rule turns prefill graphs off (0.835) and the cut applies
    multi = sglang("google/gemma-3-27b-it", enable_multimodal=True)
    assert round(GEMMA3_CUT, 6) == 0.759630
    assert multi.engine.gpu_memory_utilization == GEMMA3_CUT
    assert any("embedding cache" in note for note in multi.notes)
    # gemma3_mm.py builds the SigLIP tower either way: the weights do not move
    assert multi.memory.weights_bytes == plain.memory.weights_bytes


def test_language_only_skips_the_cut_in_every_release_but_keeps_the_tower():
    default = sglang("Qwen/Qwen2.5-VL-7B-Instruct")
    assert round(QWEN25_VL_CUT, 6) == 0.748630
    assert default.engine.gpu_memory_utilization == QWEN25_VL_CUT
    for version in ("0.5.9", "0.5.23"):
        language = sglang("Qwen/Qwen2.5-VL-7B-Instruct", version, language_only=True)
        # is_multimodal stays True (ModelConfig does not read --language-only): prefill graphs stay off, 0.835
        assert language.engine.gpu_memory_utilization == BASE
        assert any("--language-only: the encoder runs on another server" in note for note in language.notes)
    # qwen2_5_vl.py builds self.visual whatever --language-only says
    assert language.memory.weights_bytes == default.memory.weights_bytes


def test_disaggregation_decode_skips_the_cut_from_0_5_17():
    assert sglang("Qwen/Qwen2.5-VL-7B-Instruct", "0.5.17",
                  disaggregation_mode="decode").engine.gpu_memory_utilization == BASE
    decode = sglang("Qwen/Qwen2.5-VL-7B-Instruct", "0.5.16", disaggregation_mode="decode")
    assert decode.engine.gpu_memory_utilization == QWEN25_VL_CUT
    assert any("--disaggregation-mode decode: read for the vision cut only" in note for note in decode.notes)
    # a prefill server keeps the cut
    assert sglang("Qwen/Qwen2.5-VL-7B-Instruct",
                  disaggregation_mode="prefill").engine.gpu_memory_utilization == QWEN25_VL_CUT


def test_config_language_model_only_builds_no_qwen3_vl_tower_from_0_5_18():
    assert QWEN3_VL_TOWER == 576_388_336
    override = {"language_model_only": True}
    full = sglang("Qwen/Qwen3-VL-8B-Instruct")
    text = sglang("Qwen/Qwen3-VL-8B-Instruct", hf_overrides=override)
    assert full.model.params.vision == QWEN3_VL_TOWER
    # bf16: 2 B a parameter, none of them built
    assert full.memory.weights_bytes - text.memory.weights_bytes == 2 * QWEN3_VL_TOWER == 1_152_776_672
    # not multimodal (is_lm_only): no cut, prefill graphs kept, no embedding cache out of the KV budget
    assert full.engine.gpu_memory_utilization == BASE * (0.95 * (1 - 0.1 * (1152 ** 2 / 1024 ** 2 - 1)))
    assert text.engine.gpu_memory_utilization == BASE_GRAPHS
    memory = text.memory
    assert abs(memory.kv_cache_bytes - (memory.total_bytes - memory.non_torch_bytes - memory.weights_bytes
                                        - memory.reserve_bytes)) <= 1
    assert any("towers: not built (config.json sets language_model_only" in note for note in text.notes)
    # 0.5.17's qwen3_vl.py has no language_model_only branch and its ModelConfig reads no is_lm_only
    old_full = sglang("Qwen/Qwen3-VL-8B-Instruct", "0.5.17")
    old_text = sglang("Qwen/Qwen3-VL-8B-Instruct", "0.5.17", hf_overrides=override)
    assert old_text.memory.weights_bytes == old_full.memory.weights_bytes
    assert old_text.engine.gpu_memory_utilization == old_full.engine.gpu_memory_utilization


def test_language_model_only_is_refused_where_sglang_refuses_it():
    with pytest.raises(KvplanError, match="does not take it for Qwen3VLForConditionalGeneration"):
        sglang("Qwen/Qwen3-VL-8B-Instruct", language_model_only=True)
    with pytest.raises(KvplanError, match="SGLang has this flag from 0.5.18"):
        sglang("Qwen/Qwen3-VL-8B-Instruct", "0.5.17", language_model_only=True)
    # LANGUAGE_MODEL_ONLY_ARCHITECTURES: DeepseekV4ForCausalLM from 0.5.22 (0.5.21's list lacks it)
    assert language_model_only_refusal("DeepseekV4ForCausalLM", (0, 5, 22), MultimodalSwitches()) is None
    assert language_model_only_refusal("DeepseekV4ForCausalLM", (0, 5, 21), MultimodalSwitches()) is not None
    # never with --disaggregation-mode prefill/decode, nor with --language-only
    for switches in (MultimodalSwitches(disaggregation_mode="prefill"), MultimodalSwitches(language_only=True)):
        assert language_model_only_refusal("DeepseekV4ForCausalLM", (0, 5, 23), switches) is not None


def test_prefill_graphs_follow_is_multimodal_and_the_release_allowlist():
    # Qwen3.5-27B (Qwen3_5ForConditionalGeneration, multimodal): 0.5.15's breakable rule tests is_multimodal alone,
    # so its prefill graphs are off (0.835 before the cut); 0.5.16 lists it in
    # multimodal_breakable_cuda_graph_supported_model_archs, so they are kept (0.83 before the cut).
    factor = 0.95 * (1 - 0.1 * (1152 ** 2 / 1024 ** 2 - 1))
    assert sglang("Qwen/Qwen3.5-27B", "0.5.15").engine.gpu_memory_utilization == BASE * factor
    assert sglang("Qwen/Qwen3.5-27B", "0.5.16").engine.gpu_memory_utilization == BASE_GRAPHS * factor


def test_language_only_is_refused_outside_encoder_disaggregation_architectures():
    # _handle_encoder_disaggregation's list: Qwen2.5-VL from 0.5.10 (0.5.9 has no check), Qwen3.5 from 0.5.11,
    # MiMoV2ForCausalLM from 0.5.13; Gemma 3 never
    with pytest.raises(KvplanError, match="not support encoder disaggregation for Gemma3ForConditionalGeneration"):
        sglang("google/gemma-3-27b-it", language_only=True)
    # 0.5.9 takes it (and captures no prefill graphs before 0.5.10: 0.835)
    assert sglang("google/gemma-3-27b-it", "0.5.9", language_only=True).engine.gpu_memory_utilization == BASE
    assert language_only_refusal("Qwen2_5_VLForConditionalGeneration", (0, 5, 10)) is None
    assert language_only_refusal("Qwen3_5ForConditionalGeneration", (0, 5, 10)) is not None
    assert language_only_refusal("Qwen3_5ForConditionalGeneration", (0, 5, 11)) is None
    assert language_only_refusal("MiMoV2ForCausalLM", (0, 5, 12)) is not None
    assert language_only_refusal("MiMoV2ForCausalLM", (0, 5, 13)) is None
