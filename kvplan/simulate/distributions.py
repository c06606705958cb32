"""Length distributions for synthetic workloads, one type each, read from 'fixed:L', 'uniform:A-B',
'lognormal:MEAN,SIGMA' and 'zipf:THETA,MIN-MAX'. Every sample is a whole number of tokens, at least 1."""

from __future__ import annotations

import math
import random
from bisect import bisect_left
from dataclasses import dataclass, field
from itertools import accumulate

from kvplan.errors import KvplanError

MAX_LENGTH = 10**7  # tokens: beyond any context window, so a typing slip rather than a length
MAX_ZIPF_SPAN = 10**6  # support points of a zipf table


@dataclass(frozen=True)
class Fixed:
    length: int

    def sample(self, rng: random.Random) -> int:
        return self.length

    def describe(self) -> str:
        return f"fixed:{self.length}"


@dataclass(frozen=True)
class Uniform:
    low: int
    high: int

    def sample(self, rng: random.Random) -> int:
        return rng.randint(self.low, self.high)

    def describe(self) -> str:
        return f"uniform:{self.low}-{self.high}"


@dataclass(frozen=True)
class LogNormal:
    """MEAN is the distribution's mean in tokens (not the underlying normal's mu): mu = ln(MEAN) - SIGMA^2 / 2."""

    mean: float
    sigma: float

    def sample(self, rng: random.Random) -> int:
        mu = math.log(self.mean) - self.sigma ** 2 / 2
        return max(1, min(MAX_LENGTH, round(rng.lognormvariate(mu, self.sigma))))

    def describe(self) -> str:
        return f"lognormal:{self.mean:g},{self.sigma:g}"


@dataclass(frozen=True)
class Zipf:
    """P(MIN + k) proportional to 1 / (k + 1)^THETA for k = 0 .. MAX - MIN: short lengths common, a long tail."""

    theta: float
    low: int
    high: int
    _cumulative: list[float] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        weights = ((k + 1) ** -self.theta for k in range(self.high - self.low + 1))
        object.__setattr__(self, "_cumulative", list(accumulate(weights)))

    def sample(self, rng: random.Random) -> int:
        return self.low + bisect_left(self._cumulative, rng.random() * self._cumulative[-1])

    def describe(self) -> str:
        return f"zipf:{self.theta:g},{self.low}-{self.high}"


Distribution = Fixed | Uniform | LogNormal | Zipf

_FORMS = "fixed:L, uniform:A-B, lognormal:MEAN,SIGMA or zipf:THETA,MIN-MAX"


def parse_distribution(text: str, where: str) -> Distribution:
    kind, _, rest = str(text).strip().partition(":")
    kind = kind.lower()
    try:
        if kind == "fixed":
            return Fixed(_length(rest, where))
        if kind == "uniform":
            low, high = _span(rest, where)
            return Uniform(low, high)
        if kind == "lognormal":
            mean, sigma = (float(part) for part in rest.split(","))
            if not (1 <= mean <= MAX_LENGTH and 0 <= sigma <= 5):
                raise KvplanError(f"lognormal needs 1 <= MEAN <= {MAX_LENGTH:,} tokens and 0 <= SIGMA <= 5; "
                                  f"got {text!r}", where)
            return LogNormal(mean, sigma)
        if kind == "zipf":
            theta_text, span = rest.split(",")
            theta = float(theta_text)
            low, high = _span(span, where)
            if not 0 < theta <= 10:
                raise KvplanError(f"zipf needs 0 < THETA <= 10; got {text!r}", where)
            if high - low >= MAX_ZIPF_SPAN:
                raise KvplanError(f"zipf spans at most {MAX_ZIPF_SPAN:,} lengths; got {text!r}", where)
            return Zipf(theta, low, high)
    except ValueError:
        pass
    raise KvplanError(f"cannot read {text!r} as a length distribution; write {_FORMS}", where)


def _length(text: str, where: str) -> int:
    value = int(text)
    if not 1 <= value <= MAX_LENGTH:
        raise KvplanError(f"a length must be 1 to {MAX_LENGTH:,} tokens; got {value:,}", where)
    return value


def _span(text: str, where: str) -> tuple[int, int]:
    low_text, high_text = text.split("-")
    low, high = _length(low_text, where), _length(high_text, where)
    if low > high:
        raise KvplanError(f"a range runs low-high; got {text!r}", where)
    return low, high
