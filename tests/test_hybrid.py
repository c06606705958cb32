"""vLLM's rules for Mamba / linear-attention hybrids, pipeline stages, chunked attention and shared KV, each
checked against a hand derivation or a real startup log (sources in comments; configs in
fixtures/configs/hybrid/SOURCES.md)."""

from __future__ import annotations

from pathlib import Path

from kvplan.api import gpu_choices
from kvplan.capacity import aligned_block_size, pool_layout
from kvplan.deployment import Deployment
from kvplan.engines import plan_deployment
from kvplan.models.hf_config import load_json, parse_config
from kvplan.models.layers import FullAttention, GatedDeltaNetState, Mamba2State, page_tensors_bytes
from kvplan.models.model import ModelSpec, SpecSource
from kvplan.models.sources import resolve

GiB = 2**30
HYBRID = Path(__file__).parent / "fixtures" / "configs" / "hybrid"


def hybrid_fixture(name: str) -> ModelSpec:
    path = HYBRID / name
    return parse_config(load_json(path.read_bytes(), str(path)), name, SpecSource("local", str(path)))


def plan(spec: ModelSpec, **knobs):
    dep = Deployment.from_mapping(knobs)
    return plan_deployment(spec, dep, gpu_choices(dep)[0])


def test_qwen3_next_replays_the_vllm_0_10_2_log():
    # Qwen3-Next-80B-A3B on 2 x H200, vLLM 0.10.2: block size 544, 44.59 GiB available, 973,760 tokens,
    # 14.77x at 262,144 (the issue #7 log). By hand, per TP rank (2 of each 2 KV heads / 32 value heads):
    # layers: no layer_types, full_attention_interval 4 -> 12 full, 36 Gated DeltaNet.
    # attention page per token: 2 x 1 head x 256 x 2 B = 1,024 B.
    # GDN state: conv 3 x (2 x 16 x 128 + 32 x 128) / 2 = 3 x 4,096 x 2 B = 24,576 B; recurrent 16 x 128 x 128 x 2 B
    # = 524,288 B; 548,864 B -> block 16 x cdiv(548,864, 16 x 1,024) = 544 tokens, page 557,056 B (+1.49%).
    # groups: 12 full and 36 GDN layers, group size 12 -> 1 + 3 groups; a block is 12 pages = 6,684,672 B.
    # 44.59 GiB // 6,684,672 = 7,162 blocks; tokens 7,162 // 4 x 544 = 973,760.
    # per request: cdiv(262,144, 544) = 482 + 3 state groups x 1 = 485; 7,162 / 485 = 14.77.
    spec = resolve("Qwen/Qwen3-Next-80B-A3B-Instruct")
    assert spec.attention == "gdn:36+full:12"
    result = plan(spec, gpu="h200", tensor_parallel_size=2, kv_cache_memory_bytes=int(44.59 * GiB),
                  engine_version="0.10.2")
    cap = result.capacity
    assert result.engine.block_size == 544
    assert (result.layout.num_groups, result.layout.block_bytes) == (4, 6_684_672)
    assert (cap.num_blocks, cap.tokens, cap.max_concurrency, cap.blocks_per_request) == (7_162, 973_760, 14.77, 485)
    assert any("Padding mamba page size by 1.49%" in note for note in result.notes)


def test_state_page_tensors_add_up_to_the_padded_page():
    # The GDN page above: 24,576 + 524,288 = 548,864 B of state, padded by 8,192 B to the 557,056 B attention page.
    layout = pool_layout(list(resolve("Qwen/Qwen3-Next-80B-A3B-Instruct").layers), 16, 2, 2)
    state = next(g.layer for g in layout.groups if isinstance(g.layer, GatedDeltaNetState))
    tensors = state.page_tensors(544, 2, 2)
    assert [t.nbytes for t in tensors] == [24_576, 524_288, 8_192]
    assert page_tensors_bytes(tensors) == state.page_bytes(544, 2, 2) == 557_056


def test_qwen3_6_27b_on_vllm_0_27_replays_y06():
    # engine-calibration Y06 (talos-argocd-proxmox#1995): TP 2, fp8_e4m3 KV, max_model_len 131,072, block 1,568,
    # 302,921 tokens, 2.31x, 4.99 GiB pool per GPU, prefix caching on. By hand, per rank:
    # attention 2 x 2 heads x 256 x 1 B = 1,024 B per token; GDN state: conv 3 x (2 x 16 x 128 + 48 x 128) / 2 x 2 B
    # = 30,720 B, recurrent 24 x 128 x 128 x 4 B (mamba_ssm_dtype float32) = 1,572,864 B; 1,603,584 B ->
    # 16 x cdiv(1,603,584, 16,384) = 1,568 tokens. 16 full + 48 GDN layers, group size 16 -> 4 groups; a block is
    # 16 x 1,568 x 1,024 = 25,690,112 B; 4.99 GiB // that = 208 blocks. Prefix caching ("align"): 2 blocks per state
    # group: cdiv(131,072, 1,568) = 84 + 3 x 2 = 90 per request; 208 / 90 = 2.31x; tokens 208 x 131,072 // 90 = 302,921.
    result = plan(hybrid_fixture("qwen3.5-27b.json"), gpu="rtx3090", tensor_parallel_size=2,
                  kv_cache_dtype="fp8_e4m3", max_model_len=131072, max_num_batched_tokens=8192, max_num_seqs=2,
                  kv_cache_memory_bytes=int(4.99 * GiB), engine_version="0.27.1")
    cap = result.capacity
    assert result.engine.block_size == 1568
    assert (cap.num_blocks, cap.blocks_per_request, cap.tokens, cap.max_concurrency) == (208, 90, 302_921, 2.31)


def test_qwen3_6_27b_with_mtp_on_vllm_0_20_1_replays_y04():
    # engine-calibration Y04 (club-3090#91, v0.20.1): TP 2, float16, fp8_e5m2 KV, 262,144, MTP with 3 speculative
    # tokens: 619,479 tokens, 2.36x; related boots of the profile report up to 10.99 GiB. By hand: 3 speculative
    # tokens add 3 conv rows: 6 x 5,120 x 2 B = 61,440 + 1,572,864 = 1,634,304 B -> block 16 x cdiv(.., 16,384) = 1,600.
    # The MTP layer is one more full layer: 17 full + 48 GDN, group size 17 -> 1 + 3 groups (3 padding layers); a block
    # is 17 x 1,600 x 1,024 = 27,852,800 B; 10.99 GiB // that = 423. Per request: cdiv(262,144, 1,600) = 164 + 3 groups
    # x (2 + 3 speculative blocks) = 179; 423 / 179 = 2.36x; tokens 423 x 262,144 // 179 = 619,479. The 2 are
    # mamba_cache_mode align's, which 0.20.1 gives a hybrid only with --enable-prefix-caching (config/model.py
    # is_prefix_caching_supported: False for hybrids before 0.26), so the profile passed it; without it 1 + 3.
    knobs = {"gpu": "rtx3090", "tensor_parallel_size": 2, "dtype": "float16", "kv_cache_dtype": "fp8_e5m2",
             "max_model_len": 262144, "max_num_batched_tokens": 8192, "max_num_seqs": 2,
             "kv_cache_memory_bytes": int(10.99 * GiB), "engine_version": "0.20.1",
             "speculative_config": {"method": "mtp", "num_speculative_tokens": 3}}
    assert plan(hybrid_fixture("qwen3.5-27b.json"), **knobs).capacity.blocks_per_request == 164 + 3 * 4
    result = plan(hybrid_fixture("qwen3.5-27b.json"), enable_prefix_caching=True, **knobs)
    cap = result.capacity
    assert (result.engine.block_size, result.layout.block_bytes, result.layout.padding_layers) == (1600, 27_852_800, 3)
    assert (cap.num_blocks, cap.blocks_per_request, cap.tokens, cap.max_concurrency) == (423, 179, 619_479, 2.36)


def test_nemotron_mamba2_block_alignment_matches_y08():
    # engine-calibration Y08 (vLLM 0.19.0, NemotronH, fp8 KV, --mamba-ssm-cache-dtype float32): "Setting attention
    # block size to 4176 tokens", "Padding mamba page size by 0.19%". Config: 2 KV heads x 128, Mamba-2 64 heads x
    # 64, state 128, 8 groups, conv 4. By hand, TP 1: attention 2 x 2 x 128 x 1 B = 512 B per token; conv
    # 3 x (4,096 + 2 x 8 x 128) x 2 B = 36,864 B, SSM 64 x 64 x 128 x 4 B = 2,097,152 B; 2,134,016 B ->
    # 16 x cdiv(2,134,016, 8,192) = 4,176 tokens, page 2,138,112 B: +0.19%.
    state = Mamba2State(4096, 64, 64, 8, 128, 4, ssm_bytes=4)
    layers = [state, FullAttention(2, 128)]
    assert state.state_page_bytes() == 2_134_016
    assert aligned_block_size(layers, 16, 1, 1) == 4176
    assert aligned_block_size(layers, 8192, 1, 1) == 8192  # a larger --block-size is kept


def test_pure_mamba_is_served():
    # mamba-2.8b: 64 Mamba-1 layers, inner 5,120, state 16, conv 4; TP 1, bf16: (3 x 5,120 + 5,120 x 16) x 2 B
    # = 194,560 B per layer; one block is a whole state of all 64 layers: 12,451,840 B. 10 GiB // that = 862
    # blocks = 862 requests; vLLM logs the blocks in max_model_len tokens (2,048: the config names none).
    result = plan(resolve("state-spaces/mamba-2.8b-hf"), gpu="h100-sxm", kv_cache_memory_bytes=10 * GiB,
                  engine_version="0.10.2")
    cap = result.capacity
    assert result.layout.block_bytes == 12_451_840
    assert (cap.num_blocks, cap.tokens, cap.max_concurrency, cap.fits) == (862, 862 * 2048, 862.0, True)


def test_pipeline_stages_share_the_whole_models_groups():
    # Gemma 3 27B at PP 4 (62 layers: 10 full at every 6th, 52 sliding): vLLM groups the whole model once
    # (kv_cache_utils.get_kv_cache_configs): group size 10 -> 1 full + 6 sliding groups, sliding group j taking
    # every 6th sliding layer from j. Stages of 15, 16, 16, 15 layers (get_pp_indices); stage 0 holds sliding
    # layers 0-12, so group 0 has 3 of them (0, 6, 12): every stage's fullest group holds 3 layers (by hand for each
    # stage), so a block is 3 pages of 16 x 2 x 16 x 128 x 2 B = 393,216 B. 10 GiB // 393,216 = 27,306 blocks;
    # tokens 27,306 // 7 groups x 16 = 62,400 as v0.20.0 logs them (v1/core/kv_cache_utils.py _report_kv_cache_config;
    # from v0.20.1 it logs int(concurrency x max_model_len), issue 18 section 2.7). (Grouping each stage by itself gave
    # stage 1, 3 full + 13 sliding, six groups: 27,306 // 6 x 16 = 72,816 tokens, 16.7% too many.)
    result = plan(resolve("google/gemma-3-27b-it"), gpu="h100-sxm", pipeline_parallel_size=4,
                  kv_cache_memory_bytes=10 * GiB, engine_version="0.20.0")
    assert (result.layout.num_groups, result.layout.block_bytes) == (7, 393_216)
    assert (result.capacity.num_blocks, result.capacity.tokens) == (27_306, 62_400)


def test_llama4_chunked_attention_turns_the_hybrid_manager_off():
    # Llama 4 Scout: 48 layers, 8 KV heads x 128; 36 chunked + 12 global. vLLM with
    # VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE off (0, or the default before v0.14): one full spec, a block
    # of 48 x 16 x 2 x 8 x 128 x 2 B = 3,145,728 B. With it: group size 12, 4 groups of 12 pages: 786,432 B.
    spec = resolve("meta-llama/Llama-4-Scout-17B-16E-Instruct")
    off = plan(spec, gpu="h200", tensor_parallel_size=1, kv_cache_memory_bytes=10 * GiB, chunked_hybrid_kv=False)
    on = plan(spec, gpu="h200", tensor_parallel_size=1, kv_cache_memory_bytes=10 * GiB, chunked_hybrid_kv=True)
    assert (off.layout.num_groups, off.layout.block_bytes) == (1, 3_145_728)
    assert (on.layout.num_groups, on.layout.block_bytes) == (4, 786_432)


def test_the_chunked_hybrid_switch_is_read_from_the_environment():
    # The variable as a user exports it (or writes it before a pasted `vllm serve`) sets the knob.
    from kvplan.deployment.front_doors import from_cli

    environ = {"VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE": "1"}
    assert from_cli({}, [], None, None, environ).chunked_hybrid_kv is True
    assert from_cli({}, [], None, None, {}).chunked_hybrid_kv is None


def test_gemma_3n_shared_kv_layers_hold_no_kv():
    # gemma-3n-E2B: 30 layers, the last 10 (num_kv_shared_layers) read earlier layers' KV; the list-valued
    # intermediate_size (8,192 on each layer) is read. 20 KV layers: 16 sliding + 4 full.
    spec = hybrid_fixture("gemma-3n-e2b.json")
    assert spec.intermediate_size == 8192
    assert spec.num_kv_layers == 20
    assert [layer.kind for layer in spec.layers[20:]] == ["shared"] * 10
    assert spec.attention == "sliding:16+shared:10+full:4"


def test_mla_on_amd_plans():
    # MI300X reports gfx942, not a CUDA capability: MLA keeps vLLM's default 16-token blocks there.
    result = plan(resolve("deepseek-ai/DeepSeek-V2-Lite"), gpu="mi300x")
    assert result.engine.block_size == 16
    assert result.capacity.num_blocks > 0


def parsed(**fields) -> ModelSpec:
    config = {"model_type": "hybrid", "hidden_size": 1024, "num_attention_heads": 8, "num_key_value_heads": 2,
              "vocab_size": 100, "torch_dtype": "bfloat16", **fields}
    config.setdefault("num_hidden_layers", 4)
    return parse_config(config, "h", SpecSource("local", "config.json"))


def test_state_kind_follows_the_configs_fields():
    # Granite-4.0-H fields (transformers' granitemoehybrid example): Mamba-2, 8 heads x 128, 1 group, state 128,
    # conv 4. TP 1, bf16: conv 3 x (1,024 + 2 x 128) x 2 B = 7,680 + SSM 8 x 128 x 128 x 2 B = 262,144 -> 269,824 B.
    # TP 2: the single group is replicated to 2 (extra_groups_for_head_shards): conv 3 x (1,024 + 2 x 2 x 128) / 2
    # x 2 B = 4,608 + SSM 4 x 128 x 128 x 2 B = 131,072 -> 135,680 B.
    granite = parsed(layer_types=["mamba", "mamba", "mamba", "attention"], mamba_n_heads=8, mamba_d_head=128,
                     mamba_n_groups=1, mamba_d_state=128, mamba_d_conv=4, mamba_expand=2)
    state = granite.layers[0]
    assert [layer.kind for layer in granite.layers] == ["mamba2", "mamba2", "mamba2", "full"]
    assert (state.state_page_bytes(1), state.state_page_bytes(2)) == (269_824, 135_680)
    # Nemotron-H pattern: 'M' Mamba-2, '*' attention, '-' an MLP layer with no cache.
    nemotron = parsed(hybrid_override_pattern="M-M*", mamba_num_heads=8, mamba_head_dim=64, n_groups=1,
                      ssm_state_size=128, conv_kernel=4)
    assert [layer.kind for layer in nemotron.layers] == ["mamba2", "none", "mamba2", "full"]
    # Jamba: Mamba-1 where i % attn_layer_period != attn_layer_offset; inner = expand x hidden = 2,048:
    # conv 3 x 2,048 x 2 B + SSM 2,048 x 16 x 2 B = 77,824 B.
    jamba = parsed(attn_layer_period=4, attn_layer_offset=2, mamba_d_state=16, mamba_d_conv=4, mamba_expand=2)
    assert [layer.kind for layer in jamba.layers] == ["mamba1", "mamba1", "full", "mamba1"]
    assert jamba.layers[0].state_page_bytes() == 77_824
    # LFM2 short convolutions: conv_L_cache 3 -> a (2, 1,024) conv state, 4,096 B.
    lfm2 = parsed(num_hidden_layers=3, layer_types=["conv", "conv", "full_attention"], conv_L_cache=3)
    assert [layer.kind for layer in lfm2.layers] == ["shortconv", "shortconv", "full"]
    assert lfm2.layers[0].state_page_bytes() == 4_096


def test_mamba_ssm_dtype_keeps_the_recurrent_state_in_float32():
    # Qwen3.5's mamba_ssm_dtype float32: the recurrent state's elements are 4 B, the conv state's the model's 2 B.
    state = hybrid_fixture("qwen3.5-27b.json").layers[0]
    assert [tensor.element_bytes for tensor in state.state_tensors()] == [2, 4]


def test_state_layers_stay_outside_a_flat_pool():
    # SGLang keeps Mamba / GDN state in a pool of its own: the KV pool holds only the 12 full-attention layers,
    # 2 x 1 KV head (2 / TP 2) x 256 x 2 B x 12 = 12,288 B per token.
    result = plan(resolve("Qwen/Qwen3-Next-80B-A3B-Instruct"), gpu="h200", tensor_parallel_size=2, engine="sglang")
    assert result.layout.bytes_per_token == 12_288


def test_vllm_before_0_10_keeps_states_out_of_the_pool():
    # vLLM before the v1 hybrid support (0.10) ran Mamba on V0 with a state cache of its own: blocks stay 16 tokens.
    # Jamba (registered from 0.6.0; Qwen3-Next only from 0.10.2, vllm-0.10.2 wheel models/registry.py)
    result = plan(resolve("ai21labs/AI21-Jamba-1.5-Mini"), gpu="h200", tensor_parallel_size=2,
                  kv_cache_memory_bytes=10 * GiB, engine_version="0.9.2")
    assert result.engine.block_size == 16 and result.layout.num_groups == 1
