"""Decoder layers that run attention and a Mamba-2 mixer side by side (Falcon-H1, vLLM falcon_h1.py
FalconH1ParallelHybrid): how the config is read, the per-rank state page, and the pool vLLM v1 builds when each
decoder layer registers an attention cache layer and a Mamba cache layer. Every figure is derived by hand in its
comment from fixtures/configs/issue7/falcon-h1-shaped.json, a SHAPE fixture (see SOURCES.md there): the field names
vLLM's falcon_h1.py reads, with sizes chosen for the test, not a published config."""

from __future__ import annotations

from dataclasses import replace

from conftest import fixture_dict, load_fixture

from kvplan.api import gpu_choices
from kvplan.deployment import Deployment
from kvplan.engines import plan_deployment
from kvplan.engines.base import PlanInput
from kvplan.engines.common import prepare
from kvplan.models.hf_config import parse_config
from kvplan.models.layers import (
    ChunkedLocal,
    FullAttention,
    LatentAttention,
    Mamba2State,
    MlpBlock,
    ParallelHybrid,
    SlidingWindow,
    StateOnly,
)
from kvplan.models.model import ModelSpec, SpecSource

GiB = 2**30
FIXTURE = "issue7/falcon-h1-shaped.json"
# The fixture's mixers: attention 2 KV heads x 128; Mamba-2 mamba_d_ssm 3,072, 24 heads x 128, 1 group, state 256,
# conv 4; the checkpoint in bfloat16 (conv and SSM state 2 B each: no mamba_ssm_dtype, vLLM's mamba_cache_dtype and
# mamba_ssm_cache_dtype auto follow the model dtype).
ATTENTION = FullAttention(2, 128)
MIXER = Mamba2State(3072, 24, 128, 1, 256, 4, conv_bytes=2)


def shaped(**changes: object) -> ModelSpec:
    data = {**fixture_dict(FIXTURE), **changes}
    for key in [key for key, value in changes.items() if value is None]:
        del data[key]
    return parse_config(data, "shaped", SpecSource("local", "falcon-h1-shaped.json"))


def plan(spec: ModelSpec, **knobs):
    dep = Deployment.from_mapping({"gpu": "h100-sxm", "kv_cache_memory_bytes": 10 * GiB, **knobs})
    return plan_deployment(spec, dep, gpu_choices(dep)[0])


def test_every_decoder_layer_is_attention_beside_mamba2():
    spec = load_fixture(FIXTURE)
    assert spec.layers == (ParallelHybrid(ATTENTION, MIXER),) * 36
    assert (spec.attention, spec.num_layers, spec.num_kv_layers, spec.num_kv_heads, spec.head_dim) == (
        "parallel", 36, 36, 2, 128)
    # what is cached per token is the attention's: 36 layers x 2 (K, V) x 2 heads x 128 x 2 B
    assert spec.kv_bytes_per_token(2) == 36_864
    assert spec.kv_bytes_per_token(2, tp=2) == 18_432  # one KV head per rank


def test_the_model_type_decides_not_the_name():
    # the same fields under model_type llama are plain attention layers, whatever the id says
    data = {**fixture_dict(FIXTURE), "model_type": "llama"}
    llama = parse_config(data, "tiiuae/Falcon-H1-7B-Instruct", SpecSource("local", "x.json"))
    assert llama.layers == (ATTENTION,) * 36
    # and model_type falcon_h1 under an id that names no Falcon is read as parallel mixers
    assert shaped().attention == "parallel"


def test_state_page_per_tensor_parallel_rank():
    # vLLM mamba_utils mamba2_state_shape, TP 1: conv (4 - 1) x (3,072 + 2 x 1 x 256 = 3,584) x 2 B = 21,504 B;
    # SSM 24 x 128 x 256 x 2 B = 1,572,864 B; page 1,594,368 B.
    assert [t.nbytes for t in MIXER.state_tensors(1)] == [21_504, 1_572_864]
    # TP 2: the single group does not divide, so it is replicated up to 2 groups: conv 3 x (3,072 + 2 x 2 x 256) / 2
    # = 3 x 2,048 x 2 B = 12,288 B; SSM 12 x 128 x 256 x 2 B = 786,432 B; page 798,720 B.
    assert [t.nbytes for t in MIXER.state_tensors(2)] == [12_288, 786_432]
    assert (MIXER.state_page_bytes(1), MIXER.state_page_bytes(2)) == (1_594_368, 798_720)


def test_vllm_pool_sees_an_attention_and_a_mamba_layer_per_decoder_layer():
    # vLLM 0.10.2, TP 1, 10 GiB of KV cache. 72 cache layers: 36 attention (1,024 B per token each) and 36 Mamba.
    # Block size: 16 x cdiv(1,594,368, 16 x 1,024) = 16 x 98 = 1,568 tokens; attention page 1,568 x 1,024 =
    # 1,605,632 B; the state page padded by 11,264 B = 0.71%. Equal pages, 36 + 36 layers: group size 36, 2 groups;
    # a block id spans 36 pages = 57,802,752 B. 10 GiB // that = 185 blocks; tokens 185 // 2 groups x 1,568 =
    # 144,256. At max_model_len 16,384: cdiv(16,384, 1,568) = 11 attention blocks + 1 state block = 12 per request;
    # 185 / 12 = 15.42.
    result = plan(load_fixture(FIXTURE), engine_version="0.10.2")
    cap = result.capacity
    assert (result.engine.block_size, result.layout.num_groups, result.layout.block_bytes) == (1568, 2, 57_802_752)
    assert (cap.num_blocks, cap.tokens, cap.blocks_per_request, cap.max_concurrency) == (185, 144_256, 12, 15.42)
    assert result.layout.padding_layers == 0
    assert any("Setting attention block size to 1568 tokens" in note for note in result.notes)
    assert any("Padding mamba page size by 0.71%" in note for note in result.notes)


def test_vllm_pool_at_tp2_with_prefix_cached_states():
    # Latest vLLM, TP 2: attention 512 B per token per layer, state page 798,720 B -> 16 x cdiv(798,720, 8,192) =
    # 1,568 tokens, page 802,816 B (+4,096 B = 0.51%); a block id 36 x 802,816 = 28,901,376 B; 10 GiB // that = 371.
    # Per request 11 attention blocks + 2 state blocks (mamba_cache_mode align keeps one more) = 13; vLLM (0.20+)
    # reports the tokens as blocks x max_model_len / blocks per request: 371 x 16,384 // 13 = 467,574.
    result = plan(load_fixture(FIXTURE), tensor_parallel_size=2)
    cap = result.capacity
    assert (result.engine.block_size, result.layout.block_bytes) == (1568, 28_901_376)
    assert (cap.num_blocks, cap.blocks_per_request, cap.tokens) == (371, 13, 467_574)
    assert any("Padding mamba page size by 0.51%" in note for note in result.notes)


def test_pipeline_stages_split_decoder_layers_not_cache_layers():
    # PP 2 (vLLM get_pp_indices): decoder layers 0-17 and 18-35, each stage holding both cache layers of its 18
    # decoder layers; the whole model's 2 groups project to 18 slots per stage: 18 x 1,605,632 = 28,901,376 B.
    spec = load_fixture(FIXTURE)
    dep = Deployment.from_mapping({"gpu": "h100-sxm", "pipeline_parallel_size": 2, "kv_cache_memory_bytes": 10 * GiB})
    result = plan_deployment(spec, dep, gpu_choices(dep)[0])
    stages = prepare(PlanInput(spec, dep, gpu_choices(dep)[0]), settings=result.engine).stages
    assert [stage.decoder_layers for stage in stages] == [18, 18]
    assert [len(stage.layers) for stage in stages] == [36, 36]
    assert (result.layout.num_groups, result.layout.block_bytes) == (2, 28_901_376)


def test_flat_pool_engines_cache_the_attention_tokens():
    # TensorRT-LLM's one flat pool: the 36 attention layers' 36,864 B per token; the Mamba states stay outside it.
    # Its PyTorch backend does not register FalconH1ForCausalLM (_torch/models/_arch_index.py at 065ff9e9), so this
    # is an --allow-unmodelled plan of the pool rule.
    result = plan(load_fixture(FIXTURE), engine="trtllm", allow_unmodelled=True)
    assert result.layout.bytes_per_token == 36_864


def test_engine_changes_reach_the_mamba_mixer():
    layer = ParallelHybrid(ATTENTION, MIXER)
    assert layer.cache_layers() == (ATTENTION, MIXER)
    # an engine that keeps states outside its pool: the attention stays, the state leaves the pool at its
    # 1,594,368 B per sequence (the TP 1 page above)
    assert layer.unpaged() == ParallelHybrid(ATTENTION, StateOnly(1_594_368))
    # served with a float32 SSM state and prefix caching (one more block): SSM 24 x 128 x 256 x 4 B = 3,145,728 B
    # + conv 21,504 B = 3,167,232 B, and 1 + 1 blocks held per request
    served = layer.as_served(2, 4, 0, 1).mixer
    assert (served.state_page_bytes(1), served.blocks_per_request(16_384, 1568, 8192)) == (3_167_232, 2)
    # padded to a 1,605,632 B attention page, only the state changes
    assert layer.padded_to(1_605_632, 1).mixer.page_bytes(1568, 2, 1) == 1_605_632
    assert layer.padded_to(1_605_632, 1).attention == ATTENTION


def test_sequence_state_for_an_engine_with_a_state_pool():
    # conv state in the served 2 B, SSM state in the config's dtype or else a 4 B fallback: the fixture names none,
    # so 21,504 B + 24 x 128 x 256 x 4 B = 3,167,232 B per request on one rank
    assert ParallelHybrid(ATTENTION, MIXER).sequence_state_bytes(2, 4, 1) == 3_167_232
    assert replace(MIXER, ssm_bytes=2).sequence_state_bytes(2, 4, 1) == 1_594_368  # the config's 2 B SSM dtype wins
    assert StateOnly(1001).sequence_state_bytes(2, 4, 2) == 501  # a sizeless-shape state: its bytes over 2 ranks
    assert ATTENTION.sequence_state_bytes(2, 4, 1) == 0


def test_kind_flags_engines_ask():
    kinds = (ATTENTION, SlidingWindow(2, 128, 4096), ChunkedLocal(2, 128, 8192), LatentAttention(576), MIXER,
             StateOnly(), MlpBlock(), ParallelHybrid(ATTENTION, MIXER))
    assert [layer.latent_cache for layer in kinds] == [False, False, False, True, False, False, False, False]
    assert [layer.attention_chunk for layer in kinds] == [None, None, 8192, None, None, None, None, None]
    assert [layer.mixer_free for layer in kinds] == [False, False, False, False, False, False, True, False]
    assert [layer.paged_state for layer in kinds] == [False, False, False, False, True, False, False, False]
    assert [layer.state_outside_pool for layer in kinds] == [False, False, False, False, False, True, False, False]
    # a parallel layer's state is paged through its own cache layer
    assert [cache.paged_state for cache in kinds[-1].cache_layers()] == [False, True]


def test_parameters_count_both_mixers_and_the_mlp():
    # By hand (vLLM falcon_h1.py; no bias in attention or MLP; RMSNorms of weight only):
    # attention q 2,048 x 1,024 + k, v 2 x 2,048 x 256 + o 1,024 x 2,048 = 5,242,880;
    # Mamba-2 (MambaMixer2): in_proj 2,048 x (3,072 z + 3,584 xBC + 24 dt) = 13,680,640, conv 3,584 x 4 + bias 3,584,
    # A, D, dt bias 3 x 24, no gated norm (mamba_rms_norm false), out_proj 3,072 x 2,048: 19,990,088;
    # gated MLP 3 x 2,048 x 8,192 = 50,331,648; input_layernorm + pre_ff_layernorm 2 x 2,048.
    # Per layer 75,568,712 x 36 = 2,720,473,632; embeddings and an untied lm_head 2 x 65,536 x 2,048; final norm 2,048.
    assert load_fixture(FIXTURE).params.total == 2_988_911_136


def test_mamba_d_head_auto_is_the_inner_width_over_the_heads():
    # transformers' FalconH1Config: without mamba_d_ssm the inner width is mamba_expand x hidden = 2 x 2,048 = 4,096,
    # and "auto" heads are 4,096 / 32 = 128 wide.
    spec = shaped(mamba_d_ssm=None, mamba_d_head="auto", mamba_n_heads=32)
    assert spec.layers[0] == ParallelHybrid(ATTENTION, Mamba2State(4096, 32, 128, 1, 256, 4, conv_bytes=2))


def test_without_mamba_fields_the_state_is_sizeless():
    # a falcon_h1 config that sizes no Mamba mixer: the attention is paged alone, and the state is said to be uncounted
    spec = shaped(mamba_n_heads=None, mamba_d_state=None)
    assert spec.layers[0] == ParallelHybrid(ATTENTION, StateOnly())
    result = plan(spec)
    assert (result.engine.block_size, result.layout.num_groups) == (16, 1)
    assert any("not counted in the block pool" in note for note in result.notes)
