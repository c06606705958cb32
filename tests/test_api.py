"""The Python API: the same numbers as the command line, knobs by vLLM's names, errors naming the keyword."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import kvplan
from kvplan.errors import KvplanError


def cli_json(*args):
    result = subprocess.run([sys.executable, "-m", "kvplan", "estimate", *args, "--json"], capture_output=True,
                            text=True, timeout=120)
    return json.loads(result.stdout)


def test_estimate_equals_the_cli_json():
    plan = kvplan.estimate("Qwen/Qwen2.5-7B", gpu="h100", max_model_len=32768, tensor_parallel_size=2)
    assert plan.to_dict() == cli_json("--model", "Qwen/Qwen2.5-7B", "--gpu", "h100", "--max-model-len", "32768",
                                      "-tp", "2")


def test_seed_example_through_the_api():
    # 2 x 28 x 4 x 128 x 16 x 2 = 917,504 B per block; 7.8e9 // 917,504 = 8,501 blocks = 136,016 tokens
    plan = kvplan.estimate("Qwen/Qwen2.5-7B", gpu_memory="24GB", engine="simple", weights_memory_bytes="15.2GB",
                           reserve_bytes="1GB", gpu_memory_utilization=1.0, dtype="float16", max_model_len=32768)
    assert (plan.layout.block_bytes, plan.capacity.num_blocks, plan.capacity.tokens) == (917_504, 8_501, 136_016)


def test_from_vllm_args_and_load_model_and_gpus():
    dep = kvplan.Deployment.from_vllm_args(["vllm", "serve", "Qwen/Qwen2.5-7B", "--max-model-len", "16K"])
    assert (dep.model, dep.max_model_len, dep.engine) == ("Qwen/Qwen2.5-7B", 16384, "vllm")
    spec = kvplan.load_model("meta-llama/Llama-3.1-8B")
    assert (spec.num_layers, spec.num_kv_heads, spec.head_dim) == (32, 8, 128)
    assert any(gpu.id == "h100-sxm" for gpu in kvplan.gpus())


def test_bad_knobs_name_the_keyword():
    with pytest.raises(KvplanError, match=r"^kvplan.estimate\(\): max_model_len: must be within"):
        kvplan.estimate("Qwen/Qwen2.5-7B", gpu="h100", max_model_len=-5)  # -1 means auto
    with pytest.raises(KvplanError, match="unknown knob; did you mean max-num-seqs"):
        kvplan.estimate("Qwen/Qwen2.5-7B", gpu="h100", max_num_seq=8)


def test_missing_and_unknown_gpu_name_the_keyword():
    with pytest.raises(KvplanError, match=r"^kvplan.estimate\(\): gpu: unknown GPU 'h1000'"):
        kvplan.estimate("Qwen/Qwen2.5-7B", gpu="h1000")
    with pytest.raises(KvplanError, match="no GPU given"):
        kvplan.estimate("Qwen/Qwen2.5-7B")


def test_from_vllm_args_takes_one_string_too():
    dep = kvplan.Deployment.from_vllm_args("vllm serve Qwen/Qwen2.5-7B --max-model-len 8K \\\n  -tp 2")
    assert (dep.model, dep.max_model_len, dep.tensor_parallel_size) == ("Qwen/Qwen2.5-7B", 8192, 2)
    assert sorted(dir(kvplan)) == ["Deployment", "Plan", "__version__", "estimate", "gpus", "load_model", "size"]
