"""Per-layer config forms read as the engines read them (issue 22, part 4): a per-layer moe_layer_freq list, the
vt_* sizes of Kimi's vision tower, Nemotron-H's layers_block_type without num_hidden_layers, nested text_config
wrappers. The configs are the published ones (tests/fixtures/configs/frontier/README.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvplan.errors import KvplanError
from kvplan.models.hf_config import parse_config
from kvplan.models.model import SpecSource

FRONTIER = Path(__file__).parent / "fixtures" / "configs" / "frontier"


def config(name: str) -> dict:
    return json.loads((FRONTIER / name / "config.json").read_text())


def spec(name: str, **kwargs):
    return parse_config(config(name), name.replace("__", "/"), SpecSource("local", name), **kwargs)


def test_minimax_m3_moe_layer_freq_list_marks_its_three_dense_layers():
    # moe_layer_freq is [0, 0, 0, 1 x 57]: layers 0-2 have a dense MLP (vLLM 0.33.0 minimax_m3 _is_moe_layer:
    # moe_layer_freq[layer_id] != 0), the other 57 their 128 experts
    model = spec("MiniMaxAI__MiniMax-M3", allow_unmodelled=True)
    assert model.moe is not None
    assert model.moe.dense_layers == (0, 1, 2)
    assert model.moe.expert_layer_count(60) == 57
    # the dense layers are dense_intermediate_size wide: 3 gated projections x 6144 x 12288 each
    dense_mlp = 3 * 6144 * 12288
    # the experts: 57 layers x 128 experts x 3 x 6144 x 3072
    assert model.params.experts == 57 * 128 * 3 * 6144 * 3072
    assert model.params.total > 3 * dense_mlp


def test_mimo_v2_flash_moe_layer_freq_list():
    # moe_layer_freq is [0, 1 x 47]: layer 0 dense (intermediate_size 16384), 47 layers of 256 experts x 2048
    model = spec("XiaomiMiMo__MiMo-V2-Flash", allow_unmodelled=True)
    assert model.moe is not None and model.moe.dense_layers == (0,)
    assert model.params.experts == 47 * 256 * 3 * 4096 * 2048


def test_moe_layer_freq_list_of_the_wrong_length_is_refused():
    data = config("MiniMaxAI__MiniMax-M3")
    data["moe_layer_freq"] = data["moe_layer_freq"][:10]
    with pytest.raises(KvplanError, match="moe_layer_freq' has 10 entries for 60 layers"):
        parse_config(data, "m", SpecSource("local", "m"), allow_unmodelled=True)


@pytest.mark.parametrize("name", ["moonshotai__Kimi-K2.5", "nvidia__Kimi-K2.6-NVFP4"])
def test_kimi_vision_tower_named_vt_is_read(name):
    # MoonViT's sizes are vt_hidden_size 1152, vt_num_hidden_layers 27, vt_intermediate_size 4304 (vLLM 0.33.0
    # transformers_utils/configs/kimi_k3.py); before, 'vision_config.hidden_size is missing' refused the model
    model = spec(name)
    assert model.num_layers == 61 and model.attention == "mla"
    # MLA latent kv_lora_rank 512 + qk_rope_head_dim 64 = 576 values x 2 B x 61 layers
    assert model.kv_bytes_per_token(2) == 61 * 576 * 2 == 70272
    assert model.params.vision > 27 * 2 * 1152 * 4304  # at least the tower's MLPs
    # the tower is counted module by module (tests/test_frontier_hub_totals.py); the kimi_k2 text model is not
    # checked against a published total, and said so
    assert not model.params.exact


def test_nemotron3_ultra_layer_count_from_layers_block_type():
    # Ultra names no num_hidden_layers: its layers_block_type lists 108 blocks, 48 mamba, 48 moe, 12 attention
    model = spec("nvidia__NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16", allow_unmodelled=True)
    assert model.num_layers == 108
    assert [layer.kind for layer in model.layers].count("mamba2") == 48
    assert model.num_kv_layers == 12
    # 12 attention layers x K and V x 2 KV heads x 128 head dim x 2 B
    assert model.kv_bytes_per_token(2) == 12 * 2 * 2 * 128 * 2 == 12288
    assert model.moe is not None and model.moe.expert_layer_count(108) == 48


def test_lightning_layers_block_type_agrees_with_num_hidden_layers():
    # Nemotron-3.5 Lightning gives both: 52 layers, the Nano layout (23 mamba, 23 moe, 6 attention)
    model = spec("nvidia__NVIDIA-Nemotron-3.5-Lightning-30B-A3B-NVFP4")
    assert model.num_layers == 52 and model.num_kv_layers == 6
    assert model.attention == "mamba2:23+none:23+full:6"


def test_unknown_block_type_is_named():
    data = config("nvidia__NVIDIA-Nemotron-3.5-Lightning-30B-A3B-NVFP4")
    data["layers_block_type"][3] = "conv"
    with pytest.raises(KvplanError, match="layers_block_type' has an unknown block type 'conv'"):
        parse_config(data, "m", SpecSource("local", "m"))


def test_nested_text_config_of_qwen3_vl():
    # Qwen3-VL-8B: the language model sits in text_config (36 layers, 8 KV heads x 128)
    model = spec("Qwen__Qwen3-VL-8B-Instruct")
    assert model.num_layers == 36
    assert model.kv_bytes_per_token(2) == 36 * 2 * 8 * 128 * 2
