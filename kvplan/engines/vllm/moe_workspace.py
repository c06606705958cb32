"""What vLLM's fused-MoE layers hold during the profiling run (V1 from 0.17), read in the releases' source.

The modular kernels (FusedMoEKernelModularImpl, model_executor/layers/fused_moe/modular_kernel.py _allocate_buffers)
take their scratch from the process-wide WorkspaceManager (v1/worker/workspace.py get_simultaneous): one uint8 buffer
that only grows, shared by every MoE layer and kept after the forward, so the sampler's peak sees it too. It is sized
once, at the profiling run's M = max_num_batched_tokens. TritonExperts.workspace_shapes (0.17.0-0.19.0
fused_moe.py, 0.33.0 experts/triton_moe.py) asks for workspace13 = (M, top-k, max(N / 2, K)) and workspace2 =
(M, top-k, max(N, K)), N the gate-up width (w13: 2 x the expert's intermediate size on the rank; the intermediate size
alone for the *_no_mul activations, adjust_N_for_activation), K the width the experts run in; the layer's output
(M, K) shares workspace13's storage when there is one chunk. Each part is rounded up to 256 bytes, in the model dtype
(workspace_dtype: the activations' dtype).

0.17.0 cuts M into chunks of VLLM_FUSED_MOE_CHUNK_SIZE (16,384; VLLM_ENABLE_FUSED_MOE_ACTIVATION_CHUNKING on: envs.py,
modular_kernel.py _chunk_info): the workspaces at the chunk, the output whole and apart once there are two chunks.
0.18.0 dropped the chunking (its _allocate_buffers takes M_full).

Monolithic kernels (FusedMoEExpertsMonolithic) allocate their scratch inside each call and free it with the layer:
MXFP4's Triton path (0.18.0 quantization/mxfp4.py Mxfp4MoEMethod.is_monolithic, triton_kernel_moe_forward; 0.19.0 and
0.33.0 oracle/mxfp4.py prefer OAITritonMxfp4ExpertsMonolithic) and FlashInfer's SM100 MXFP4 kernels. Marlin's
MXFP4 experts are modular: MarlinExperts.workspace_shapes (0.19.0 fused_marlin_moe.py) asks for (M x top-k, max(N, K))
and (M x top-k x max(2N, K)) with N the intermediate size, the same bytes as Triton's.

Not read, and taken at Triton's shapes: the other quantized expert kernels (FP8 on Hopper takes TritonExperts for
block-FP8 at TP, 0.19.0 oracle/fp8.py _get_priority_backends, the other FP8 paths are not read), unquantized experts
on Blackwell in the releases that prefer FlashInfer there (0.33.0 oracle/unquantized.py), expert parallelism (whose
profiling run forces the chunk's worst case in 0.17.0 with DP) and LoRA.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.models.families import family_of
from kvplan.models.model import ModelSpec
from kvplan.weights import Mxfp4Experts

CHUNKED_UNTIL = (0, 18)  # 0.17.0 chunks the fused MoE's M; 0.18.0 does not (modular_kernel.py _allocate_buffers)
FUSED_MOE_CHUNK_SIZE = 16 * 1024  # 0.17.0 envs.py VLLM_FUSED_MOE_CHUNK_SIZE
WORKSPACE_ALIGNMENT = 256  # v1/worker/workspace.py get_simultaneous: round_up(actual, 256) per part


def _aligned(size: int) -> int:
    return -(-size // WORKSPACE_ALIGNMENT) * WORKSPACE_ALIGNMENT


@dataclass(frozen=True)
class MoeShape:
    """One MoE layer's problem on a rank, as FusedMoEExpertsModular.moe_problem_size reads it."""

    tokens: int  # M: the profiling run's max_num_batched_tokens
    top_k: int
    width: int  # K: the hidden size the experts run in (a latent MoE's latent size)
    intermediate: int  # the expert's intermediate size on the rank
    gated: bool  # w13 holds gate and up (N = 2 x intermediate); False: up only (relu2_no_mul, N = intermediate)
    experts: int  # the router's logits per token
    element_bytes: int = 2  # the activations' dtype

    @property
    def gate_up(self) -> int:
        """N, w13's output width."""
        return 2 * self.intermediate if self.gated else self.intermediate


@dataclass(frozen=True)
class SharedWorkspace:
    """A modular kernel's scratch in the WorkspaceManager: held once for all layers and through the sampler."""

    chunk: int | None = None  # VLLM_FUSED_MOE_CHUNK_SIZE where the release chunks M; None: M whole

    def held_bytes(self, shape: MoeShape) -> int:
        m = shape.tokens if self.chunk is None else min(shape.tokens, self.chunk)
        size = shape.element_bytes
        workspace13 = m * shape.top_k * max(shape.intermediate, shape.width)  # adjust_N_for_activation: N / 2 or N
        workspace2 = m * shape.top_k * max(shape.gate_up, shape.width)
        output = shape.tokens * shape.width
        if m >= shape.tokens:  # one chunk: the output lives in workspace13's storage
            return _aligned(max(workspace13, output) * size) + _aligned(workspace2 * size)
        return _aligned(workspace13 * size) + _aligned(workspace2 * size) + _aligned(output * size)


@dataclass(frozen=True)
class InKernelScratch:
    """A monolithic kernel: its buffers live inside each layer's call and nothing stays past it."""

    def held_bytes(self, shape: MoeShape) -> int:
        return 0


MoeKernel = SharedWorkspace | InKernelScratch


def routing_bytes(shape: MoeShape) -> int:
    """What a MoE layer's routing holds while its experts run (freed with the layer, so only the forward's side
    sees it): the router logits (M x experts, model dtype: the gate is a ReplicatedLinear), the top-k weights
    (float32) and ids (int32; fused_moe/router/base_router.py) and moe_align_block_size's sorted ids (int32, M x
    top-k plus experts x (BLOCK_SIZE_M - 1) of padding, left out: at most 128 x 127 entries)."""
    routed = shape.tokens * shape.top_k
    return shape.tokens * shape.experts * shape.element_bytes + routed * (4 + 4) + routed * 4


def moe_shape(spec: ModelSpec, tokens: int, tp: int, element_bytes: int = 2) -> MoeShape | None:
    """The MoE layer's shape on one TP rank (the experts' intermediate size split over TP), None without experts."""
    moe = spec.moe
    if moe is None:
        return None
    return MoeShape(tokens, moe.experts_per_token, moe.latent_size or spec.hidden_size,
                    -(-moe.expert_intermediate_size // tp), family_of(spec.model_type).gated_mlp, moe.num_experts,
                    element_bytes)


def moe_kernel(method: str | None, mxfp4: Mxfp4Experts | None, release: tuple[int, int]) -> MoeKernel:
    """The expert kernel's kind: MXFP4 experts on a monolithic backend hold nothing past the layer; every other
    kernel keeps a shared workspace, chunked in 0.17."""
    # Mxfp4Experts.modular: Marlin's kernel is modular; Triton's and FlashInfer SM100's are monolithic
    if method == "mxfp4" and mxfp4 is not None and not mxfp4.modular:
        return InKernelScratch()
    return SharedWorkspace(FUSED_MOE_CHUNK_SIZE if release < CHUNKED_UNTIL else None)
