"""The Plan: what one deployment gets, as the engine will allocate it. Every command consumes it."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from kvplan.capacity import PoolLayout, SplitPools
from kvplan.models.model import ModelSpec
from kvplan.weights import ExpertPlacement, Mxfp4Experts

if TYPE_CHECKING:
    from kvplan.hardware import Gpu


@dataclass(frozen=True)
class GpuChoice:
    """The device every rank runs on, and how many of them."""

    id: str
    name: str
    memory_bytes: int
    count: int
    compute_capability: str | None = None  # CUDA's "9.0", or the vendor's architecture (gfx942); None: unknown
    fp8: bool = True  # supports FP8 compute; unknown devices are not held back
    memory_note: str | None = None  # why the total is not an observed figure, for a catalogue entry marked derived
    sm_count: int | None = None  # multi_processor_count (AMD: compute units); None: unknown (a MIG slice has fewer)

    @classmethod
    def of(cls, gpu: Gpu, count: int) -> GpuChoice:
        """`count` of a catalogue GPU, with what the catalogue knows of it."""
        from kvplan.hardware import derived_memory_note

        return cls(gpu.id, gpu.name, gpu.memory_bytes, count, gpu.compute_capability, gpu.fp8,
                   derived_memory_note(gpu), gpu.sm_count)

    @property
    def compute_major(self) -> int | None:
        """The CUDA compute capability's major version; None for other vendors and unknown devices."""
        major = (self.compute_capability or "").split(".")[0]
        return int(major) if major.isdigit() else None


@dataclass(eq=False)
class EngineSettings:
    """The settings the engine runs with once its defaults are applied."""

    name: str
    label: str  # the engine's own name in messages: vLLM, SGLang, TensorRT-LLM
    kv_log: str  # the startup log line that prints the token count
    version: str | None
    gpu_memory_utilization: float | None
    block_size: int
    max_model_len: int
    max_num_seqs: int | None
    max_num_batched_tokens: int | None
    utilization_knob: str = "gpu_memory_utilization"  # the engine's own names, for its messages
    length_knob: str = "max_model_len"
    expert_placement: ExpertPlacement | None = None  # how MoE experts spread over ranks; None: sliced by TP
    mxfp4_experts: Mxfp4Experts | None = None  # how MXFP4 experts are held once loaded; None: as stored
    auto_kv_cache_dtype: str | None = None  # what the engine makes of kv_cache_dtype auto; None: the model dtype
    forced_kv_cache_dtype: str | None = None  # what the engine serves whatever kv_cache_dtype says; None: as given
    # tokens a sliding-window or chunked layer holds beyond its window while batches are in flight (vLLM 0.26+
    # max_in_flight_tokens); None: max_num_batched_tokens
    in_flight_tokens: int | None = None
    encoder_cache_tokens: int | None = None  # vLLM's multimodal encoder cache budget; None: no encoder
    model_runner: str | None = None  # vLLM's model runner, "V1" or "V2"; None: another engine


@dataclass(eq=False)
class Memory:
    """One rank's memory, in bytes. kv_cache is what is left for the block pool."""

    total_bytes: int
    budget_bytes: int
    weights_bytes: int
    activation_bytes: int = 0
    non_torch_bytes: int = 0
    cuda_graph_bytes: int = 0
    reserve_bytes: int = 0
    kv_cache_bytes: int = 0
    encoder_bytes: int = 0  # part of activation_bytes: multimodal encoder outputs the profile holds (vLLM)


@dataclass(eq=False)
class LadderRung:
    """Requests of one context length that run at once."""

    context: int
    concurrency: int
    kv_limited: int


@dataclass(eq=False)
class Capacity:
    """What the pool holds: blocks, tokens, concurrency, and whether one request fits."""

    num_blocks: int
    tokens: int
    max_concurrency: float
    fits: bool
    max_model_len_that_fits: int
    blocks_per_request: int
    request_bytes: int
    ladder: tuple[LadderRung, ...] = ()
    offload_tokens: int = 0  # tokens of a CPU KV tier beside the GPU pool (vLLM --kv-offloading-size)
    offload_host_bytes: int = 0  # host memory that tier pins, over all the deployment's ranks


# EngineSettings fields that serve kvplan's own wording, not the JSON document.
INTERNAL_SETTINGS = ("label", "utilization_knob", "length_knob")


@dataclass(eq=False)
class Plan:
    """What one deployment gets, as the engine will allocate it."""

    model: ModelSpec
    gpu: GpuChoice
    tensor_parallel: int
    pipeline_parallel: int
    engine: EngineSettings
    kv_dtype: str
    kv_bytes: int
    layout: PoolLayout
    memory: Memory  # of the limiting rank
    capacity: Capacity
    limiting_stage: int = 0
    data_parallel: int = 1
    error: str | None = None  # the engine's own startup error, when it would refuse to start
    notes: tuple[str, ...] = field(default_factory=tuple)
    # separate token pools the engine re-splits its profiled tokens into (SGLang's full-attention and
    # sliding-window pools); None: one pool, the layout's
    pools: SplitPools | None = None
    stage_memories: tuple[Memory, ...] = ()  # every pipeline stage's first rank, in stage order

    @property
    def rank_zero_memory(self) -> Memory:
        """The first pipeline stage's first rank: the one whose lines an engine's log prints first."""
        return self.stage_memories[0] if self.stage_memories else self.memory

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model.summary(),
            "gpu": asdict(self.gpu),
            "parallel": {"tensor": self.tensor_parallel, "pipeline": self.pipeline_parallel,
                         "data": self.data_parallel},
            "engine": {key: value for key, value in asdict(self.engine).items() if key not in INTERNAL_SETTINGS},
            "kv": {"dtype": self.kv_dtype, "bytes_per_token": self.layout.bytes_per_token,
                   "block_bytes": self.layout.block_bytes, "groups": self.layout.num_groups,
                   "padding_layers": self.layout.padding_layers},
            "memory": asdict(self.memory),
            "capacity": {**asdict(self.capacity), "ladder": [asdict(rung) for rung in self.capacity.ladder]},
            # each data-parallel replica is an engine of its own with this pool: what they hold together
            "replicas": {"count": self.data_parallel, "tokens": self.capacity.tokens * self.data_parallel,
                         "max_concurrency": round(self.capacity.max_concurrency * self.data_parallel, 2)},
            "limiting_stage": self.limiting_stage,
            # null, or per pool: its name ("full", "swa"), tokens (SGLang's full_layer_tokens / swa_layer_tokens)
            # and the bytes one token takes across that pool's layers on one rank
            "pools": None if self.pools is None else [
                {"name": pool.name, "tokens": pool.tokens, "bytes_per_token": pool.bytes_per_token}
                for pool in self.pools.pools],
            "error": self.error,
            "notes": list(self.notes),
        }
