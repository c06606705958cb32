"""One request while the scheduler holds it: its prompt (which grows when a preempted request is recomputed),
prefill progress, and where it decodes from."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvplan.simulate.workload import Request

if TYPE_CHECKING:
    from kvplan.simulate.allocators.prefix_cache import CachedPrefix


class Seq:
    __slots__ = ("request", "sharing", "width", "prompt", "total", "prefill_left", "start", "phase", "decoding",
                 "live", "order", "footprint", "reserved_left", "prefix_blocks", "first_blocks", "group", "extent",
                 "windows")

    def __init__(self, request: Request, prompt: int | None = None) -> None:
        self.request = request
        self.sharing = request.sharing
        self.width = request.sharing.width
        self.prompt = request.prompt if prompt is None else prompt
        self.total = request.total
        self.prefill_left = self.prompt
        self.start = -1  # the step whose prefill finished: it sampled the first output token
        self.phase = 0
        self.decoding = False
        self.live = True
        self.order = 0
        self.footprint = 0  # contiguous: slots its reservation takes, once asked
        self.reserved_left = 0
        self.prefix_blocks = 0
        self.first_blocks = -1  # paged: blocks of its own once admitted, found on the first try
        self.group: CachedPrefix | None = None  # paged: the cached prefix it references
        self.extent: tuple[int, int] | None = None
        self.windows: list[list] = []  # paged: per window group [phase, blocks freed per release, releasing]

    def length(self, step: int) -> int:
        """Tokens in each sequence after `step`, once decoding: the prompt, the token its prefill sampled, one per
        step since."""
        return self.prompt + 1 + step - self.start
