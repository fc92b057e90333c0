"""What one producer run is asked for: its topics and their lanes, the rate (a constant or a
:class:`RateProfile` of steps), and the checks of a run's arguments.

The rate is per topic and is a ceiling: after ``t`` seconds at most ``floor(t * rate) + 1``
records have been handed to the client for each topic (:meth:`RateProfile.allowed`).  Bad
arguments raise :class:`ProducerError` before a client is made.  Everything here is also
importable from :mod:`pytest_kafka_mirror.produce.producer`.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

__all__ = ["ProducerError", "RateProfile", "TopicLanes", "validate_rate", "validate_run"]


class ProducerError(RuntimeError):
    """Bad producer arguments or a source cluster that cannot be produced to."""


@dataclass
class TopicLanes:
    """One source topic and how the producer spreads it over lanes."""

    topic: str
    partitions: int
    lanes: int | None = None  # default: one lane per partition

    def __post_init__(self) -> None:
        if self.partitions < 1:
            raise ProducerError(f"topic {self.topic!r}: partitions must be >= 1, got {self.partitions}")
        if self.lanes is None:
            self.lanes = self.partitions
        if self.lanes < 1:
            raise ProducerError(f"topic {self.topic!r}: lanes must be >= 1, got {self.lanes}")


class RateProfile:
    """A rate that changes over time: ``[(seconds from start, messages/s), ...]`` steps.

    ``RateProfile([(0, 500), (5, 5000), (8, 500)])`` is 500 msg/s, a 3 s burst at
    5000 msg/s from t = 5 s, then 500 msg/s again.  A constant rate is one step.  The
    producer keeps to :meth:`allowed` (records due by time ``t``), so a profile is as
    strict a ceiling as a constant rate.
    """

    def __init__(self, steps: Sequence[tuple[float, float]]) -> None:
        pts = [(float(t), float(r)) for t, r in steps]
        if not pts or pts[0][0] != 0:
            raise ProducerError(f"a rate profile starts at t=0: [(0, RATE), (SECONDS, RATE), ...], got {steps!r}")
        for (t0, _), (t1, _) in zip(pts, pts[1:]):
            if t1 <= t0:
                raise ProducerError(f"rate profile times must increase, got {steps!r}")
        for _, r in pts:
            if math.isnan(r) or r <= 0:
                raise ProducerError(f"rate profile rates must be positive messages/s, got {steps!r}")
        self.steps = pts
        # records due at the start of each step
        self._base = [0.0]
        for (t0, r0), (t1, _) in zip(pts, pts[1:]):
            self._base.append(self._base[-1] + (t1 - t0) * r0)

    def _step(self, t: float) -> int:
        i = 0
        while i + 1 < len(self.steps) and self.steps[i + 1][0] <= t:
            i += 1
        return i

    def rate_at(self, t: float) -> float:
        return self.steps[self._step(t)][1]

    def allowed(self, t: float) -> float:
        """Records due by ``t`` seconds (the integral of the rate)."""
        i = self._step(t)
        t0, r = self.steps[i]
        return self._base[i] + (t - t0) * r

    def time_of(self, n: float) -> float:
        """When record ``n`` (counting from 0) is due."""
        i = len(self._base) - 1
        while i > 0 and self._base[i] > n:
            i -= 1
        t0, r = self.steps[i]
        return t0 + (n - self._base[i]) / r

    def segments(self, k0: int, k1: int) -> Iterator[tuple[int, int, float, float]]:
        """Records ``k0 .. k1-1`` split by step: ``(first, end, a, b)``, record k of a piece
        due ``a + k * b`` seconds after the start (the same instants as :meth:`time_of`)."""
        i = len(self._base) - 1
        while i > 0 and self._base[i] > k0:
            i -= 1
        k = k0
        while k < k1:
            if i + 1 < len(self._base) and self._base[i + 1] <= k:
                i += 1
                continue
            t, r = self.steps[i]
            end = min(k1, math.ceil(self._base[i + 1])) if i + 1 < len(self._base) else k1
            yield k, end, t - self._base[i] / r, 1.0 / r
            k = end
            i += 1

    def to_json(self) -> float | list[list[float]]:
        return self.steps[0][1] if len(self.steps) == 1 else [list(s) for s in self.steps]

    def __repr__(self) -> str:
        return f"RateProfile({self.steps!r})"


def validate_rate(rate: float | Sequence[tuple[float, float]] | RateProfile | None) -> RateProfile | None:
    """None (unthrottled), a positive number, or a profile of ``(seconds, rate)`` steps."""
    if rate is None or isinstance(rate, RateProfile):
        return rate
    if isinstance(rate, (list, tuple)):
        return RateProfile(rate)
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) or math.isnan(rate) or rate <= 0:
        raise ProducerError(
            f"rate must be a positive number of messages/s per topic, a profile [(0, RATE), (SECONDS, RATE), ...], "
            f"or None for unthrottled; got {rate!r}"
        )
    return RateProfile([(0, float(rate))])


def validate_run(
    topics: Sequence[TopicLanes],
    rate: float | Sequence[tuple[float, float]] | RateProfile | None,
    duration: float | None,
    count: int | None,
) -> tuple[RateProfile | None, int | None]:
    """Check the arguments of a run; returns the rate profile and the records per topic
    (``round(rate * duration)`` when only a duration is given, the profile's integral)."""
    profile = validate_rate(rate)
    if not topics:
        raise ProducerError("no topics to produce to")
    if count is None and duration is None:
        raise ProducerError("give a count (records per topic) or a duration (seconds)")
    if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 0):
        raise ProducerError(f"count must be a non-negative number of records per topic, got {count!r}")
    if duration is not None and (isinstance(duration, bool) or not isinstance(duration, (int, float)) or duration <= 0):
        raise ProducerError(f"duration must be a positive number of seconds, got {duration!r}")
    if count is None and profile is not None and duration is not None:
        count = round(profile.allowed(duration))
    return profile, count
