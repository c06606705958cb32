"""The specs bundled for issue #7 (Qwen3.5, Nemotron-H, Jamba, DeepSeek-V3.1): each is its model's published config,
trimmed, and reads as the full file does; KV bytes, recurrent state and parameters checked by hand from the config.
The full configs and where they were copied from: tests/fixtures/configs/issue7/SOURCES.md."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import CONFIGS

from kvplan import api
from kvplan.errors import KvplanError
from kvplan.models import sources
from kvplan.models.hf_config import load_json, parse_config
from kvplan.models.layers import MlpBlock, RecurrentState, StateOnly
from kvplan.models.model import ModelSpec, SpecSource

# KV bytes per token at a 16-bit cache, TP 1: attention layers x KV heads x head dim x 2 (K and V) x 2 B; MLA keeps
# one (kv_lora_rank + qk_rope_head_dim) latent per layer.
KV_BYTES_16BIT = {
    # 64 layers, full attention every 4th (layer_types): 16 x 4 x 256 x 2 x 2 B
    "Qwen/Qwen3.5-27B": 65_536,
    # 40 layers, every 4th full: 10 x 2 x 256 x 2 x 2 B
    "Qwen/Qwen3.5-35B-A3B": 20_480,
    # 48 layers, every 4th full: 12 x 2 x 256 x 2 x 2 B
    "Qwen/Qwen3.5-122B-A10B": 24_576,
    # 60 layers, every 4th full: 15 x 2 x 256 x 2 x 2 B
    "Qwen/Qwen3.5-397B-A17B": 30_720,
    # hybrid_override_pattern: 10 '*' of 118 layers x 8 KV heads x 128 (attention_head_dim) x 2 x 2 B
    "nvidia/Nemotron-H-56B-Base-8K": 40_960,
    # 6 '*' of 52 layers x 2 x 128 x 2 x 2 B
    "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16": 6_144,
    # MLA: 61 layers x (512 + 64) x 2 B
    "deepseek-ai/DeepSeek-V3.1": 70_272,
    # attention at i % 8 == 4 of 32 layers: 4 x 8 x 128 x 2 x 2 B
    "ai21labs/AI21-Jamba-1.5-Mini": 16_384,
}

# One request's recurrent state in one layer, TP 1; the conv state in the checkpoint's bfloat16 (2 B).
STATE_PAGE_BYTES = {
    # Gated DeltaNet: conv 3 x (2 x 16 x 128 + 48 x 128) x 2 B = 61,440 + recurrent 48 x 128 x 128 x 4 B
    # (mamba_ssm_dtype float32) = 3,145,728
    "Qwen/Qwen3.5-27B": 3_207_168,
    # conv 3 x (2 x 16 x 128 + 32 x 128) x 2 B = 49,152 + recurrent 32 x 128 x 128 x 4 B = 2,097,152
    "Qwen/Qwen3.5-35B-A3B": 2_146_304,
    # conv 3 x (2 x 16 x 128 + 64 x 128) x 2 B = 73,728 + recurrent 64 x 128 x 128 x 4 B = 4,194,304
    "Qwen/Qwen3.5-122B-A10B": 4_268_032,
    "Qwen/Qwen3.5-397B-A17B": 4_268_032,
    # Mamba-2: conv 3 x (256 x 64 + 2 x 8 x 256) x 2 B = 122,880 + SSM 256 x 64 x 256 x 2 B = 8,388,608: the config
    # names no SSM cache dtype, so the spec keeps it as the conv state (each engine has its own default;
    # tests/test_nemotron_ssm_default.py)
    "nvidia/Nemotron-H-56B-Base-8K": 8_511_488,
    # conv 3 x (64 x 64 + 2 x 8 x 128) x 2 B = 36,864 + SSM 64 x 64 x 128 x 4 B (mamba_ssm_cache_dtype float32)
    # = 2,097,152 (the 2,134,016 B of engine-calibration Y08, a NemotronH of this geometry)
    "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16": 2_134_016,
    # Mamba-1: conv 3 x 8,192 x 2 B = 49,152 + SSM 8,192 x 16 x 2 B (no SSM dtype: as the conv state) = 262,144
    "ai21labs/AI21-Jamba-1.5-Mini": 311_296,
}

# Layers that hold KV, from each config's own layout keys.
ATTENTION_LAYERS = {
    "Qwen/Qwen3.5-27B": list(range(3, 64, 4)),
    "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16": [5, 12, 19, 26, 33, 42],
    "ai21labs/AI21-Jamba-1.5-Mini": [4, 12, 20, 28],
    "deepseek-ai/DeepSeek-V3.1": list(range(61)),
}

FULL_CONFIGS = {
    "Qwen/Qwen3.5-27B": "issue7/Qwen__Qwen3.5-27B.json",
    "Qwen/Qwen3.5-35B-A3B": "issue7/Qwen__Qwen3.5-35B-A3B.json",
    "Qwen/Qwen3.5-122B-A10B": "issue7/Qwen__Qwen3.5-122B-A10B.json",
    "Qwen/Qwen3.5-397B-A17B": "issue7/Qwen__Qwen3.5-397B-A17B.json",
    "nvidia/Nemotron-H-56B-Base-8K": "issue7/nvidia__Nemotron-H-56B-Base-8K.json",
    "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16": "issue7/nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.json",
    "deepseek-ai/DeepSeek-V3.1": "issue7/deepseek-ai__DeepSeek-V3.1.json",
    "ai21labs/AI21-Jamba-1.5-Mini": "params/ai21labs__AI21-Jamba-1.5-Mini.json",
}
MODELS = list(KV_BYTES_16BIT)


def bundled(model_id: str) -> ModelSpec:
    found = sources.find_spec_file(model_id)
    assert found is not None and found.kind == "bundled", model_id
    return sources.read_spec_file(found)


def full(model_id: str) -> ModelSpec:
    path = CONFIGS / FULL_CONFIGS[model_id]
    return parse_config(load_json(path.read_bytes(), str(path)), model_id, SpecSource("local", str(path)))


@pytest.mark.parametrize("model_id", MODELS)
def test_kv_bytes_per_token(model_id):
    assert bundled(model_id).kv_bytes_per_token(2) == KV_BYTES_16BIT[model_id]


@pytest.mark.parametrize("model_id", list(STATE_PAGE_BYTES))
def test_recurrent_state_per_layer(model_id):
    states = {layer for layer in bundled(model_id).layers if isinstance(layer, RecurrentState)}
    assert len(states) == 1
    assert states.pop().state_page_bytes(1) == STATE_PAGE_BYTES[model_id]


@pytest.mark.parametrize("model_id", list(ATTENTION_LAYERS))
def test_attention_layers(model_id):
    layers = bundled(model_id).layers
    assert [i for i, layer in enumerate(layers) if layer.holds_kv] == ATTENTION_LAYERS[model_id]


@pytest.mark.parametrize("model_id", MODELS)
def test_trimmed_spec_reads_as_the_full_config(model_id):
    # the bundled file keeps only the keys kvplan reads: nothing that changes the spec may have been dropped
    trimmed, whole = bundled(model_id), full(model_id)
    assert trimmed.layers == whole.layers
    assert (trimmed.params.total, trimmed.moe and trimmed.moe.dense_layers, trimmed.max_context, trimmed.dtype) == (
        whole.params.total, whole.moe and whole.moe.dense_layers, whole.max_context, whole.dtype)
    assert bool(trimmed.quantization) == bool(whole.quantization)


@pytest.mark.parametrize("model_id", MODELS)
def test_source_names_the_hub_file_and_its_copy(model_id):
    document = json.loads(sources.find_spec_file(model_id).path.read_text())  # type: ignore[union-attr]
    source = document["_kvplan"]["source"]
    assert source.startswith(f"https://huggingface.co/{model_id}/blob/main/config.json (copy: ")


def test_nemotron_h_56b_parameters_by_hand():
    # vLLM nemotron_h.py: each layer is one block after one RMSNorm (8,192). Mamba-2 'M' (MambaMixer2, inner
    # 256 x 64 = 16,384, conv channels 16,384 + 2 x 8 x 256 = 20,480): in_proj 8,192 x (16,384 + 20,480 + 256)
    # = 304,087,040, conv 20,480 x 4 + bias 20,480, A/D/dt_bias 3 x 256, gated norm 16,384, out_proj 16,384 x 8,192
    # -> 438,424,320. Attention '*' (no MLP of its own): q, o 2 x 8,192^2 + k, v 2 x 8,192 x 1,024 = 150,994,944.
    # MLP '-' (ReLU^2, up and down only): 2 x 8,192 x 32,768 = 536,870,912. 54 M + 54 '-' + 10 '*', 118 norms,
    # untied embeddings 2 x 131,072 x 8,192, final norm: 56,324,350,464, the "56B" of the model's name.
    params = bundled("nvidia/Nemotron-H-56B-Base-8K").params
    assert params.total == 56_324_350_464
    assert params.experts == 0


def test_nemotron_3_nano_parameters_by_hand():
    # Mamba-2 'M' (inner 64 x 64 = 4,096, conv channels 4,096 + 2 x 8 x 128 = 6,144): in_proj 2,688 x 10,304
    # = 27,697,152, conv 6,144 x 4 + 6,144, 3 x 64, norm 4,096, out_proj 4,096 x 2,688 -> 38,742,208. Attention '*':
    # 2 x 2,688 x 4,096 + 2 x 2,688 x 256 = 23,396,352. Experts 'E' (NemotronHMoE): 128 x 2 x 2,688 x 1,856
    # = 1,277,165,568, router 2,688 x 128 + e_score_correction_bias 128, one shared expert 2 x 2,688 x 3,712
    # (moe_shared_expert_intermediate_size) -> 1,297,465,472. 23 M + 23 E + 6 '*', 52 norms x 2,688, untied
    # embeddings 2 x 131,072 x 2,688, final norm: 31,577,940,288 (the model card: 31.6B in all).
    params = bundled("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16").params
    assert params.total == 31_577_940_288
    assert params.experts == 23 * 128 * 2 * 2_688 * 1_856


def test_jamba_parameters_match_the_card():
    # tests/test_params.py derives 51,570,323,328 by hand; the Hub card gives 51.6B
    params = bundled("ai21labs/AI21-Jamba-1.5-Mini").params
    assert params.total == 51_570_323_328 and params.exact


def test_nemotron_mlp_layers_are_blocks_without_a_state():
    spec = bundled("nvidia/Nemotron-H-56B-Base-8K")
    blocks = [layer for layer in spec.layers if isinstance(layer, MlpBlock)]
    assert len(blocks) == 54
    assert not any(isinstance(layer, StateOnly) for layer in spec.layers)


def nano_with(**changes) -> ModelSpec:
    path = CONFIGS / FULL_CONFIGS["nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16"]
    config = {**load_json(path.read_bytes(), str(path)), **changes}
    return parse_config(config, "nano", SpecSource("local", str(path)))


def test_nemotron_ssm_cache_dtype_is_read_from_the_config():
    # mamba_ssm_cache_dtype bfloat16: conv 36,864 + SSM 64 x 64 x 128 x 2 B = 1,048,576
    state = next(layer for layer in nano_with(mamba_ssm_cache_dtype="bfloat16").layers
                 if isinstance(layer, RecurrentState))
    assert state.state_page_bytes(1) == 1_085_440


def test_mamba2_mixer_without_its_gated_norm():
    # mamba_rms_norm false (Falcon-H1 writes it): each of the 23 mixers loses its 4,096-wide norm
    assert nano_with(mamba_rms_norm=False).params.total == 31_577_940_288 - 23 * 4_096


def test_nemotron_experts_only_in_e_layers():
    # a '-' layer among 'E' layers is a dense MLP (vLLM NemotronHMLPDecoderLayer); the Mamba ('M') and attention
    # ('*') layers have neither experts nor an MLP
    spec = nano_with(hybrid_override_pattern="ME-*" * 13)
    assert spec.moe is not None
    assert spec.moe.dense_layers == tuple(range(2, 52, 4))
    assert spec.moe.mlp_free_layers == tuple(i for i in range(52) if i % 4 in (0, 3))
    assert spec.moe.expert_layer_count(52) == 13


def test_nemotron_pattern_refuses_an_unknown_symbol():
    config = {"model_type": "nemotron_h", "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
              "num_hidden_layers": 3, "vocab_size": 10, "hybrid_override_pattern": "M*X", "mamba_num_heads": 2,
              "mamba_head_dim": 8, "ssm_state_size": 4, "n_groups": 1}
    with pytest.raises(KvplanError, match="hybrid_override_pattern.*unknown layer symbol 'X'"):
        parse_config(config, "x", SpecSource("local", "config.json"))


def test_nemotron_plan_has_no_uncounted_state_note():
    # the '-' and 'E' layers hold no state, and the Mamba-2 states are in the block pool
    plan = api.estimate("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", gpu="h100")
    assert plan.capacity.fits
    assert not any("not counted in the block pool" in note for note in plan.notes)


def test_cli_lists_and_estimates_them():
    listed = subprocess.run([sys.executable, "-m", "kvplan.cli.app", "models", "list", "--json"],
                            capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0, listed.stderr
    rows = {row["id"]: row for row in json.loads(listed.stdout)}
    for model_id, kv in KV_BYTES_16BIT.items():
        assert rows[model_id]["kv_bytes_per_token"] == kv
    result = subprocess.run([sys.executable, "-m", "kvplan.cli.app", "estimate", "--model",
                             "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", "--gpu", "h100", "--json"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["kv"]["bytes_per_token"] == 6_144
