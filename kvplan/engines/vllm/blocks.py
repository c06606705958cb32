"""vLLM's KV block size: the default by attention backend, and what becomes of a --block-size the user gives
(issue 18 sections 2.9 and 2.10), read in each release wheel's platforms/cuda.py (CudaPlatform
check_and_update_config through 0.17; get_attn_backend_cls from 0.18), config/cache.py and
v1/attention/backend.py (AttentionBackend.supports_block_size)."""

from __future__ import annotations

from kvplan.deployment import Deployment
from kvplan.engines import common
from kvplan.engines.vllm.releases import ANY_BLOCK_SIZE_FROM, FLASHINFER_MLA_FROM, MLA_BLOCK_FROM_BACKEND
from kvplan.errors import KvplanError
from kvplan.models.model import ModelSpec

# config/cache.py through 0.17.0: BlockSize = Literal[1, 8, 16, 32, 64, 128, 256] (ANY_BLOCK_SIZE_FROM after)
LITERAL_BLOCK_SIZES = (1, 8, 16, 32, 64, 128, 256)
# FLASHINFER_MLA_FROM: 0.15.0-0.17.0 platforms/cuda.py, on SM100 with no --attention-backend, take FlashInfer MLA
# where qk_nope_head_dim is 128 ("kernel constraint"), CUTLASS MLA otherwise; 0.14.0 takes CUTLASS MLA on every SM100
# model.
# 0.12.0 forces the MLA backends' sizes with "block_size % 64 != 0" (and % 128 for CUTLASS); 0.11.0 and earlier
# with "block_size != 64" / "!= 128".
MLA_MULTIPLES_FROM = (0, 12)
# The smallest kernel block of the backends vLLM 0.18+ can fall back to (FlashAttention, Triton, FlexAttention
# and the Triton / FlashAttention MLA backends: MultipleOf(16)); DeepSeek sparse attention's FlashMLASparse takes
# only 64 (v1/attention/backends/mla/flashmla_sparse.py get_supported_kernel_block_sizes).
KERNEL_BLOCK_STEP = 16


def _mla(spec: ModelSpec) -> bool:
    return any(layer.latent_cache for layer in spec.layers)


def flashinfer_mla(spec: ModelSpec, version: tuple[int, int]) -> bool:
    """SM100 0.15-0.17: FlashInfer MLA for qk_nope_head_dim 128 (DeepSeek's, Kimi's), else CUTLASS MLA."""
    nope = {getattr(layer, "nope_head_dim", 0) for layer in spec.layers if layer.latent_cache}
    return version >= FLASHINFER_MLA_FROM and nope == {128}


def default_block_size(spec: ModelSpec, major: int | None, version: tuple[int, int] = (0, 0)) -> int:
    """The KV block size when --block-size is not given: 16, or what the MLA backend vLLM picks for the GPU takes."""
    if not _mla(spec) or major is None:
        return 16
    if version >= MLA_BLOCK_FROM_BACKEND:
        # the backend is chosen first and its preferred size taken (Platform.update_block_size_for_backend:
        # 16 where supported, else its smallest): FLASH_ATTN_MLA on SM90 and TRITON_MLA off Blackwell datacenter
        # take 16; FlashInfer MLA, first on SM100, supports 32 and 64 and takes 32 (it accepts a qk_nope_head_dim
        # of 64, 128 or 192, DeepSeek's being 128; CUTLASS MLA's 128 for the others is not modelled)
        return 32 if major == 10 else 16
    if major == 10:
        # "Forcing kv cache block size to 64 for FlashInferMLA backend" (the default 16 is neither 32 nor a
        # multiple of 64); CUTLASS MLA's 128 otherwise
        return 64 if flashinfer_mla(spec, version) else 128
    if major == 9:
        return 64  # "Forcing kv cache block size to 64 for FlashMLA backend" on Hopper
    return 16  # TRITON_MLA: consumer Blackwell (SM120) and older GPUs


def _forced_before_v0_18(spec: ModelSpec, given: int, major: int | None, version: tuple[int, int]) -> int:
    """What CudaPlatform.check_and_update_config (through 0.17) makes of a user's size for MLA: FlashMLA (SM90)
    and FlashInfer MLA need 64 (FlashInfer also takes 32), CUTLASS MLA 128; a multiple of it is kept from 0.12."""
    if not _mla(spec) or major not in (9, 10):
        return given
    needed = 128 if major == 10 and not flashinfer_mla(spec, version) else 64
    if needed == 64 and major == 10 and given == 32:
        return given
    kept = given % needed == 0 if version >= MLA_MULTIPLES_FROM else given == needed
    return given if kept else needed


def kv_block_size(spec: ModelSpec, dep: Deployment, major: int | None, version: tuple[int, int]) -> int:
    """The block size vLLM runs with: DeepSeek sparse attention's kernel block, the user's --block-size as the
    release treats it, else the default."""
    kernel = common.kernel_block_size(spec)
    given = dep.block_size
    if version < ANY_BLOCK_SIZE_FROM:
        if given is not None and given not in LITERAL_BLOCK_SIZES:
            raise KvplanError(f"invalid choice {given} (choose from {', '.join(map(str, LITERAL_BLOCK_SIZES))})",
                              dep.where("block_size"))
        # "Forcing kv cache block size to 64 for FlashMLASparse backend", whatever --block-size says
        if kernel:
            return kernel
        return default_block_size(spec, major, version) if given is None else _forced_before_v0_18(
            spec, given, major, version)
    if given is None:
        return kernel or default_block_size(spec, major, version)
    # 0.18+: the user's size is kept where some backend's kernel block divides it (supports_block_size: "the
    # framework-level block size only needs to be a multiple of the kernel's requirement"); sparse MLA keeps a
    # multiple of its 64 and is taken as 64 otherwise, as before 0.18 (which sparse backend a smaller size would
    # find is not modelled)
    if kernel:
        return given if given % kernel == 0 else kernel
    step = KERNEL_BLOCK_STEP
    if given % step:
        raise KvplanError(f"--block-size {given}: no attention backend of vLLM {version[0]}.{version[1]} takes it; "
                          f"its kernels need a multiple of {step} tokens", dep.where("block_size"))
    return given
