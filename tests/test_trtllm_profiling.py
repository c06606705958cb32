"""What TensorRT-LLM has allocated when it measures the memory left for the KV cache (kvplan/engines/trtllm.py):
the PyTorch backend's dummy requests, their forward pass and the CUDA graphs captured before it; the TensorRT
engine backend's execution context, selected by --backend tensorrt or the YAML's backend key. Expected figures
are derived by hand in the comments; T03 is the DGX Spark log in each engine's data/calibration.yaml (its full
text: the kvplan reference notes, same id)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from kvplan.api import estimate, estimates
from kvplan.calibration import engines as engine_calibration
from kvplan.deployment import Deployment
from kvplan.deployment.front_doors import from_cli
from kvplan.engines import plan_deployment as engines_estimate
from kvplan.engines.trtllm import budget as trtllm
from kvplan.errors import KvplanError
from kvplan.hardware import find_gpu
from kvplan.models.sources import resolve
from kvplan.plan import GpuChoice
from kvplan.units import GiB


def estimate_deployment(dep):
    return estimates(dep, (), False, None)[0].plan


@pytest.mark.parametrize("max_num_tokens, max_seq_len, requests", [
    (8192, 131_072, 1),  # one prompt of 8,192 tokens
    (8192, 8192, 2),  # prompts of at most 8,191: 8,191 + 1
    (8192, 2048, 5),  # 4 x 2,047 = 8,188, then 4 left over
    (8192, 1, 8192),  # max_seq_len - 1 is 0: prompts of one token
])
def test_dummy_requests_cut_max_num_tokens_by_max_seq_len(max_num_tokens, max_seq_len, requests):
    assert trtllm.dummy_requests(max_num_tokens, max_seq_len) == requests


def test_estimation_pool_has_a_floor_of_max_batch_size_blocks():
    # _get_token_num_for_estimation (tensorrt_llm/_torch/pyexecutor/_util.py as stored in 2026; read_file id
    # 54555926407): the dummy requests' blocks, each prompt + 1 generated token, at least the CUDA-graph warmup's
    # ceil((max_seq_len + 1) / 32) + graph batch - 1 blocks and at least max_batch_size blocks.
    # max_seq_len 131,072, 128-request graphs, max_batch_size 2,048: dummy ceil(8,193 / 32) = 257 blocks, warmup
    # 4,097 + 127 = 4,224, floor 2,048 -> 4,224 blocks = 135,168 tokens.
    assert trtllm.estimation_tokens(8192, 131_072, 32, 2048, 128) == 4224 * 32
    # max_seq_len 2,048: 4 x ceil(2,048 / 32) + ceil(5 / 32) = 257 blocks; warmup 65 + 63 = 128 with 64-request
    # graphs; max_batch_size 64 -> 257 blocks = 8,224 tokens. (T03, a 1.1.0rc3 log with max_seq_len 131,072 and
    # max_batch_size 64, printed 8,224 too: before the floors, its one 8,193-token request alone.)
    assert trtllm.estimation_tokens(8192, 2048, 32, 64, 64) == 8224
    # the max_batch_size floor: 2,048 blocks whatever the requests need
    assert trtllm.estimation_tokens(2048, 8192, 32, 2048, 128) == 2048 * 32


def test_profiling_activation_against_t03():
    # gpt-oss-120b (hidden 2,880, 4 of 128 experts of width 2,880, vocab 201,088, bf16), T03's settings: one
    # dummy request of 8,192 tokens. Per token 3 x 2,880 + 4 x (2,880 + 3 x 2,880) = 54,720 elements:
    #   8,192 x 54,720 x 2 = 896,532,480 B = 0.835 GiB, above the one row of logits (201,088 x (2 + 4) = 1,206,528).
    # T03 prints "Memory dynamically allocated during inference (inside torch) ...: 0.85 GiB": 1.8% more.
    spec = resolve("openai/gpt-oss-120b")
    activation = trtllm.forward_activation_bytes(spec, 1, 8192, trtllm.dummy_requests(8192, 131_072), 2)
    assert activation == 896_532_480
    assert abs(activation / GiB - 0.85) < 0.02


@pytest.mark.parametrize("model, tp, elements", [
    # dense: 3 x 3,584 + 3 x 18,944 = 67,584; at TP 2 the MLP halves: 10,752 + 28,416 = 39,168
    ("Qwen/Qwen2.5-7B", 1, 67_584),
    ("Qwen/Qwen2.5-7B", 2, 39_168),
    # routed experts only: 3 x 2,048 + 8 x (2,048 + 3 x 768) = 6,144 + 34,816 = 40,960
    ("Qwen/Qwen3-30B-A3B", 1, 40_960),
    # a dense first layer (3 x 10,944 = 32,832) and expert layers of 6 x (2,048 + 3 x 1,408) routed plus the two
    # shared experts' 2,816 together (3 x 2,816): 37,632 + 8,448 = 46,080, the larger; + 3 x 2,048 = 52,224
    ("deepseek-ai/DeepSeek-V2-Lite", 1, 52_224),
    # TP 2: dense 16,416; experts 6 x (2,048 + 2,112) + 4,224 = 29,184; + 6,144 = 35,328
    ("deepseek-ai/DeepSeek-V2-Lite", 2, 35_328),
])
def test_activation_per_token_follows_the_layer_structure(model, tp, elements):
    assert trtllm.token_activation_elements(resolve(model), tp) == elements


def test_a_dense_layer_wider_than_the_expert_layers_sets_the_peak():
    # DeepSeek-V2-Lite with one routed expert per token: expert layers 1 x (2,048 + 4,224) + 8,448 = 14,720, below
    # the dense first layer's 3 x 10,944 = 32,832: 6,144 + 32,832 = 38,976
    spec = resolve("deepseek-ai/DeepSeek-V2-Lite")
    assert spec.moe is not None
    one_expert = replace(spec, moe=replace(spec.moe, experts_per_token=1))
    assert trtllm.token_activation_elements(one_expert, 1) == 38_976


def test_tensor_parallel_ranks_profile_their_share():
    # Qwen2.5-7B at TP 2, max_seq_len 8192: 8,192 x 39,168 x 2 = 641,728,512 (each rank's logits are gathered to
    # the whole vocabulary: 2 rows x 152,064 x 6 = 1,824,768, smaller)
    plan = estimate("Qwen/Qwen2.5-7B", gpu="h100", engine="trtllm", max_model_len=8192, tensor_parallel_size=2)
    assert plan.memory.activation_bytes == 641_728_512


def test_no_cuda_graphs_no_graph_pool():
    # As tests/test_trtllm_rules.py's first test without the 116,785,152 B of graphs: free 68,025,365,832
    # x 0.8999999761581421 = 61,222,827,626 -> // 57,344 = 1,067,641 tokens -> 33,363 whole blocks of 32
    plan = estimate("Qwen/Qwen2.5-7B", gpu="h100", engine="trtllm", max_model_len=8192, enforce_eager=True)
    assert plan.memory.cuda_graph_bytes == 0
    assert plan.capacity.num_blocks == 33_363


def test_max_num_tokens_sizes_the_profiling_run():
    # max_num_tokens 4096: one dummy request (4,096 <= 8,191): 4,096 x 67,584 x 2 = 553,648,128; the estimation
    # pool (at least max_batch_size 2,048 blocks) holds the 128-request graph (116,785,152).
    # Free 85,018,877,624 - 15,231,233,024 - 553,648,128 - 116,785,152 - 654,982,512 = 68,462,228,808
    # x 0.8999999761581421 = 61,616,004,294 -> // 57,344 = 1,074,497 tokens -> 33,578 whole blocks
    plan = estimate("Qwen/Qwen2.5-7B", gpu="h100", engine="trtllm", max_model_len=8192,
                    max_num_batched_tokens=4096)
    assert plan.memory.activation_bytes == 553_648_128 and plan.memory.cuda_graph_bytes == 116_785_152
    assert plan.capacity.num_blocks == 33_578


@pytest.mark.parametrize("max_batch_size, largest", [
    (64, 64),  # in the list: 64 requests
    (100, 64),  # not in it: the largest size below, 64 (padding, which would add 100, is off by default)
    (31, 31),
    (512, 128),  # the list stops at CudaGraphConfig's 128
])
def test_graphs_are_captured_for_the_default_batch_sizes(max_batch_size, largest):
    assert trtllm.largest_graph(max_batch_size, 8192, 258) == largest


def test_graphs_need_the_estimation_pool_to_hold_them():
    # the capture runs largest first and stops at the first batch the estimation pool has fewer blocks than
    assert trtllm.largest_graph(2048, 8192, 128) == 128
    assert trtllm.largest_graph(2048, 8192, 127) == 0
    # max_num_tokens 100 caps a decode batch at 100 requests: 64 is the largest size
    assert trtllm.largest_graph(2048, 100, 64) == 64


def test_graph_memory_is_the_largest_graphs_forward():
    # max_batch_size 64: 64 decode requests, logits 64 x 152,064 x (2 + 4) = 58,392,576 above the layers'
    # 64 x 67,584 x 2 = 8,650,752
    plan = estimate("Qwen/Qwen2.5-7B", gpu="h100", engine="trtllm", max_model_len=8192, max_num_seqs=64)
    assert plan.memory.cuda_graph_bytes == 58_392_576


@pytest.mark.parametrize("max_num_tokens, block_size", [(2048, 32), (2048, 16), (4063, 32)])
def test_a_small_profiling_run_still_captures_the_largest_graph(max_num_tokens, block_size):
    # The estimation pool holds at least max_batch_size (2,048) blocks (_util.py as stored in 2026), so the
    # 128-request graph is captured even where the one dummy request needs 65 blocks (ceil(2,049 / 32)): its
    # logits 128 x 152,064 x (2 + 4) = 116,785,152. (Before that floor a 2,048-token run captured none.)
    plan = estimate("Qwen/Qwen2.5-7B", gpu="h100", engine="trtllm", max_model_len=8192,
                    max_num_batched_tokens=max_num_tokens, block_size=block_size)
    assert plan.memory.cuda_graph_bytes == 116_785_152


@pytest.mark.parametrize("backend, name", [("tensorrt", "tensorrt"), ("trt", "tensorrt"), ("pytorch", "pytorch"),
                                           (None, "pytorch")])
def test_backend_is_read_from_the_deployment(backend, name):
    gpu = find_gpu("h100")
    dep = Deployment(engine="trtllm", gpu=gpu.id, backend=backend)
    target = trtllm.PlanInput(resolve("Qwen/Qwen2.5-7B"), dep, GpuChoice(gpu.id, gpu.name, gpu.memory_bytes, 1))
    assert trtllm.backend(target).name == name


def t08_plan(**knobs):
    gpu = find_gpu("l4")
    dep = Deployment(engine="trtllm", gpu=gpu.id, dtype="float16", kv_cache_dtype="float16", block_size=64,
                     gpu_memory_utilization=0.45, max_num_seqs=64, **knobs)
    return engines_estimate(resolve("Qwen/Qwen2.5-1.5B-Instruct"), dep,
                            GpuChoice(gpu.id, gpu.name, gpu.memory_bytes, 1, gpu.compute_capability, gpu.fp8))


def test_engine_backend_on_t08():
    # T08-1.5B: Qwen2.5-1.5B-Instruct fp16 engine on an L4 (23,654,532,383 B), fraction 0.45, 64-token blocks.
    # Weights 1,543,714,304 x 2 = 3,087,428,608; execution context for 8,192 tokens:
    # 8,192 x (3 x 1,536 + 3 x 8,960) x 2 = 515,899,392; no profiling run, no CUDA graphs; CUDA context
    # 654,982,512. Runtime buffers and decoder for max_batch_size 64, max_seq_len 32,768, vocabulary 151,936
    # (engine_buffers.py; tests/test_trtllm_engine_buffers.py derives each term): logits 64 x 151,936 x 4 =
    # 38,895,616, cache indirection 64 x 32,768 x 4 = 8,388,608, slot outputs 64 x (32,768 x 8 + 8) = 16,777,728,
    # 60 B a slot 3,840, input ids 32,768 (64,098,560); decoder state 64 x 32,768 x 16 = 33,554,432 + bias
    # 38,895,616 + 1,920, penalty 38,895,616 + 1,280, workspace 38,895,616 + 3,328 + top-k scratch
    # (38,895,616 + 2 x 2,097,152 + 255 = 43,090,175, above AIR top-p's 6,578,431), layers 7,104 (193,345,087):
    # 257,443,647 B. Free 19,138,778,224 B x 0.44999998807907104 = 8,612,449,972 -> // 28,672 = 300,378 tokens
    # -> 4,694 blocks of 64 = 300,416 tokens, 9.7% over the logged 273,792 (11.2% before the buffers were
    # counted): TensorRT's own allocations beyond the execution context stay unmodelled.
    plan = t08_plan(backend="tensorrt")
    assert plan.memory.activation_bytes == 515_899_392 and plan.memory.cuda_graph_bytes == 0
    assert plan.memory.non_torch_bytes == 654_982_512 + 257_443_647
    assert plan.capacity.tokens == 300_416
    assert "the runtime buffers and the decoder" in plan.notes[0]
    assert plan.notes[-1].startswith("runtime buffers and decoder for max_batch_size 64 and max_seq_len 32,768: "
                                     "0.24 GiB per rank")


def test_engine_log_replays_take_the_engine_backend():
    # kvplan/calibration/engines.py plans an entry of kind trtllm_engine with backend tensorrt: T08-1.5B from scratch
    # is the 300,416 tokens derived above (the engines' data/calibration.yaml holds the same settings)
    entry = next(entry for entry in engine_calibration.entries() if entry["id"] == "T08-1.5B")
    plan = engine_calibration.plan_from_scratch(entry)
    assert plan.capacity.tokens == 300_416 and "TensorRT engine" in plan.notes[0]


def test_the_pytorch_backend_on_t08_adds_its_graphs():
    # The same deployment served by the PyTorch backend: the 64-request graph (64 of 1-31, 32, 64, 128 within
    # max_batch_size 64; the estimation pool's ceil(8,193 / 64) = 129 blocks hold it) adds
    # 64 x 151,936 x (2 + 4) = 58,343,424 B; free 19,337,878,447 x 0.44999998807907104 = 8,702,045,070
    # -> // 28,672 = 303,503 tokens -> 4,742 whole blocks of 64 = 303,488 tokens
    plan = t08_plan()
    assert plan.memory.cuda_graph_bytes == 58_343_424
    assert plan.capacity.tokens == 303_488


@pytest.mark.parametrize("flags, pasted", [
    (["--backend", "tensorrt"], None),  # kvplan estimate --engine trtllm --backend tensorrt
    ([], ["trtllm-serve", "Qwen/Qwen2.5-7B", "--backend", "trt"]),  # serve's alias (ChoiceWithAlias in serve.py)
])
def test_backend_flag_selects_the_engine_path(flags, pasted):
    own = {"gpu": ("h100", "--gpu"), "engine": ("trtllm", "--engine"), "model": ("Qwen/Qwen2.5-7B", "--model")}
    plan = estimate_deployment(from_cli(own, flags, None, pasted, environ={}))
    assert plan.memory.cuda_graph_bytes == 0 and "TensorRT engine" in plan.notes[0]


def test_backend_key_of_the_yaml_selects_the_engine_path(tmp_path: Path):
    config = tmp_path / "extra.yaml"
    config.write_text("backend: tensorrt\n")
    dep = from_cli({"gpu": ("h100", "--gpu")}, [], None, ["trtllm-serve", "Qwen/Qwen2.5-7B", "--config",
                                                           str(config)], environ={})
    assert dep.backend == "tensorrt" and dep.where("backend") == f"{config}:1: backend"
    assert "TensorRT engine" in estimate_deployment(dep).notes[0]


def test_an_unknown_backend_is_one_line_naming_the_flag():
    with pytest.raises(KvplanError, match="--backend: invalid choice 'onnx'"):
        from_cli({"gpu": ("h100", "--gpu")}, [], None, ["trtllm-serve", "Qwen/Qwen2.5-7B", "--backend", "onnx"],
                 environ={})


def test_notes_say_what_a_gib_of_the_unmodelled_costs():
    # 0.8999999761581421 x 2^30 = 966,367,616 B // 57,344 B per token = 16,852 tokens
    plan = estimate("Qwen/Qwen2.5-7B", gpu="h100", engine="trtllm", max_model_len=8192)
    assert any("each GiB of them is 16,852 tokens fewer" in note for note in plan.notes)
    assert any("profiling forward of 8,192 tokens" in note for note in plan.notes)


def test_pipeline_stages_before_the_last_have_no_logits():
    # PP 2, first stage: no lm_head, so no logits rows: 8,192 x 67,584 x 2 = 1,107,296,256 exactly
    gpu = find_gpu("h100")
    dep = replace(Deployment(engine="trtllm", gpu=gpu.id, max_model_len=8192), pipeline_parallel_size=2)
    target = trtllm.PlanInput(resolve("Qwen/Qwen2.5-7B"), dep, GpuChoice(gpu.id, gpu.name, gpu.memory_bytes, 2))
    settings = trtllm.ENGINE.settings(target)
    activation, _ = trtllm.BACKENDS["pytorch"].before_kv(target, settings, last=False)
    assert activation == 1_107_296_256
