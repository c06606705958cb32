"""PLaMo 2, read as vLLM 0.8.5 to 0.26.0 model_executor/models/plamo2.py builds it (kvplan.models.plamo); 0.27.0
dropped the file and kvplan refuses the architecture there by vLLM's registry.

The config is pfnet/plamo-2-1b's as a stored copy quotes it (hidden 2048, 16 layers, 16 heads, 1 KV head,
hidden_size_per_head 128, Mamba 32 heads, state 64, conv 4, mamba_step 2, chunk 256, intermediate 8192, vocab
100,000, tied embeddings; it names no torch_dtype). No exact published parameter total was found: the Hub lists the
checkpoint's float32 safetensors at 4.06 GB + 285 MB + 819 MB + 621 kB + 132 kB + 5.3 kB + 40 B (= 5.165 GB), which
the 4 B x 1,291,441,920 = 5.166 GB below matches to the listing's rounding; the count stays marked approximate.
"""

from __future__ import annotations

from kvplan.api import gpu_choices
from kvplan.deployment import Deployment
from kvplan.engines import plan_deployment
from kvplan.models.hf_config import parse_config
from kvplan.models.layers import FullAttention, Mamba2State
from kvplan.models.model import ModelSpec, SpecSource

GiB = 2**30
PLAMO2_1B = {
    "architectures": ["Plamo2ForCausalLM"], "model_type": "plamo2", "hidden_size": 2048, "num_hidden_layers": 16,
    "num_attention_heads": 16, "num_key_value_heads": 1, "hidden_size_per_head": 128, "attention_window_size": 2048,
    "mamba_d_state": 64, "mamba_d_conv": 4, "mamba_num_heads": 32, "mamba_step": 2, "mamba_chunk_size": 256,
    "mamba_enabled": True, "intermediate_size": 8192, "vocab_size": 100000, "tie_word_embeddings": True,
    "max_position_embeddings": 10485760, "rms_norm_eps": 1e-06,
}


def plamo2(**changes: object) -> ModelSpec:
    return parse_config({**PLAMO2_1B, **changes}, "plamo-2-1b", SpecSource("local", "plamo-2-1b.json"))


def test_mamba_step_places_the_mamba_layers_and_the_rest_are_full_attention():
    # is_mamba: i % 2 != 1, so layers 0, 2, ... 14 are Mamba, 1, 3, ... 15 attention (no window: vLLM's
    # Attention is built without one, whatever attention_window_size says). The Mamba state: 32 heads x 128 =
    # 4,096 channels, no groups, state 64, conv 4 (float32, the dtype a config naming none is read in)
    spec = plamo2()
    mamba = Mamba2State(4096, 32, 128, 0, 64, 4, 256, conv_bytes=4)
    assert spec.layers == tuple(mamba if index % 2 == 0 else FullAttention(1, 128) for index in range(16))
    # per token: 8 attention layers x 2 (K, V) x 1 KV head x 128 x 2 B = 4,096 B
    assert spec.kv_bytes_per_token(2) == 4096
    # with mamba_step 4 (4 // 2 = 2): only layers 2, 6, 10 and 14 are attention
    assert [layer.kind for layer in plamo2(mamba_step=4).layers].count("full") == 4


def test_parameters_of_its_own_mamba_mixer_and_per_head_qk_norms():
    # h 2,048, I 8,192. Mamba mixer (8): in_proj 2,048 x 8,192 = 16,777,216; conv1d 4,096 x 4 = 16,384 (no bias);
    # bcdt_proj 4,096 x (128 + 2 x 64) = 1,048,576 (time-step rank max(64, 2,048 // 16) = 128); dt_proj 128 x 32 =
    # 4,096; A, D, dt_bias 96; out_proj 4,096 x 2,048 = 8,388,608; dt_norm 128, B_norm and C_norm 64 each:
    # 26,235,232. Attention (8): qkv 2,048 x (2,048 + 2 x 128) = 4,718,592; o_proj 2,048 x 2,048 = 4,194,304;
    # q_norm 16 x 128 = 2,048; k_norm 1 x 128: 8,915,072. Every layer: DenseMLP 3 x 2,048 x 8,192 = 50,331,648
    # and four norms of 2,048 = 8,192. Layers 8 x 76,575,072 + 8 x 59,254,912 = 1,086,639,872; embeddings
    # 100,000 x 2,048 = 204,800,000, tied; final norm 2,048: 1,291,441,920.
    spec = plamo2()
    assert spec.params.total == 1_291_441_920
    assert spec.params.lm_head == 0


def test_vllm_0_26_pool():
    # vLLM 0.26.0 (its last release with plamo2.py), 10 GiB, max_model_len 8,192. The float32 checkpoint is served
    # in bfloat16 (vLLM's auto dtype), so attention 2 x 128 x 2 B = 512 B per token per layer and the state
    # 3 x 4,096 x 2 B + 32 x 128 x 64 x 2 B = 548,864 B. Block 16 x cdiv(548,864, 16 x 512) = 1,072 tokens, whose
    # page, 1,072 x 512 B, is the state's exactly (no padding). 16 cache layers, 8 of each kind: 2 groups, a block
    # id 8 x 548,864 = 4,390,912 B; 10 GiB // that = 2,445 blocks. Per request cdiv(8,192, 1,072) = 8 attention
    # blocks + 2 state blocks (mamba_cache_mode align) = 10; tokens 2,445 x 8,192 // 10 = 2,002,944; 244.5x.
    dep = Deployment.from_mapping({"gpu": "h100-sxm", "kv_cache_memory_bytes": 10 * GiB, "max_model_len": 8192,
                                   "engine_version": "0.26.0"})
    result = plan_deployment(plamo2(), dep, gpu_choices(dep)[0])
    cap = result.capacity
    assert (result.engine.block_size, result.layout.num_groups, result.layout.block_bytes) == (1072, 2, 4_390_912)
    assert (cap.num_blocks, cap.blocks_per_request, cap.tokens, cap.max_concurrency) == (2445, 10, 2_002_944, 244.5)
