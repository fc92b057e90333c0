"""Exact latency percentiles, histogram, min / mean / max in two cheap aggregations.

``percentile_approx`` keeps a Greenwald-Khanna summary per group; at the accuracy a
p99.9 needs, it costs about 1.5 s per million records on two cores and is still
approximate.  Latencies are integers (microseconds), so exact nearest-rank percentiles
come cheaper:

1. count records per (topic, fine bucket), where fine buckets are logarithmic with a
   ratio of 1.001: a few thousand groups, a hash aggregate as cheap as a count;
2. find on the driver the bucket and the rank within it of every wanted percentile, for
   every topic and overall; most resolve right there (rank 1 is the bucket's min, the
   last rank its max);
3. for the rest, count the distinct values of just those buckets.  A bucket spans 0.1%
   of its value, so that is at most a few thousand values even for minutes of lag.

Only monotonicity of the bucket function matters for exactness (a value misplaced by
floating point at a boundary still lands in an ordered bucket), and Java's ``Math.log``
is guaranteed semi-monotonic.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from pytest_kafka_mirror.verify.report import LatencyStats

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from pytest_kafka_mirror.verify._sql import Queries

__all__ = ["PERCENTILES", "LatencyPlan", "nearest_rank"]

#: Quantiles reported, and the LatencyStats fields they fill.
PERCENTILES: tuple[tuple[float, str], ...] = ((0.5, "p50_ms"), (0.9, "p90_ms"), (0.99, "p99_ms"), (0.999, "p999_ms"))
_RATIO = 1.001


def nearest_rank(q: float, n: int) -> int:
    """1-based rank of the q-quantile among n values: ``ceil(q * n)``, at least 1.

    Computed on exact fractions: ``math.ceil(0.7 * 10)`` is 8 in floating point.
    """
    return max(1, math.ceil(Fraction(str(q)) * n))


def _double(value: float) -> str:
    """A float as a Spark SQL double literal that parses back to the same double."""
    return f"{float(value)!r}D"


def fine_bucket(lat_us: str, ratio: float = _RATIO) -> str:
    """Monotone bucket of a latency in µs (column ``lat_us``), as SQL: log-ratio buckets,
    mirrored for negatives (clock skew)."""
    step = _double(math.log(ratio))
    return (
        f"CAST(CASE WHEN `{lat_us}` > 0 THEN FLOOR(LN(CAST(`{lat_us}` AS DOUBLE)) / {step}) "
        f"WHEN `{lat_us}` = 0 THEN -1 "
        f"ELSE -2 - FLOOR(LN(CAST(-(`{lat_us}`) AS DOUBLE)) / {step}) END AS BIGINT)"
    )


def _hist_bucket(lat_us: str, bounds_ms: Sequence[float]) -> str:
    """Index of the first bound (ms, inclusive) the latency (µs, column ``lat_us``) is
    under, as SQL; len(bounds) above all."""
    cases = " ".join(f"WHEN `{lat_us}` <= {_double(bound * 1000.0)} THEN {i}" for i, bound in enumerate(bounds_ms))
    return f"CASE {cases} ELSE {len(bounds_ms)} END" if cases else str(len(bounds_ms))


@dataclass
class _Scope:
    """Bucket counts of one topic, or of all of them."""

    buckets: dict[int, list[int]] = field(default_factory=dict)  # fine bucket -> [count, min, max]
    histogram: list[int] = field(default_factory=list)
    count: int = 0
    total_us: int = 0

    def add(self, fb: int, hb: int, count: int, lo: int, hi: int, total_us: int) -> None:
        b = self.buckets.get(fb)
        if b is None:
            self.buckets[fb] = [count, lo, hi]
        else:
            b[0] += count
            b[1] = min(b[1], lo)
            b[2] = max(b[2], hi)
        self.histogram[hb] += count
        self.count += count
        self.total_us += total_us

    def locate(self, rank: int) -> tuple[int, int | None]:
        """``(value, None)`` when the bucket alone answers, else ``(bucket, rank within it)``."""
        cum = 0
        for fb in sorted(self.buckets):
            count, lo, hi = self.buckets[fb]
            if cum + count >= rank:
                r = rank - cum
                if r == 1 or lo == hi:
                    return lo, None
                if r == count:
                    return hi, None
                return fb, r
            cum += count
        raise ValueError(f"rank {rank} beyond {cum} values")  # unreachable for 1 <= rank <= count


class LatencyPlan:
    """The latency figures of ``latencies`` (SQL text of a relation over ``frames``, columns
    ``topic``, ``lat_us`` non-null): its two aggregations as queries the caller runs
    (together with its other queries), and the figures from their rows."""

    def __init__(self, query: Queries, latencies: str, bounds_ms: Sequence[float], *, exact: bool = False,
                 **frames: DataFrame) -> None:
        self.query = query
        self.frames = frames
        # exact: one bucket per value (about a row per record): every percentile is then
        # answered by the buckets, and values_query is never needed.
        bucket = "lat_us" if exact else fine_bucket("lat_us")
        self.binned = (f"(SELECT topic, lat_us, {bucket} AS fb, "
                       f"{_hist_bucket('lat_us', bounds_ms)} AS hb FROM {latencies})")
        width = len(bounds_ms) + 1
        self.overall = _Scope(histogram=[0] * width)
        self.topics: dict[str, _Scope] = defaultdict(lambda: _Scope(histogram=[0] * width))
        self.found: dict[tuple[str | None, str], tuple[int, int | None]] = {}

    def buckets_query(self) -> DataFrame:
        """Counts per (topic, fine bucket, histogram bucket)."""
        return self.query("SELECT topic, fb, hb, count(1) AS n, min(lat_us) AS lo, max(lat_us) AS hi, "
                          f"sum(lat_us) AS total FROM {self.binned} GROUP BY topic, fb, hb", **self.frames)

    def values_query(self, rows: Sequence[Mapping[str, Any]]) -> DataFrame | None:
        """Take the rows of :meth:`buckets_query`; return the query of the distinct values of
        the buckets some percentile falls inside, or None when the buckets answer alone."""
        for row in rows:
            counted = (row["fb"], row["hb"], row["n"], row["lo"], row["hi"], row["total"])
            self.topics[row["topic"]].add(*counted)
            self.overall.add(*counted)
        for name, scope in self._scopes().items():
            for q, figure in PERCENTILES:
                if scope.count:
                    self.found[(name, figure)] = scope.locate(nearest_rank(q, scope.count))
        # Second pass only for ranks that fell inside a bucket with several distinct values.
        wanted = sorted({at[0] for at in self.found.values() if at[1] is not None})
        if not wanted:
            return None
        return self.query(f"SELECT topic, fb, lat_us, count(1) AS count FROM {self.binned} "
                          f"WHERE fb IN ({', '.join(map(str, wanted))}) GROUP BY topic, fb, lat_us", **self.frames)

    def _scopes(self) -> dict[str | None, _Scope]:
        scopes: dict[str | None, _Scope] = {None: self.overall}
        scopes.update(self.topics)
        return scopes

    def finish(self, rows: Sequence[Mapping[str, Any]]) -> tuple[LatencyStats, dict[str, LatencyStats]]:
        """Take the rows of :meth:`values_query` (none when it returned None)."""
        values: dict[tuple[str, int], list[tuple[int, int]]] = defaultdict(list)
        for row in rows:
            values[(row["topic"], row["fb"])].append((row["lat_us"], row["count"]))
        topics = self.topics

        def resolve(name: str | None, at: tuple[int, int | None]) -> float:
            value, rank = at
            if rank is None:
                return value / 1000.0
            counts: dict[int, int] = defaultdict(int)
            for topic in topics if name is None else [name]:
                for v, c in values.get((topic, value), []):
                    counts[v] += c
            cum = 0
            for v in sorted(counts):
                cum += counts[v]
                if cum >= rank:
                    return v / 1000.0
            raise ValueError(f"rank {rank} beyond bucket {value} of {name or 'all topics'}")

        def stats(name: str | None, scope: _Scope) -> LatencyStats:
            if not scope.count:
                return LatencyStats(histogram=scope.histogram)
            return LatencyStats(
                count=scope.count,
                min_ms=min(b[1] for b in scope.buckets.values()) / 1000.0,
                mean_ms=scope.total_us / scope.count / 1000.0,
                max_ms=max(b[2] for b in scope.buckets.values()) / 1000.0,
                histogram=scope.histogram,
                **{figure: resolve(name, self.found[(name, figure)]) for _, figure in PERCENTILES},
            )

        return stats(None, self.overall), {name: stats(name, scope) for name, scope in sorted(topics.items())}
