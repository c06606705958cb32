"""MiMo-V2-Flash (issue 22): hybrid sliding / full attention by its per-layer hybrid_layer_pattern, the sliding
layers with their own KV heads (swa_num_key_value_heads), K and V head dims apart (head_dim 192, v_head_dim 128),
attention sinks on the sliding layers only, read as vLLM 0.33.0 model_executor/models/mimo_v2.py builds it. Every
number is derived by hand from the published config (tests/fixtures/configs/frontier/README.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvplan.errors import KvplanError
from kvplan.models.hf_config import parse_config
from kvplan.models.layers import FullAttention, SlidingWindow
from kvplan.models.model import SpecSource
from kvplan.models.sources import read_spec_file, spec_files

FRONTIER = Path(__file__).parent / "fixtures" / "configs" / "frontier"
MIMO = FRONTIER / "XiaomiMiMo__MiMo-V2-Flash" / "config.json"


def config() -> dict:
    return json.loads(MIMO.read_text())


def spec(data: dict | None = None):
    return parse_config(data or config(), "XiaomiMiMo/MiMo-V2-Flash", SpecSource("local", str(MIMO)))


def test_layers_follow_hybrid_layer_pattern():
    model = spec()
    # hybrid_layer_pattern: 0 at layers 0, 5, 11, 17, 23, 29, 35, 41, 47 (full attention: 4 KV heads, K 192, V 128),
    # 1 elsewhere (sliding window 128: 8 KV heads, swa_head_dim 192, swa_v_head_dim 128)
    full, sliding = FullAttention(4, 192, 128), SlidingWindow(8, 192, 128, 128)
    assert [i for i, layer in enumerate(model.layers) if layer == full] == [0, 5, 11, 17, 23, 29, 35, 41, 47]
    assert sum(layer == sliding for layer in model.layers) == 39
    assert set(model.layers) == {full, sliding}


def test_kv_bytes_per_token_by_hand():
    # bfloat16: full 9 x 4 heads x (192 + 128) x 2 B = 23,040; sliding 39 x 8 x 320 x 2 = 199,680
    assert spec().kv_bytes_per_token(2) == 9 * 4 * 320 * 2 + 39 * 8 * 320 * 2 == 222_720


def test_sliding_page_matches_sglangs_logged_k_and_v_sizes():
    # sgl-project/sglang#18039 (MiMo-V2-Flash, TP 4, page 64): "swa_layer_tokens=300288 ... K size: 8.38 GB,
    # V size: 5.59 GB". At TP 4 a sliding layer holds 8 / 4 = 2 KV heads: K 2 x 192 x 2 B = 768 B a token, V 2 x 128
    # x 2 B = 512; 39 layers x 300,288 tokens x 768 B = 8,994,226,176 B = 8.38 GiB, x 512 B = 5.58 GiB (5.59 logged)
    layer = SlidingWindow(8, 192, 128, 128)
    key, value = layer.page_tensors(1, 2, tp=4)
    assert (key.shape, value.shape) == ((1, 2, 192), (1, 2, 128))
    assert round(39 * 300_288 * key.nbytes / 2**30, 2) == 8.38
    assert 39 * 300_288 * value.nbytes == 5_996_150_784  # 5.584 GiB
    assert layer.page_bytes(64, 2, tp=4) == 64 * (768 + 512)


def test_parameters_by_hand():
    model = spec()
    h = 4096
    full_attention = h * 64 * 192 + h * 4 * 192 + h * 4 * 128 + 64 * 128 * h  # q, k, v, o: 89,128,960
    sliding_attention = h * 64 * 192 + h * 8 * 192 + h * 8 * 128 + 64 * 128 * h + 64  # and a sink per head
    dense_mlp = 3 * h * 16384  # layer 0 (moe_layer_freq[0] == 0)
    experts = 256 * 3 * h * 2048  # the other 47 layers
    router = h * 256 + 256  # gate and e_score_correction_bias (topk_method noaux_tc)
    norms = 2 * h
    decoder = (9 * full_attention + 39 * sliding_attention + dense_mlp + 47 * (experts + router) + 48 * norms)
    embeddings = lm_head = 152576 * h  # tie_word_embeddings false
    total = decoder + h + embeddings + lm_head
    assert total == 308_778_780_864  # the model card's "309B total parameters" (the 3 MTP layers not counted)
    assert model.params.total == total
    assert model.params.experts == 47 * experts


def test_mtp_layers_not_in_the_main_model():
    # no num_nextn_predict_layers in the config; vLLM 0.33.0 loads its model.mtp.* weights only as the speculative
    # drafter (config/speculative.py: one MTP layer, _MIMO_V2_FLASH_NUM_MTP_LAYERS)
    assert spec().mtp_layers == 0


def test_wrong_pattern_length_is_one_line():
    data = config()
    data["hybrid_layer_pattern"] = data["hybrid_layer_pattern"][:40]
    with pytest.raises(KvplanError, match="hybrid_layer_pattern' has 40 entries for 48 layers"):
        spec(data)


def test_bundled_spec_is_the_published_config():
    bundled = next(f for f in spec_files() if f.kind == "bundled" and f.path.name == "XiaomiMiMo__MiMo-V2-Flash.json")
    assert read_spec_file(bundled).kv_bytes_per_token(2) == 222_720
