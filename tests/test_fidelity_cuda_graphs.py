"""vLLM's CUDA-graph estimate (v0.20+): how many batch sizes it captures, and a first capture plus a part per further
size."""

from __future__ import annotations

import pytest

from kvplan.calibration import engines as calibration
from kvplan.engines.vllm.budget import cuda_graph_sizes

MiB = 2**20
BY_ID = {entry["id"]: entry for entry in calibration.entries()}


@pytest.mark.parametrize("seqs, batched, spec, sizes", [
    # vLLM's default list (config/vllm.py _set_cudagraph_sizes): 1, 2, 4, then every 8 below 256, every 16 from 256,
    # up to min(max_num_seqs x (1 + speculative tokens) x 2, 512, max_num_batched_tokens), all captured PIECEWISE;
    # FULL captures the uniform-decode ones, up to max_num_seqs x (1 + speculative tokens)
    (1024, 8192, 0, (51, 51)),  # up to 512: 3 + 31 (8..248) + 17 (256..512): the v0.19 H100 logs' "PIECEWISE=51,
    # FULL=51"
    (8, 8192, 0, (5, 4)),  # up to 16: 1, 2, 4, 8, 16; FULL up to 8
    (2, 8192, 0, (3, 2)),  # up to 4: 1, 2, 4; FULL 1, 2 (engine-calibration Y06: max_num_seqs 2, no drafter)
    (1024, 256, 0, (35, 35)),  # capped by 256 batched tokens: 3 + 31 + 1
    (256, 2048, 0, (51, 35)),  # vLLM's default below 70 GiB: PIECEWISE up to 512, FULL up to 256 (3 + 31 + 1)
    # MTP 3 (Y02, Y03): up to 2 x 4 x 2 = 16, each size rounded up to a multiple of 4: {4, 8, 16}; FULL up to 8
    (2, 8192, 3, (3, 2)),
    # vLLM issue #32324: max_num_seqs 40 and 3 speculative tokens give a largest size of 320: 3 + 31 + 5 sizes, and
    # rounding to multiples of 4 folds 1, 2 and 4 into one; FULL up to 160: 4 and 8..160 (20)
    (40, 8192, 3, (37, 21)),
    # 2 draft tokens: each size rounded up to a multiple of 3, and 512's 513 dropped as past the largest
    # (adjust_cudagraph_sizes_for_spec_decode): 1, 2, 4 -> 3, 3, 6; 8..248 -> 31 sizes; 256..496 -> 16: 49
    (1024, 8192, 2, (49, 49)),
    # nothing left under the largest (1 batched token, 7 draft tokens): vLLM keeps the query length alone
    (1, 1, 7, (1, 1)),
])
def test_capture_sizes_follow_vllms_default_list(seqs, batched, spec, sizes):
    assert cuda_graph_sizes(seqs, batched, spec) == sizes


def test_the_estimate_is_one_first_capture_plus_a_part_per_further_size_and_mode():
    # Y02 (vLLM 0.24 inferred, 2 x RTX 3090, max_num_seqs 2, MTP 3): 3 PIECEWISE sizes and 2 FULL ones, 64 decoder
    # layers on the rank: 256 MiB + (2 + 1) x 64 x 0.1875 MiB = 256 MiB + 36 MiB = 306,184,192 B.
    memory = calibration.vllm_plan(BY_ID["Y02"]).memory
    assert memory.cuda_graph_bytes == 306_184_192


def test_the_default_sizes_give_the_v0_19_logs_figure():
    # The v0.19 H100 logs (engines/vllm/data/calibration.yaml L09: Llama-3.1-8B, 32 layers, 51 + 51 sizes) print
    # "PIECEWISE ... 138.00 MiB first-capture + (51-1) x 6.00 MiB", "FULL ... 260.00 MiB first-capture +
    # (51-1) x 6.00 MiB" and "0.84 GiB total" = 260 + 50 x 6 + 50 x 6 MiB. kvplan's medians give
    # 256 MiB + 100 x 32 x 0.1875 MiB = 856 MiB = 0.84 GiB.
    from kvplan.engines.vllm.budget import cuda_graph_bytes
    assert cuda_graph_bytes(32, (51, 51)) == 856 * MiB
    # no FULL size (a FULL-less count) adds nothing for that mode
    assert cuda_graph_bytes(32, (51, 0)) == (256 + 50 * 6) * MiB


def test_the_graph_estimate_starts_in_v0_20():
    # vLLM 0.20.0 envs.py: VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS defaults to "1" (0.19.0 envs.py: "0"; the log's
    # "default since v0.21.0" is wrong, issue 18 section 2.1): Y04's v0.20.1 deployment has the estimate taken out of
    # its budget, the same deployment at v0.19.1 none. Y04's excerpt prints no memory line that would say otherwise.
    assert calibration.vllm_plan(BY_ID["Y04"]).memory.cuda_graph_bytes > 0
    assert calibration.vllm_plan({**BY_ID["Y04"], "version": "v0.19.1"}).memory.cuda_graph_bytes == 0


def test_the_two_figures_are_the_medians_of_the_logged_parts():
    # engines/vllm/data/calibration.yaml graph_parts_mib: each log's "Estimated <MODE> CUDA graph memory: F MiB first-capture
    # + (n-1) x P MiB per-graph"; over the logs with 51 sizes in both modes, the median of the larger first capture
    # and of the per-graph figure per decoder layer and mode are kvplan's two constants
    from statistics import median

    from kvplan.calibration import vllm as vllm_calibration
    from kvplan.engines.vllm.budget import CUDA_GRAPH_FIRST_CAPTURE, CUDA_GRAPH_PER_GRAPH_PER_LAYER
    from kvplan.models.sources import resolve

    firsts, per_layer = [], []
    for entry in vllm_calibration.entries():
        parts = entry.get("graph_parts_mib") or {}
        piecewise, full = parts.get("piecewise"), parts.get("full")
        if not (piecewise and full and piecewise[1] == full[1] == 51):
            continue
        layers = resolve(entry["model"]).num_layers // entry.get("pp", 1)
        firsts.append(max(piecewise[0], full[0]))
        per_layer.append((piecewise[2] + full[2]) / 2 / layers)
    assert len(firsts) == 21
    assert median(firsts) * MiB == CUDA_GRAPH_FIRST_CAPTURE and median(per_layer) * MiB == CUDA_GRAPH_PER_GRAPH_PER_LAYER


def test_each_logged_total_is_the_larger_first_capture_plus_every_further_graph():
    # vLLM's own sum, checked on every log that prints both modes: max(first) + (n-1) x per-graph for each mode,
    # within the two-decimal print of the total (L09: 260 + 50 x 6 + 50 x 6 = 860 MiB = 0.84 GiB)
    from kvplan.calibration import vllm as vllm_calibration

    checked = 0
    for entry in vllm_calibration.entries():
        parts = entry.get("graph_parts_mib") or {}
        piecewise, full = parts.get("piecewise"), parts.get("full")
        if piecewise and full:
            total = max(piecewise[0], full[0]) + (piecewise[1] - 1) * piecewise[2] + (full[1] - 1) * full[2]
            assert abs(total / 1024 - entry["cuda_graphs_gib"]) <= 0.006, entry["id"]
            checked += 1
    assert checked == 22


def test_gpt_oss_captures_up_to_1024():
    # GptOssForCausalLMConfig raises the largest capture size to 1024: 3 + 31 + 49 = 83 sizes (L17 logs
    # "PIECEWISE=83 (largest=1024)"), FULL as many with 1,024 sequences; the 8,192-token budget still bounds it
    assert cuda_graph_sizes(1024, 8192, 0, "GptOssForCausalLM") == (83, 83)
    assert cuda_graph_sizes(1024, 512, 0, "GptOssForCausalLM") == (51, 51)
    assert cuda_graph_sizes(1024, 8192, 0, "LlamaForCausalLM") == (51, 51)


def test_the_estimate_against_every_logged_one():
    # the line docs/calibration.md carries: kvplan's estimate for each log's deployment against the total it prints
    from pathlib import Path

    from kvplan.calibration import vllm as vllm_calibration

    line = vllm_calibration.cuda_graph_line()
    root = Path(__file__).parent.parent
    assert line in (root / "docs" / "calibration.md").read_text()
    readme = " ".join((root / "README.md").read_text().split())
    assert line.split(": ", 1)[1].removesuffix(".") in readme  # "0.17 GiB off on average, 0.85 GiB at most"
    # the largest gap, by hand: L12 (Llama-3.1-8B at TP 2, 32 layers, 51 + 51 sizes) is 256 + 100 x 32 x 0.1875 =
    # 856 MiB = 0.836 GiB against the 1.69 GiB it prints
    entry = next(e for e in vllm_calibration.entries() if e["id"] == "L12")
    assert vllm_calibration.cuda_graph_estimate(entry) == 856 * MiB
    assert line.endswith(f"{1.69 - 856 / 1024:.2f} GiB at most.")


def test_piecewise_only_where_vllm_captures_no_full_graphs():
    from kvplan.api import estimate
    from kvplan.calibration import vllm as vllm_calibration

    # Llama-4-Scout's chunked local attention: "FULL_AND_PIECEWISE is not supported with
    # ChunkedLocalAttention_8192_FlashAttentionBackend ... setting cudagraph_mode=PIECEWISE" (L14 logs PIECEWISE=51
    # only): 256 MiB + 50 x 48 layers x 0.1875 MiB = 706 MiB
    scout = next(e for e in vllm_calibration.entries() if e["id"] == "L14")
    assert vllm_calibration.cuda_graph_estimate(scout) == 706 * MiB
    # -O1 is PIECEWISE (config/vllm.py OPTIMIZATION_LEVEL_01): Qwen2.5-7B on an H100, 256 + 50 x 28 x 0.1875 MiB =
    # 518.5 MiB, against -O2's 256 + 100 x 28 x 0.1875 = 781 MiB
    o1 = estimate("Qwen/Qwen2.5-7B", gpu="h100", max_model_len=8192, optimization_level=1)
    o2 = estimate("Qwen/Qwen2.5-7B", gpu="h100", max_model_len=8192, optimization_level=2)
    assert (o1.memory.cuda_graph_bytes, o2.memory.cuda_graph_bytes) == (1037 * MiB // 2, 781 * MiB)
