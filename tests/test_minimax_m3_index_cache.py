"""MiniMax-M3 (issue 22): the sparse-attention layers' index cache (sparse_attention_config). A layer whose
sparse_attention_freq entry is not 0 caches, beside its K and V, one index key of sparse_index_dim per token, a single
head replicated on every rank, in bfloat16 (vLLM 0.33.0 models/minimax_m3/nvidia/model.py MiniMaxM3SparseAttention
and common/indexer.py MiniMaxM3IndexerCache; SGLang 0.5.23 mem_cache/memory_pool.py MiniMaxSparseKVPool), and the
sparse kernels read 128-token blocks. Every number is derived by hand from the published config
(tests/fixtures/configs/frontier/README.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvplan.api import estimate
from kvplan.errors import KvplanError
from kvplan.models.hf_config import parse_config
from kvplan.models.layers import FullAttention, IndexedAttention
from kvplan.models.model import SpecSource
from kvplan.models.sources import read_spec_file, spec_files

M3 = Path(__file__).parent / "fixtures" / "configs" / "frontier" / "MiniMaxAI__MiniMax-M3"


def config() -> dict:
    return json.loads((M3 / "config.json").read_text())


def spec(data: dict | None = None):
    return parse_config(data or config(), "MiniMaxAI/MiniMax-M3", SpecSource("local", str(M3)))


def test_sparse_layers_cache_an_index_key():
    layers = spec().layers
    # sparse_attention_freq: 0 for layers 0-2, 1 for the other 57; 4 KV heads x 128, sparse_index_dim 128
    assert layers[:3] == (FullAttention(4, 128),) * 3
    assert layers[3:] == (IndexedAttention(FullAttention(4, 128), 128, 2),) * 57


def test_kv_bytes_per_token_by_hand():
    model = spec()
    # bfloat16: 60 layers x 2 (K, V) x 4 heads x 128 x 2 B = 122,880, and 57 index keys x 128 x 2 B = 14,592
    assert model.kv_bytes_per_token(2) == 60 * 2 * 4 * 128 * 2 + 57 * 128 * 2 == 137_472
    # fp8 K and V, the index key still bfloat16 (indexer_kv_dtype 'auto' is 'bf16')
    assert model.kv_bytes_per_token(1) == 60 * 2 * 4 * 128 + 57 * 128 * 2 == 76_032


def test_block_at_tp8_by_hand():
    # TP 8: the 4 KV heads replicated, one a rank (2 x 128 x 2 B = 512 B a token a layer); the index key whole on
    # every rank (256 B); 128-token blocks: 128 x (60 x 512 + 57 x 256) = 5,799,936 B, one group
    plan = estimate(str(M3), gpu="h200", tensor_parallel_size=8, max_model_len=131072)
    assert (plan.layout.block_size, plan.layout.num_groups) == (128, 1)
    assert plan.layout.block_bytes == 128 * (60 * 512 + 57 * 256) == 5_799_936
    assert plan.capacity.blocks_per_request == 131072 // 128


def test_parameters_by_hand():
    h = 6144
    attention = h * 64 * 128 + 2 * h * 4 * 128 + 64 * 128 * h + 2 * 128  # q, k, v, o and the per-head q/k norms
    index = h * (4 + 1) * 128 + 2 * 128  # index_q (4 heads), index_k (one), their norms
    dense = 3 * h * 12288  # layers 0-2: dense_intermediate_size
    moe = 128 * 3 * h * 3072 + 3 * h * 3072 + h * 128 + 128  # experts, the shared expert, router and routing bias
    decoder = 3 * (attention + dense) + 57 * (attention + index + moe) + 60 * 2 * h
    total = decoder + h + 2 * 200064 * h  # final norm; embeddings and lm_head (untied)
    assert total == 426_174_572_928
    assert spec().params.total == total


def test_unmodelled_sparse_forms_are_refused_by_name():
    data = config()
    data["sparse_attention_config"]["sparse_disable_index_value"][5] = 0
    with pytest.raises(KvplanError, match="sparse_disable_index_value' is 0 for sparse layer 5"):
        spec(data)
    data = config()
    data["sparse_attention_config"]["sparse_block_size"] = 64
    with pytest.raises(KvplanError, match="sparse_block_size' \\(64\\) is not modelled"):
        spec(data)


def test_bundled_spec_is_the_published_config():
    bundled = next(f for f in spec_files() if f.kind == "bundled" and f.path.name == "MiniMaxAI__MiniMax-M3.json")
    assert read_spec_file(bundled).kv_bytes_per_token(2) == 137_472
