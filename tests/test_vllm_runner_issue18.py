"""vLLM's model-runner choice and the platforms its worker asks for a CUDA-graph estimate (issue 18 sections 2.2
and 2.3), read in the release wheels on PyPI (`pip download --no-deps vllm==X`): config/vllm.py
(DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES, VllmConfig.use_v2_model_runner, _is_default_v2_model_runner_model,
_get_v2_model_runner_unsupported_features), v1/worker/gpu/model_runner.py (V2's profile_cudagraph_memory) and
v1/worker/gpu_worker.py (determine_available_memory)."""

from __future__ import annotations

import kvplan

GiB, MiB = 2**30, 2**20


def plan(model: str, version: str, gpu: str = "h100-sxm", **knobs: object) -> kvplan.Plan:
    return kvplan.estimate(model, gpu=gpu, engine_version=version, max_model_len=32768, **knobs)


def runner(model: str, version: str, **knobs: object) -> str | None:
    return plan(model, version, **knobs).engine.model_runner


# Qwen3-8B on an H100 (36 layers, 1,024 sequences, 8,192 batched tokens): 51 PIECEWISE and 51 FULL sizes, so V1's
# estimate is 256 MiB + 36 x 3/16 MiB x (50 + 50) = 931 MiB (budget.cuda_graph_bytes, calibrated on v0.19 logs).
QWEN3_8B_V1_ESTIMATE = 931 * MiB


def test_v2_defaults_by_release():
    # 0.21.0 envs.py: VLLM_USE_V2_MODEL_RUNNER "0". 0.22.0 config/vllm.py: frozenset({"Qwen3ForCausalLM"}), and
    # _is_default_v2_model_runner_model ends "not model_config.is_moe and not model_config.is_quantized". 0.23.0
    # adds LlamaForCausalLM and MistralForCausalLM with the same check; 0.24.0 lists six (DeepseekV2, Qwen2Moe,
    # GraniteMoe too) without it. 0.25.0 lists the three MoE ones and returns "any(listed) or not is_moe" after
    # leaving hybrid and attention-free models out; 0.29.0 has no default-model check at all.
    assert runner("Qwen/Qwen3-8B", "0.21.0") == "V1"
    assert runner("Qwen/Qwen3-8B", "0.22.0") == "V2"
    assert runner("meta-llama/Llama-3.1-8B", "0.22.0") == "V1"
    assert runner("meta-llama/Llama-3.1-8B", "0.23.0") == "V2"
    fp8_llama = "RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic"  # LlamaForCausalLM with a quantization_config
    assert runner(fp8_llama, "0.23.0", tensor_parallel_size=2) == "V1"
    assert runner(fp8_llama, "0.24.0", tensor_parallel_size=2) == "V2"
    assert runner("Qwen/Qwen2.5-7B", "0.24.0") == "V1"  # Qwen2ForCausalLM: not listed
    assert runner("Qwen/Qwen2.5-7B", "0.25.0") == "V2"  # no experts
    assert runner("deepseek-ai/DeepSeek-V2-Lite", "0.25.0") == "V2"  # listed MoE
    assert runner("mistralai/Mixtral-8x7B-v0.1", "0.28.0", tensor_parallel_size=2) == "V1"  # unlisted MoE
    assert runner("mistralai/Mixtral-8x7B-v0.1", "0.29.0", tensor_parallel_size=2) == "V2"
    assert runner("Qwen/Qwen3-Next-80B-A3B-Instruct", "0.28.0", tensor_parallel_size=4) == "V1"  # hybrid
    assert runner("Qwen/Qwen3-Next-80B-A3B-Instruct", "0.29.0", tensor_parallel_size=4) == "V2"


def test_v2_subtracts_no_graph_estimate_before_v0_29():
    # V2's GPUModelRunner.profile_cudagraph_memory returns 0 in 0.22.0-0.28.0 (v1/worker/gpu/model_runner.py);
    # 0.29.0 measures it (v1/worker/gpu/cudagraph_utils.py profile_cudagraph_memory). The KV cache gets the
    # 931 MiB back, byte for byte, beside what V2's lighter sampler leaves (V1 0.21's two passes 2,376,865,792 B,
    # tests/test_vllm_sampler_v1.py; V2 0.22 1,044,377,600 B, 1.5 float32 copies and gumbel's maxima with the held
    # hidden states and the cuBLAS workspace, tests/test_vllm_sampler_v2.py).
    v1, v2 = plan("Qwen/Qwen3-8B", "0.21.0"), plan("Qwen/Qwen3-8B", "0.22.0")
    assert v1.memory.cuda_graph_bytes == QWEN3_8B_V1_ESTIMATE
    assert v2.memory.cuda_graph_bytes == 0
    assert (v1.memory.activation_bytes, v2.memory.activation_bytes) == (2_376_865_792, 1_044_377_600)
    assert v2.memory.kv_cache_bytes - v1.memory.kv_cache_bytes == QWEN3_8B_V1_ESTIMATE + 2_376_865_792 - 1_044_377_600
    assert plan("Qwen/Qwen3-8B", "0.29.0").memory.cuda_graph_bytes == QWEN3_8B_V1_ESTIMATE
    forced = plan("Qwen/Qwen3-8B", "0.22.0", v2_model_runner=False)  # VLLM_USE_V2_MODEL_RUNNER=0
    assert (forced.engine.model_runner, forced.memory.cuda_graph_bytes) == ("V1", QWEN3_8B_V1_ESTIMATE)


def test_unsupported_features_fall_back_to_v1():
    # 0.25.0 _get_v2_model_runner_unsupported_features: "ngram/ngram_gpu speculative decoding"; 0.33.0 refuses only
    # suffix and custom_class, so ngram keeps V2 there.
    ngram = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4}
    fallback = plan("Qwen/Qwen2.5-7B", "0.25.0", speculative_config=ngram)
    assert fallback.engine.model_runner == "V1" and fallback.memory.cuda_graph_bytes > 0
    assert any("V2 does not support speculative method 'ngram'" in note for note in fallback.notes)
    assert runner("Qwen/Qwen2.5-7B", "0.33.0", speculative_config=ngram) == "V2"


def test_v2_holds_pp_plus_one_batches_in_flight():
    # 0.26.0 config/vllm.py max_concurrent_batches: under async scheduling V2 returns pp + 1, V1 pp (pp > 1);
    # max_in_flight_tokens = that x max_num_batched_tokens (8,192 on an H100).
    v2 = plan("google/gemma-3-1b-it", "0.26.0", pipeline_parallel_size=2)
    v1 = plan("google/gemma-3-1b-it", "0.26.0", pipeline_parallel_size=2, v2_model_runner=False)
    assert (v2.engine.in_flight_tokens, v1.engine.in_flight_tokens) == (3 * 8192, 2 * 8192)


def test_the_choice_is_in_the_json_and_the_notes():
    found = plan("Qwen/Qwen3-8B", "0.22.0")
    assert found.to_dict()["engine"]["model_runner"] == "V2"
    assert any(note.startswith("vLLM model runner V2: Qwen3ForCausalLM is in DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES")
               for note in found.notes)


def test_rocm_gets_the_graph_estimate_from_v0_26():
    # 18 §2.3. gpu_worker.py determine_available_memory: 0.20.0 "not current_platform.is_rocm()", 0.25.0
    # "current_platform.is_cuda()", 0.26.0 "current_platform.is_cuda_alike()". On V1 (VLLM_USE_V2_MODEL_RUNNER=0)
    # an MI300X gets no estimate at 0.25 and the 931 MiB one at 0.26; an H100 gets it at both.
    for version, expected in (("0.25.0", 0), ("0.26.0", QWEN3_8B_V1_ESTIMATE)):
        amd = plan("Qwen/Qwen3-8B", version, gpu="mi300x", v2_model_runner=False)
        assert amd.memory.cuda_graph_bytes == expected
        assert plan("Qwen/Qwen3-8B", version, v2_model_runner=False).memory.cuda_graph_bytes == QWEN3_8B_V1_ESTIMATE
    assert plan("Qwen/Qwen3-8B", "0.20.0", gpu="mi300x").memory.cuda_graph_bytes == 0
    assert plan("Qwen/Qwen3-8B", "0.29.0", gpu="mi300x").memory.cuda_graph_bytes == QWEN3_8B_V1_ESTIMATE


def test_v2_capture_sizes_are_not_rounded_for_draft_tokens():
    # 18 §2.4's V2 half. 0.33.0 config/compilation.py resolve_cudagraph_mode_and_sizes: sizes are rounded up to a
    # multiple of 1 + speculative tokens only "if not use_v2_model_runner". Qwen2.5-7B (28 layers) on an H100, ngram
    # with 3 tokens: the largest size min(1,024 x 4 x 2, 512, 8,192) = 512; V1 rounds 1, 2, 4 to 4 and keeps the 48
    # multiples of 8 and 16 above it: 49 sizes, 256 + 28 x 3/16 x 2 x 48 = 760 MiB; V2 keeps all 51: 256 + 28 x 3/16
    # x 2 x 50 = 781 MiB.
    ngram = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4}
    v2 = plan("Qwen/Qwen2.5-7B", "0.33.0", speculative_config=ngram)
    v1 = plan("Qwen/Qwen2.5-7B", "0.33.0", speculative_config=ngram, v2_model_runner=False)
    assert (v2.engine.model_runner, v2.memory.cuda_graph_bytes) == ("V2", 781 * MiB)
    assert (v1.engine.model_runner, v1.memory.cuda_graph_bytes) == ("V1", 760 * MiB)
