"""Which top-k / top-p sampler vLLM's profiling run warms up, release by release, and what it holds at its peak.

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

From v0.17 the Triton top-k / top-p kernel replaces the sort for 8 rows or more, and for every row count from 0.30
(apply_top_k_top_p): 3.5 copies and the kernel's cached buffer (NATIVE_COPIES, TritonBuffer). From 0.17 V1's whole
profiled peak is read in the source (DERIVED_FROM): the dummy run's hidden states held beside the sampler and PyTorch's
cuBLAS workspace take the place of the era's fitted fixed bytes. From 0.21 FlashInfer is the default again and the
profiling run samples twice (V1_TWO_PASS_FROM); PyTorch's sort holds more below 128 rows (SORT_FULL_BELOW_ROWS).

Model Runner V2 (v1/worker/gpu/, the runner of runner.py) has a sampler of its own: its ProfileSampler is V2_SAMPLERS,
and its profiled peak is read in the source as V1's from 0.17 (held hidden states, one sampled copy, the cuBLAS
workspace) from 0.22 on; 0.33's warm-up pass off FlashInfer holds the Triton buffer as V1's does.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from kvplan.deployment import Deployment
from kvplan.errors import KvplanError
from kvplan.units import MiB

if TYPE_CHECKING:  # releases.py lists this module's release boundaries
    from kvplan.engines.vllm.releases import Era

FLASHINFER_DEFAULT_UNTIL = (0, 12)  # 0.11.0 on by default, 0.12.0 opt-in (topk_topp_sampler.py)
FLASHINFER_COPIES = 3.5  # bfloat16 logits 0.5 + float32 logits 1 + masked logits 1 + probabilities 1
SORT_UNTIL = (0, 17)
# vLLM 0.21.0 envs.py: VLLM_USE_FLASHINFER_SAMPLER defaults to True (0.20.2: None, opt-in), and
# v1/worker/gpu_model_runner.py _dummy_sampler_run samples the dummy batch twice: as given (generators {}: FlashInfer's
# forward_cuda where TopKTopPSampler took it), then with a seeded generator for request 0 ("Also warm
# forward_native"), which forward_cuda hands to forward_native. Both passes see the same caller-held logits and
# their own float32 copy; the first pass's FlashInfer temporaries are freed before the second, its top_k_mask_logits
# row states (_get_cache_buf, 1 MiB, flashinfer 0.6.4-0.7.2 sampling.py) are cached and stay. The peak is the
# larger pass plus those row states. 0.33.0 still has both passes.
V1_TWO_PASS_FROM = (0, 21)
# TopKTopPSampler.__init__ (0.17.0-0.33.0): FlashInfer only where current_platform.is_cuda() (ROCm goes native) and
# FlashInferBackend.supports_compute_capability (v1/attention/backends/flashinfer.py): 7.5-12.1 in 0.21.0-0.23.0,
# 8.0-12.1 from 0.24.0 (flashinfer issue 3620); elsewhere the default quietly falls back to forward_native, while an
# explicit VLLM_USE_FLASHINFER_SAMPLER=1 on an unsupported GPU stops the start-up (RuntimeError; flashinfer_in).
V1_FLASHINFER_CAPABILITY = (((0, 0), ((7, 5), (12, 1))), ((0, 24), ((8, 0), (12, 1))))
FLASHINFER_ROW_STATES = MiB
# apply_top_k_top_p (0.17.0-0.29.0): the Triton kernel for 8 rows or more, apply_top_k_top_p_pytorch's sort below;
# 0.30.0 takes Triton for every row count where Triton is installed. forward_native (v1/sample/ops/
# topk_topp_sampler.py, 0.17.0-0.33.0) masks the float32 logits in place (apply_top_k_top_p_triton), takes their
# softmax (probabilities, 1) and random_sample's q = empty_like(probs) (1; float64 only with use_fp64_gumbel, off by
# default): beside the caller's bfloat16 logits (0.5) and their float32 copy (1), 3.5 copies; and the Triton buffer.
# The dummy batch asks for top-k, so the 0.30+ split top-p pipeline (top-p alone, 64 rows or fewer) is not taken.
TRITON_MIN_ROWS = 8
TRITON_ALL_ROWS_FROM = (0, 30)
NATIVE_COPIES = 3.5
# profile_run (v1/worker/gpu_model_runner.py, 0.17.0-0.33.0) keeps the dummy run's hidden states (max_num_batched_tokens
# rows) and the sampled rows it returns (hidden_states[logit_indices]) through _dummy_sampler_run, which samples from
# torch.rand_like of those rows (one more copy): max_num_batched_tokens + 2 x rows rows x hidden, 16-bit.
DERIVED_FROM = SORT_UNTIL
HELD_SAMPLED_COPIES = 2
# PyTorch's cuBLAS workspace, allocated through its caching allocator by the first cuBLAS call of the dummy forward
# and kept (aten/src/ATen/cuda/CublasHandlePool.cpp getCurrentCUDABlasHandle -> setWorkspaceForHandle ->
# getNewWorkspace, parseChosenWorkspaceSize, pytorch/pytorch as stored, commit 26a39059): without
# CUBLAS_WORKSPACE_CONFIG, 4,096 KiB x 8 = 32 MiB on the compute capabilities of the torch release's rule (Cublas32Mib),
# :4096:2:16:8 = 8 MiB + 128 KiB on other CUDA GPUs; on ROCm 32 MiB, 128 MiB on gfx94x and gfx95x (MI300X, MI325X,
# MI355X). The cuBLASLt workspace (1 MiB, bias matmuls) is not counted.
CUBLAS_HOPPER_WORKSPACE = 4096 * 8 * 1024
CUBLAS_WORKSPACE = 4096 * 1024 * 2 + 16 * 1024 * 8
HIPBLAS_WORKSPACE = 32 * MiB
HIPBLAS_GFX94_95_WORKSPACE = 128 * MiB


@dataclass(frozen=True)
class Cublas32Mib:
    """The CUDA devices a torch release gives the 32 MiB cuBLAS workspace: 9.0 alone (majors None), or every
    compute capability of these majors."""

    majors: tuple[int, ...] | None = None

    def takes(self, capability: str) -> bool:
        if self.majors is None:
            return capability == "9.0"
        major = capability.partition(".")[0]
        return major.isdigit() and int(major) in self.majors


# (first vLLM release, rule) by the torch each release pins (the vLLM wheels' METADATA: 0.17.0-0.19.0 torch 2.10.0,
# 0.20.0-0.26.0 2.11.0, 0.27.0-0.32.0 2.13.0, 0.33.0 2.14.0), read in those torch wheels' libtorch_cuda.so, whose
# at::cuda::parseChosenWorkspaceSize compares cudaDeviceProp's major and minor: 2.10.0 and 2.11.0 (major, minor) ==
# (9, 0); 2.13.0 major 9, 10 or 12 (pytorch PR 175344, "32MiB for Hopper and Blackwell", merged after 2.11's branch
# cut); 2.14.0 major 9 to 12 (PR 189312 adds 11).
CUBLAS_32MIB = (((0, 0), Cublas32Mib()), ((0, 27), Cublas32Mib((9, 10, 12))), ((0, 33), Cublas32Mib((9, 10, 11, 12))))


def cublas_workspace_bytes(capability: str | None, release: tuple[int, int]) -> int:
    """PyTorch's default cuBLAS (hipBLAS) workspace for a device under the release's torch (unknown devices: CUDA's
    8 MiB + 128 KiB default)."""
    arch = capability or ""
    if arch.startswith("gfx"):
        return HIPBLAS_GFX94_95_WORKSPACE if arch.startswith(("gfx94", "gfx95")) else HIPBLAS_WORKSPACE
    rule = next(rule for first, rule in reversed(CUBLAS_32MIB) if release >= first)
    return CUBLAS_HOPPER_WORKSPACE if rule.takes(arch) else CUBLAS_WORKSPACE


@dataclass(frozen=True)
class TritonBuffer:
    """apply_top_k_top_p_triton's per-program buffer (v1/sample/ops/topk_topp_triton.py, 0.17.0-0.33.0): NUM_PROGRAMS
    = min(SMs, rows) (num_compute_units: multi_processor_count) and a buffer of min(next_power_of_2(NUM_PROGRAMS), SMs)
    rows x vocab float32, kept in _TRITON_BUFFER_CACHE, so it stays through the softmax and random_sample that follow.
    None where the sort runs (below from_rows rows)."""

    sms: int | None  # None: unknown, taken at its largest, next_power_of_2(rows) (SMs at least that many)
    from_rows: int = TRITON_MIN_ROWS

    def rows(self, rows: int) -> int:
        if rows < max(self.from_rows, 1):
            return 0
        programs = rows if self.sms is None else min(self.sms, rows)
        size = 1 << (programs - 1).bit_length()  # vllm/utils/math_utils.py next_power_of_2
        return size if self.sms is None else min(size, self.sms)
# PyTorch's CUDA sort of rows x vocab float32 logits (aten/src/ATen/native/cuda/Sort.cpp sort_cuda_kernel: a vocab
# over 4,096 takes launch_stable_sort_kernel, SortStable.cu), beside the bfloat16 logits (0.5), their float32 copy
# (1) and the sort's outputs (values 1, int64 indices 2), in float32 copies of rows x vocab:
# - one row (segmented_sort_large_segments): an int64 index row (2) and cub DeviceRadixSort::SortPairs' temporary
#   storage, whose third key and value buffers (cub dispatch_radix_sort.cuh: num_items x key and value size when
#   the output may not overwrite the input) hold 1 + 2: 5 copies of scratch, 9.5 in all;
# - 128 rows or more (segmented_sort_pairs): int64 reverse indices (2) and DeviceSegmentedRadixSort's third buffers
#   (1 + 2): 5 again, 9.5 in all, what the v0.8-v0.16 logs measure at 256 and 1,024 rows (9.52);
# - 2 to 127 rows (segmented_sort_pairs_by_full_sort): two int2 (8-byte) index-and-segment arrays (2 + 2), the
#   radix sort's own keys output (1) and its third buffers (1 + 2): 8 copies of scratch, 3 more; the segment-id
#   radix_sort_keys that follows holds less (one radix pass over at most 7 bits: no third buffer).
# Read in the stored pytorch/pytorch SortStable.cu (the torch 2.9 tag that vLLM 0.12-0.16 pin is not stored; the
# three branches and their buffers are the same in a stored 2025 backport, Lanurence666/pytorch_backport_py38).
SORT_COPIES = 9.5
SORT_FULL_BELOW_ROWS = 128
SORT_FULL_EXTRA = 3.0


def flashinfer_sampler(dep: Deployment, release: tuple[int, int]) -> bool:
    """Whether the profiling run's sampler is FlashInfer's (VLLM_USE_FLASHINFER_SAMPLER, else the release's default,
    taking FlashInfer as installed, as vLLM's images ship it)."""
    if dep.flashinfer_sampler is not None:
        return dep.flashinfer_sampler
    return release < FLASHINFER_DEFAULT_UNTIL or release >= V1_TWO_PASS_FROM


def cuda_capability_in(capability: str | None, bounds: tuple[tuple[int, int], tuple[int, int]]) -> bool:
    """A CUDA compute capability within bounds (unknown GPUs are taken as CUDA ones inside; ROCm's gfx... are out)."""
    if not capability:
        return True
    major, _, minor = capability.partition(".")
    if not (major.isdigit() and minor.isdigit()):
        return False
    low, high = bounds
    return low <= (int(major), int(minor)) <= high


def flashinfer_in(dep: Deployment, capability: str | None,
                  bounds: tuple[tuple[int, int], tuple[int, int]]) -> bool:
    """FlashInfer's sampler on this GPU; outside its bounds vLLM falls back, unless VLLM_USE_FLASHINFER_SAMPLER was
    set on a CUDA GPU: then flashinfer_sampler_supported (0.24.0-0.33.0; TopKTopPSampler.__init__ in 0.17.0-0.23.0)
    raises a RuntimeError at start-up."""
    if cuda_capability_in(capability, bounds):
        return True
    if dep.flashinfer_sampler and capability and capability.partition(".")[0].isdigit():
        low, high = (".".join(map(str, bound)) for bound in bounds)
        raise KvplanError(f"vLLM stops at start-up: FlashInfer's sampler takes compute capability {low}-{high}, "
                          f"not {capability}; unset it", dep.where("flashinfer_sampler"))
    return False


def sort_sampler(segmented: float) -> ProfileSampler:
    """The sort path's peak: segmented at one row and at 128 rows or more, 3 copies more between them."""
    return ProfileSampler(segmented, fewer_rows=((2, segmented), (SORT_FULL_BELOW_ROWS, segmented + SORT_FULL_EXTRA)))


def v1_native(era: Era, release: tuple[int, int], sms: int | None = None) -> ProfileSampler:
    """forward_native's peak: the sort before 0.17 (the era's calibrated figure above 127 rows), from 0.17 Triton's
    3.5 copies and its buffer, with the sort below 8 rows until 0.30."""
    if release < SORT_UNTIL:
        return sort_sampler(era.logits_copies)
    if release >= TRITON_ALL_ROWS_FROM:
        return ProfileSampler(NATIVE_COPIES, triton=TritonBuffer(sms, 0))
    return ProfileSampler(NATIVE_COPIES, triton=TritonBuffer(sms),
                          fewer_rows=((2, SORT_COPIES), (TRITON_MIN_ROWS, SORT_COPIES + SORT_FULL_EXTRA)))


def v1_sampler(era: Era, dep: Deployment, release: tuple[int, int], capability: str | None,
               sms: int | None = None) -> ProfileSampler:
    """V1's dummy sampler pass; from 0.17 with the hidden states held beside it and the cuBLAS workspace."""
    if era.v0:
        return ProfileSampler(era.logits_copies)
    sampler = v1_pass(era, dep, release, capability, sms)
    if release < DERIVED_FROM:
        return sampler
    return replace(sampler, holds_hidden=True, counts_received=True,
                   fixed_bytes=cublas_workspace_bytes(capability, release))


def v1_pass(era: Era, dep: Deployment, release: tuple[int, int], capability: str | None,
            sms: int | None) -> ProfileSampler:
    """FlashInfer's single pass, forward_native's, or from 0.21 the larger of the two passes."""
    native = v1_native(era, release, sms)
    if not flashinfer_sampler(dep, release):
        return native
    if release < SORT_UNTIL:
        return ProfileSampler(FLASHINFER_COPIES)
    bounds = next(bounds for first, bounds in reversed(V1_FLASHINFER_CAPABILITY) if release >= first)
    if not flashinfer_in(dep, capability, bounds):
        return native
    if release < V1_TWO_PASS_FROM:
        return ProfileSampler(FLASHINFER_COPIES, cached_bytes=FLASHINFER_ROW_STATES)
    return native.at_least(FLASHINFER_COPIES, FLASHINFER_ROW_STATES)


GUMBEL_BLOCK = 1024  # v1/worker/gpu/sample/gumbel.py gumbel_sample: BLOCK_SIZE, one partial maximum per block


@dataclass(frozen=True)
class ProfileSampler:
    """What the profiling run's dummy sampler holds at its peak: float32 copies of the batch's rows x vocab, the
    small buffers beside them, and (Model Runner V2) the vocab-wide buffers kept for max_num_seqs requests."""

    copies: float
    gumbel: bool = False  # gumbel_sample's rows x ceil(vocab / 1024) int64 arg-maxima and float32 maxima
    cached_bytes: int = 0  # FlashInfer's top_k_mask_logits row states (1 MiB, flashinfer 0.7.2 sampling.py)
    held: bool = False  # V2's penalty and grammar buffers, counted in the non-KV memory (0.27+)
    fewer_rows: tuple[tuple[int, float], ...] = ()  # (below this many rows, copies): the first that holds wins
    triton: TritonBuffer | None = None  # the Triton top-k / top-p kernel's cached buffer (V1 from 0.17, V2 0.33)
    holds_hidden: bool = False  # the dummy run's hidden states and sampled rows beside the peak (V1 0.17+, V2)
    sampled_copies: int = HELD_SAMPLED_COPIES  # copies of the sampled rows held (V1 2, V2 V2_HELD_SAMPLED_COPIES)
    counts_received: bool = False  # a later pipeline stage's received buffers count (V1 0.17+, V2 0.27+)
    fixed_bytes: int | None = None  # beside every peak, read in the source (the cuBLAS workspace); None: the era's

    def copies_at(self, rows: int) -> float:
        return next((copies for below, copies in self.fewer_rows if rows < below), self.copies)

    def hidden_bytes(self, rows: int, batched_tokens: int, hidden_size: int) -> int:
        """The dummy run's hidden states and sampled rows held through the sampler (none without a sampler run)."""
        if not (self.holds_hidden and rows):
            return 0
        return (batched_tokens + self.sampled_copies * rows) * hidden_size * 2

    def at_least(self, copies: float, cached_bytes: int) -> ProfileSampler:
        """The larger of this pass and another of `copies` at every row count, with the other's cached buffers."""
        return replace(self, copies=max(self.copies, copies), cached_bytes=self.cached_bytes + cached_bytes,
                       fewer_rows=tuple((below, max(held, copies)) for below, held in self.fewer_rows))

    def peak_bytes(self, rows: int, vocab: int) -> float:
        blocks = rows * -(-vocab // GUMBEL_BLOCK) * (8 + 4) if self.gumbel else 0
        buffer = self.triton.rows(rows) * vocab * 4 if self.triton else 0
        return self.copies_at(rows) * rows * vocab * 4 + buffer + blocks + (self.cached_bytes if rows else 0)

    def held_bytes(self, max_num_seqs: int, vocab: int, logits_per_request: int) -> int:
        """PenaltiesState's output_bin_counts (max_num_seqs x vocab int32) and prompt_bin_mask (max_num_seqs x
        ceil(vocab / 32) int32), StructuredOutputsWorker's grammar_bitmask (max_num_seqs x logits per request x
        ceil(vocab / 32) int32), all made in GPUModelRunner.load_model (v1/worker/gpu/sample/penalties.py,
        structured_outputs.py; 0.29.0 and 0.33.0) after the weights are measured. From 0.27.0 memory_profiling
        (utils/mem_utils.py) counts all the free memory lost since the worker's snapshot, so they leave the KV cache;
        0.22-0.26 count weights + torch peak increase + non-torch only, which leaves them out."""
        if not self.held:
            return 0
        words = -(-vocab // 32)
        return max_num_seqs * (vocab + words + logits_per_request * words) * 4


# Model Runner V2's _dummy_sampler_run (v1/worker/gpu/model_runner.py) samples compute_logits' rows x vocab in the
# model dtype (0.5 of a float32 copy) for min(max_num_seqs, max_num_batched_tokens) dummy requests (InputBatch.
# make_dummy), none of them added to the sampler, so every sampling parameter is at its default (SamplingStates:
# temperature 0, top-k vocab, top-p 1): no top-k / top-p, and gumbel_sample over the logits.
# - 0.22.0-0.26.0: Sampler.apply_sampling_params copies the logits to float32 regardless (sample/sampler.py): 1.5.
# - 0.27.0-0.32.0: it returns them as they are when no request needs processing (0.27.0 _requires_logits_processing,
#   0.28.0 needs_logits_processing; temperature 0 needs none): 0.5.
# - 0.33.0: a second pass after every dummy request is given SamplingParams.for_sampler_warmup() (temperature 0.9,
#   top-k 50, top-p 0.9, min-p, penalties, logit bias, bad words, 5 logprobs): the float32 copy (1) beside the
#   logits (0.5); through FlashInfer (flashinfer_sampler_supported: CUDA, VLLM_USE_FLASHINFER_SAMPLER on, its
#   default since 0.21.0 envs.py, FlashInferBackend.supports_compute_capability 8.0-12.1) flashinfer_sample with
#   both a top-k and a top-p tensor calls top_k_top_p_sampling_from_logits (flashinfer 0.7.2.post1, the release's
#   pin), whose top_k_mask_logits output (1) and softmax (1) are held together: 3.5; elsewhere
#   _sample_random's apply_top_k_top_p takes apply_top_k_top_p_triton (Triton installed, v1/sample/ops/
#   topk_topp_sampler.py), which masks in place and caches its per-program buffer (TritonBuffer, from row 0: every
#   row has top-k 50, so has_topp_only_rows is False and the split top-p pipeline and its workspace are not taken),
#   and gumbel_sample draws: 1.5 and the buffer. The logprobs that follow (compute_topk_scores
#   over the raw logits beside the float32 copy) hold less. The first pass holds less than the second.
# Beside the sampler, as V1's from 0.17: profile_run (v1/worker/gpu/model_runner.py, 0.22.0-0.33.0 alike) keeps
# _dummy_run's hidden_states (max_num_batched_tokens rows, the eager forward's output: execute_model runs the model
# with need_eager=is_profile) and sample_hidden_states = hidden_states[input_batch.logits_indices] (a gathered copy,
# one row a dummy request) until after _dummy_sampler_run, which takes compute_logits of those rows directly (no
# rand_like, V1's second copy): max_num_batched_tokens + 1 x rows rows x hidden, 16-bit. PyTorch's cuBLAS workspace
# (cublas_workspace_bytes, by the release's torch: CUBLAS_32MIB) stays from the dummy forward's first matmul: the same
# gpu_worker.py determine_available_memory runs V2's profile_run as V1's. These two take the place of the era's
# fitted fixed bytes on the sampler side (the forward's side keeps them, budget.activation_bytes).
# A later pipeline stage's received buffers (self.intermediate_tensors, max_num_batched_tokens rows) are made in
# GPUModelRunner.load_model after "Model loading took" is measured, not in the profile run as V1's: 0.22-0.26 leave
# them out of the non-KV memory, from 0.27 total_consumed counts them, as held_bytes' buffers.
# No V2 startup log that prints its peak is stored (the 0.22 / 0.23 logs run V1 or print no peak): nothing here is
# fitted; every figure is read in the release's source.
V2_HELD_SAMPLED_COPIES = 1
V2_UNPROCESSED_LOGITS_FROM = (0, 27)  # and memory_profiling's total_consumed: ProfileSampler.held_bytes
V2_SAMPLERS = (  # (first release, sampler); 0.33's two passes are v2_sampler's
    ((0, 22), ProfileSampler(1.5, gumbel=True)),
    (V2_UNPROCESSED_LOGITS_FROM, ProfileSampler(0.5, gumbel=True, held=True)),
)
V2_TWO_PASS_FROM = (0, 33)
V2_FLASHINFER_CAPABILITY = ((8, 0), (12, 1))  # 0.33.0 v1/attention/backends/flashinfer.py supports_compute_capability


def v2_flashinfer(dep: Deployment, capability: str | None) -> bool:
    """Whether V2's warm-up pass samples through FlashInfer (unknown GPUs are taken as CUDA ones it supports)."""
    return dep.flashinfer_sampler is not False and flashinfer_in(dep, capability, V2_FLASHINFER_CAPABILITY)


def v2_sampler(dep: Deployment, release: tuple[int, int], capability: str | None,
               sms: int | None = None) -> ProfileSampler:
    """V2's dummy sampler passes, with the hidden states and sampled rows held beside them and the cuBLAS
    workspace; 0.33's warm-up pass off FlashInfer with the Triton kernel's buffer (no V2 release before 0.33 asks
    the dummy batch for top-k or top-p, so none allocates it)."""
    if release >= V2_TWO_PASS_FROM:
        if v2_flashinfer(dep, capability):
            sampler = ProfileSampler(3.5, cached_bytes=MiB, held=True)
        else:
            sampler = ProfileSampler(1.5, gumbel=True, held=True, triton=TritonBuffer(sms, 0))
    else:
        sampler = next(sampler for first, sampler in reversed(V2_SAMPLERS) if release >= first)
    return replace(sampler, holds_hidden=True, sampled_copies=V2_HELD_SAMPLED_COPIES,
                   counts_received=release >= V2_UNPROCESSED_LOGITS_FROM,
                   fixed_bytes=cublas_workspace_bytes(capability, release))


def triton_buffer_note(sampler: ProfileSampler, rows: int) -> str | None:
    """A plan note where the Triton buffer is taken at its largest because the GPU's SM count is unknown."""
    largest = sampler.triton.rows(rows) if sampler.triton and sampler.triton.sms is None else 0
    if not largest:
        return None
    return (f"the GPU's SM count is unknown: vLLM's Triton top-k / top-p buffer is taken at its largest, "
            f"{largest:,} rows x vocab float32 (min(next power of 2 of min(SMs, {rows:,} rows), "
            "SMs) rows, topk_topp_triton.py)")


def profile_sampler(era: Era, dep: Deployment, release: tuple[int, int], v2: bool,
                    capability: str | None, sms: int | None = None) -> ProfileSampler:
    """The dummy sampler of the runner the release picks (runner.py model_runner)."""
    return v2_sampler(dep, release, capability, sms) if v2 else v1_sampler(era, dep, release, capability, sms)
