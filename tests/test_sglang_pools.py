"""SGLang's pools as SGLang builds them (kvplan/engines/sglang.py): the hybrid-SWA split into a full-attention and a
sliding-window pool, the KV heads of attention data parallelism, and the Mamba cap on running requests. Each
expected number is derived by hand in its comment; the rules are in sgl-project/sglang v0.5.6-v0.5.9
(model_runner_kv_cache_mixin.py set_num_tokens_hybrid_swa and init_memory, configs/model_config.py
is_hybrid_swa_model, layers/dp_attention.py get_attention_tp_size)."""

from __future__ import annotations

from dataclasses import replace

from conftest import load_fixture

from kvplan.deployment import Deployment
from kvplan.engines import plan_deployment
from kvplan.engines.sglang import budget as sglang
from kvplan.models.sources import resolve
from kvplan.plan import GpuChoice, Plan
from kvplan.units import GiB


def _pool_plan(model: str, kv_bytes: int, tp: int = 1, **knobs) -> Plan:
    dep = Deployment(engine="sglang", kv_cache_memory_bytes=kv_bytes, tensor_parallel_size=tp,
                     max_num_batched_tokens=2048, **knobs)
    return plan_deployment(resolve(model), dep, GpuChoice("custom", "pool only", 0, tp))


# gpt-oss-20b: 24 layers alternating sliding window 128 and full attention, 8 KV heads x 64: one layer's token is
# 8 x 64 x (K, V) x 2 B = 2,048 B; the 12 full layers 24,576 B, the 12 sliding ones 24,576 B; SGLang's profiled cell
# counts all 24 layers: 49,152 B.
GPT_OSS_CELL = 49_152


def test_gpt_oss_gets_a_full_and_a_sliding_pool():
    # 1,000,100 cells' bytes at --page-size 64: 1,000,064 tokens profiled (whole pages). set_num_tokens_hybrid_swa:
    # full = int(1,000,064 x 49,152 / (24,576 + 0.8 x 24,576)) = int(1,111,182.2) = 1,111,182 -> 1,111,168 in pages;
    # swa = int(1,111,182 x 0.8) = 888,945 -> 888,896.
    plan = _pool_plan("openai/gpt-oss-20b", 1_000_100 * GPT_OSS_CELL, block_size=64, max_model_len=8192)
    assert plan.to_dict()["pools"] == [{"name": "full", "tokens": 1_111_168, "bytes_per_token": 24_576},
                                       {"name": "swa", "tokens": 888_896, "bytes_per_token": 24_576}]
    # SGLang's max_total_num_tokens is the full pool's
    assert plan.capacity.tokens == 1_111_168
    # the blocks stay the profiled pages of every layer: 1,000,064 // 64, the memory the two pools share
    assert plan.capacity.num_blocks == 15_626
    # max_concurrency at 8,192: 1,111,168 / 8,192 = 135.64 (full pool); the sliding pool holds min(127 + 2,048 chunk,
    # 8,192) = 2,175 tokens -> 34 pages + 1 = 2,240 tokens a request: 888,896 // 2,240 = 396, not the limit.
    assert plan.capacity.max_concurrency == 135.64
    ladder = {rung.context: rung.concurrency for rung in plan.capacity.ladder}
    # at 2,048 the sliding pool limits: full 1,111,168 // 2,048 = 542, sliding (32 + 1) x 64 = 2,112 tokens a
    # request: 888,896 // 2,112 = 420
    assert ladder[2048] == 420
    assert ladder[8192] == 135
    assert not any("one flat pool" in note for note in plan.notes)


def test_longest_request_follows_the_full_pool():
    # 10,000 cells at page 64: 9,984 profiled; full int(9,984 x 10 / 9 = 11,093.3) = 11,093 -> 11,072; swa
    # int(11,093 x 0.8) = 8,874 -> 8,832. A request of c tokens needs c in the full pool (at most 11,072) and at most
    # 2,240 in the sliding pool: the longest is 11,072, where one flat pool would give 9,984.
    plan = _pool_plan("openai/gpt-oss-20b", 10_000 * GPT_OSS_CELL, block_size=64)
    assert [pool["tokens"] for pool in plan.to_dict()["pools"]] == [11_072, 8_832]
    assert plan.capacity.max_model_len_that_fits == 11_072
    assert plan.error is not None and "estimated maximum model length is 11072" in plan.error


def test_s11_logged_pair_through_the_plan():
    # S11 (each engine's data/calibration.yaml, PR sgl-project/sglang#18039's log): page 64, ratio 0.8,
    # full_layer_tokens=375360, swa_layer_tokens=300288. gpt-oss-120b has equal cells on both sides (18 full + 18
    # sliding layers x 2,048 B = 36,864 B each), so full = profiled x 10 / 9: --max-total-tokens 337,856 (5,279
    # pages) gives int(375,395.6) = 375,395 -> 375,360 (5,865 pages) and int(375,395 x 0.8) = 300,316 -> 300,288, the
    # logged pair (S11's own model, MiMo-V2-Flash, is not bundled). That is the rule of the engine before the PR, as
    # 0.5.9-0.5.10 have it; from 0.5.11 the cap is on the full pool itself (test_sglang_releases_issue18.py).
    plan = _pool_plan("openai/gpt-oss-120b", 400_000 * 73_728, block_size=64, max_total_tokens=337_856,
                      max_model_len=8192, engine_version="0.5.9")
    assert [pool["tokens"] for pool in plan.to_dict()["pools"]] == [375_360, 300_288]


def test_ratio_knob_moves_the_split():
    # --swa-full-tokens-ratio 0.5 on the 1,000,064 profiled tokens of the first test (page 1 here: 1,000,100):
    # full = int(1,000,100 x 49,152 / (24,576 + 12,288)) = int(1,333,466.67) = 1,333,466; swa = 666,733
    plan = _pool_plan("openai/gpt-oss-20b", 1_000_100 * GPT_OSS_CELL, swa_full_tokens_ratio=0.5, max_model_len=8192)
    assert [pool["tokens"] for pool in plan.to_dict()["pools"]] == [1_333_466, 666_733]


def test_llama4_chunked_layers_take_the_sliding_pool():
    # Llama 4 Scout: 48 layers, every 4th full (get_hybrid_layer_ids: (i + 1) % 4 == 0), the rest chunked local;
    # 8 KV heads x 128 at TP 8: 1 head x 128 x 2 x 2 B = 512 B a layer; full 12 x 512 = 6,144 B, chunked 36 x 512 =
    # 18,432 B, profiled cell 24,576 B. 100,000 cells: full = int(100,000 x 24,576 / (6,144 + 0.8 x 18,432))
    # = int(117,647.06) = 117,647; swa = int(94,117.6) = 94,117.
    plan = _pool_plan("meta-llama/Llama-4-Scout-17B-16E-Instruct", 100_000 * 24_576, tp=8, max_model_len=8192)
    assert plan.to_dict()["pools"] == [{"name": "full", "tokens": 117_647, "bytes_per_token": 6_144},
                                       {"name": "swa", "tokens": 94_117, "bytes_per_token": 18_432}]


def test_gemma3_is_not_a_hybrid_swa_architecture_in_sglang():
    # Gemma3ForCausalLM is not in is_hybrid_swa_model's list: one pool, every layer caching every token. gemma-3-1b:
    # 26 layers x 1 KV head x 256 x 2 x 2 B = 26,624 B a token; 100,000 cells -> 100,000 tokens.
    plan = _pool_plan("google/gemma-3-1b-it", 100_000 * 26_624, max_model_len=8192)
    assert plan.to_dict()["pools"] is None
    assert plan.capacity.tokens == 100_000


def test_attention_dp_divides_the_kv_heads_by_the_attention_tp_size():
    # Qwen2.5-7B: 28 layers, 4 KV heads x 128. At TP 4 a rank holds 1 head: 28 x 1 x 128 x 2 x 2 B = 14,336 B a
    # token; with --attn-dp-size 2 the attention TP size is 4 // 2 = 2, 2 heads a rank: 28,672 B. The same
    # 2,867,200,000 B then holds 200,000 and 100,000 tokens.
    plain = _pool_plan("Qwen/Qwen2.5-7B", 2_867_200_000, tp=4, max_model_len=8192)
    dp = _pool_plan("Qwen/Qwen2.5-7B", 2_867_200_000, tp=4, attention_data_parallel_size=2, max_model_len=8192)
    assert (plain.layout.bytes_per_token, plain.capacity.tokens) == (14_336, 200_000)
    assert (dp.layout.bytes_per_token, dp.capacity.tokens) == (28_672, 100_000)
    assert any("4 // 2 = 2 ranks" in note for note in dp.notes)


def test_vllm_keeps_the_whole_tp_for_kv_heads():
    # the default rule: vLLM has no attention DP knob; its Qwen2.5-7B cell at TP 4 stays 14,336 B
    dep = Deployment(engine="vllm", tensor_parallel_size=4, kv_cache_memory_bytes=GiB, max_model_len=8192)
    plan = plan_deployment(resolve("Qwen/Qwen2.5-7B"), dep, GpuChoice("custom", "pool only", 0, 4))
    assert plan.layout.bytes_per_token == 14_336 and plan.to_dict()["pools"] is None


def _s05_like(**knobs) -> Plan:
    # tests/test_sglang_rules.py's S05 deployment: Qwen3.5-27B geometry, 78.48 GiB free before load, 28.47 GiB of
    # weights, mem_fraction_static 0.85
    spec = load_fixture("hybrid/qwen3.5-27b.json")
    total = int(78.48 * GiB) + sglang.CUDA_CONTEXT_BYTES
    dep = Deployment(engine="sglang", gpu_memory_bytes=total, weights_memory_bytes=int(28.47 * GiB),
                     gpu_memory_utilization=0.85, max_model_len=8192, **knobs)
    return plan_deployment(spec, dep, GpuChoice("custom", "custom", total, 1))


def test_mamba_slots_cap_the_running_requests():
    # --max-mamba-cache-size 124: max_num_reqs = 124 // 3 = 41. The KV pool (332,866 tokens, test_sglang_rules.py)
    # would run 332,866 // 2,048 = 162 requests of 2,048 tokens; the cap makes it 41. At 8,192 the pool's
    # 332,866 // 8,192 = 40 is below the cap.
    # (SGLang 0.5.9: 3 slots a request, MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO.) From 0.5.14 the radix cache's
    # auto strategy is extra_buffer for Qwen3_5ForConditionalGeneration (server_args.py _handle_mamba_radix_cache)
    # and a request takes 3 + 2 tracking slots (0.5.23 kv_cache_configurator.py _calculate_mamba_ratio): 124 // 5 = 24.
    # 0.5.9's handle_max_mamba_cache takes the 124 slots alone from the rest (the padding slot from 0.5.17): one state
    # more for the KV, 21,968,675,929 B // 65,536 = 335,215 tokens, 335,215 // 2,048 = 163.
    plan = _s05_like(max_mamba_cache_size=124, engine_version="0.5.9")
    assert plan.capacity.tokens == 335_215
    ladder = {rung.context: (rung.concurrency, rung.kv_limited) for rung in plan.capacity.ladder}
    assert ladder[2048] == (41, 163)
    assert ladder[8192] == (40, 40)
    assert any("124 // 3 = 41" in note for note in plan.notes)
    newest = _s05_like(max_mamba_cache_size=124)
    assert {rung.context: rung.concurrency for rung in newest.capacity.ladder}[2048] == 24
    assert any("124 // 5 = 24" in note and "extra_buffer" in note for note in newest.notes)


def test_mamba_cap_from_the_ratio_and_max_num_seqs():
    # --mamba-full-memory-ratio 0.5: 87 slots from 0.5.17 (test_sglang_rules.py), 0.5.9's int(budget // state) = 88,
    # the same 88 states out of the rest -> 88 // 3 = 29 requests at most; the KV pool of 419,779 tokens would run
    # 419,779 // 2,048 = 204. --max-running-requests 20 is tighter still.
    # (SGLang 0.5.9; the newest 87 // 5 = 17, test_mamba_slots_cap_the_running_requests)
    ladder = _s05_like(mamba_full_memory_ratio=0.5, engine_version="0.5.9").capacity.ladder
    assert {r.context: r.concurrency for r in ladder}[2048] == 29
    capped = _s05_like(mamba_full_memory_ratio=0.5, max_num_seqs=20, engine_version="0.5.9")
    assert {r.context: r.concurrency for r in capped.capacity.ladder}[2048] == 20
    assert {r.context: r.concurrency for r in _s05_like(mamba_full_memory_ratio=0.5).capacity.ladder}[2048] == 17


def test_models_without_states_have_no_mamba_cap():
    plan = _pool_plan("Qwen/Qwen2.5-7B", 2_867_200_000, max_model_len=8192)
    assert not any("Mamba state slots" in note for note in plan.notes)
    # 2,867,200,000 // 57,344 B (28 x 4 x 128 x 2 x 2) = 50,000 tokens -> 50,000 // 2,048 = 24 requests
    assert {r.context: r.concurrency for r in plan.capacity.ladder}[2048] == 24


def test_an_all_sliding_hybrid_architecture_keeps_one_sliding_pool():
    # set_num_tokens_hybrid_swa's all-SWA branch: no full layer, the profiled tokens (in whole pages) are the sliding
    # pool. gpt-oss-20b's 24 layers all made sliding: 24 x 2,048 = 49,152 B a token, 1,000,100 cells at page 64 ->
    # 1,000,064 tokens, nothing re-split.
    spec = resolve("openai/gpt-oss-20b")
    sliding = replace(spec, layers=tuple(layer for layer in spec.layers if layer.drops_old_tokens) * 2)
    dep = Deployment(engine="sglang", kv_cache_memory_bytes=1_000_100 * GPT_OSS_CELL, block_size=64,
                     max_num_batched_tokens=2048, max_model_len=8192)
    plan = plan_deployment(sliding, dep, GpuChoice("custom", "pool only", 0, 1))
    assert plan.to_dict()["pools"] == [{"name": "swa", "tokens": 1_000_064, "bytes_per_token": 49_152}]
    assert plan.capacity.tokens == 1_000_064


def test_attention_dp_shares_the_mamba_slots_and_keeps_whole_states():
    # TP 2 with --attn-dp-size 2: the attention TP size is 1, so a rank keeps whole states (153,944,064 B a request,
    # as at TP 1) and whole KV heads (65,536 B a token); handle_max_mamba_cache gives each attention-DP group
    # 248 // 2 = 124 slots. Rest 41,057,739,865 B (the weights are given per rank) - 124 x 153,944,064 (0.5.9 leaves
    # the padding slot out of the rest) = 21,968,675,929 B // 65,536 = 335,215 tokens, the TP-1 figure of
    # --max-mamba-cache-size 124 (test_mamba_slots_cap_the_running_requests); 124 // 3 = 41 (SGLang 0.5.9's 3 slots
    # a request).
    plan = _s05_like(tensor_parallel_size=2, attention_data_parallel_size=2, max_mamba_cache_size=248,
                     engine_version="0.5.9")
    assert plan.layout.bytes_per_token == 65_536
    assert plan.capacity.tokens == 335_215
    assert {r.context: r.concurrency for r in plan.capacity.ladder}[2048] == 41
    assert any("248 slots as given // attention DP 2 = 124" in note for note in plan.notes)
