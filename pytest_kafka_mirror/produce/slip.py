"""The producer's schedule slip: how late records were handed to the client.

Every throttled record has a due time (its place in the rate schedule) and that due time
is the timestamp it carries (coordinated omission: latency is measured from when the
record *should* have been sent, so a producer that falls behind cannot hide the delay).
How far the producer itself lagged is reported separately, as the distribution of
``hand-over time - due time`` over all records: the *schedule slip*.

Counting it per record would cost the producer's inner loop a clock read and a histogram
update per record.  Instead the producer reports each send pass: the records of one pass
(within one step of the rate profile) are due at evenly spaced times and all leave
together, so their slips are an arithmetic sequence, which is added to fixed-width buckets
arithmetically — a handful of operations per pass, not per record.  Records of one pass
leave within microseconds of each other, so a pass's clock reading stands for all of them.

Buckets are 10 µs wide up to 1 ms, 0.1 ms wide up to 100 ms, 10 ms wide up to 10 s, and
one bucket above; percentiles are the upper edge of the bucket holding the nearest rank
(capped by the exact maximum), so they are at most one bucket width above the true value.
A pass whose slips span many fine buckets costs one step per bucket: only a producer that
is on schedule has slips below 1 ms, and its passes are short.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["SlipHistogram"]

#: (upper limit of a tier in µs, bucket width in µs), in order; above the last: one bucket
_TIERS = ((1_000.0, 10.0), (100_000.0, 100.0), (10_000_000.0, 10_000.0))


def _tier_starts() -> tuple[list[tuple[float, float, int]], int]:
    """(tier start µs, bucket width, index of its first bucket) per tier, and the overflow index."""
    starts, lo, first = [], 0.0, 0
    for hi, width in _TIERS:
        starts.append((lo, width, first))
        first += int((hi - lo) // width)
        lo = hi
    return starts, first


_STARTS, _OVERFLOW = _tier_starts()
_LIMIT_US = _TIERS[-1][0]


def _index(slip_us: float) -> int:
    if slip_us >= _LIMIT_US:
        return _OVERFLOW
    for start, width, first in reversed(_STARTS):
        if slip_us >= start:
            return first + int((slip_us - start) // width)
    return 0  # negative: due a hair in the future by float rounding


def _lower_edge(index: int) -> float:
    if index >= _OVERFLOW:
        return _LIMIT_US
    for start, width, first in reversed(_STARTS):
        if index >= first:
            return start + (index - first) * width
    return 0.0


def _upper_edge(index: int) -> float:
    return _lower_edge(index + 1) if index < _OVERFLOW else math.inf


class SlipHistogram:
    """Slips of every record, in buckets (see the module docstring)."""

    __slots__ = ("count", "counts", "max_us")

    def __init__(self) -> None:
        self.counts: dict[int, int] = {}
        self.count = 0
        self.max_us = 0.0

    def add_even(self, first_us: float, spacing_us: float, n: int) -> None:
        """Add ``n`` slips ``first_us, first_us - spacing_us, ...`` (records due ``spacing_us``
        apart that left together: the first one due is the latest)."""
        if n <= 0:
            return
        first = max(first_us, 0.0)
        last = max(first_us - spacing_us * (n - 1), 0.0)
        self.count += n
        self.max_us = max(self.max_us, first)
        hi, lo = _index(first), _index(last)
        if hi == lo or spacing_us <= 0:
            self.counts[hi] = self.counts.get(hi, 0) + n
            return
        # at_least(b): how many of the slips are >= the lower edge of bucket b
        above = 0
        for b in range(hi, lo, -1):
            edge = _lower_edge(b)
            at_least = min(n, int((first_us - edge) // spacing_us) + 1) if first_us >= edge else 0
            if at_least > above:
                self.counts[b] = self.counts.get(b, 0) + at_least - above
                above = at_least
        self.counts[lo] = self.counts.get(lo, 0) + n - above

    def merge(self, other: SlipHistogram) -> None:
        for b, c in other.counts.items():
            self.counts[b] = self.counts.get(b, 0) + c
        self.count += other.count
        self.max_us = max(self.max_us, other.max_us)

    def percentile_ms(self, q: float) -> float | None:
        """Nearest-rank ``q``-quantile in ms: its bucket's upper edge, at most the maximum."""
        if not self.count:
            return None
        rank = max(1, math.ceil(q * self.count - 1e-9))
        cum = 0
        for b in sorted(self.counts):
            cum += self.counts[b]
            if cum >= rank:
                return round(min(_upper_edge(b), self.max_us) / 1000.0, 3)
        return round(self.max_us / 1000.0, 3)  # unreachable: the counts add up to count

    def to_stats(self) -> dict[str, Any] | None:
        """``{"p50", "p99", "max"}`` in ms, for the manifest's stats; None without records."""
        if not self.count:
            return None
        return {
            "p50": self.percentile_ms(0.5),
            "p99": self.percentile_ms(0.99),
            "max": round(self.max_us / 1000.0, 3),
            "records": self.count,
        }
