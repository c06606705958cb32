"""ModelOpt MIXED_PRECISION checkpoints (issue 22 item 2): each module's format from quantized_layers, as vLLM 0.33.0
(quantization/modelopt.py ModelOptMixedPrecisionConfig) and SGLang 0.5.23 (srt/layers/quantization/modelopt_quant.py
ModelOptMixedPrecisionConfig) resolve it: NVFP4 / W4A16_NVFP4 half a byte and an FP8 scale per 16, MXFP8 a byte
and an E8M0 scale per 32, FP8 a byte; a module the map does not name unquantized. Both engines weigh these formats
alike (their create_weights), so one hand derivation serves both. An algorithm kvplan does not weigh is refused by
name, or noted under --allow-unmodelled. Fixtures: tests/fixtures/modelopt_mixed/README.md."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kvplan.api import estimate
from kvplan.errors import KvplanError
from kvplan.models.sources import read_local
from kvplan.weights import mixed_bytes, weight_layout

MIXED = Path(__file__).parent / "fixtures" / "modelopt_mixed"
FRONTIER = Path(__file__).parent / "fixtures" / "configs" / "frontier"
M3 = MIXED / "nvidia__MiniMax-M3-NVFP4"
LIGHTNING = MIXED / "nvidia__NVIDIA-Nemotron-3.5-Lightning-30B-A3B-NVFP4"


def nvfp4(count: int) -> int:
    return count // 2 + count // 16


def mxfp8(count: int) -> int:
    return count + count // 32


def decoder_params(spec) -> int:
    """The decoder's parameters (the rest, outside the groups derived below, stays bfloat16)."""
    p = spec.params
    return p.total - p.embeddings - p.lm_head - p.vision


def test_minimax_m3_weighs_nvfp4_experts_and_mxfp8_rest() -> None:
    # text_config: hidden 6,144; 64 query heads and 4 KV heads of 128; 60 layers, the first 3 dense (12,288 wide),
    # 57 with 128 routed experts and one shared expert of 3,072; 57 sparse layers with the indexer (4 index heads
    # x 128 queries, one 128 key). quantized_layers: every attention, indexer, dense and shared-expert projection
    # MXFP8, the routed experts NVFP4 (group 16); lm_head, embeddings, routers and the tower excluded.
    h = 6144
    attention = h * 64 * 128 + 2 * h * 4 * 128 + 64 * 128 * h  # q, k, v, o: 106,954,752
    indexer = h * 4 * 128 + h * 128  # index_q_proj, index_k_proj: 3,932,160
    dense_mlp = 3 * h * 12288  # gate, up, down: 226,492,416
    shared = 3 * h * 3072  # 56,623,104
    experts = 128 * 3 * h * 3072  # 7,247,757,312
    spec = read_local(M3)
    assert spec.quantization is not None and spec.quantization.method == "modelopt_mixed"
    quantized = 60 * attention + 57 * indexer + 3 * dense_mlp + 57 * shared + 57 * experts
    rest = decoder_params(spec) - quantized  # norms, routers and their biases, at 2 bytes
    (dense, routed), note = mixed_bytes(spec, decoder_params(spec), 2)
    assert routed == 57 * nvfp4(experts) == 232_381_218_816
    assert dense == mxfp8(60 * attention) + mxfp8(57 * indexer) + mxfp8(3 * dense_mlp) + mxfp8(57 * shared) + 2 * rest
    assert note == ""
    layout = weight_layout(spec, 2, "modelopt_mixed")
    assert layout.lm_head == 200064 * h * 2  # excluded: bfloat16
    assert layout.note == ""


def test_qwen36_lm_head_in_its_listed_format() -> None:
    # quantized_layers names lm_head W4A16_NVFP4 (group 16); untied, vocab 248,320 x hidden 5,120.
    spec = read_local(FRONTIER / "nvidia__Qwen3.6-27B-NVFP4")
    assert weight_layout(spec, 2, "modelopt_mixed").lm_head == nvfp4(248320 * 5120) == 715_161_600
    assert weight_layout(spec, 2, None).lm_head == 248320 * 5120 * 2


def test_lightning_hf_quant_config_fp8_mamba_nvfp4_experts() -> None:
    # Nemotron-3.5-Lightning (hidden 2,688; 23 Mamba-2, 23 MoE, 6 attention layers): hf_quant_config.json gives
    # Mamba in_proj / out_proj FP8, routed and shared experts W4A16_NVFP4; attention projections excluded.
    h = 2688
    mamba = h * (4096 + 6144 + 64) + 4096 * h  # in_proj (z, xBC, dt) and out_proj: 38,707,200
    experts = 128 * 2 * h * 1856  # relu2 up and down: 1,277,165,568
    shared = 2 * h * 3712
    spec = read_local(LIGHTNING)
    assert spec.quantization is not None and spec.quantization.source == "hf_quant_config.json"
    rest = decoder_params(spec) - 23 * (mamba + experts + shared)  # attention (excluded), norms, convs, routers
    (dense, routed), _ = mixed_bytes(spec, decoder_params(spec), 2)
    assert routed == 23 * nvfp4(experts) == 16_523_329_536
    assert dense == 23 * mamba + 23 * nvfp4(shared) + 2 * rest


def _with_algo(tmp_path: Path, algo: str) -> Path:
    target = tmp_path / "model"
    shutil.copytree(LIGHTNING, target)
    quant = json.loads((target / "hf_quant_config.json").read_text())
    quant["quantization"]["quantized_layers"]["backbone.layers.0.mixer.in_proj"]["quant_algo"] = algo
    (target / "hf_quant_config.json").write_text(json.dumps(quant))
    return target


def test_unknown_format_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(KvplanError, match="quant_algo Q4_K, which kvplan does not model"):
        read_local(_with_algo(tmp_path, "q4_k"))


def test_unknown_format_noted_and_weighed_at_model_dtype(tmp_path: Path) -> None:
    spec = read_local(_with_algo(tmp_path, "Q4_K"), allow_unmodelled=True)
    assert any("quant_algo Q4_K not modelled" in note for note in spec.notes)
    known = read_local(LIGHTNING)
    (dense, _), _ = mixed_bytes(spec, decoder_params(spec), 2)
    (fp8_dense, _), _ = mixed_bytes(known, decoder_params(known), 2)
    h = 2688
    # layer 0's mixer (in_proj and out_proj: a role takes its widest format) at 2 bytes, not FP8's 1
    assert dense - fp8_dense == h * (4096 + 6144 + 64) + 4096 * h
    plan = estimate(str(_with_algo(tmp_path / "b", "Q4_K")), gpu="h100", max_model_len=8192, allow_unmodelled=True)
    assert any("Q4_K" in note for note in plan.notes)


def test_mixed_precision_without_a_map_refused(tmp_path: Path) -> None:
    target = tmp_path / "model"
    shutil.copytree(LIGHTNING, target)
    quant = json.loads((target / "hf_quant_config.json").read_text())
    del quant["quantization"]["quantized_layers"]
    (target / "hf_quant_config.json").write_text(json.dumps(quant))
    with pytest.raises(KvplanError, match="non-empty 'quantized_layers'"):
        read_local(target)


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_mixed_checkpoints_plan_without_the_bf16_note(engine: str) -> None:
    for model in (M3, LIGHTNING, FRONTIER / "nvidia__Qwen3.6-27B-NVFP4", FRONTIER / "nvidia__Qwen3.6-35B-A3B-NVFP4",
                  FRONTIER / "nvidia__DeepSeek-V4-Flash-NVFP4"):
        plan = estimate(str(model), gpu="b200", engine=engine, max_model_len=8192, tensor_parallel_size=4)
        assert not any("quantization 'modelopt_mixed' is not modelled" in note for note in plan.notes), model.name


def test_models_import_keeps_the_inline_map(tmp_path: Path) -> None:
    # `kvplan models import` keeps the config's key paths that were read: the whole inline ModelOpt section
    # (quantized_layers with it), so the stored spec weighs as the directory does.
    env = {**os.environ, "KVPLAN_SPEC_DIR": str(tmp_path / "specs")}
    result = subprocess.run([sys.executable, "-m", "kvplan.cli.app", "models", "import", str(M3), "--id", "acme/m3"],
                            capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 0, result.stderr
    stored = json.loads((tmp_path / "specs" / "acme__m3.json").read_text())
    published = json.loads((M3 / "config.json").read_text())["quantization_config"]
    assert stored["config"]["quantization_config"] == published


def test_deepseek_v4_nvfp4_hybrid_experts() -> None:
    # nvidia/DeepSeek-V4-Flash-NVFP4's config.json: quant_method fp8 (block 128), quant_algo MIXED_PRECISION,
    # moe_quant_algo NVFP4, group_size 16, expert_dtype fp4: the routed experts NVFP4, not MXFP4 (17/32 B).
    # 43 layers x 256 experts x 3 x hidden 4,096 x 2,048.
    experts = 43 * 256 * 3 * 4096 * 2048  # 277,025,390,592
    spec = read_local(FRONTIER / "nvidia__DeepSeek-V4-Flash-NVFP4")
    assert spec.quantization is not None and spec.quantization.expert_format == "nvfp4"
    layout = weight_layout(spec, 2, "fp8")
    assert layout.experts_per_layer * 43 == nvfp4(experts) == 155_826_782_208
    base = read_local(FRONTIER / "deepseek-ai__DeepSeek-V4-Flash")  # DeepSeek's own: MXFP4 experts
    assert weight_layout(base, 2, "fp8").experts_per_layer * 43 == experts * 17 // 32
