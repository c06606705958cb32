"""Issue 22's leftovers: TensorRT-LLM's DeepSeek-V4 (planned on its own cache manager; SM 120/121 refused),
MiMo-V2-Flash's MTP layer, Kimi-K3's vision tower."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import kvplan
from kvplan.errors import KvplanError
from kvplan.models.hf_config import parse_config
from kvplan.models.layers import FullAttention, SlidingWindow
from kvplan.models.model import SpecSource
from kvplan.models.sources import bundled_dir, resolve
from tests.conftest import run_cli

FRONTIER = Path(__file__).parent / "fixtures" / "configs" / "frontier"
FLASH = FRONTIER / "deepseek-ai__DeepSeek-V4-Flash"


def test_trtllm_plans_deepseek_v4_on_its_cache_manager():
    # NVIDIA/TensorRT-LLM (stored sources) runs DeepSeek-V4 on DeepseekV4CacheManager
    # (tensorrt_llm/_torch/attention_backend/sparse/deepseek_v4/cache_manager.py): kvplan plans its pools from the
    # free memory's share or --kv-cache-memory (tests/test_trtllm_deepseek_v4.py), not as the old "flat token pool"
    plan = kvplan.estimate(str(FLASH), gpu="h200", tensor_parallel_size=8, engine="trtllm").to_dict()
    assert any("DeepseekV4CacheManager" in note for note in plan["notes"])
    assert not any("flat token pool" in note for note in plan["notes"])


def test_trtllm_refusal_is_one_line_exit_2(capsys):
    # what stays refused: SM 120/121, where TrtllmAttention requires kv_cache_config.dtype fp8_ds_mla (an FP8 cache on
    # SM 90 now plans its context-MLA workspace reserve: tests/test_issue22_trtllm_fp8_sm90.py)
    code, out, err = run_cli(capsys, "estimate", "--model", str(FLASH), "--gpu", "rtx-pro-6000-blackwell",
                             "--engine", "trtllm", "--tp-size", "8", "--kv-cache-memory", "40GiB")
    assert code == 2
    assert "DeepSeek-V4 on TensorRT-LLM is not modelled" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_trtllm_still_plans_other_mla_models():
    # the hook refuses DeepSeek-V4's packed caches only: DeepSeek-V3's MLA layers keep every token as before
    # (config.json: kv_lora_rank 512 + qk_rope_head_dim 64 = 576 values x 61 layers x 2 B bfloat16 = 70,272 B)
    plan = kvplan.estimate(str(FRONTIER / "deepseek-ai__DeepSeek-V3"), gpu="h200", tensor_parallel_size=8,
                           engine="trtllm").to_dict()
    assert plan["kv"]["bytes_per_token"] == 576 * 61 * 2 == 70_272


def test_mimo_v2_flash_mtp_layer_is_a_sliding_window_layer():
    # vLLM 0.33.0 model_executor/models/mimo_v2_mtp.py (and SGLang 0.5.23 srt/models/mimo_v2_nextn.py) build the one
    # MTP layer from swa_num_key_value_heads 8, swa_head_dim 192, swa_v_head_dim 128, sliding_window_size 128;
    # layer 0 (hybrid_layer_pattern[0] == 0) is full attention with 4 KV heads, which kvplan copied before
    spec = resolve("XiaomiMiMo/MiMo-V2-Flash")
    assert spec.mtp_layer == SlidingWindow(8, 192, 128, 128)
    assert spec.layers[0] == FullAttention(4, 192, 128)


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_mimo_v2_flash_mtp_adds_the_sliding_layers_bytes(engine):
    # by hand at TP 2: a sliding layer 8 / 2 heads x (192 + 128) x 2 B = 2,560 B a token, a full one 4 / 2 x 320 x 2
    # = 1,280 B; the target 39 x 2,560 + 9 x 1,280 = 111,360 B; its MTP layer adds a sliding layer's 2,560 (a copy of
    # layer 0 added 1,280)
    def per_token(**extra):
        return kvplan.estimate("XiaomiMiMo/MiMo-V2-Flash", gpu="h200", engine=engine, tensor_parallel_size=2,
                               max_model_len=32_768, kv_cache_memory_bytes=40 * 2**30, **extra).to_dict()["kv"]
    assert per_token()["bytes_per_token"] == 39 * 2_560 + 9 * 1_280 == 111_360
    mtp = per_token(speculative_config={"method": "mtp", "num_speculative_tokens": 1})
    assert mtp["bytes_per_token"] == 111_360 + 2_560


def test_kimi_k3_vision_tower_counts_vllms_moonvit_3d_module_by_module():
    # vLLM 0.33.0 kimi_k25_vit.py MoonViT3dPretrainedModel + KimiK25MultiModalProjector, Kimi-K3's vision_config
    # (vt_hidden_size 1024, vt_intermediate_size 4096, qkv_hidden_size 1536, 27 layers, patch 14, positions
    # 64 x 64, rmsnorm, no biases, patchmergerv2 into the 7,168-wide text model), by hand:
    patch_embed = 3 * 14 * 14 * 1024                                   # 602,112
    positions = 64 * 64 * 1024                                         # 4,194,304
    block = 2 * 1024 + 1024 * 3 * 1536 + 1536 * 1024 + 2 * 1024 * 4096  # 14,682,112
    tower = patch_embed + positions + 27 * block + 1024                # 401,214,464
    projector = 4096 * 4096 + 4096 * 7168 + 7168                       # 46,144,512
    spec = resolve("moonshotai/Kimi-K3")
    assert spec.params.vision == tower + projector == 447_358_976
    # the decoder, unchanged: 2,779,484,476,000 outside the tower (tests/test_kimi_k3_kda.py). The Hugging Face
    # Hub's safetensors total for moonshotai/Kimi-K3 is 2,779,931,837,184 (its API's num_parameters, as a public
    # daily digest of the Hub's trending models recorded it on 2026-07-28): 2,208 more, which is 69 KDA layers x
    # (128 - 96) A_log values, as the checkpoint pads A_log past num_heads 96 and vLLM 0.33.0 builds and loads
    # num_heads of them (models/kimi_k3/nvidia/kda.py KimiK3DeltaAttention.A_log, a_log_weight_loader's narrow)
    assert spec.params.total == 2_779_484_476_000 + 447_358_976 == 2_779_931_837_184 - 69 * (128 - 96)
    assert spec.params.exact


def test_kimi_k3_bad_merge_kernel_is_one_line():
    data = json.loads((bundled_dir() / "moonshotai__Kimi-K3.json").read_text())["config"]
    data["vision_config"]["merge_kernel_size"] = ["2", 2]
    with pytest.raises(KvplanError, match="merge_kernel_size"):
        parse_config(data, "kimi-k3", SpecSource("local", "kimi-k3"))


def test_minimax_m3_is_planned_as_the_class_the_engines_register():
    # aiconfigurator's MiniMax-M3 config names MiniMaxM3ForCausalLM (model_type minimax_m3); vLLM 0.33.0's registry
    # and SGLang 0.5.23's srt/models/minimax_m3.py register MiniMaxM3SparseForCausalLM only
    spec = resolve("MiniMaxAI/MiniMax-M3")
    assert spec.architecture == "MiniMaxM3SparseForCausalLM"
    assert any("MiniMaxM3ForCausalLM is registered by neither" in note for note in spec.notes)
    # the layers are read as before: 57 sparse layers with a 128-wide bfloat16 index key, 137,472 B a token
    assert spec.kv_bytes_per_token(2) == 137_472
    # a registered name is left as it is, without a note
    other = resolve("MiniMaxAI/MiniMax-M2.5")
    assert other.architecture == "MiniMaxM2ForCausalLM"
    assert not any("registered by neither" in note for note in other.notes)


def test_deepseek_v4_flash_total_is_llama_cpps_published_count():
    # llama.cpp's /v1/models n_params for unsloth/DeepSeek-V4-Flash-GGUF (base deepseek-ai/DeepSeek-V4-Flash):
    # 284,334,567,511 (erstmalreden/deepseek-v4-flash-ryzen-ai-max-395-experiment README.md; the Hub lists the same
    # num_parameters for unsloth/DeepSeek-V4-Flash-0731-GGUF)
    spec = resolve("deepseek-ai/DeepSeek-V4-Flash")
    assert spec.params.total == 284_334_567_511
    assert spec.params.exact


def test_glm_5_2_total_is_its_safetensors_headers_text_model():
    # zai-org/GLM-5.2@b4734de4, every shard header read (joshuahickscorp/hawking GLM52_LOGICAL_WEIGHT_LEDGER.json):
    # 753,329,940,480 weights, of which the MTP layer (layer 78) holds 9,952,920,576; the text model kvplan counts
    # (the MTP layer is a speculative draft's, counted only with one) is the rest
    spec = resolve("zai-org/GLM-5.2")
    assert spec.mtp_layers == 1
    assert spec.params.total == 753_329_940_480 - 9_952_920_576 == 743_377_019_904
    assert spec.params.exact
