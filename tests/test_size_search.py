"""kvplan size's search against plain enumeration, and every option it prints fed back to kvplan estimate."""

from __future__ import annotations

import json
import shlex
from itertools import product

import pytest

import kvplan
from kvplan.cli.app import main
from kvplan.deployment import Deployment
from kvplan.errors import KvplanError
from kvplan.hardware import find_gpu
from kvplan.sizing import Sizing, size
from kvplan.sizing.search import Space

# A small space: an FP8 GPU and one without FP8 of about the same memory, and a larger FP8 one.
PRICES = {"l4": 0.8, "a10": 0.75, "l40s": 1.9}
TARGETS = ("40@16K", "8@32K")


def brute_force(model: str, targets: list[tuple[int, int]], gpus: list[str], max_gpus: int, kvs: list[str],
                quants: list[str | None]) -> list[dict]:
    """Every candidate, planned one by one through the public estimate() (the model resolved again each time),
    kept when the engine starts and every target holds. The rules of the space, restated here: N@C holds when
    the requests of C tokens at once of one replica, times the data-parallel replicas, reach N; FP8 (KV or weights)
    only on GPUs with FP8; any TP x PP x DP with that many GPUs (8 GPUs a node, more than any count here)."""
    contexts = tuple(sorted({c for _, c in targets}))
    found = []
    for name, count, kv, quant in product(gpus, range(1, max_gpus + 1), kvs, quants):
        gpu = find_gpu(name)
        if (kv == "fp8" or quant == "fp8") and not gpu.fp8:
            continue
        for tp, pp in product(range(1, count + 1), repeat=2):
            if count % (tp * pp):
                continue
            dp = count // (tp * pp)
            try:
                plan = kvplan.estimate(model, gpu=name, ladder=contexts, tensor_parallel_size=tp,
                                       pipeline_parallel_size=pp, data_parallel_size=dp, kv_cache_dtype=kv,
                                       quantization=quant, max_model_len=max(contexts))
            except KvplanError:
                continue
            at = {rung.context: rung.concurrency * dp for rung in plan.capacity.ladder}
            if plan.error is None and plan.capacity.fits and all(at[c] >= n for n, c in targets):
                found.append({"gpu": gpu.id, "count": count, "split": (tp, pp, dp), "kv": kv, "quant": quant,
                              "requests": tuple(at[c] for _, c in targets), "memory": gpu.memory_bytes * count})
    return found


def key_of(option) -> tuple:
    return (option.gpu.id, (option.split.tensor, option.split.pipeline, option.split.data),
            option.deployment.kv_cache_dtype, option.deployment.quantization)


def test_cheapest_equals_brute_force_by_price():
    targets = [(40, 16384), (8, 32768)]
    everything = brute_force("Qwen/Qwen2.5-7B", targets, list(PRICES), 4, ["auto", "fp8"], [None, "fp8"])
    sizing = size("Qwen/Qwen2.5-7B", list(TARGETS), gpus=list(PRICES), max_gpus=4, quantization="none,fp8",
                  prices=PRICES)
    cost = {find_gpu(name).id: price for name, price in PRICES.items()}
    cheapest = min(cost[c["gpu"]] * c["count"] for c in everything)
    best = sizing.options[0]
    assert best.cost_per_hour == pytest.approx(cheapest)
    # ties keep the most requests at the largest target context (32K, the second target)
    at_cheapest = [c for c in everything if cost[c["gpu"]] * c["count"] == pytest.approx(cheapest)]
    assert best.requests[1] == max(c["requests"][1] for c in at_cheapest)
    # each GPU: the same smallest count, and at it exactly the same set of candidates that meet the targets
    for gpu in {c["gpu"] for c in everything}:
        smallest = min(c["count"] for c in everything if c["gpu"] == gpu)
        expected = {(c["gpu"], c["split"], c["kv"], c["quant"]) for c in everything
                    if c["gpu"] == gpu and c["count"] == smallest}
        assert {key_of(o) for o in sizing.options if o.gpu.id == gpu} == expected
    assert {o.gpu.id for o in sizing.best_per_gpu} == {c["gpu"] for c in everything}
    # the a10 has no FP8: none of its options uses it, though fp8 was asked for
    assert all(o.deployment.kv_cache_dtype == "auto" and o.deployment.quantization is None
               for o in sizing.options if o.gpu.id == "a10")


def test_cheapest_equals_brute_force_by_gpus_then_memory():
    targets = [(24, 32768)]
    gpus = ["rtx3090", "l40s", "a100-40gb-sxm"]
    everything = brute_force("meta-llama/Llama-3.1-8B", targets, gpus, 3, ["auto", "fp8"], [None])
    sizing = size("meta-llama/Llama-3.1-8B", "24@32K", gpus=gpus, max_gpus=3)
    smallest = min((c["count"], c["memory"]) for c in everything)
    best = sizing.options[0]
    assert (best.count, best.total_memory_bytes) == smallest
    assert best.requests[0] == max(c["requests"][0] for c in everything if (c["count"], c["memory"]) == smallest)


def test_moe_replicas_match_brute_force():
    """vLLM spreads a MoE model's experts over TP x DP ranks: two replicas of Qwen3-30B-A3B hold half its experts
    each, so DP 2 is not twice one replica. The search must plan each split whole, as brute force does."""
    everything = brute_force("Qwen/Qwen3-30B-A3B", [(20, 32768)], ["h100"], 2, ["auto"], [None])
    sizing = size("Qwen/Qwen3-30B-A3B", "20@32K", gpus="h100", max_gpus=2, kv_cache_dtype="auto")
    expected = {(c["gpu"], c["split"], c["kv"], c["quant"]): c["requests"] for c in everything}
    assert {key_of(o): o.requests for o in sizing.options} == expected
    assert ("h100-sxm", (1, 1, 2), "auto", None) in expected


def test_counted_candidates():
    # Qwen2.5-7B 32@8K on one H100 meets at once: 1 GPU x 1 split x (auto, fp8) = 2 candidates, nothing larger
    sizing = size("Qwen/Qwen2.5-7B", "32@8K", gpus="h100", max_gpus=8)
    assert sizing.searched == 2 and sizing.planned == 2
    assert [o.count for o in sizing.options] == [1, 1]


def test_numbers_from_a_given_kv_pool():
    """With --kv-cache-memory-bytes vLLM skips profiling, so the numbers follow by hand. Qwen2.5-7B: 28 layers,
    4 KV heads of 128, bf16: a 16-token block is 16 x 28 x 2 x 4 x 128 x 2 B = 917,504 B at TP 1 (458,752 B at TP 2
    or PP 2, half the heads or half the layers per rank; and at TP 1 in fp8). 8 GiB / 917,504 B = 9,362 blocks =
    149,792 tokens; an 8K request holds 512 blocks, so 9,362 // 512 = 18 at once. Half-size blocks: 18,724 blocks,
    299,584 tokens, 36 at once."""
    sizing = size("Qwen/Qwen2.5-7B", "30@8K", gpus="h100", max_gpus=2, kv_cache_dtype="auto",
                  kv_cache_memory_bytes="8GiB")
    got = {(o.split.tensor, o.split.pipeline, o.split.data): (o.requests, o.kv_tokens) for o in sizing.options}
    # 18 < 30 on one GPU; two replicas of 18 each, or one pool of 36 over TP 2 or PP 2
    assert got == {(1, 1, 2): ((36,), 149_792), (2, 1, 1): ((36,), 299_584), (1, 2, 1): ((36,), 299_584)}
    fp8 = size("Qwen/Qwen2.5-7B", "30@8K", gpus="h100", max_gpus=2, kv_cache_memory_bytes="8GiB")
    assert [(o.count, o.deployment.kv_cache_dtype, o.requests, o.kv_tokens) for o in fp8.options] == [
        (1, "fp8", (36,), 299_584)]


def test_data_parallel_lifts_the_max_num_seqs_cap():
    """vLLM caps a replica at max_num_seqs (1,024 by default on GPUs of 70 GiB or more other than the A100, as
    kvplan's engine settings say). Qwen2.5-0.5B at 1K tokens needs 24 x 2 x 64 x 2 x 2 B = 12,288 B a token, 12.6 MB
    a request: an H100 holds thousands, so 2,000 at once is held back by the cap alone, and two replicas lift it."""
    one = size("Qwen/Qwen2.5-0.5B", "2000@1K", gpus="h100", max_gpus=1, kv_cache_dtype="auto")
    assert not one.found
    assert one.closest[0].requests == (1024,)
    assert one.closest[0].limits == ("max_num_seqs 1,024 per replica: 1,024 of 2,000 at 1,024 tokens",)
    two = size("Qwen/Qwen2.5-0.5B", "2000@1K", gpus="h100", max_gpus=2, kv_cache_dtype="auto")
    assert [(o.split.tensor, o.split.pipeline, o.split.data, o.requests) for o in two.options] == [(1, 1, 2, (2048,))]


def test_tp_refused_where_the_heads_do_not_divide():
    # Qwen2.5-7B has 28 attention heads: TP 3, 5, 6, 7 and 8 do not divide them (vLLM refuses at startup)
    sizing = size("Qwen/Qwen2.5-7B", "2000@32K", gpus="l4", max_gpus=8)
    assert not sizing.found
    assert "Total number of attention heads (28) must be divisible by tensor parallel size (3)." in sizing.refusals
    tried = sizing.closest + sizing.options
    assert tried and all(o.split.tensor in (1, 2, 4) for o in tried)


def test_fp8_only_on_gpus_that_have_it():
    # the A100 has no FP8 (catalogue), the H100 does; the same request on both
    sizing = size("Qwen/Qwen2.5-14B", "8@32K", gpus="a100-80gb,h100", max_gpus=2, quantization="none,fp8")
    formats = {(o.gpu.id, o.deployment.kv_cache_dtype, o.deployment.quantization) for o in sizing.options}
    assert {f[1:] for f in formats if f[0] == "a100-80gb-sxm"} == {("auto", None)}
    assert ("h100-sxm", "fp8", "fp8") in formats


def test_awq_needs_turing_or_newer():
    # vLLM's AWQ kernels need compute capability 7.5: not the V100 (7.0); the T4 (7.5) may
    sizing = size("Qwen/Qwen2.5-7B", "1@4K", gpus="v100-32gb,t4", max_gpus=1, quantization="awq")
    assert [o.gpu.id for o in sizing.options] == ["t4"]
    assert sizing.options[0].weights.checkpoint is not None


def test_a_smaller_format_that_misses_skips_only_the_larger_ones():
    """Qwen2.5-32B on one H100: 64 layers x 8 KV heads x 128 x 2 (K, V) = 131,072 elements a token, 262,144 B in
    bf16 and 131,072 B in fp8; its weights are 61.1 GiB in bf16 (32.0 GiB in fp8), with vLLM's 131,072 x 128 x 2 B
    RoPE table, which leaves about 7.8 GiB of
    KV with bf16 weights and 36.9 GiB with fp8 weights (kvplan's vLLM budget). An 8K request is 512 blocks of 16
    tokens: fp8 KV with bf16 weights holds 63,856 tokens, 7 at once; bf16 KV with fp8 weights 150,976 tokens, 18 at
    once (fp8 for both: 301,952 tokens, 36). So 12@8K is missed by (fp8 KV, bf16 weights), which is not larger than
    (bf16 KV, fp8 weights): that one must still be planned, and meets."""
    sizing = size("Qwen/Qwen2.5-32B", "12@8K", gpus="h100", max_gpus=1, quantization="none,fp8")
    got = {(o.deployment.kv_cache_dtype, o.deployment.quantization): o.requests for o in sizing.options}
    assert got == {("fp8", "fp8"): (36,), ("auto", "fp8"): (18,)}
    assert sizing.pruned == 1  # (bf16 KV, bf16 weights): larger than the (fp8 KV, bf16 weights) that missed


def test_a_quantized_checkpoint_is_searched_as_stored():
    # its config names compressed-tensors: vLLM refuses a --quantization that contradicts it, and awq would be
    # another checkpoint altogether
    sizing = size("RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic", "8@32K", gpus="h100", quantization="none,fp8,awq")
    assert sizing.options and all(o.deployment.quantization is None for o in sizing.options)
    assert "the checkpoint is quantized (compressed-tensors): searched as stored" in sizing.notes


def test_only_priced_gpus_when_none_are_named():
    sizing = size("Qwen/Qwen2.5-7B", "32@8K", prices={"l4": 0.8, "h100": 2.9})
    assert {o.gpu.id for o in sizing.options} == {"l4", "h100-sxm"}


def test_weights_that_do_not_fit_are_named():
    # Llama-3.1-70B is 70.6e9 parameters, 141 GB in bf16 and 70.6 GB in fp8: more than one L4 (22 GiB) holds
    sizing = size("meta-llama/Llama-3.1-70B", "1@8K", gpus="l4", max_gpus=1, quantization="none,fp8")
    assert not sizing.found
    assert sizing.closest[0].limits[0].startswith("weights do not fit")


def test_what_the_deployment_names_is_fixed():
    sizing = size("Qwen/Qwen2.5-7B", "64@8K", gpus="l40s,h100", max_gpus=4, tensor_parallel_size=2,
                  max_num_seqs=48)
    assert sizing.options and all(o.split.tensor == 2 for o in sizing.options + sizing.best_per_gpu)
    # max_num_seqs 48 per replica: 64 at once needs two replicas, so 4 GPUs (TP 2 x DP 2)
    assert all(o.count == 4 and o.split.data == 2 and o.requests == (96,) for o in sizing.options)
    assert all("--max-num-seqs 48" in o.command() for o in sizing.options)


def estimate_back(capsys, gpu: str, command: str, sizing: Sizing, version: str | None = None) -> dict:
    contexts = ",".join(str(t.context) for t in sizing.targets)
    extra = ["--vllm-version", version] if version else []
    code = main(["estimate", "--gpu", gpu, "--context", contexts, "--json", *extra, "--", *shlex.split(command)])
    out = capsys.readouterr().out
    assert code == 0, out
    return json.loads(out)


SEARCHES = [
    (("Qwen/Qwen2.5-7B", list(TARGETS)), {"gpus": list(PRICES), "max_gpus": 4, "quantization": "none,fp8,awq",
                                          "prices": PRICES}),
    (("meta-llama/Llama-3.1-70B", ["32@8K", "4@128K"]), {"gpus": "h100,a100-80gb,l40s", "max_gpus": 8}),
    (("Qwen/Qwen2.5-0.5B", "2000@1K"), {"gpus": "h100,l4", "max_gpus": 2, "gpu_memory_utilization": 0.8}),
    (("Qwen/Qwen2.5-14B", "16@16K"), {"gpus": "l40s,h100", "engine": "sglang", "quantization": "none,fp8"}),
    (("Qwen/Qwen2.5-14B", "16@16K"), {"gpus": "l40s,h100", "engine": "trtllm", "max_num_seqs": 64,
                                         "quantization": "none,fp8,awq"}),
    # a MoE model: vLLM spreads its experts over TP x DP ranks, so a replica's weights depend on DP
    (("Qwen/Qwen3-30B-A3B", "20@32K"), {"gpus": "l40s,h100", "max_gpus": 4, "kv_cache_dtype": "auto"}),
    (("meta-llama/Llama-3.1-8B", "12@32K"), {"gpus": "rtx4090,a10", "max_gpus": 4, "engine_version": "0.11",
                                            "enforce_eager": True}),
]


@pytest.mark.parametrize(("args", "knobs"), SEARCHES)
def test_every_option_gives_the_same_numbers_through_estimate(capsys, args, knobs):
    sizing = size(*args, **knobs)
    shown = sizing.options[:10] + sizing.best_per_gpu
    assert shown
    for option in shown:
        if option.weights.checkpoint and knobs.get("engine", "vllm") == "vllm":
            # another checkpoint loads in the model's place: the line names it and leaves --quantization to it
            # (vLLM refuses --quantization awq on the 16-bit checkpoint: Cannot find the config file for awq)
            assert "--quantization" not in option.command() and "-checkpoint-of-" in option.command()
            continue
        plan = estimate_back(capsys, option.gpu.id, option.command(), sizing, knobs.get("engine_version"))
        assert plan["capacity"]["tokens"] == option.kv_tokens
        assert plan["parallel"] == {"tensor": option.split.tensor, "pipeline": option.split.pipeline,
                                    "data": option.split.data}
        at = {rung["context"]: rung["concurrency"] * option.split.data for rung in plan["capacity"]["ladder"]}
        assert tuple(at[t.context] for t in sizing.targets) == option.requests
        assert plan["engine"]["name"] == knobs.get("engine", "vllm")


def test_tensor_parallel_stays_within_a_node_at_16_gpus():
    space = Space((find_gpu("h100"),), (), (), max_gpus=16, gpus_per_node=8)
    splits = space.splits(16, Deployment.from_mapping({"model": "Qwen/Qwen2.5-0.5B"}))
    # 16 GPUs, TP at most 8 (one node): TP 1 x PP 1, 2, 4, 8, 16; TP 2 x PP 1, 2, 4, 8; TP 4 x PP 1, 2, 4; TP 8 x
    # PP 1, 2; the rest data-parallel replicas. 5 + 4 + 3 + 2 = 14 splits; TP 16 across two nodes is not one.
    assert sorted((s.tensor, s.pipeline, s.data) for s in splits) == [
        (1, 1, 16), (1, 2, 8), (1, 4, 4), (1, 8, 2), (1, 16, 1), (2, 1, 8), (2, 2, 4), (2, 4, 2), (2, 8, 1),
        (4, 1, 4), (4, 2, 2), (4, 4, 1), (8, 1, 2), (8, 2, 1)]
