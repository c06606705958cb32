"""Which top-k / top-p sampler vLLM's profiling run warms up in v0.8-v0.16, and what it holds at its peak.

profile_run (v1/worker/gpu_model_runner.py) ends with _dummy_sampler_run: compute_logits gives the dummy batch's
min(max_num_seqs, max_num_batched_tokens) rows x vocab in the model dtype (half a float32 copy, held by the
caller), Sampler.forward casts them to float32 (one copy), and the dummy metadata asks for top-k (vocab - 1) and
top-p (0.9), so TopKTopPSampler runs one of two paths (v1/sample/ops/topk_topp_sampler.py):

- FlashInfer's, where flashinfer imports and VLLM_USE_FLASHINFER_SAMPLER is not 0: 0.8.5-0.11.0 take it by
  default ("In V1, None means True"); from 0.12.0 it is opt-in ("Users must opt in explicitly via
  VLLM_USE_FLASHINFER_SAMPLER=1"). flashinfer_sample calls top_k_top_p_sampling_from_logits, which holds the
  masked logits (top_k_mask_logits: empty_like, one copy) and their softmax (one copy) beside the two above
  (flashinfer 0.3.1, the one vLLM 0.11.0 pins, sampling.py): 3.5 float32 copies.
- PyTorch's sort (apply_top_k_top_p): the sorted logits, their int64 indices and the sort's own buffers, 9.52
  copies as the v0.11 and v0.15-v0.16 H100 logs measure it (data/calibration.yaml B01-B06, V15-V16; the era's
  logits_copies).

From v0.17 the Triton top-k / top-p kernel replaces the sort for 8 rows or more (the era "V1, v0.17"'s 3.79 copies).
"""

from __future__ import annotations

from kvplan.deployment import Deployment
from kvplan.engines.vllm.releases import Era

FLASHINFER_DEFAULT_UNTIL = (0, 12)  # 0.11.0 on by default, 0.12.0 opt-in (topk_topp_sampler.py)
FLASHINFER_COPIES = 3.5  # bfloat16 logits 0.5 + float32 logits 1 + masked logits 1 + probabilities 1
SORT_UNTIL = (0, 17)


def flashinfer_sampler(dep: Deployment, release: tuple[int, int]) -> bool:
    """Whether the profiling run's sampler is FlashInfer's (VLLM_USE_FLASHINFER_SAMPLER, else the release's default,
    taking FlashInfer as installed, as vLLM's images ship it)."""
    return dep.flashinfer_sampler if dep.flashinfer_sampler is not None else release < FLASHINFER_DEFAULT_UNTIL


def logits_copies(era: Era, dep: Deployment, release: tuple[int, int]) -> float:
    """The sampler's peak in float32 copies of the dummy batch's logits."""
    if era.v0 or release >= SORT_UNTIL or not flashinfer_sampler(dep, release):
        return era.logits_copies
    return FLASHINFER_COPIES
