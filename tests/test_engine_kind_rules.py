"""The engine rules that depend on a layer's kind, asked of the kind (not of its class or label), and the CUDA
context the flat-pool engines share. Each expected figure is derived by hand in its comment."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kvplan.api import estimate
from kvplan.deployment import Deployment
from kvplan.engines.base import CUDA_CONTEXT_BYTES
from kvplan.engines.sglang import budget as sglang
from kvplan.engines.trtllm import budget as trtllm
from kvplan.engines.vllm import budget as vllm
from kvplan.engines.vllm.blocks import default_block_size
from kvplan.errors import KvplanError
from kvplan.models.layers import (
    FullAttention,
    LatentAttention,
    Mamba1State,
    Mamba2State,
    MlpBlock,
    SharedKv,
    SlidingWindow,
    StateOnly,
)
from kvplan.models.sources import resolve

ENGINES = Path(__file__).parent.parent / "kvplan" / "engines"
# A Mamba-2 mixer as a float32 checkpoint declares it (conv_bytes 4): inner 8,192, 128 heads x 64, 8 groups,
# state 128, conv kernel 4; no mamba_ssm_dtype in the config (ssm_bytes None).
MAMBA2 = Mamba2State(8192, 128, 64, 8, 128, 4, conv_bytes=4)


@pytest.mark.parametrize("layer, ranks, expected", [
    # conv (4 - 1) x (8,192 + 2 x 8 x 128) channels x 2 B (served bf16, not the checkpoint's 4 B) = 61,440 B;
    # SSM 128 x 64 x 128 x 4 B (SGLang's float32 default) = 4,194,304 B: 4,255,744 B.
    (MAMBA2, 1, 4_255_744),
    # TP 2: conv 3 x 5,120 x 2 B = 30,720 B; SSM 64 x 64 x 128 x 4 B = 2,097,152 B.
    (MAMBA2, 2, 2_127_872),
    # the config's mamba_ssm_dtype bf16 is kept: SSM 128 x 64 x 128 x 2 B = 2,097,152 B + 61,440 B
    (Mamba2State(8192, 128, 64, 8, 128, 4, conv_bytes=4, ssm_bytes=2), 1, 2_158_592),
    # Mamba-1, inner 8,192, state 16, kernel 4: conv 3 x 8,192 x 2 B = 49,152 B; SSM 8,192 x 16 x 4 B = 524,288 B
    (Mamba1State(8192, 16, 4), 1, 573_440),
    # a state the config gives only as bytes: 5 MiB over 3 ranks, rounded up: ceil(5,242,880 / 3) = 1,747,627 B
    (StateOnly(5 * 2**20), 3, 1_747_627),
    (StateOnly(), 1, 0),  # a state of unknown size counts nothing
    # layers that cache per token, or nothing of their own, keep no state
    (FullAttention(8, 128), 1, 0),
    (SlidingWindow(8, 128, 4096), 1, 0),
    (LatentAttention(576), 1, 0),
    (MlpBlock(), 1, 0),
    (SharedKv(8, 128), 1, 0),
])
def test_sglang_state_per_layer_in_its_own_dtypes(layer, ranks, expected):
    assert sglang.layer_state_bytes(layer, 2, ranks) == expected


def test_mla_models_get_the_mla_backends_block_size():
    # Before v0.18 vLLM's MLA backends forced their own block size: FlashMLA 64 on Hopper (SM 9.x), CUTLASS MLA 128 on
    # Blackwell datacenter (SM 10.x) through 0.14, FlashInfer MLA's 64 there in 0.15-0.17 for DeepSeek's
    # qk_nope_head_dim of 128 (platforms/cuda.py, issue 18 section 2.9); TRITON_MLA on other GPUs (consumer Blackwell
    # SM 12.x too), and every model without MLA, keep the default 16.
    mla, gqa = resolve("deepseek-ai/DeepSeek-V2-Lite"), resolve("Qwen/Qwen2.5-7B")
    old = (0, 17)
    assert [default_block_size(mla, major, old) for major in (8, 9, 10, 12, None)] == [16, 64, 64, 16, 16]
    assert [default_block_size(mla, major, (0, 14)) for major in (9, 10)] == [64, 128]
    # From v0.18 the chosen backend's preferred size: 16 where it takes it (FLASH_ATTN_MLA on Hopper, as the v0.19
    # H100 log L01 shows: 94,097 blocks x 16 = 1,505,552 tokens), FlashInfer MLA's smallest, 32, on SM 10.x
    new = (0, 19)
    assert [default_block_size(mla, major, new) for major in (8, 9, 10, 12, None)] == [16, 16, 32, 16, 16]
    assert [default_block_size(gqa, major, new) for major in (8, 9, 10)] == [16, 16, 16]


def test_the_blackwell_mla_block_size_says_no_log_checks_it():
    # SM 10.x: FlashInfer MLA's 32 (v0.18+) and CUTLASS MLA's 128 come from vLLM's source alone; a size the user
    # gives, or another GPU, needs no such note
    from kvplan.api import estimate
    said = "no startup log checks it"
    assert any(said in note for note in estimate("deepseek-ai/DeepSeek-V2-Lite", gpu="b200").notes)
    assert not any(said in note for note in estimate("deepseek-ai/DeepSeek-V2-Lite", gpu="b200", block_size=64).notes)
    assert not any(said in note for note in estimate("deepseek-ai/DeepSeek-V2-Lite", gpu="h200").notes)


def test_only_chunked_local_attention_turns_the_hybrid_manager_off():
    # Llama 4 Scout's chunked layers (attention_chunk_size 8192) turn vLLM's hybrid KV cache manager off unless
    # VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=1; Gemma 2's sliding window (it also drops old tokens)
    # does not.
    # The variable defaults to on from v0.14 (vLLM 0.14.0 envs.py "1", 0.13.0 "0").
    scout, gemma2 = resolve("meta-llama/Llama-4-Scout-17B-16E-Instruct"), resolve("google/gemma-2-9b-it")
    assert vllm.hybrid_kv_manager(scout, Deployment(), (0, 13)) is False
    assert vllm.hybrid_kv_manager(scout, Deployment(chunked_hybrid_kv=True), (0, 13)) is True
    assert vllm.hybrid_kv_manager(scout, Deployment(), (0, 14)) is True
    assert vllm.hybrid_kv_manager(scout, Deployment(chunked_hybrid_kv=False), (0, 33)) is False
    assert vllm.hybrid_kv_manager(gemma2, Deployment(), (0, 13)) is True


PREFIX_NOTE = "prefix caching on (mamba_cache_mode align)"


@pytest.mark.parametrize("model, version, noted", [
    ("Qwen/Qwen3-Next-80B-A3B-Instruct", None, True),  # Gated DeltaNet: vLLM caches its prefixes (v0.26+)
    # before v0.26 a hybrid has no prefix caching by default (config/model.py is_prefix_caching_supported)
    ("Qwen/Qwen3-Next-80B-A3B-Instruct", "0.25", False),
    ("Qwen/Qwen3-Next-80B-A3B-Instruct", "0.19", False),
    ("ai21labs/AI21-Jamba-1.5-Mini", None, False),  # Mamba-1: no prefix caching of its state
    ("Qwen/Qwen2.5-7B", None, False),  # no recurrent state at all
])
def test_prefix_cached_state_note(model, version, noted):
    knobs = {"vllm_version": version} if version else {}
    plan = estimate(model, gpu="h200", tensor_parallel_size=2, **knobs)
    assert any(PREFIX_NOTE in note for note in plan.notes) is noted


def test_the_cuda_context_is_one_figure_for_both_flat_pool_engines():
    # llm-d's H100: 79.18 GiB total, 78.57 GiB free at startup: int(0.61 x 2^30) = 654,982,512 B, outside torch,
    # charged by SGLang before its "free before load" and by TensorRT-LLM in its profiling peak.
    assert CUDA_CONTEXT_BYTES == 654_982_512
    for engine in ("sglang", "trtllm"):
        plan = estimate("Qwen/Qwen2.5-7B", gpu="h100", engine=engine)
        assert plan.memory.non_torch_bytes == 654_982_512
    defined = [path.name for path in ENGINES.glob("*.py") if "\nCUDA_CONTEXT_BYTES =" in path.read_text()]
    assert defined == ["base.py"]


def test_a_tensorrt_pool_is_never_negative_when_its_bytes_are_given():
    # Qwen3-Next-80B's 148 GiB of bf16 weights on one 79 GiB H100 leave nothing free: with max_gpu_total_bytes
    # (1 B) the pool is empty, and the refusal says the weights do not fit, not "a KV pool of -63.55 GiB".
    plan = estimate("Qwen/Qwen3-Next-80B-A3B-Instruct", gpu="h100", engine="trtllm", kv_cache_memory_bytes=1)
    assert plan.memory.kv_cache_bytes == 0
    assert plan.error is not None and not re.search(r"-\d", plan.error)  # no negative GiB in the refusal
    assert trtllm.CUDA_CONTEXT_BYTES == CUDA_CONTEXT_BYTES


def test_a_negative_default_fraction_is_explained():
    # server_args on a 1 GiB GPU (chunked prefill 2,048, CUDA graphs up to batch 8): reserve 512 + 2,048 x 1.5 +
    # 8 x 2 + 1 x 1 / 8 x 1,024 = 3,728 MiB, and SGLang 0.5.23's 42 prefill graph sizes up to 2,048 x 8 MiB = 336:
    # 4,064 MiB, so the default mem_fraction_static is (1,024 - 4,064) / 1,024 = -2.96875, -2.969 to three places
    # (0.5.9: -2.640625, -2.641); SGLang cannot start.
    plan = estimate("Qwen/Qwen2.5-0.5B", gpu_memory="1GiB", engine="sglang")
    assert plan.engine.gpu_memory_utilization == -2.969
    assert estimate("Qwen/Qwen2.5-0.5B", gpu_memory="1GiB", engine="sglang",
                    engine_version="0.5.9").engine.gpu_memory_utilization == -2.641
    assert any("mem_fraction_static -2.969: SGLang's default heuristic reserves more MiB" in note
               for note in plan.notes)
    assert not any("held back" in note for note in plan.notes)


@pytest.mark.parametrize("engine", ["vllm", "trtllm"])
@pytest.mark.parametrize("dtype", ["mxfp8", "fp4_mx_block16"])
def test_sglangs_own_kv_dtypes_are_refused_elsewhere(engine, dtype):
    # SGLang 0.5.16+ takes them (its server_args.py choices); vLLM 0.33.0's config/cache.py CacheDType and
    # trtllm-serve's --kv_cache_dtype (auto, fp8, nvfp4) have neither, so both refuse them at startup
    with pytest.raises(KvplanError, match=f"invalid choice '{dtype}'"):
        estimate("Qwen/Qwen2.5-7B", gpu="h100", engine=engine, max_model_len=8192, kv_cache_dtype=dtype)
