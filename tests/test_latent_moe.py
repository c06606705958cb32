"""Nemotron-3's latent MoE (issue 22, part 4): with moe_latent_size the routed experts run at that width between
two projections (vLLM 0.33.0 model_executor/models/nemotron_h.py NemotronHMoE: fc1_latent_proj hidden -> latent,
the FusedMoE at hidden_size=moe_latent_size, fc2_latent_proj back); the router and the shared expert read the
hidden state. Before, every expert was counted at the hidden width: Super came to 458.6B."""

from __future__ import annotations

import json
from pathlib import Path

from kvplan.models.hf_config import parse_config
from kvplan.models.model import SpecSource

FRONTIER = Path(__file__).parent / "fixtures" / "configs" / "frontier"


def spec(name: str):
    data = json.loads((FRONTIER / name / "config.json").read_text())
    return parse_config(data, name, SpecSource("local", name))


def test_nemotron3_super_parameters_by_hand():
    # hidden 4,096. Mamba-2 'M' (128 heads x 64 = inner 8,192, conv channels 8,192 + 2 x 8 x 128 = 10,240): in_proj
    # 4,096 x (8,192 + 10,240 + 128) = 76,021,760, conv 10,240 x 4 + bias 10,240, A/D/dt_bias 3 x 128, gated norm
    # 8,192, out_proj 8,192 x 4,096 -> 109,635,968. Attention '*': q, o 2 x 4,096 x 4,096 + k, v 2 x 4,096 x 256
    # = 35,651,584. Experts 'E': 512 x (up + down, ReLU^2) 2 x 1,024 (moe_latent_size) x 2,688 = 2,818,572,288,
    # router 4,096 x 512 + e_score_correction_bias 512, fc1/fc2_latent_proj 2 x 4,096 x 1,024, one shared
    # expert 2 x 4,096 x 5,376 -> 2,873,098,752. 40 M + 40 E + 8 '*', 88 norms x 4,096, untied embeddings
    # 2 x 131,072 x 4,096, final norm: 120,668,707,840, the model card's "120B" (A12B).
    model = spec("nvidia__NVIDIA-Nemotron-3-Super-120B-A12B-FP8")
    assert model.moe is not None and model.moe.latent_size == 1024
    assert model.params.total == 120_668_707_840
    assert model.params.experts == 40 * 512 * 2 * 1024 * 2688
    # active per token: 22 of 512 experts in 40 layers, plus everything that is not a routed expert: about 12.8B
    active = model.params.total - model.params.experts + 40 * 22 * 2 * 1024 * 2688
    assert 12.0e9 < active < 13.0e9


def test_nemotron3_ultra_parameters_by_hand():
    # hidden 8,192. 'M' (256 heads x 64 = 16,384, conv 16,384 + 2,048 = 18,432): 8,192 x (16,384 + 18,432 + 256)
    # + 18,432 x 5 + 768 + 16,384 + 16,384 x 8,192 = 421,636,864. '*' (64 heads x 128, 2 KV heads):
    # 2 x 8,192 x 8,192 + 2 x 8,192 x 256 = 138,412,032. 'E': 512 x 2 x 2,048 x 5,120 + 8,192 x 512 + 512
    # + 2 x 8,192 x 2,048 + 2 x 8,192 x 10,240 = 10,942,939,648. 48 M + 48 E + 12 '*' (layers_block_type), 108
    # norms, untied embeddings 2 x 131,072 x 8,192, final norm: 549,308,993,536, the card's "550B" (A55B).
    model = spec("nvidia__NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16")
    assert model.params.total == 549_308_993_536


def test_lightning_without_a_latent_keeps_the_hidden_width():
    # Nemotron-3.5 Lightning writes moe_latent_size null: experts at the hidden width 2,688, as Nano
    model = spec("nvidia__NVIDIA-Nemotron-3.5-Lightning-30B-A3B-NVFP4")
    assert model.moe is not None and model.moe.latent_size == 0
    assert model.params.experts == 23 * 128 * 2 * 2688 * 1856
