"""Kimi-K3 (issue 22): Kimi Delta Attention (linear_attn_config) mixed with MLA, and its latent MoE, read as vLLM
0.33.0 builds it (models/kimi_k3/nvidia: model.py KimiDecoderLayer and KimiMoE, kda.py KimiK3DeltaAttention, mla.py;
model_executor/layers/mamba/mamba_utils.py kda_state_shape and kda_state_dtype). A KDA layer keeps one recurrent
state per request (a state block in vLLM's pool; a sequence_state_bytes in a flat-pool engine), an MLA layer its
576-value latent per token. Every number is derived by hand from the published config
(tests/fixtures/configs/frontier/README.md)."""

from __future__ import annotations

import json
from pathlib import Path

from kvplan.models.hf_config import parse_config
from kvplan.models.layers import KdaLowRankGateState, KdaState, LatentAttention
from kvplan.models.model import SpecSource
from kvplan.models.sources import read_spec_file, spec_files

K3 = Path(__file__).parent / "fixtures" / "configs" / "frontier" / "moonshotai__Kimi-K3"
MLA_LAYERS = [*range(3, 92, 4), 92]  # full_attn_layers 4, 8, ..., 92, 93 (1-based)


def config() -> dict:
    return json.loads((K3 / "config.json").read_text())


def spec(data: dict | None = None):
    return parse_config(data or config(), "moonshotai/Kimi-K3", SpecSource("local", str(K3)))


def test_kda_layers_are_one_based():
    layers = spec().layers
    assert [i for i, layer in enumerate(layers) if isinstance(layer, LatentAttention)] == MLA_LAYERS
    assert len(MLA_LAYERS) == 24
    kda = [layer for layer in layers if isinstance(layer, KdaState)]
    assert len(kda) == 69 and kda[0].heads == 96 and kda[0].head_size == 128 and kda[0].conv_kernel == 4
    assert layers[3] == LatentAttention(512 + 64)


def test_kv_bytes_and_state_by_hand():
    model = spec()
    # only the 24 MLA layers cache per token: 576 x 2 B = 1,152 each
    assert model.kv_bytes_per_token(2) == 24 * 1152 == 27_648
    state = model.layers[0]
    # conv (4 - 1, 3 x 96 x 128) in bfloat16 + recurrent (96, 128, 128) in float32
    assert state.state_page_bytes(1) == 3 * 36_864 * 2 + 96 * 128 * 128 * 4 == 6_512_640
    # TP 8: 3 x 4,608 x 2 + 12 x 128 x 128 x 4
    assert state.state_page_bytes(8) == 27_648 + 786_432 == 814_080
    # a flat-pool engine keeps it per request beside the pool; a bfloat16 recurrent state if the engine says so
    assert state.sequence_state_bytes(2, 2, 1) == 6_512_640
    assert state.as_served(2, 2, 0, 0).state_page_bytes(1) == 3 * 36_864 * 2 + 96 * 128 * 128 * 2


def test_layer_parameters_by_hand():
    by_layer = spec().params.by_layer
    h, width = 7168, 96 * 128
    kda = h * (4 * width + 128 + 96) + 128 * width + width * h  # in_proj_qkvgfab, f_b_proj, o_proj
    mla = (h * 1536 + 1536 * 96 * 192 + h * 576 + 512 * 96 * 256 + 96 * 128 * h
           + h * 96 * 128)  # q_a, q_b, kv_a, kv_b, o and the output gate g
    experts = 896 * 3 * 3584 * 3072  # routed experts at routed_expert_hidden_size 3,584
    shared = 3 * h * 6144 + 2 * h * 3584  # two shared experts, routed_expert_down_proj / up_proj
    # norms: two per layer, and the attention residuals' two norms and two hidden -> 1 projections
    norms = 6 * h
    kda_loose = width + 3 * width * 4 + 96 + 128  # dt_bias, conv1d, A_log, o_norm
    moe_loose = h * 896 + 896 + 3584  # router, e_score_correction_bias, routed_expert_norm
    assert (by_layer[0].mixer, by_layer[0].mlp, by_layer[0].loose) == (kda, 3 * h * 33792, kda_loose + norms)
    assert (by_layer[1].mixer, by_layer[1].mlp, by_layer[1].experts) == (kda, shared, experts)
    assert by_layer[1].loose == kda_loose + norms + moe_loose
    assert (by_layer[3].mixer, by_layer[3].loose) == (mla, 512 + 1536 + norms + moe_loose)


def test_total_parameters_by_hand():
    h, width = 7168, 96 * 128
    kda = h * (4 * width + 128 + 96) + 128 * width + width * h + width + 3 * width * 4 + 96 + 128
    mla = h * 1536 + 1536 * 96 * 192 + h * 576 + 512 * 96 * 256 + 96 * 128 * h + h * 96 * 128 + 512 + 1536
    moe = 896 * 3 * 3584 * 3072 + 3 * h * 6144 + 2 * h * 3584 + h * 896 + 896 + 3584
    norms = 6 * h
    # layer 0 (first_k_dense_replace 1): KDA and the dense MLP; then 68 KDA and 24 MLA layers with experts
    decoder = (kda + 3 * h * 33792 + norms) + 68 * (kda + moe + norms) + 24 * (mla + moe + norms)
    # embeddings and lm_head (untied), the final norm, output_attn_res_norm and _proj; the vision tower apart
    total = decoder + 2 * 163840 * h + h + 2 * h
    assert total == 2_779_484_476_000
    model = spec()
    assert model.params.total - model.params.vision == total


def test_the_low_rank_gate_is_the_other_layer_kind_with_the_same_state():
    # use_full_rank_gate false: vLLM 0.33.0 KimiDecoderLayer builds KimiGatedDeltaNetAttention (Kimi-Linear's
    # low-rank gate, tests/test_issue22_hybrid_totals.py) instead of refusing; the state shape is the same
    # (kda_state_shape). Its projections at K3's sizes (h 7,168, width 96 x 128 = 12,288, head_dim 128, 96 heads):
    # h x (3 x 12,288 + 96 + 128) + 2 x 128 x 12,288 (f_b, g_b) + h x 128 (g_a) + o_proj, against the full-rank
    # h x (4 x 12,288 + 128 + 96) + 128 x 12,288 + o_proj: -7,168 x 12,288 + 128 x 12,288 + 7,168 x 128 =
    # -85,590,016 a KDA layer
    data = config()
    data["text_config"]["linear_attn_config"]["use_full_rank_gate"] = False
    low = spec(data)
    assert isinstance(low.layers[0], KdaLowRankGateState)
    assert low.layers[0].state_page_bytes(1) == spec().layers[0].state_page_bytes(1) == 6_512_640
    assert low.params.by_layer[0].mixer - spec().params.by_layer[0].mixer == -85_590_016


def test_bundled_spec_is_the_published_config():
    bundled = next(f for f in spec_files() if f.kind == "bundled" and f.path.name == "moonshotai__Kimi-K3.json")
    assert read_spec_file(bundled).kv_bytes_per_token(2) == 27_648
