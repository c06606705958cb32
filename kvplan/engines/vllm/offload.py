"""vLLM's weight offloading (--cpu-offload-gb), as the 0.33.0 wheel does it.

config/offload.py UVAOffloadConfig: cpu_offload_gb is GiB per GPU; offloader/base.py makes a UVAOffloader of
int(cpu_offload_gb x 1024^3) bytes. models/utils.py make_layers hands it the decoder layers of the rank's pipeline
stage in order (embeddings and lm_head are never offered), and offloader/uva.py _maybe_offload_to_cpu moves each
layer's parameters whole, in named_parameters order, while the bytes moved are below the limit: the last one moved
may overshoot it. The moved parameters live in pinned CPU memory read over the interconnect (UVA) each forward, so
"Model loading took" no longer counts them; the KV pool gets what they leave.

kvplan decomposes an unquantized dense decoder layer into its parameters (q/k/v, o, gate/up, down, the norms,
and the q/k/v bias or q/k norms where the exact parameter count says the family has them); other layers are
refused by name rather than guessed."""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.deployment import Deployment
from kvplan.errors import KvplanError
from kvplan.models.layers import FullAttention
from kvplan.models.model import ModelSpec
from kvplan.units import GiB


@dataclass(frozen=True)
class Offload:
    """What one rank moves to the CPU."""

    limit_bytes: int
    moved_bytes: int
    parameters: int  # how many parameters moved
    layers: int  # decoder layers touched (the last one may be partly moved)

    def note(self, gpus: int) -> str:
        return (f"weights offloaded to CPU (--cpu-offload-gb): {self.moved_bytes / GiB:.2f} GiB per GPU "
                f"({self.parameters} whole parameters of the first {self.layers} decoder layers of each stage), read "
                f"from pinned host memory every step; the host needs {self.moved_bytes * gpus / GiB:.2f} GiB for "
                f"the {gpus} GPU(s)")


def layer_parameters(spec: ModelSpec, tp: int, size: int) -> list[int]:
    """One rank's bytes of each parameter of a decoder layer, in named_parameters order (attention: qkv_proj
    weight and bias, o_proj, q/k norms; MLP: gate_up_proj, down_proj; then the two norms)."""
    kinds = {layer for layer in spec.layers if isinstance(layer, FullAttention)}
    if (spec.moe is not None or spec.quantization is not None or not spec.params.exact or len(kinds) != 1
            or len(spec.layers) != spec.num_layers):
        raise KvplanError("cpu_offload_gb is modelled for unquantized dense full-attention decoders with an exact "
                          "parameter count (not MoE, quantized, hybrid or sliding-window layers)", "--cpu-offload-gb")
    (layer,) = kinds
    hidden, inter, heads, dim = spec.hidden_size, spec.intermediate_size, spec.num_attention_heads, layer.head_dim
    q, kv = heads * dim, layer.kv_heads * dim
    base = [(q + 2 * kv) * hidden, q * hidden, 2 * inter * hidden, inter * hidden, hidden, hidden]
    params = spec.params
    rest = params.decoder - spec.num_layers * sum(base)
    extras = {0: [], q + 2 * kv: [q + 2 * kv], 2 * dim: [dim, dim]}  # none, q/k/v bias, q/k norms
    found = next((e for e, parts in extras.items() if rest - spec.num_layers * e in (0, hidden)), None)
    if found is None:
        raise KvplanError("cpu_offload_gb: this family's decoder layer parameters are not decomposed",
                          "--cpu-offload-gb")
    qkv_bias, qk_norm = (extras[found], []) if found == q + 2 * kv else ([], extras[found])
    column = [((q + 2 * kv) * hidden) // tp, *[b // tp for b in qkv_bias], q * hidden // tp, *qk_norm]
    return [p * size for p in column + [2 * inter * hidden // tp, inter * hidden // tp, hidden, hidden]]


def offloaded(spec: ModelSpec, dep: Deployment, decoder_layers: int, size: int) -> Offload | None:
    """The parameters one rank of a stage moves, None without --cpu-offload-gb."""
    if not dep.cpu_offload_gb:
        return None
    limit = int(dep.cpu_offload_gb * 1024**3)
    per_layer = layer_parameters(spec, dep.tensor_parallel_size, size)
    moved = count = 0
    for index in range(decoder_layers * len(per_layer)):
        if moved >= limit:
            break
        moved += per_layer[index % len(per_layer)]
        count += 1
    return Offload(limit, moved, count, -(-count // len(per_layer)))
