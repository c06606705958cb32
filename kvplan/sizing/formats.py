"""The KV-cache dtypes and weight formats a search may try, each knowing which GPUs run it and what it needs
besides a flag (an AWQ checkpoint is a different checkpoint, not a switch)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from kvplan.deployment.knobs import KV_CACHE_DTYPES
from kvplan.errors import KvplanError
from kvplan.hardware import Gpu

T = TypeVar("T")


def _capability(gpu: Gpu) -> tuple[int, int] | None:
    """A CUDA compute capability as (major, minor); None for other vendors' architectures."""
    parts = (gpu.compute_capability or "").split(".")
    if len(parts) == 2 and all(part.isdigit() for part in parts):
        return int(parts[0]), int(parts[1])
    return None


@dataclass(frozen=True)
class KvFormat:
    """One --kv-cache-dtype value."""

    name: str
    needs_fp8: bool  # FP8 KV kernels: only on GPUs that compute in FP8 (the catalogue's fp8)

    def runs_on(self, gpu: Gpu) -> bool:
        return gpu.fp8 or not self.needs_fp8

    def no_larger_than(self, other: KvFormat) -> bool:
        """Holds no more bytes a token than the other: the same dtype, or FP8 (1 byte, the smallest there is)."""
        return self == other or self.needs_fp8

    @property
    def flag_value(self) -> str | None:
        return None if self.name == "auto" else self.name


@dataclass(frozen=True)
class WeightFormat:
    """One weight format: the --quantization value (None: the checkpoint as it is), and what it takes."""

    name: str
    quantization: str | None
    needs_fp8: bool = False
    min_capability: tuple[int, int] | None = None  # CUDA GPUs below it lack the kernels; other vendors not held back
    checkpoint: str | None = None  # the checkpoint to load instead of the model's own, when the format needs one
    bits: int | None = None  # bits a weight; None: as the checkpoint stores them

    def runs_on(self, gpu: Gpu) -> bool:
        if self.needs_fp8 and not gpu.fp8:
            return False
        capability = _capability(gpu)
        return self.min_capability is None or capability is None or capability >= self.min_capability

    def no_larger_than(self, other: WeightFormat, stored_16_bit: bool) -> bool:
        """Fewer bytes of weights than the other: fewer bits, or any quantization of a 16-bit checkpoint."""
        if self == other:
            return True
        if self.bits is None:
            return False
        return (other.bits is None and stored_16_bit) or (other.bits is not None and self.bits <= other.bits)


WEIGHT_FORMATS = {
    "none": WeightFormat("none", None),
    # Online FP8: vLLM and SGLang quantize the model's own 16-bit checkpoint at load time.
    "fp8": WeightFormat("fp8", "fp8", needs_fp8=True, bits=8),
    # vLLM's AWQConfig.get_min_capability and GPTQConfig.get_min_capability: 75 (Turing) and 60 (Pascal).
    "awq": WeightFormat("awq", "awq", min_capability=(7, 5), checkpoint="a 4-bit AWQ checkpoint of the model",
                        bits=4),
    "gptq": WeightFormat("gptq", "gptq", min_capability=(6, 0), checkpoint="a 4-bit GPTQ checkpoint of the model",
                         bits=4),
}


def kv_format(name: str, where: str = "--kv-cache-dtype") -> KvFormat:
    wanted = name.strip().lower()
    if wanted not in KV_CACHE_DTYPES:
        raise KvplanError(f"unknown KV cache dtype {name!r:.40}; choose from {', '.join(KV_CACHE_DTYPES)}", where)
    return KvFormat(wanted, wanted.startswith("fp8"))


def weight_format(name: str, where: str = "--quantization") -> WeightFormat:
    wanted = name.strip().lower()
    found = WEIGHT_FORMATS.get(wanted)
    if found is None:
        raise KvplanError(f"size searches the weight formats {', '.join(WEIGHT_FORMATS)}, not {name!r:.40} (a "
                          "checkpoint of another format: put its --quantization in the pasted command)", where)
    return found


def parse_list(text: str | None, default: str, parse: Callable[[str, str], T], where: str) -> tuple[T, ...]:
    """A comma-separated list of formats, each once, in the order given."""
    names = [part for part in (text if text is not None else default).split(",") if part.strip()]
    if not names:
        raise KvplanError("give at least one value", where)
    return tuple(dict.fromkeys(parse(name, where) for name in names))
