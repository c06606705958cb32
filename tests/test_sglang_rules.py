"""SGLang's budget rule (kvplan/engines/sglang.py): server_args' defaults and ModelRunner.profile_max_num_token,
derived by hand."""

from __future__ import annotations

import pytest
from conftest import fixture_dict, load_fixture

from kvplan.api import estimate
from kvplan.deployment import Deployment
from kvplan.engines import plan_deployment as engines_estimate
from kvplan.engines.base import PlanInput
from kvplan.engines.sglang import budget as sglang
from kvplan.errors import KvplanError
from kvplan.models.hf_config import parse_config
from kvplan.models.model import SpecSource
from kvplan.plan import GpuChoice
from kvplan.units import GiB


@pytest.mark.parametrize("gpu_mib, tp, defaults", [
    (23_034, 1, (4096, 48)),  # an L4 (22.5 GiB): 20-35 GiB, 0.5.20+ (arg_groups/memory_hook.py)
    (81_559, 1, (8192, 256)),  # an H100 (79.6 GiB): 60-90 GiB, TP < 4
    (81_559, 4, (8192, 512)),  # the same at TP 4
    (183_359, 8, (16384, 512)),  # a B200 (179 GiB): 160 GiB and above
])
def test_chunked_prefill_and_cuda_graph_batch_by_gpu_size(gpu_mib, tp, defaults):
    assert sglang.gpu_defaults(gpu_mib, tp) == defaults


def test_default_fraction_reproduces_the_logged_086_on_an_h100_nvl():
    # S02 (each engine's data/calibration.yaml) printed mem_fraction_static=0.86 with chunked_prefill_size 8192 and
    # cuda_graph_max_bs 256 chosen by SGLang. An H100 NVL (nvidia-smi 95,830 MiB) gives exactly those defaults and
    # reserves 512 + 1.5 x 8192 + 2 x 256 + 1 x 1 / 8 x 1024 = 13,440 MiB: round(82,390 / 95,830, 3) = 0.86.
    assert sglang.gpu_defaults(95_830, 1) == (8192, 256)
    assert sglang.default_mem_fraction(95_830, 1, 1, 8192, 256, release=(0, 5, 9)) == 0.86
    # That is SGLang 0.5.9's heuristic. The note names 0.5.10.post1, whose own ServerArgs (run on CPU with this GPU
    # size) gives 0.855: its piecewise prefill graphs (58 sizes up to 8,192 x 8 MiB = 464 MiB) are on by default, so
    # the logged run reserved none (an older release, or the graphs turned off).
    assert sglang.default_mem_fraction(95_830, 1, 1, 8192, 256, release=(0, 5, 10),
                                       prefill_mib=sglang.prefill_graph_mib(8192, mla=False)) == 0.855


def test_default_fraction_reproduces_the_logged_0826_of_a_vision_model_on_an_mi355x():
    # S03 (Kimi-K2.5 at TP 8, SGLang v0.5.8 on ROCm) printed mem_fraction_static=0.8260405859375 with chunked prefill
    # 16384 and CUDA-graph bs 512 chosen by SGLang. An MI355X (294,896 MiB, kvplan/data/gpus.json) gives those
    # defaults and reserves 512 + 1.5 x 16384 + 2 x 512 + 8 / 8 x 1024 = 27,136 MiB: round(267,760 / 294,896, 3)
    # = 0.908. A vision tower of MoonViT's size (27 layers of width 1152; assumed: Kimi-K2.5's config is not
    # bundled) is 27 x 1152^2 / (24 x 1024^2) = 1.423828125 ViT-L/14s: 0.908 x 0.95 x (1 - 0.1 x 0.423828125)
    # = 0.8260405859375, the logged value to the last digit.
    assert sglang.gpu_defaults(294_896, 8) == (16384, 512)
    base = sglang.default_mem_fraction(294_896, 8, 1, 16384, 512)
    assert base == 0.908
    assert sglang.vlm_mem_fraction(base, 27, 1152) == 0.8260405859375


@pytest.mark.parametrize("chunked, speculative, fraction", [
    (8192, None, 0.835),  # 13,440 MiB reserved: round(68,119 / 81,559, 3)
    # 512 + 1.5 x 2048 + 512 + 128 = 4,224 MiB, raised to the 10 GiB floor of GPUs above 60 GiB: 71,319 / 81,559
    (2048, None, 0.874),
    # 0.5.9 server_args.py: + 2 GiB for an EAGLE draft: 15,488 MiB, 66,071 / 81,559 = 0.8101
    (8192, "eagle", 0.81),
    (8192, "ngram", 0.835),  # n-gram speculation loads no draft: nothing added
])
def test_default_fraction_on_an_h100(chunked, speculative, fraction):
    # SGLang 0.5.9's heuristic (no prefill CUDA graphs, the draft's reserve)
    assert sglang.default_mem_fraction(81_559, 1, 1, chunked, 256, speculative=speculative,
                                       release=(0, 5, 9)) == fraction


def test_pool_is_free_after_load_less_the_held_back_share_of_free_before_load():
    # Qwen2.5-7B on an H100 (kvplan/data/gpus.json: 85,018,877,624 B, nvidia-smi 81,559 MiB): fraction 0.835.
    # Free before load = 85,018,877,624 - the 0.61 GiB CUDA context (654,982,512) = 84,363,895,112;
    # held back int(84,363,895,112 x 0.165) = 13,920,042,693; weights 7,615,616,512 x 2 = 15,231,233,024;
    # pool int(84,363,895,112 - 15,231,233,024 - 13,920,042,693.48) = 55,212,619,394
    # -> // 57,344 B per token (28 layers x 4 KV heads x 128 x 2 x 2 B) = 962,831 tokens. (SGLang 0.5.9's fraction;
    # 0.5.23's is in test_sglang_releases_issue18.py.)
    plan = estimate("Qwen/Qwen2.5-7B", gpu="h100", engine="sglang", max_model_len=8192, engine_version="0.5.9")
    assert plan.engine.gpu_memory_utilization == 0.835
    assert plan.memory.non_torch_bytes == 654_982_512
    assert plan.memory.reserve_bytes == 13_920_042_693
    assert plan.memory.kv_cache_bytes == 55_212_619_394
    assert plan.capacity.tokens == 962_831


@pytest.mark.parametrize("knobs, tokens", [
    ({"block_size": 64}, 962_816),  # --page-size 64: 962,831 // 64 x 64
    ({"max_total_tokens": 500_000}, 500_000),  # --max-total-tokens caps the profiled 962,831
])
def test_page_alignment_and_token_cap(knobs, tokens):
    plan = estimate("Qwen/Qwen2.5-7B", gpu="h100", engine="sglang", max_model_len=8192, engine_version="0.5.9",
                    **knobs)
    assert plan.capacity.tokens == tokens


def test_rest_memory_of_the_s02_log():
    # S02: 35.57 - 36.54 x (1 - 0.86) = 30.4544 GiB
    assert sglang.rest_bytes(36.54 * GiB, 35.57 * GiB, 0.86) == int(30.4544 * GiB)


def test_mamba_states_take_their_share_of_the_rest():
    # _handle_max_mamba_cache, no --max-mamba-cache-size: the states' budget is 0.9 / 1.9 of the rest: 19 GiB ->
    # 9 GiB; slots int((9 GiB - 1 GiB) // 1 GiB) = 8, and the pool holds them plus the padding slot: 9 GiB.
    assert sglang.mamba_pool(19 * GiB, GiB) == (8, 9 * GiB)
    # an explicit size wins: 360 slots + 1
    assert sglang.mamba_pool(19 * GiB, GiB, given=360) == (360, 361 * GiB)


def test_state_per_request_in_sglang_dtypes():
    # Qwen3.5-27B (tests/fixtures/configs/hybrid): 48 Gated DeltaNet layers. SGLang keeps the conv state in the
    # served bf16, 3 x (2 x 16 x 128 + 48 x 128) x 2 B = 61,440 B, and the recurrent state in mamba_ssm_dtype
    # float32, 48 x 128 x 128 x 4 B = 3,145,728 B: 48 x 3,207,168 = 153,944,064 B per request (76,972,032 at TP 2).
    spec = load_fixture("hybrid/qwen3.5-27b.json")
    for tp, expected in ((1, 153_944_064), (2, 76_972_032)):
        target = PlanInput(spec, Deployment(engine="sglang", tensor_parallel_size=tp),
                        GpuChoice("h100-sxm", "H100", 85_018_877_624, tp, "9.0"))
        assert sglang.state_bytes_per_request(target) == expected


def test_swa_split_keeps_the_memory_and_the_ratio():
    # set_num_tokens_hybrid_swa: 1,000 cells of 100 B full + 100 B sliding = 200,000 B re-split as full x 100 +
    # 0.8 x full x 100: full = int(200,000 / 180) = 1,111, sliding = int(1,111 x 0.8) = 888.
    assert sglang.swa_split(1000, 100, 100, 0.8) == (1111, 888)
    # 64-token pages: 1,111 -> 1,088 and 888 -> 832
    assert sglang.swa_split(1000, 100, 100, 0.8, 64) == (1088, 832)


def test_ssm_state_is_float32_where_the_config_names_no_dtype():
    # Without mamba_ssm_dtype SGLang still keeps the recurrent state in float32 (its --mamba-ssm-dtype default):
    # the same 153,944,064 B, not the 48 x (61,440 + 1,572,864) = 78,446,592 B of a bf16 state.
    config = fixture_dict("hybrid/qwen3.5-27b.json")
    config["text_config"].pop("mamba_ssm_dtype")
    spec = parse_config(config, "qwen3.5-27b-no-ssm-dtype", SpecSource("local", "test"))
    target = PlanInput(spec, Deployment(engine="sglang"), GpuChoice("h100-sxm", "H100", 85_018_877_624, 1, "9.0"))
    assert sglang.state_bytes_per_request(target) == 153_944_064


def test_hybrid_pool_through_the_engine_s05():
    # S05 (Qwen3.8-27B-FP8, H100, --mem-fraction-static 0.85) with the Qwen3.5-27B geometry it shares: device memory
    # = the 78.48 GiB free before load + the 0.61 GiB context, weights as measured (28.47 GiB). Rest 78.48 - 28.47 -
    # 78.48 x 0.15 = 38.238 GiB; the states' budget x 0.9 / 1.9 = 18.113 GiB -> 125 slots of 153,944,064 B, the pool
    # 126 x 153,944,064 = 19,396,952,064 B (18.065 GiB); the KV pool 20.173 GiB // 65,536 B (16 full-attention layers
    # x 4 KV heads x 256 x 2 x 2 B) = 330,517 tokens (the log has 330,323: docs/calibration.md, S05).
    spec = load_fixture("hybrid/qwen3.5-27b.json")
    total = int(78.48 * GiB) + sglang.CUDA_CONTEXT_BYTES
    dep = Deployment(engine="sglang", gpu_memory_bytes=total, weights_memory_bytes=int(28.47 * GiB),
                     gpu_memory_utilization=0.85, max_model_len=8192)
    plan = engines_estimate(spec, dep, GpuChoice("custom", "custom", total, 1))
    assert plan.layout.bytes_per_token == 65_536
    assert plan.capacity.tokens == 330_517


def _s05_like(**knobs):
    # the S05 deployment of test_hybrid_pool_through_the_engine_s05: before load int(78.48 GiB) = 84,267,258,347 B,
    # weights int(28.47 GiB) = 30,569,429,729 B, fraction 0.85: rest int(84,267,258,347 - 30,569,429,729 -
    # 84,267,258,347 x 0.15) = 41,057,739,865 B
    spec = load_fixture("hybrid/qwen3.5-27b.json")
    total = int(78.48 * GiB) + sglang.CUDA_CONTEXT_BYTES
    dep = Deployment(engine="sglang", gpu_memory_bytes=total, weights_memory_bytes=int(28.47 * GiB),
                     gpu_memory_utilization=0.85, max_model_len=8192, **knobs)
    return engines_estimate(spec, dep, GpuChoice("custom", "custom", total, 1))


@pytest.mark.parametrize("knobs, tokens", [
    # --max-mamba-cache-size 124 (S05's logged count): 125 x 153,944,064 = 19,243,008,000 B of states; the KV pool
    # 21,814,731,865 B // 65,536 = 332,866 tokens
    ({"max_mamba_cache_size": 124}, 332_866),
    # --mamba-full-memory-ratio 0.5: budget 41,057,739,865 x 0.5 / 1.5 = 13,685,913,288 B -> int((13,685,913,288 -
    # 153,944,064) // 153,944,064) = 87 slots, 88 x 153,944,064 = 13,547,077,632 B; KV 27,510,662,233 B // 65,536
    # = 419,779 tokens
    ({"mamba_full_memory_ratio": 0.5}, 419_779),
])
def test_mamba_knobs_through_the_engine(knobs, tokens):
    assert _s05_like(**knobs).capacity.tokens == tokens


def test_sglang_spellings_of_the_new_knobs():
    from kvplan.deployment.launch import parse_command

    dep = parse_command("python -m sglang.launch_server --model-path Qwen/Qwen2.5-7B --tp 4 --attn-dp-size 2 "
                        "--max-mamba-cache-size 360 --mamba-full-memory-ratio 0.5 --swa-full-tokens-ratio 0.6 "
                        "--max-total-tokens 100000").deployment()
    assert (dep.attention_data_parallel_size, dep.max_mamba_cache_size, dep.mamba_full_memory_ratio,
            dep.swa_full_tokens_ratio, dep.max_total_tokens) == (2, 360, 0.5, 0.6, 100_000)
    assert parse_command(["--attention-data-parallel-size", "4"], engine="sglang").deployment(
    ).attention_data_parallel_size == 4


def test_vllm_has_no_mamba_cache_size_flag():
    from kvplan.deployment.launch import parse_command
    from kvplan.errors import KvplanError

    with pytest.raises(KvplanError):
        parse_command("vllm serve Qwen/Qwen2.5-7B --max-mamba-cache-size 10").deployment()


def test_attention_dp_enlarges_the_default_reserve():
    # server_args at TP 4 on an H100 (81,559 MiB; chunked 8192, CUDA-graph batch 512): 512 + 1.5 x 8192 + 2 x 512
    # + 4 / 8 x 1024 = 14,336 MiB; attention DP 2 adds 512 x 2 x 3 = 3,072 and, the batch being above 300,
    # 512 x 2 x 1.5 = 1,536: 18,944 MiB -> round((81,559 - 18,944) / 81,559, 3) = 0.768 (0.824 without DP), SGLang
    # 0.5.9. 0.5.23 adds its 58 prefill graph sizes up to 8,192 x 8 MiB = 464 MiB: 0.762 and 0.819, as 0.5.23's own
    # ServerArgs resolves them (tests/oracle/cases.jsonl).
    for version, with_dp, without in (("0.5.9", 0.768, 0.824), ("0.5.23", 0.762, 0.819)):
        plan = estimate("Qwen/Qwen2.5-7B", gpu="h100", engine="sglang", tensor_parallel_size=4,
                        attention_data_parallel_size=2, engine_version=version)
        assert plan.engine.gpu_memory_utilization == with_dp
        assert plan.engine.max_num_batched_tokens == 4096  # _handle_data_parallelism: 8,192 // 2 per DP rank
        assert any("attention data parallel 2" in note for note in plan.notes)
        assert estimate("Qwen/Qwen2.5-7B", gpu="h100", engine="sglang", tensor_parallel_size=4,
                        engine_version=version).engine.gpu_memory_utilization == without


def test_multimodal_models_keep_the_embedding_cache_out_of_the_kv_budget():
    # kv_cache_configurator.mm_runtime_reservation_gb: SGLANG_VLM_CACHE_SIZE_MB = 100 MiB = 104,857,600 B
    assert (sglang.rest_bytes(36.54 * GiB, 35.57 * GiB, 0.86, multimodal=True)
            == sglang.rest_bytes(36.54 * GiB, 35.57 * GiB, 0.86) - 104_857_600)
    # Gemma 3 is multimodal to SGLang only with --enable-multimodal (model_config.py mm_disabled_models)
    plan = estimate("google/gemma-3-4b-it", gpu="h100", engine="sglang", gpu_memory_utilization=0.8,
                    enable_multimodal=True)
    memory = plan.memory
    before = memory.total_bytes - memory.non_torch_bytes
    assert abs(memory.kv_cache_bytes - (before - memory.weights_bytes - memory.reserve_bytes - 104_857_600)) <= 1
    assert any("embedding cache" in note for note in plan.notes)


def test_swa_ratio_is_noted_for_sliding_window_models_only():
    # gemma-3 interleaves sliding-window and full layers; Qwen2.5-7B has none
    gemma = estimate("google/gemma-3-1b-it", gpu="h100", engine="sglang", swa_full_tokens_ratio=0.5)
    assert any("swa_full_tokens_ratio 0.5" in note for note in gemma.notes)
    qwen = estimate("Qwen/Qwen2.5-7B", gpu="h100", engine="sglang", swa_full_tokens_ratio=0.5)
    assert not any("swa_full_tokens_ratio" in note for note in qwen.notes)


def test_attention_dp_must_divide_tp():
    # layers/dp_attention.py compute_dp_attention_world_info: attn_tp = tp // attn_dp and rank r's group is
    # r // attn_tp; TP 4 with attn-dp 3 gives attn_tp 1 and a fourth group (rank 3) that does not exist.
    with pytest.raises(KvplanError, match="attention data parallel 3 must divide tensor parallel 4"):
        estimate("Qwen/Qwen2.5-7B", gpu="h200", engine="sglang", tensor_parallel_size=4,
                 attention_data_parallel_size=3)
    plan = estimate("Qwen/Qwen2.5-7B", gpu="h200", engine="sglang", tensor_parallel_size=4,
                    attention_data_parallel_size=2)
    assert sglang.attention_tp(PlanInput(plan.model, Deployment(engine="sglang", tensor_parallel_size=4,
                                                              attention_data_parallel_size=2), plan.gpu)) == 2
