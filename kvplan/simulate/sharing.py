"""How the sequences of one request share blocks under paging, one type per mode. Lengths count the prompt plus
the tokens generated so far by each sequence; B is the block size. Every mode keeps the prompt's full blocks once;
what differs is what the sequences share after it.

- Single: one sequence.
- ParallelSamples(n): n independent samples of one prompt. The prompt's partly filled last block is shared until
  the first divergent write, then copied into each sample (copy-on-write), so each sample owns its blocks from the
  prompt's last partial block on.
- BeamSearch(w), a deterministic model of beam search: at every block boundary the w beams all descend from one
  beam of the previous boundary, so every full block is shared by all beams and each beam owns only its partly
  filled last block; when the beams cross into a new block, the w - 1 losers' last blocks are freed and each beam
  takes a new one (net one block per boundary)."""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.units import cdiv


def unused_tail(length: int, block_size: int) -> int:
    """Slots of the last block a sequence of this length leaves empty."""
    return -length % block_size


@dataclass(frozen=True)
class Single:
    width: int = 1

    @property
    def growth(self) -> int:
        """Blocks the request takes when its sequences cross a block boundary."""
        return 1

    def blocks(self, length: int, prompt: int, block_size: int) -> int:
        return -(-length // block_size)  # cdiv without the call: this runs on every admission and release

    def freed(self, left: int, prompt: int, block_size: int) -> int:
        """Blocks a window group no longer holds once each sequence's first `left` blocks left the window."""
        return left

    def describe(self) -> str:
        return "one sequence per request"


@dataclass(frozen=True)
class ParallelSamples:
    width: int

    @property
    def growth(self) -> int:
        return self.width

    def blocks(self, length: int, prompt: int, block_size: int) -> int:
        if length <= prompt:
            return cdiv(length, block_size)
        shared = prompt // block_size
        return shared + self.width * (cdiv(length, block_size) - shared)

    def freed(self, left: int, prompt: int, block_size: int) -> int:
        shared = prompt // block_size
        return left if left <= shared else shared + self.width * (left - shared)

    def describe(self) -> str:
        return f"{self.width} parallel samples per request"


@dataclass(frozen=True)
class BeamSearch:
    width: int

    @property
    def growth(self) -> int:
        return 1

    def blocks(self, length: int, prompt: int, block_size: int) -> int:
        if length <= prompt:
            return cdiv(length, block_size)
        return cdiv(length, block_size) - 1 + self.width

    def freed(self, left: int, prompt: int, block_size: int) -> int:
        return left  # blocks that leave the window are full, and beams share every full block

    def describe(self) -> str:
        return f"beam search of width {self.width}"


Sharing = Single | ParallelSamples | BeamSearch

