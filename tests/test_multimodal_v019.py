"""vLLM 0.19's encoder profiling holds the dummy multimodal inputs through the decoder's run, as 0.23 and 0.33 do
(issue 20 item 4, issue 18), checked against the three v0.19 Gemma 3 logs (data/calibration.yaml C17, L06, L07); and
the encoder outputs' padding in 0.11 and 0.12 (multimodal.held_rows).

Read in the 0.19.0 wheel: v1/worker/gpu_model_runner.py profile_run binds batched_dummy_mm_inputs (from
_get_mm_dummy_batch, group_and_batch_mm_kwargs(..., device=self.device)) and the encoder outputs (also put in
encoder_cache) as locals, runs _dummy_run and _dummy_sampler_run, and only then clears encoder_cache; the inputs are
freed when profile_run returns. multimodal/processing/context.py _postprocess_output casts floating tensors to the
model dtype. The same code stands in 0.20.0, 0.22.0 and 0.33.0 (and in every V1 release from 0.8.5)."""

from __future__ import annotations

import pytest

from kvplan.calibration import vllm as calibration
from kvplan.deployment import Deployment
from kvplan.engines import plan_deployment
from kvplan.engines.vllm.multimodal import Item, held_rows
from kvplan.hardware import find_gpu
from kvplan.models.sources import resolve
from kvplan.plan import GpuChoice
from kvplan.units import GiB, MiB

ENTRIES = {entry["id"]: entry for entry in calibration.entries()}
VOCAB = 262_208  # Gemma 3's text vocab_size
ROWS, TOKENS = 1_024, 8_192  # the logs' max_num_seqs and max_num_batched_tokens ("Defaulting ... for OPENAI_API_SERVER")
H100_SMS = 132


def _held(hidden: int) -> int:
    # 32 images of 256 soft tokens (gemma3_mm.py, no pan-and-scan): their embeddings (hidden wide) and their
    # 3 x 896 x 896 pixel_values, all bfloat16
    return 32 * (256 * hidden * 2 + 3 * 896 * 896 * 2)


def test_c17_budget_items_and_held_bytes():
    # C17's log: "Encoder cache will be initialized with a budget of 8192 tokens, and profiled with 32 image items
    # of the maximum feature size"; held by hand: 32 x (256 x 5,376 x 2 + 3 x 896^2 x 2) = 242,221,056 B
    plan = calibration.plan_for(ENTRIES["C17"])
    assert plan.engine.encoder_cache_tokens == 8192
    assert any("profiled with 32 image item(s) of 256 tokens" in note for note in plan.notes)
    assert plan.memory.encoder_bytes == _held(5376) == 242_221_056


@pytest.mark.parametrize(("entry", "hidden", "logged_peak"), [
    # "Actual usage is ... GiB for peak activation" in llm-d-planner accuracy/results/v0.19.0/logs (d3121e0):
    # google-gemma-3-27b-it 3.99, -12b-it 3.94, -4b-it 3.89 (h100-80gb--tp1pp1dp1--8192)
    ("C17", 5376, 3.99), ("L06", 3840, 3.94), ("L07", 2560, 3.89),
])
def test_held_inputs_close_the_v019_gemma3_peaks(entry, hidden, logged_peak):
    # The rest of the 0.19.0 peak, derived by hand from the same wheel (the sampler's phase is the larger):
    # _dummy_sampler_run's bfloat16 logits (0.5 float32 copies of 1,024 x vocab), Sampler.forward's float32 copy
    # (1), forward_native's softmax probabilities (1) and random_sample's q (1); apply_top_k_top_p_triton's cached
    # buffer of min(SMs, rows) = 132 rows x vocab float32; profile_run's hidden_states (8,192 x hidden) with the
    # sampler's last_hidden_states and rand_like (1,024 x hidden each), bfloat16; and PyTorch's cuBLAS workspace
    # through the caching allocator, 4,096 x 8 KiB = 32 MiB on sm90 (CublasHandlePool.cpp parseChosenWorkspaceSize).
    # The same terms give the ten v0.19 text-model H100 logs to within 0.007 GiB (Llama-3.1-8B 1.885 vs 1.89).
    text = int(3.5 * ROWS * VOCAB * 4) + H100_SMS * VOCAB * 4 + (TOKENS + 2 * ROWS) * hidden * 2 + 32 * MiB
    held = calibration.plan_for(ENTRIES[entry]).memory.encoder_bytes
    assert held == _held(hidden)
    assert abs((text + held) / GiB - logged_peak) < 0.01
    # without the pixel values the peak would fall 0.14 GiB under the log
    assert (text + held - 32 * 3 * 896 * 896 * 2) / GiB < logged_peak - 0.13


def _gemma3_27b(version: str):
    gpu = find_gpu("h100")
    dep = Deployment(engine="vllm", engine_version=version, gpu=gpu.id, max_model_len=8192)
    choice = GpuChoice(gpu.id, gpu.name, gpu.memory_bytes, 1, gpu.compute_capability, gpu.fp8)
    return plan_deployment(resolve("google/gemma-3-27b-it"), dep, choice)


@pytest.mark.parametrize(("version", "held"), [
    # 0.11.0-0.11.2 profile_run: each 256-row output is under the 8,192-token budget, so it is copied into a zeroed
    # 8,192 x 5,376 tensor: 32 x (8,192 x 5,376 x 2 + 3 x 896^2 x 2) = 2,972,712,960 B
    ("0.11.0", 32 * (8192 * 5376 * 2 + 3 * 896 * 896 * 2)),
    ("0.11.2", 2_972_712_960),
    # 0.12.0 pads to the image's 256 tokens, which the output already has; 0.13.0 keeps the outputs as returned
    ("0.12.0", 242_221_056),
    ("0.13.0", 242_221_056),
])
def test_encoder_outputs_padded_by_release(version, held):
    plan = _gemma3_27b(version)
    assert plan.engine.encoder_cache_tokens == 8192
    assert plan.memory.encoder_bytes == held


def test_held_rows_by_release():
    # an item of 2,496 prompt tokens whose encoder returns 2,048 embeddings, in an 8,192-token budget: 0.11 caches
    # 8,192 rows, 0.12 the item's 2,496, 0.10 and 0.13 the 2,048 returned
    item = Item(tokens=2496, embeds=2048)
    assert [held_rows(item, 8192, release) for release in ((0, 10), (0, 11), (0, 12), (0, 13), None)] == [
        2048, 8192, 2496, 2048, 2048]
    # an output longer than the budget is kept whole
    assert held_rows(Item(tokens=9000, embeds=9000), 9000, (0, 11)) == 9000
