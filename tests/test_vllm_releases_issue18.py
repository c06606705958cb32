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
