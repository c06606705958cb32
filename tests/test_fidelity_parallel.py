"""vLLM's data and expert parallelism: each DP rank is an engine of its own with its own pool; the MoE layers
see TP x DP ranks, their experts sliced over them, or whole with --enable-expert-parallel, plus EPLB's
redundant experts (model_executor/layers/fused_moe/config.py FusedMoEParallelConfig.make, fused_moe/layer.py;
see kvplan/weights.py ExpertPlacement)."""

from __future__ import annotations

import pytest

from kvplan.api import gpu_choices, load_model
from kvplan.deployment import Deployment
from kvplan.engines import plan_deployment
from kvplan.errors import KvplanError

# Qwen/Qwen3-30B-A3B, by hand from its config.json (hidden 2048, 48 layers, 32 q / 4 KV heads of 128, 128 experts
# of width 768, vocab 151,936, untied), in bf16:
#   routed experts: 128 x 3 x 2048 x 768 x 48 layers = 28,991,029,248 params -> 57,982,058,496 B
#   embeddings and lm_head: 151,936 x 2048 = 311,164,928 params each -> 1,244,659,712 B together
#   per layer outside experts: q 8,388,608 + k 1,048,576 + v 1,048,576 + o 8,388,608 + q/k norms 256 + router
#   262,144 + 2 norms 4,096 = 19,140,864 params; x 48 = 918,761,472 -> 1,837,522,944 B
# The final norm (2,048 params, 4 KiB) is spread over the layers, and each split rounds up: 4 KiB slack.
EXPERT_BYTES = 57_982_058_496
DENSE_BYTES = 1_837_522_944 + 1_244_659_712
SLACK = 4096
# and every rank holds vLLM's whole RoPE cos/sin table: 40,960 positions x 128 x 2 B
ROPE = 10_485_760


def plan(model: str, **knobs):
    dep = Deployment.from_mapping({"gpu": "h100", **knobs})
    return plan_deployment(load_model(model), dep, gpu_choices(dep)[0])


def test_expert_parallel_tp4_dp2_holds_an_eighth_of_the_experts():
    # TP 4 alone: everything over 4 ranks = (3,082,182,656 + 57,982,058,496) / 4 = 15,266,060,288 B.
    alone = plan("Qwen/Qwen3-30B-A3B", tensor_parallel_size=4)
    assert abs(alone.memory.weights_bytes - ROPE - 15_266_060_288) <= SLACK
    # TP 4 x DP 2 with EP: 128 / 8 = 16 whole experts per rank, dense over TP 4:
    # 57,982,058,496 x 16 / 128 + 3,082,182,656 / 4 = 7,247,757,312 + 770,545,664 = 8,018,302,976 B (8.0 GB).
    ep = plan("Qwen/Qwen3-30B-A3B", tensor_parallel_size=4, data_parallel_size=2, enable_expert_parallel=True)
    assert abs(ep.memory.weights_bytes - ROPE - 8_018_302_976) <= SLACK
    # Without EP the experts are sliced over the same 8 ranks (flatten_tp_across_dp): the same bytes here.
    sliced = plan("Qwen/Qwen3-30B-A3B", tensor_parallel_size=4, data_parallel_size=2)
    assert abs(sliced.memory.weights_bytes - ROPE - 8_018_302_976) <= SLACK
    # The 7.25 GB saved per rank goes to that engine's pool; the two engines hold twice that in all.
    assert ep.memory.kv_cache_bytes - alone.memory.kv_cache_bytes == pytest.approx(
        alone.memory.weights_bytes - ep.memory.weights_bytes, abs=SLACK)
    replicas = ep.to_dict()["replicas"]
    assert replicas["count"] == 2 and replicas["tokens"] == 2 * ep.capacity.tokens
    assert any("16 whole experts per rank" in note for note in ep.notes)


def test_whole_experts_round_up_on_the_fullest_rank():
    # DP 3 with EP: 128 experts over 3 ranks -> the first 2 ranks hold 43 (determine_expert_map), so
    # 57,982,058,496 x 43 / 128 + 3,082,182,656 = 19,478,347,776 + 3,082,182,656 = 22,560,530,432 B;
    # sliced without EP: 57,982,058,496 / 3 + 3,082,182,656 = 22,409,535,488 B.
    whole = plan("Qwen/Qwen3-30B-A3B", data_parallel_size=3, enable_expert_parallel=True)
    assert abs(whole.memory.weights_bytes - ROPE - 22_560_530_432) <= SLACK
    sliced = plan("Qwen/Qwen3-30B-A3B", data_parallel_size=3)
    assert abs(sliced.memory.weights_bytes - ROPE - 22_409_535_488) <= SLACK


def test_redundant_experts_add_physical_experts():
    # EPLB with 8 redundant experts: 136 physical over 8 ranks = 17 per rank:
    # 57,982,058,496 x 17 / 128 + 770,545,664 = 7,700,742,144 + 770,545,664 = 8,471,287,808 B.
    eplb = plan("Qwen/Qwen3-30B-A3B", tensor_parallel_size=4, data_parallel_size=2, enable_expert_parallel=True,
                enable_eplb=True, eplb_config={"num_redundant_experts": 8})
    assert abs(eplb.memory.weights_bytes - ROPE - 8_471_287_808) <= SLACK


def test_dense_models_replicate_on_every_data_parallel_rank():
    # Qwen2.5-7B has no experts: DP 2 gives each engine the whole TP-1 model, as DP 1 does.
    one = plan("Qwen/Qwen2.5-7B")
    two = plan("Qwen/Qwen2.5-7B", data_parallel_size=2, enable_expert_parallel=True)
    assert two.memory.weights_bytes == one.memory.weights_bytes
    assert two.capacity.num_blocks == one.capacity.num_blocks
    assert two.to_dict()["replicas"]["max_concurrency"] == round(2 * one.capacity.max_concurrency, 2)


def test_eplb_needs_expert_parallel_and_redundancy_needs_eplb():
    # vLLM's ParallelConfig checks, in its words.
    with pytest.raises(KvplanError, match="enable_expert_parallel must be True to use EPLB"):
        plan("Qwen/Qwen3-30B-A3B", tensor_parallel_size=4, enable_eplb=True)
    with pytest.raises(KvplanError, match="num_redundant_experts is set to 8 but EPLB is not enabled"):
        plan("Qwen/Qwen3-30B-A3B", tensor_parallel_size=4, enable_expert_parallel=True,
             eplb_config={"num_redundant_experts": 8})


def test_the_flags_are_read_from_a_launch_command():
    dep = Deployment.from_vllm_args(["vllm", "serve", "Qwen/Qwen3-30B-A3B", "-tp", "4", "-dp", "2", "-ep",
                                     "--enable-eplb", "--eplb-config.num_redundant_experts", "8"])
    assert dep.enable_expert_parallel and dep.enable_eplb
    assert dep.eplb_config == {"num_redundant_experts": 8}
    assert Deployment.from_vllm_args(["--enable-expert-parallel"]).enable_expert_parallel
