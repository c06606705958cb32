"""The KV pool a simulation plays in, taken from a plan (or a given size with the plan's block bytes), and the
engine knobs its scheduler obeys; the step-time model that maps seconds onto engine steps."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from kvplan.capacity import PoolLayout
from kvplan.errors import KvplanError
from kvplan.plan import Plan

# vLLM's EngineArgs default for max_num_seqs, used when the plan's engine has no such knob.
DEFAULT_MAX_NUM_SEQS = 256
# vLLM's BlockSpaceManager watermark: 1% of the blocks held back from admitting new requests.
WATERMARK = 0.01


@dataclass(frozen=True)
class Pool:
    """A pool of blocks of one KV-cache group each (vLLM's hybrid allocator gives every group its own blocks from
    one pool). A sequence holds blocks in each group: full_groups grow with every block_size tokens, a window
    group keeps only the blocks its window reaches, a state group holds a fixed number per sequence."""

    pool_bytes: int
    block_size: int
    block_bytes: int
    max_model_len: int
    max_num_seqs: int
    max_num_batched_tokens: int
    state_bytes: int = 0  # per sequence, beside the groups' blocks
    watermark: float = WATERMARK
    full_groups: int = 1
    windows: tuple[tuple[int, int], ...] = ()  # (window in tokens, groups with it)
    state_group_blocks: int = 0  # blocks per sequence of the groups that page a recurrent state

    @property
    def token_groups(self) -> int:
        """Groups that hold per-token KV: each takes a block when a sequence opens one."""
        return self.full_groups + sum(count for _, count in self.windows)

    @property
    def num_blocks(self) -> int:
        return self.pool_bytes // self.block_bytes

    @property
    def slots(self) -> int:
        """Token slots in the pool: the unit every allocator counts in."""
        return self.num_blocks * self.block_size

    @property
    def slot_bytes(self) -> int:
        return self.block_bytes // self.block_size

    @property
    def watermark_blocks(self) -> int:
        return int(self.watermark * self.num_blocks)

    def state_blocks(self) -> int:
        """Blocks a sequence holds whatever its length: paged recurrent states and state kept outside them."""
        return self.state_group_blocks + (-(-self.state_bytes // self.block_bytes) if self.state_bytes else 0)

    def state_slots(self) -> int:
        return self.state_group_blocks * self.block_size + \
            (-(-self.state_bytes // self.slot_bytes) if self.state_bytes else 0)


def pool_from_plan(plan: Plan, kv_cache_bytes: int | None = None, block_size: int | None = None) -> Pool:
    layout = plan.layout
    if not layout.groups:
        raise KvplanError(f"{plan.model.id} holds no KV cache, so there is no block pool to simulate", "--model")
    block_bytes = layout.block_bytes
    pool_bytes = kv_cache_bytes if kv_cache_bytes is not None else plan.capacity.num_blocks * block_bytes
    if pool_bytes < block_bytes:
        why = f" ({plan.error})" if plan.error else ""
        raise KvplanError(f"the KV pool ({pool_bytes:,} B) holds not one block of {block_bytes:,} B{why}",
                          "--kv-cache-memory" if kv_cache_bytes is not None else "--gpu")
    engine = plan.engine
    budget = engine.max_num_batched_tokens or engine.max_model_len
    full, windows, state_blocks = _groups(layout, budget)
    if not full and not windows:
        raise KvplanError(f"{plan.model.id} keeps no per-token KV in its pool, so no allocator differs", "--model")
    return Pool(pool_bytes, layout.block_size, block_bytes, engine.max_model_len,
                engine.max_num_seqs or DEFAULT_MAX_NUM_SEQS, budget, full_groups=full, windows=windows,
                state_group_blocks=state_blocks)


def _groups(layout: PoolLayout, budget: int) -> tuple[int, tuple[tuple[int, int], ...], int]:
    """The pool's groups as the simulation moves them: full, windowed (a chunked-local layer is counted as a
    window of its chunk, the most it holds), and paged states (blocks per sequence, whatever the length)."""
    full, windows, state_blocks = 0, Counter[int](), 0
    for group in layout.groups:
        layer = group.layer
        kept = layer.kept_tokens()
        if not layer.holds_kv:
            state_blocks += layer.blocks_per_request(0, layout.block_size, budget)
        elif kept is not None:
            windows[kept] += 1
        else:
            full += 1
    return full, tuple(sorted(windows.items())), state_blocks


@dataclass(frozen=True)
class StepTime:
    """An engine step takes fixed_ms + per_1k_ms for every 1,000 tokens it processes."""

    fixed_ms: float
    per_1k_ms: float
    source: str

    def seconds(self, tokens: int) -> float:
        return (self.fixed_ms + self.per_1k_ms * tokens / 1000) / 1000


def parse_step_time(text: str) -> StepTime:
    try:
        fixed, per_1k = (float(part) for part in text.split(","))
    except ValueError:
        raise KvplanError(f"cannot read {text!r}; write A_MS,B_MS_PER_1K_TOKENS, e.g. 12,0.5", "--step-time") from None
    if not (0 <= fixed <= 1e5 and 0 <= per_1k <= 1e5 and fixed + per_1k > 0):
        raise KvplanError("step times must be 0 to 100,000 ms and not both 0", "--step-time")
    return StepTime(fixed, per_1k, "--step-time")


def roofline_step_time(plan: Plan) -> StepTime | None:
    """The datasheet floor of a step: reading the rank's weights once at peak memory bandwidth, plus two FLOPs per
    parameter per token at peak bf16 throughput. Real steps are slower; None when the GPU's figures are unknown."""
    from kvplan.hardware import find_gpu

    try:
        gpu = find_gpu(plan.gpu.id)
    except KvplanError:
        return None
    if not gpu.bandwidth_gbps or not gpu.bf16_tflops_dense:
        return None
    ranks = plan.tensor_parallel * plan.pipeline_parallel
    fixed_ms = plan.memory.weights_bytes / (gpu.bandwidth_gbps * 1e9) * 1000
    per_1k_ms = 2 * plan.model.params.total / ranks * 1000 / (gpu.bf16_tflops_dense * 1e12) * 1000
    return StepTime(fixed_ms, per_1k_ms, f"the {gpu.name} datasheet's roofline: weights read once at "
                                         f"{gpu.bandwidth_gbps:g} GB/s, 2 FLOPs per parameter per token at "
                                         f"{gpu.bf16_tflops_dense:g} TFLOPS; real steps are slower")
