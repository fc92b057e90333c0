"""MirrorProducer: sequence-numbered test records at a controlled rate, and the manifest.

The rate is per topic and is a ceiling: after ``t`` seconds at most ``floor(t * rate) + 1``
records have been handed to the client for each topic.

**Falling behind.**  The producer's *lag* is how late, in seconds, the record it is about
to send is relative to its due time.  It warns once (:class:`PytestKafkaMirrorWarning`,
``cannot reach ... msg/s``) only when it really cannot keep up: the lag stayed above
:data:`LAG_LIMIT_S` for :data:`LAG_WINDOW_S` without interruption and is no smaller at the
end of that window than at its start (see :class:`_LagWatch`).  A brief stall, or a backlog
the producer is absorbing (its lag shrinking, as after a burst of a rate profile), is not
reported; it shows in the schedule slip and in ``stats["max_lag_s"]``.  (Issue 13: the
records-behind count of a whole run, compared with a quarter second of the rate *after* a
step down, warned about a producer that had kept up.)

**Timestamps and coordinated omission.**  A throttled record carries its *due time* (its
place in the rate schedule), not the moment the producer got round to it: a producer that
stalls cannot hide the stall from the latency figures, which are measured from when the
record should have left.  How late the producer itself was is reported separately, as the
schedule slip (``stats["schedule_slip_ms"]``: p50 / p99 / max, see ``_slip.py``).
Unthrottled records carry the time they were handed to the client.

**Acknowledgements.**  The manifest holds, per topic, producer id and lane, the sequences
the source acknowledged: what the verifier expects on the target, so a record the source
never confirmed is never counted as lost by the replicator.  The client reports failures
only (``delivery.report.only.error``): a successful delivery costs no Python call, and
after the final flush every record that was neither reported failed nor left in the queue
was acknowledged.  Records still queued when the flush times out are purged, and their
purge reports make them *unreported* (neither acknowledged nor failed), as before.

Per record the send loop does a ``divmod``, a due-time multiply, the header or body
formatting and the client call; everything else (acknowledgements, rate accounting,
per-second counts' dictionary, slip) happens per pass or per failure.  The figures are in
``benchmarks/`` (README, Performance).
"""

from __future__ import annotations

import logging
import math
import time
import uuid
import warnings
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from .._warnings import PytestKafkaMirrorWarning
from ..rundir import LaneManifest, Manifest
from .records import FORMATS, HDR_LANE, HDR_PRODUCER, HDR_SEQ, HDR_TS, SEQ_WIDTH, VARIANTS, RecordEncoder, metadata_size
from .slip import SlipHistogram

__all__ = ["MirrorProducer", "ProducerError", "RateProfile", "TopicLanes", "new_producer_id"]

log = logging.getLogger("pytest_kafka_mirror.producer")

PROGRESS_EVERY = 10.0
#: Seconds between two ``on_counts`` calls (live metrics).
COUNTS_EVERY = 1.0
#: Records per topic per send pass, at most (unthrottled, or far behind the schedule).
BATCH = 2000
#: Seconds behind the schedule that count as falling behind; less is scheduling noise (a
#: context switch, a GC pause, a loaded machine) that the next passes absorb.
LAG_LIMIT_S = 0.25
#: Seconds the lag must stay above :data:`LAG_LIMIT_S`, without shrinking, before the
#: producer warns that it cannot keep up.
LAG_WINDOW_S = 2.0

#: ``on_counts(producer_id, {topic: {"sent", "acked", "failed", "rate"}})``: cumulative counts
#: of one producer, and its send rate over the last interval (0 once it is done).  While
#: producing, ``acked`` is sent - failed - in flight (the client's queue, shared out between
#: topics by records sent), never decreasing; exact once the producer is done.
CountsCallback = Callable[[str, dict[str, dict[str, float]]], None]


class ProducerError(RuntimeError):
    """Bad producer arguments or a source cluster that cannot be produced to."""


def new_producer_id() -> str:
    return "p" + uuid.uuid4().hex[:7]


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


def _merge(ranges: list[list[int]]) -> list[list[int]]:
    """Sort and merge inclusive ranges."""
    out: list[list[int]] = []
    for a, b in sorted(ranges):
        if out and a <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return out


def _ranges(seqs: Sequence[int]) -> list[list[int]]:
    """Inclusive ranges of a sorted list of distinct ints."""
    out: list[list[int]] = []
    for s in seqs:
        if out and s == out[-1][1] + 1:
            out[-1][1] = s
        else:
            out.append([s, s])
    return out


def _complement(sent: int, holes: Sequence[int]) -> list[list[int]]:
    """Ranges of ``0 .. sent-1`` without the sorted distinct ``holes``."""
    out: list[list[int]] = []
    nxt = 0
    for h in holes:
        if h > nxt:
            out.append([nxt, h - 1])
        nxt = h + 1
    if nxt < sent:
        out.append([nxt, sent - 1])
    return out


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


class _Topic:
    """Send state of one topic: lane routing, precomputed key / header parts, failures."""

    __slots__ = ("acked_shown", "failed", "keys", "lane_headers", "lanes", "name", "parts", "sent", "unreported")

    def __init__(self, t: TopicLanes, enc: RecordEncoder) -> None:
        self.name = t.topic
        self.lanes = t.lanes or 1
        self.keys = [enc.key(lane) for lane in range(self.lanes)]
        self.parts = [lane % t.partitions for lane in range(self.lanes)]
        self.lane_headers = [(HDR_LANE, h) for h in enc.lane_headers()] if enc.fmt == "headers" else []
        self.sent = 0  # records handed to the client; record k is seq k // lanes of lane k % lanes
        self.failed: dict[int, str] = {}  # record index -> error name (delivery failed)
        self.unreported: set[int] = set()  # record index: purged after the flush timed out
        self.acked_shown = 0  # live counts never decrease

    def on_delivery(self, k: int, err: Any, msg: Any) -> None:
        """Delivery report of record ``k`` (only failures are reported, see the module docstring)."""
        if err is None:
            return
        name = err.name() if hasattr(err, "name") else str(err)
        if name.startswith("_PURGE"):
            self.unreported.add(k)
        else:
            self.failed[k] = name

    def lane_manifests(self) -> list[LaneManifest]:
        out = []
        for lane in range(self.lanes):
            sent = (self.sent - lane + self.lanes - 1) // self.lanes if self.sent > lane else 0
            failed = sorted(k // self.lanes for k in self.failed if k % self.lanes == lane)
            holes = sorted({*failed, *(k // self.lanes for k in self.unreported if k % self.lanes == lane)})
            out.append(LaneManifest(self.name, lane, self.parts[lane], sent=sent,
                                    acked=_complement(sent, holes), failed=_ranges(failed)))
        return out


class _Seconds:
    """Records per UTC second of their own timestamp (``stats["sent_per_second"]``).

    The verifier groups arrivals by that same timestamp, so "sent" and "received" of a
    second compare exactly (recovery figures rely on it).  The send loop keeps the current
    second in locals and touches the dictionary only when a record falls outside it.
    """

    __slots__ = ("counts", "end", "n", "start")

    def __init__(self) -> None:
        self.counts: dict[int, int] = {}
        self.start, self.end, self.n = 0, 0, 0

    def switch(self, ts_us: int) -> None:
        """Close the current second and open the one of ``ts_us``."""
        if self.n:
            sec = self.start // 1_000_000
            self.counts[sec] = self.counts.get(sec, 0) + self.n
        self.start = ts_us - ts_us % 1_000_000
        self.end, self.n = self.start + 1_000_000, 0

    def pairs(self) -> list[list[int]]:
        self.switch(0)
        self.start = self.end = 0
        return sorted([s, n] for s, n in self.counts.items())


class _LagWatch:
    """Tells a producer that cannot keep up from one that stalled briefly or is catching up.

    Fed once per send pass with the lag (seconds the next record to send is past its due
    time), the run's elapsed seconds and the records sent so far.  :meth:`add` returns the
    window's first sample once the lag has been above ``limit`` for ``window`` seconds
    without interruption and is at least as large as it was ``window`` seconds ago: a lag
    that is sustained or growing.  A lag that drops under the limit starts the watch again,
    and a shrinking one (a backlog being absorbed) never triggers it, however large.
    """

    __slots__ = ("above_since", "limit", "longest_above", "max_lag", "samples", "window")

    def __init__(self, limit: float = LAG_LIMIT_S, window: float = LAG_WINDOW_S) -> None:
        self.limit, self.window = limit, window
        # (elapsed, lag, sent) while above the limit: the newest sample at or before the
        # window's start, then every later one
        self.samples: deque[tuple[float, float, int]] = deque()
        self.above_since: float | None = None
        self.max_lag = 0.0
        self.longest_above = 0.0

    def add(self, elapsed: float, lag: float, sent: int) -> tuple[float, float, int] | None:
        if lag > self.max_lag:
            self.max_lag = lag
        s = self.samples
        if lag <= self.limit:
            self.close(elapsed)
            return None
        if self.above_since is None:
            self.above_since = elapsed
        s.append((elapsed, lag, sent))
        start = elapsed - self.window
        while len(s) > 1 and s[1][0] <= start:
            s.popleft()
        first = s[0]
        if first[0] <= start and lag >= first[1]:
            return first
        return None

    def close(self, elapsed: float) -> None:
        """The lag is under the limit again (or the run is over) at ``elapsed``."""
        if self.above_since is not None:
            self.longest_above = max(self.longest_above, elapsed - self.above_since)
        self.samples.clear()
        self.above_since = None


class MirrorProducer:
    """Produces one run of test records to a source cluster.

    >>> p = MirrorProducer("127.0.0.1:9092", format="headers", message_size=200)
    >>> manifest = p.run([TopicLanes("orders", 4)], rate=1000, duration=10)  # doctest: +SKIP

    Several producer processes (for rates one core cannot reach) are a
    :class:`~pytest_kafka_mirror.produce.group.ProducerGroup`.
    """

    def __init__(
        self,
        bootstrap_servers: str,
        *,
        format: str = "headers",
        message_size: int = 200,
        producer_id: str | None = None,
        config: dict[str, Any] | None = None,
        flush_timeout: float = 30.0,
        client_factory: Callable[[dict[str, Any]], Any] | None = None,
    ) -> None:
        if format not in FORMATS:
            raise ProducerError(f"format must be one of {', '.join(FORMATS)}, got {format!r}")
        if isinstance(message_size, bool) or not isinstance(message_size, int) or message_size <= 0:
            raise ProducerError(f"message_size must be a positive number of bytes, got {message_size!r}")
        self.bootstrap_servers = bootstrap_servers
        self.format = format
        self.message_size = message_size
        self.producer_id = producer_id or new_producer_id()
        self.flush_timeout = flush_timeout
        # The Kafka client class; tests substitute a fake to check scheduling exactly.
        self.client_factory = client_factory
        self.config = {
            "bootstrap.servers": bootstrap_servers,
            "enable.idempotence": True,  # keeps per-partition order and no duplicates from the source side
            "acks": "all",
            "linger.ms": 5,
            "queue.buffering.max.messages": 1_000_000,
            "queue.buffering.max.kbytes": 1_048_576,
            "message.timeout.ms": 60_000,
            "socket.connection.setup.timeout.ms": 5000,
            # librdkafka refuses records above message.max.bytes before sending them
            # (1 MB by default): room for the largest record of this producer.
            "message.max.bytes": max(1_000_000, message_size + 65_536),
            # Failures only: a success costs no Python callback (see the module docstring).
            "delivery.report.only.error": True,
            **(config or {}),
        }
        if format == "body":
            # Body records are produced without a callback of their own: a failed one is
            # identified from its value (delivery reports carry no headers, so the headers
            # format gives each record its callback instead).
            self.config.setdefault("on_delivery", self._on_body_failure)
        self._by_name: dict[str, _Topic] = {}

    def check_size(self, topics: Sequence[TopicLanes]) -> None:
        """Raise ProducerError when ``message_size`` cannot hold the metadata."""
        lanes = max(t.lanes or 1 for t in topics)
        need = metadata_size(self.format, self.producer_id, lanes)
        if self.message_size < need:
            raise ProducerError(
                f"message_size {self.message_size} B is below the {self.format} format's metadata size "
                f"{need} B (producer id, lane, sequence, timestamp, checksum); use message_size >= {need}"
            )

    def connect(self, warmup_topic: str | None = None) -> tuple[Any, float | None]:
        """The client, and the seconds its warm-up record took (None without a warm-up topic)."""
        from confluent_kafka import KafkaException, Producer

        from .._kafkalog import with_logger

        try:
            producer = (self.client_factory or Producer)(with_logger(self.config))
        except KafkaException as exc:
            raise ProducerError(f"cannot create a producer for {self.bootstrap_servers}: {exc}") from None
        return producer, (self._warm_up(producer, warmup_topic) if warmup_topic else None)

    def _warm_up(self, producer: Any, topic: str) -> float:
        t0 = time.monotonic()
        failure: list[Any] = []
        producer.produce(topic, b"kafka-mirror warm-up", on_delivery=lambda err, msg: failure.append(err))
        left = producer.flush(min(self.flush_timeout, 30.0))
        if left or (failure and failure[0] is not None):
            raise ProducerError(
                f"source {self.bootstrap_servers}: the warm-up record to {topic!r} was not acknowledged "
                f"({failure[0] if failure and failure[0] else 'no answer within the flush timeout'})"
            )
        return round(time.monotonic() - t0, 6)

    def run(
        self,
        topics: Sequence[TopicLanes],
        *,
        rate: float | Sequence[tuple[float, float]] | RateProfile | None,
        duration: float | None = None,
        count: int | None = None,
        target_names: dict[str, str] | None = None,
        progress: Callable[[dict[str, Any]], None] | None = None,
        should_stop: Callable[[], bool] | None = None,
        warmup_topic: str | None = None,
        on_start: Callable[[], None] | None = None,
        on_counts: CountsCallback | None = None,
        start_at: float | None = None,
        client: tuple[Any, float | None] | None = None,
    ) -> Manifest:
        """Produce until ``count`` records per topic or ``duration`` seconds, then flush.

        With ``rate`` and ``duration`` but no ``count``, each topic gets exactly
        ``round(rate * duration)`` records (the integral, for a :class:`RateProfile`).
        Returns the manifest (not yet written).

        ``warmup_topic``: a topic outside the mirrored set.  One record is produced to it
        and acknowledged before the schedule starts, so the client's connection and
        idempotent-producer id (~0.5 s on Tansu) are not counted as mirror latency.

        ``on_start`` is called once, right when the schedule's clock starts (after the
        warm-up): scheduled faults are timed from there.  ``start_at`` (UTC epoch seconds)
        starts the schedule at that moment instead of at once, so that several producer
        processes share one schedule (their records' due times are counted from it).
        ``client``: a client already made by :meth:`connect`.

        ``on_counts`` gets the counts per topic about once a second and once at the end
        (see :data:`CountsCallback`), for live metrics.  The manifest's stats get
        ``sent_per_second``: ``[UTC epoch second, records]`` pairs over all topics, by each
        record's own timestamp, and ``schedule_slip_ms`` for a throttled run.
        """
        profile, count = validate_run(topics, rate, duration, count)
        self.check_size(topics)
        lanes_max = max(t.lanes or 1 for t in topics)
        enc = RecordEncoder(self.format, self.producer_id, self.message_size, lanes_max)
        producer, warmup_seconds = client if client is not None else self.connect(warmup_topic)
        state = [_Topic(t, enc) for t in topics]
        self._by_name = {t.name: t for t in state}

        seconds = _Seconds()
        slip = SlipHistogram()
        send = partial(self._send, producer, enc, seconds)
        behind_max = 0  # records (stats["max_behind_schedule"], kept for its readers)
        lag_watch = _LagWatch()
        warned = False
        if start_at is not None:
            wait = start_at - time.time()
            if wait > 0:
                time.sleep(wait)
        if on_start is not None:
            on_start()
        if start_at is not None:
            wall0_us = round(start_at * 1e6)
            t0 = time.monotonic() - max(0.0, time.time() - start_at)
        else:
            wall0_us, t0 = time.time_ns() // 1000, time.monotonic()
        next_progress = t0 + PROGRESS_EVERY
        counts_at = (t0, [0] * len(state))
        next_counts = t0 + COUNTS_EVERY
        limit = count if count is not None else 1 << 62

        def report_counts(now: float, final: bool = False) -> None:
            nonlocal counts_at
            assert on_counts is not None
            then, sent_then = counts_at
            span = max(now - then, 1e-9)
            in_flight = 0 if final else len(producer)
            total = sum(t.sent for t in state) or 1
            counts = {}
            for i, t in enumerate(state):
                failed = len(t.failed) + len(t.unreported)
                acked = t.sent - failed - (in_flight * t.sent + total - 1) // total
                t.acked_shown = max(t.acked_shown, acked)
                counts[t.name] = {
                    "sent": t.sent,
                    "acked": t.acked_shown,
                    "failed": len(t.failed),
                    "rate": 0.0 if final else round((t.sent - sent_then[i]) / span, 3),
                }
            counts_at = (now, [t.sent for t in state])
            on_counts(self.producer_id, counts)

        poll = producer.poll
        try:
            while True:
                now = time.monotonic()
                elapsed = now - t0
                if duration is not None and elapsed >= duration and count is None:
                    break
                if should_stop is not None and should_stop():
                    break
                done = True
                wait = 0.01
                # at `now`: the lag (how late the next record of the topic furthest behind is), records sent
                lag, pass_at, sent_now = -1.0, elapsed, sum(t.sent for t in state) if profile is not None else 0
                for t in state:
                    if t.sent >= limit:
                        continue
                    done = False
                    if profile is None:
                        n = min(limit - t.sent, BATCH)
                        send(t, t.sent, t.sent + n, None)
                        continue
                    elapsed = time.monotonic() - t0
                    allowed = min(limit, int(profile.allowed(elapsed)) + 1)
                    behind_max = max(behind_max, allowed - t.sent)
                    lag = max(lag, pass_at - profile.time_of(t.sent))
                    end = min(allowed, t.sent + BATCH)
                    for k0, k1, a, b in profile.segments(t.sent, end):
                        # due time of record k: a + k * b seconds from the schedule's start
                        slip.add_even((elapsed - a - k0 * b) * 1e6, b * 1e6, k1 - k0)
                        send(t, k0, k1, (wall0_us + a * 1e6, b * 1e6))
                    if t.sent < limit:
                        wait = min(wait, profile.time_of(t.sent) - (time.monotonic() - t0))
                if done:
                    if profile is not None and limit:
                        # the last record's lag: the passes' lags miss it when the last pass is long
                        lag_watch.max_lag = max(lag_watch.max_lag, time.monotonic() - t0 - profile.time_of(limit - 1))
                    break
                if profile is not None:
                    since = lag_watch.add(pass_at, lag, sent_now)
                    if since is not None and not warned:
                        warned = True
                        warnings.warn(self._lag_warning(profile, len(state), lag_watch, since, pass_at, lag, sent_now),
                                      stacklevel=2)
                poll(max(0.0, wait) if wait > 0.0005 else 0)
                if progress is not None and now >= next_progress:
                    progress({"producer_id": self.producer_id, "sent": sum(t.sent for t in state), "elapsed": elapsed})
                    next_progress = now + PROGRESS_EVERY
                if on_counts is not None and now >= next_counts:
                    report_counts(now)
                    next_counts = now + COUNTS_EVERY
            produce_seconds = time.monotonic() - t0
            lag_watch.close(produce_seconds)
            unflushed = producer.flush(self.flush_timeout)
            unaccounted = self._purge(producer) if unflushed else 0
        except KeyboardInterrupt:
            producer.flush(min(self.flush_timeout, 5))
            raise
        finished_us = time.time_ns() // 1000

        errors: dict[str, int] = {}
        lane_manifests: list[LaneManifest] = []
        for t in state:
            for name in t.failed.values():
                errors[name] = errors.get(name, 0) + 1
            lane_manifests += t.lane_manifests()
        total_sent = sum(t.sent for t in state)
        acked = sum(m.acked_count for m in lane_manifests)
        stats = {
            "sent": total_sent,
            "acked": acked,
            "failed": sum(len(t.failed) for t in state),
            "unreported": unflushed,
            "errors": errors,
            "produce_seconds": round(produce_seconds, 6),
            "achieved_rate_per_topic": round(total_sent / len(state) / produce_seconds, 3) if produce_seconds > 0 else None,
            "max_behind_schedule": behind_max if profile is not None else None,
            # seconds: the largest lag, and the longest stretch it stayed above LAG_LIMIT_S
            "max_lag_s": round(max(lag_watch.max_lag, 0.0), 3) if profile is not None else None,
            "lag_over_limit_s": round(lag_watch.longest_above, 3) if profile is not None else None,
            "rate_warning": warned,
            "warmup_seconds": warmup_seconds,
            "sent_per_second": seconds.pairs(),
            # Timestamps are due times (throttled) or hand-over times (unthrottled).
            "timestamps": "due" if profile is not None else "sent",
            "schedule_slip_ms": slip.to_stats(),
        }
        if unaccounted:
            # Left in the client after a purge: which ones is unknown, so they stay counted
            # as acknowledged (a record that then never arrives is reported missing).
            stats["unaccounted"] = unaccounted
            log.error("producer %s: %d records neither delivered nor purged; counted as acknowledged",
                      self.producer_id, unaccounted)
        if on_counts is not None:
            report_counts(time.monotonic(), final=True)
        if errors:
            log.warning("producer %s: %d delivery errors %s", self.producer_id, stats["failed"], errors)
        log.info(
            "producer %s: sent %d, acked %d in %.2f s (%.0f msg/s per topic)",
            self.producer_id, total_sent, acked, produce_seconds, stats["achieved_rate_per_topic"] or 0,
        )
        return Manifest(
            producer_id=self.producer_id,
            format=self.format,
            message_size=self.message_size,
            rate=profile.to_json() if profile is not None else None,
            started_us=wall0_us,
            finished_us=finished_us,
            topics={t.topic: (target_names or {}).get(t.topic, t.topic) for t in topics},
            lanes=lane_manifests,
            stats=stats,
        )

    def _lag_warning(self, profile: RateProfile, topics: int, watch: _LagWatch, since: tuple[float, float, int],
                     elapsed: float, lag: float, sent: int) -> PytestKafkaMirrorWarning:
        """The "cannot reach" warning: the rate due and the rate sent over the window, the lag now
        and then, and since when it has been above the limit."""
        then, lag_then, sent_then = since
        span = max(elapsed - then, 1e-9)
        due_rate = (profile.allowed(elapsed) - profile.allowed(then)) / span
        sent_rate = (sent - sent_then) / topics / span
        above = watch.above_since if watch.above_since is not None else then
        return PytestKafkaMirrorWarning(
            f"producer {self.producer_id} cannot reach {due_rate:.4g} msg/s per topic on {topics} topic(s): "
            f"it sent {sent_rate:.4g} msg/s per topic over the last {span:.1f} s and is {lag:.2f} s behind its "
            f"schedule ({lag_then:.2f} s {span:.1f} s earlier; more than {watch.limit:g} s behind for "
            f"{elapsed - above:.1f} s, since {above:.1f} s into the run). Lower the rate, use fewer/larger "
            "messages, or use several producer processes (processes=N)."
        )

    def _on_body_failure(self, err: Any, msg: Any) -> None:
        """Failure report of a body-format record (the client's default ``on_delivery``):
        the record is identified from its value, ``producer-id;sequence;...``."""
        if err is None:
            return
        t = self._by_name.get(msg.topic())
        if t is None:
            return  # not a record of the current run (the warm-up has its own callback)
        skip = len(self.producer_id) + 1
        try:
            lane, seq = int(msg.key()), int(msg.value()[skip : skip + SEQ_WIDTH])
        except (TypeError, ValueError):
            log.error("producer %s: a failed record of %s cannot be identified: %s", self.producer_id, t.name, err)
            return
        t.on_delivery(seq * t.lanes + lane, err, msg)

    def _send(self, producer: Any, enc: RecordEncoder, seconds: _Seconds, t: _Topic, k0: int, k1: int,
              due: tuple[float, float] | None) -> None:
        """Hand records ``k0 .. k1-1`` of topic ``t`` to the client.

        ``due`` = ``(a, b)``: record k is due at ``a + k * b`` UTC epoch microseconds and
        carries that time; None: unthrottled, records carry the time they are handed over.
        The hot loop of the producer: keep per-record work out of it.  The two formats get a
        loop each (the per-second bookkeeping repeated in both) rather than a branch or a
        call per record.
        """
        produce, poll = producer.produce, producer.poll
        topic, nl, keys, parts = t.name, t.lanes, t.keys, t.parts
        variants, nv = enc.variants, VARIANTS
        a, b = due if due is not None else (0.0, 0.0)
        throttled = due is not None
        now_ns = time.time_ns
        start, end, n = seconds.start, seconds.end, seconds.n
        if enc.fmt == "headers":
            p_hdr, lane_hdrs, fail = (HDR_PRODUCER, enc.producer_id.encode()), t.lane_headers, t.on_delivery
            for k in range(k0, k1):
                seq, lane = divmod(k, nl)
                ts = int(a + k * b) if throttled else now_ns() // 1000
                if not start <= ts < end:
                    seconds.start, seconds.n = start, n
                    seconds.switch(ts)
                    start, end, n = seconds.start, seconds.end, 0
                n += 1
                headers = [p_hdr, lane_hdrs[lane], (HDR_SEQ, b"%010d" % seq), (HDR_TS, b"%016d" % ts)]
                while True:
                    try:
                        produce(topic, variants[seq % nv], keys[lane], partition=parts[lane], headers=headers,
                                on_delivery=partial(fail, k))
                        break
                    except BufferError:
                        poll(0.05)
        else:
            pid = enc.producer_id.encode()
            for k in range(k0, k1):
                seq, lane = divmod(k, nl)
                ts = int(a + k * b) if throttled else now_ns() // 1000
                if not start <= ts < end:
                    seconds.start, seconds.n = start, n
                    seconds.switch(ts)
                    start, end, n = seconds.start, seconds.end, 0
                n += 1
                value = b"%s;%010d;%016d;%s" % (pid, seq, ts, variants[seq % nv])
                while True:
                    try:
                        produce(topic, value, keys[lane], partition=parts[lane])
                        break
                    except BufferError:
                        poll(0.05)
        seconds.start, seconds.end, seconds.n = start, end, n
        t.sent = k1

    def _purge(self, producer: Any) -> int:
        """After a flush timeout: purge what is left, so its reports say which records
        never got an answer; returns how many are still unaccounted for."""
        try:
            producer.purge(in_queue=True, in_flight=True)
        except Exception as exc:
            log.error("producer %s: purge after the flush timeout failed: %s", self.producer_id, exc)
            return len(producer)
        deadline = time.monotonic() + 5.0
        while len(producer) and time.monotonic() < deadline:
            producer.poll(0.1)
        return len(producer)
