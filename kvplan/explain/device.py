"""Which catalogue GPU a log ran on, from the CUDA total it prints. The catalogue holds one observed total per
GPU, but the total moves with the driver: the kvplan GPU notes find +-0.1-0.2 GiB between drivers (an RTX 3090
read 23.70 GiB on 2022-23 drivers and 23.56 GiB on a 580-series one). A GPU matches when its catalogue total
is within that band of the logged one; the nearest is taken, and the others within the band are named."""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.hardware import Gpu, catalogue
from kvplan.units import GiB

DRIVER_BAND = GiB // 5  # 0.2 GiB


@dataclass(frozen=True)
class DeviceMatch:
    """The catalogue GPUs a logged total fits, nearest first."""

    total_bytes: int
    candidates: tuple[Gpu, ...]

    @property
    def best(self) -> Gpu | None:
        return self.candidates[0] if self.candidates else None

    @property
    def ambiguous(self) -> bool:
        return len(self.candidates) > 1


def match_total(total_bytes: int) -> DeviceMatch:
    near = [gpu for gpu in catalogue() if abs(gpu.memory_bytes - total_bytes) <= DRIVER_BAND]
    near.sort(key=lambda gpu: abs(gpu.memory_bytes - total_bytes))
    return DeviceMatch(total_bytes, tuple(near))
