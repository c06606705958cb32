"""SGLang's weight offloading (--cpu-offload-gb), as the 0.5.23 wheel does it: utils/offloader.py create_offloader
makes an OffloaderV1 of int(cpu_offload_gb x 1024^3) bytes per GPU; utils/common.py make_layers hands it the
decoder layers of the rank's stage, and OffloaderV1.maybe_offload_to_cpu moves each layer's parameters whole, in
order, while the bytes moved are below the limit, into pinned CPU memory: the rule vLLM's UVAOffloader follows,
so the same decomposition (kvplan.engines.vllm.offload) gives the bytes. SGLang measures the weights by the free
memory before and after loading, so what moved is not in them and the pool gets it."""

from __future__ import annotations

from kvplan.deployment import Deployment
from kvplan.engines.vllm.offload import Offload, offloaded
from kvplan.models.model import ModelSpec

__all__ = ["Offload", "offloaded_weights"]


def offloaded_weights(spec: ModelSpec, dep: Deployment, decoder_layers: int, size: int) -> Offload | None:
    """The parameters one rank of a stage moves, None without --cpu-offload-gb."""
    return offloaded(spec, dep, decoder_layers, size)
