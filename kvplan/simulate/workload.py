"""A workload: requests with prompt and output lengths, arrival times, a sharing mode and an optional shared
prefix. Synthetic ones come from length distributions; traces.py reads recorded ones."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from kvplan.errors import KvplanError
from kvplan.simulate.distributions import MAX_LENGTH, Distribution
from kvplan.simulate.sharing import BeamSearch, ParallelSamples, Sharing, Single

MAX_REQUESTS = 10**6  # about 20 s per allocator: a bigger workload says nothing more about the pool
MAX_WIDTH = 1024


@dataclass(frozen=True, slots=True)
class Request:
    id: int
    arrival: float  # seconds after the first request
    prompt: int  # tokens, the shared prefix included
    output: int  # tokens each sequence generates
    sharing: Sharing = Single()
    prefix_id: int | None = None  # requests with the same id start with the same prefix_len tokens
    prefix_len: int = 0

    @property
    def total(self) -> int:
        return self.prompt + self.output


@dataclass
class Workload:
    requests: list[Request]
    description: dict[str, Any] = field(default_factory=dict)

    def clipped(self, max_model_len: int) -> Workload:
        """Requests cut to max_model_len, as the engine would refuse longer ones: the prompt first keeps one token of
        room for output, then the output is cut. The count of cut requests goes into the description."""
        kept, cut = [], 0
        for request in self.requests:
            prompt = min(request.prompt, max_model_len - 1)
            output = min(request.output, max_model_len - prompt)
            if (prompt, output) != (request.prompt, request.output):
                cut += 1
                request = Request(request.id, request.arrival, prompt, output, request.sharing, request.prefix_id,
                                  min(request.prefix_len, prompt))
            kept.append(request)
        return Workload(kept, {**self.description, "clipped_to_max_model_len": cut})


def sharing_mode(n: int, beam_width: int, where: str = "--n") -> Sharing:
    if n < 1 or beam_width < 1 or n > MAX_WIDTH or beam_width > MAX_WIDTH:
        raise KvplanError(f"--n and --beam-width must be 1 to {MAX_WIDTH}", where)
    if n > 1 and beam_width > 1:
        raise KvplanError("give --n (parallel samples) or --beam-width (beam search), not both", where)
    if beam_width > 1:
        return BeamSearch(beam_width)
    return ParallelSamples(n) if n > 1 else Single()


def synthetic(count: int, prompt: Distribution, output: Distribution, *, sharing: Sharing = Single(),
              shared_prefix: int = 0, prefix_groups: int = 1, rate: float | None = None, seed: int = 0) -> Workload:
    """count requests; each prompt is the shared prefix (one of prefix_groups, drawn uniformly) followed by a
    prompt-length sample. rate: Poisson arrivals per second; None: all arrive at once."""
    if not 1 <= count <= MAX_REQUESTS:
        raise KvplanError(f"give 1 to {MAX_REQUESTS:,} requests", "--requests")
    if rate is not None and not 0 < rate <= 1e6:
        raise KvplanError("a rate is above 0 and at most 1,000,000 requests/s", "--rate")
    if not 0 <= shared_prefix <= MAX_LENGTH or not 1 <= prefix_groups <= MAX_REQUESTS:
        raise KvplanError(f"--shared-prefix must be 0 to {MAX_LENGTH:,} tokens and --prefix-groups 1 to "
                          f"{MAX_REQUESTS:,}", "--shared-prefix")
    rng = random.Random(seed)
    requests, clock = [], 0.0
    for index in range(count):
        if rate is not None and index:
            clock += rng.expovariate(rate)
        prefix_id = rng.randrange(prefix_groups) if shared_prefix else None
        requests.append(Request(index, clock, shared_prefix + prompt.sample(rng), output.sample(rng), sharing,
                                prefix_id, shared_prefix))
    description: dict[str, Any] = {
        "source": "synthetic", "requests": count, "prompt_len": prompt.describe(), "output_len": output.describe(),
        "sharing": sharing.describe(), "arrivals": f"poisson {rate:g}/s" if rate is not None else "all at once",
        "seed": seed}
    if shared_prefix:
        description.update(shared_prefix=shared_prefix, prefix_groups=prefix_groups)
    return Workload(requests, description)
