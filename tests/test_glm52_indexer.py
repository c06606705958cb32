"""GLM-5.2 (issue 22): DeepSeek sparse attention whose lightning indexer is shared between layers
(index_topk_freq 4, index_skip_topk_offset 3). A layer that skips its top-k reuses the previous layer's and builds no
indexer, so caches no indexer key (vLLM 0.33.0 models/deepseek_v32/attention.py; SGLang 0.5.23
model_executor/pool_configurator.py, a 0-row index-K buffer), and vLLM drops its indexer weights at load
(model_executor/models/deepseek_v2.py load_weights). Every number is derived by hand from the published config
(tests/fixtures/configs/frontier/README.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvplan.api import estimate
from kvplan.capacity import pool_layout
from kvplan.models.hf_config import parse_config
from kvplan.models.layers import IndexerSharingLatentAttention, SparseLatentAttention
from kvplan.models.model import SpecSource
from kvplan.models.sources import read_spec_file, spec_files

FRONTIER = Path(__file__).parent / "fixtures" / "configs" / "frontier"
NAMES = ("zai-org__GLM-5.2", "zai-org__GLM-5.2-FP8", "nvidia__GLM-5.2-NVFP4")


def config(name: str = NAMES[0]) -> dict:
    return json.loads((FRONTIER / name / "config.json").read_text())


def spec(data: dict):
    return parse_config(data, "zai-org/GLM-5.2", SpecSource("local", "config.json"))


# layers with their own indexer: max(i - 3 + 1, 0) % 4 == 0, i.e. i = 0, 1, 2 (max(.., 0) = 0) and 6, 10, ..., 74
OWN = [0, 1, 2, *range(6, 78, 4)]


@pytest.mark.parametrize("name", NAMES)
def test_indexer_layers_follow_index_topk_freq(name):
    model = spec(config(name))
    own = SparseLatentAttention(576, 128, 32, 2048)  # kv_lora_rank 512 + rope 64; index_head_dim 128, 32 heads
    sharing = IndexerSharingLatentAttention(576, 2048)
    assert len(OWN) == 21
    assert [i for i, layer in enumerate(model.layers) if layer == own] == OWN
    assert sum(layer == sharing for layer in model.layers) == 57
    # the config's own indexer_types ('full' / 'shared', which neither engine reads) says the same
    assert [i for i, kind in enumerate(config(name)["indexer_types"]) if kind == "full"] == OWN


def test_kv_bytes_per_token_by_hand():
    model = spec(config())
    # bfloat16: 78 latents x 576 x 2 B = 89,856, and 21 indexer keys x (128 + 128 / 128 x 4) = 2,772
    assert model.kv_bytes_per_token(2) == 78 * 1152 + 21 * 132 == 92_628
    # 8-bit: each latent in fp8_ds_mla, 512 + 4 x 4 + 64 x 2 = 656 B; the indexer keys as before
    assert model.kv_bytes_per_token(1) == 78 * 656 + 21 * 132 == 53_940
    # before: an indexer key in every layer, 78 x (1,152 + 132) = 100,152 B in bfloat16


def test_one_pool_group_whose_block_is_the_sum_of_pages():
    # one UniformTypeKVCacheSpecs group, 64-token blocks (the sparse backend's): 64 x 53,940 = 3,452,160 B
    layout = pool_layout(list(spec(config()).layers), 64, 1, 8)
    assert layout.num_groups == 1 and layout.block_bytes == 64 * 53_940
    plan = estimate(str(FRONTIER / "zai-org__GLM-5.2-FP8"), gpu="b200", tensor_parallel_size=8, max_model_len=65536,
                    engine="sglang")
    assert (plan.layout.block_size, plan.layout.block_bytes) == (64, 3_452_160)


def test_pattern_overrides_the_frequency():
    # index_topk_pattern: 'S' marks a layer that skips (both engines read it before index_topk_freq)
    data = config()
    data["index_topk_pattern"] = ["F", "S"] * 39
    layers = spec(data).layers
    assert [isinstance(layer, IndexerSharingLatentAttention) for layer in layers[:4]] == [False, True, False, True]


def test_skipped_indexers_are_not_weights():
    # one indexer: wq_b q_lora_rank 2,048 x 32 heads x 128, wk 6,144 x 128, its key LayerNorm 2 x 128, and
    # weights_proj 6,144 x 32 = 9,371,904 parameters; 57 layers have none loaded
    indexer = 2048 * 32 * 128 + 6144 * 128 + 2 * 128 + 6144 * 32
    assert indexer == 9_371_904
    every = config()
    del every["index_topk_freq"]
    assert spec(every).params.total - spec(config()).params.total == 57 * indexer == 534_198_528


def test_bundled_spec_is_the_published_config():
    bundled = next(f for f in spec_files() if f.kind == "bundled" and f.path.name == "zai-org__GLM-5.2.json")
    assert read_spec_file(bundled).kv_bytes_per_token(2) == 92_628
