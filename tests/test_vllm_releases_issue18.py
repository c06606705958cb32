"""vLLM's release boundaries as each release's own source sets them (issue 18 section 2), each fixed where the oracle
(tests/oracle/cases.jsonl, the release's code run on CPU) showed kvplan a release off. The vLLM files cited are those
of the release's wheel on PyPI (`pip download --no-deps vllm==X`)."""

from __future__ import annotations

import kvplan

GiB = 2**30


def plan(version: str, **knobs: object) -> kvplan.Plan:
    return kvplan.estimate(knobs.pop("model", "Qwen/Qwen2.5-7B"), gpu=str(knobs.pop("gpu", "h100-sxm")),
                           engine_version=version, **knobs)


def test_utilization_and_the_graph_estimate_start_in_v0_20_0():
    # 18 §2.1. vLLM 0.20.0 config/cache.py: gpu_memory_utilization Field(default=0.92) (0.19.0: 0.9); envs.py:
    # VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS defaults to "1" (0.19.0: "0"); the oracle's 0.20.0 and 0.19.0 cases
    # resolve 0.92 and 0.9 (vllm.engine.arg_utils.EngineArgs.create_engine_config).
    for version in ("0.20.0", "0.20.1", "0.21.0"):
        found = plan(version, max_model_len=32768)
        assert found.engine.gpu_memory_utilization == 0.92
        assert found.memory.cuda_graph_bytes > 0
    before = plan("0.19.1", max_model_len=32768)
    assert before.engine.gpu_memory_utilization == 0.9
    assert before.memory.cuda_graph_bytes == 0


def test_every_model_logs_concurrency_times_max_model_len_from_v0_20_1():
    # 18 §2.7. vLLM 0.20.1 v1/core/kv_cache_utils.py _report_kv_cache_config: num_tokens = int(max_concurrency x
    # max_model_len); 0.20.0's: num_blocks // len(groups) x min block size. The oracle (cases.jsonl, gemma-2-9b-it,
    # 4 GiB of KV cache at 8,192 tokens, both releases' kv_cache_utils.get_kv_cache_configs): 1,560 blocks in 2
    # groups, 1.52x; 0.20.0 logs 12,480 tokens (780 x 16), 0.20.1 logs 12,467 (int(1,560 / 1,025 x 8,192)).
    knobs = {"model": "google/gemma-2-9b-it", "max_model_len": 8192, "kv_cache_memory_bytes": 4 * GiB}
    old, new = plan("0.20.0", **knobs), plan("0.20.1", **knobs)
    assert (old.capacity.num_blocks, old.capacity.tokens) == (1560, 12480)
    assert (new.capacity.num_blocks, new.capacity.tokens, new.capacity.max_concurrency) == (1560, 12467, 1.52)


def test_sm100_captures_up_to_1024_from_v0_28():
    # 18 §2.4. vLLM 0.28.0 config/vllm.py _set_cudagraph_sizes: default_max_graph_size = 1024 if
    # is_device_capability_family(100) else 512 (0.27.0: 512). The oracle's B200 cases (Qwen2.5-7B, 1,024 sequences,
    # 16,384 batched tokens; EngineArgs.create_engine_config): 83 capture sizes in 0.28.0, 51 in 0.27.0; an H100 51.
    from kvplan.engines.vllm.budget import cuda_graph_sizes, default_largest_capture

    b200, h100 = plan("0.28.0", gpu="b200", max_model_len=32768), plan("0.28.0", max_model_len=32768)
    old = plan("0.27.0", gpu="b200", max_model_len=32768)
    for found, count in ((b200, 83), (h100, 51), (old, 51)):
        settings = found.engine
        largest = default_largest_capture(found.gpu, tuple(int(p) for p in (settings.version or "").split(".")[:2]))
        assert cuda_graph_sizes(settings.max_num_seqs or 1, settings.max_num_batched_tokens or 1, 0, "",
                                largest)[0] == count
    # the estimate itself is V1's: Qwen2ForCausalLM runs Model Runner V2 from 0.25, whose profile_cudagraph_memory
    # returns 0 before 0.29 (v1/worker/gpu/model_runner.py; tests/test_vllm_runner_issue18.py)
    assert b200.memory.cuda_graph_bytes == old.memory.cuda_graph_bytes == 0
    v1 = {"gpu": "b200", "max_model_len": 32768, "v2_model_runner": False}
    assert plan("0.28.0", **v1).memory.cuda_graph_bytes > plan("0.27.0", **v1).memory.cuda_graph_bytes


def test_v0_8_5_takes_the_big_batch_tier_by_memory_a100s_included():
    # vLLM 0.8.5 engine/arg_utils.py: device_memory >= 70 * GiB_bytes -> max_num_seqs 1024, max_num_batched_tokens
    # 8192 for the API server (PR #17073), A100s included; 0.9 left them out (PR #17885). Read to the patch: the
    # oracle's 0.8.5 and 0.9.2 A100-SXM4-80GB cases (EngineArgs.create_engine_config) resolve 1,024 / 8,192 and
    # 256 / 2,048.
    def batch(version: str) -> tuple[int | None, int | None]:
        found = plan(version, gpu="a100-80gb-sxm", max_model_len=32768).engine
        return found.max_num_seqs, found.max_num_batched_tokens

    assert batch("0.8.5") == (1024, 8192)
    assert batch("0.8.4") == (256, 2048)  # PR #12369's tier by name: H100 and H200 only
    assert batch("0.9.2") == (256, 2048)


def test_window_layers_hold_max_in_flight_tokens_from_v0_26():
    # 18 §2.6. vLLM 0.26.0 v1/kv_cache_interface.py SlidingWindowSpec.max_memory_usage_bytes: min(sliding_window - 1
    # + max_in_flight_tokens, max_model_len) tokens, config/vllm.py max_in_flight_tokens = max_concurrent_batches (2
    # under async scheduling, its default) x max_num_batched_tokens; 0.25.0 takes window - 1 + max_num_batched_tokens.
    # The oracle (gemma-3-1b-it, window 512, 4 GiB at 32,768 tokens, 8,192 batched; get_kv_cache_configs): 65,536
    # blocks in 7 groups both; 0.25.0 12.32x and 403,814 tokens, 0.26.0 7.81x and 255,957.
    knobs = {"model": "google/gemma-3-1b-it", "max_model_len": 32768, "kv_cache_memory_bytes": 4 * GiB}
    old, new = plan("0.25.0", **knobs), plan("0.26.0", **knobs)
    assert (old.capacity.num_blocks, old.capacity.max_concurrency, old.capacity.tokens) == (65536, 12.32, 403814)
    assert (new.capacity.num_blocks, new.capacity.max_concurrency, new.capacity.tokens) == (65536, 7.81, 255957)
    assert new.engine.in_flight_tokens == 2 * 8192 and old.engine.in_flight_tokens is None


def test_the_capacity_check_leaves_the_null_block_out_from_v0_29():
    # vLLM 0.29.0 v1/core/kv_cache_utils.py get_kv_cache_configs: check_memory = available - _pool_bytes_per_block
    # ("Reserve the null block BlockPool permanently holds back"); 0.28.0 checks the whole memory. The oracle (4 GiB of
    # KV cache at 32,768 tokens; get_kv_cache_configs): Llama-3.1-8B needs exactly 4 GiB (2,048 blocks of 2 MiB),
    # which 0.28.0 accepts and 0.29.0 refuses with an estimated maximum model length of 32,752; Qwen3-8B is refused
    # by both, 0.28.0 estimating 29,120 and 0.29.0 29,104.
    llama = {"model": "meta-llama/Llama-3.1-8B", "max_model_len": 32768, "kv_cache_memory_bytes": 4 * GiB}
    qwen = {**llama, "model": "Qwen/Qwen3-8B"}
    assert (plan("0.28.0", **llama).capacity.fits, plan("0.28.0", **llama).capacity.max_model_len_that_fits) == (
        True, 32768)
    new = plan("0.29.0", **llama).capacity
    assert (new.fits, new.max_model_len_that_fits, new.num_blocks) == (False, 32752, 2048)
    assert plan("0.28.0", **qwen).capacity.max_model_len_that_fits == 29120
    assert plan("0.29.0", **qwen).capacity.max_model_len_that_fits == 29104


def test_v0_8_caches_sliding_windows_as_full_attention_beside_full_layers():
    # vLLM 0.8.5 v1/core/kv_cache_utils.py unify_hybrid_kv_cache_specs: "convert all SlidingWindowSpec to
    # FullAttentionSpec if both types are present": one group; 0.9.2 groups them apart. The oracle (gemma-2-9b-it,
    # 20 GiB of KV cache at 8,192 tokens; get_kv_cache_config / get_kv_cache_configs): 0.8.5 3,900 blocks in 1 group,
    # 62,400 tokens, 7.62x; 0.9.2 7,801 blocks in 2 groups, 62,400 tokens, 7.61x.
    knobs = {"model": "google/gemma-2-9b-it", "max_model_len": 8192, "kv_cache_memory_bytes": 20 * GiB}
    old, new = plan("0.8.5", **knobs), plan("0.9.2", **knobs)
    assert (old.capacity.num_blocks, old.capacity.tokens, old.capacity.max_concurrency) == (3900, 62400, 7.62)
    assert (new.capacity.num_blocks, new.capacity.tokens, new.capacity.max_concurrency) == (7801, 62400, 7.61)
    assert old.layout.num_groups == 1 and new.layout.num_groups == 2


def test_chunked_local_attention_keeps_its_groups_by_default_from_v0_14():
    # 18 §2.5. vLLM 0.14.0 envs.py: VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE defaults to "1" (0.13.0: "0"),
    # which config/vllm.py VllmConfig.__post_init__ reads before turning the hybrid KV cache manager off for chunked
    # local attention. Llama 4 Scout (36 chunked + 12 full layers, 8 KV heads x 128, 16-token blocks): off, one group
    # of 48 pages, 48 x 16 x 2 x 8 x 128 x 2 B = 3,145,728 B a block; on, 4 groups of 12 pages, 786,432 B.
    knobs = {"model": "meta-llama/Llama-4-Scout-17B-16E-Instruct", "gpu": "h200", "kv_cache_memory_bytes": 10 * GiB,
             "max_model_len": 131072}
    old, new = plan("0.13.0", **knobs), plan("0.14.0", **knobs)
    assert (old.layout.num_groups, old.layout.block_bytes) == (1, 3_145_728)
    assert (new.layout.num_groups, new.layout.block_bytes) == (4, 786_432)
    assert new.capacity.max_concurrency > 2 * old.capacity.max_concurrency
    switched_off = plan("0.14.0", chunked_hybrid_kv=False, **knobs)
    assert (switched_off.layout.num_groups, switched_off.layout.block_bytes) == (1, 3_145_728)


def test_gb10_stays_on_the_small_batch_tier_in_v0_33():
    # 18 §2.12. vLLM 0.33.0 engine/arg_utils.py get_batch_defaults: the >= 70 GiB tier also needs "not is_gb10"
    # (is_device_capability((12, 1))), so DGX Spark's GB10 (119.63 GiB) gets 256 sequences and 2,048 batched tokens
    # for the API server (8,192 for the LLM class); 0.32.0 has no such check: 1,024 and 8,192 (16,384).
    def batch(version: str, entrypoint: str = "serve") -> tuple[int | None, int | None]:
        found = plan(version, gpu="gb10", max_model_len=32768, entrypoint=entrypoint).engine
        return found.max_num_seqs, found.max_num_batched_tokens

    assert batch("0.33.0") == (256, 2048) and batch("0.33.0", "llm") == (256, 8192)
    assert batch("0.32.0") == (1024, 8192) and batch("0.32.0", "llm") == (1024, 16384)
    assert plan("0.33.0", max_model_len=32768).engine.max_num_seqs == 1024  # an H100 (9.0) keeps the big tier
