"""MirrorProducer: sequence-numbered test records at a controlled rate, and the manifest.

The rate is per topic and is a ceiling: after ``t`` seconds at most ``floor(t * rate) + 1``
records have been handed to the client for each topic.  When the producer falls behind
its schedule by more than a quarter second's worth of records it warns once
(:class:`PytestKafkaMirrorWarning`) and records the shortfall in the manifest's stats.

Every record's delivery report goes into the manifest (per topic, producer id and lane):
the acknowledged sequences are what the verifier expects on the target, so a record that
the source never confirmed is never counted as lost by the replicator.
"""

from __future__ import annotations

import logging
import math
import time
import uuid
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from ._warnings import PytestKafkaMirrorWarning
from .records import FORMATS, RecordEncoder, metadata_size
from .rundir import LaneManifest, Manifest

__all__ = ["MirrorProducer", "ProducerError", "RateProfile", "TopicLanes", "new_producer_id"]

log = logging.getLogger("pytest_kafka_mirror.producer")

PROGRESS_EVERY = 10.0
#: Seconds between two ``on_counts`` calls (live metrics).
COUNTS_EVERY = 1.0

#: ``on_counts(producer_id, {topic: {"sent", "acked", "failed", "rate"}})``: cumulative counts
#: of one producer, and its send rate over the last interval (0 once it is done).
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


@dataclass
class _Lane:
    """Acknowledgement bookkeeping for one (topic, lane); ranges kept as they arrive."""

    manifest: LaneManifest
    _acked_end: int = -2
    _failed_end: int = -2
    errors: dict[str, int] = field(default_factory=dict)

    def ack(self, seq: int) -> None:
        if seq == self._acked_end + 1:
            self.manifest.acked[-1][1] = seq
        else:
            self.manifest.acked.append([seq, seq])
        self._acked_end = seq

    def fail(self, seq: int, err: str) -> None:
        if seq == self._failed_end + 1:
            self.manifest.failed[-1][1] = seq
        else:
            self.manifest.failed.append([seq, seq])
        self._failed_end = seq
        self.errors[err] = self.errors.get(err, 0) + 1


def _merge(ranges: list[list[int]]) -> list[list[int]]:
    """Sort and merge inclusive ranges (delivery reports may come out of order on retries)."""
    out: list[list[int]] = []
    for a, b in sorted(ranges):
        if out and a <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
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


class MirrorProducer:
    """Produces one run of test records to a source cluster.

    >>> p = MirrorProducer("127.0.0.1:9092", format="headers", message_size=200)
    >>> manifest = p.run([TopicLanes("orders", 4)], rate=1000, duration=10)  # doctest: +SKIP
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
        if not isinstance(message_size, int) or message_size <= 0:
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
            **(config or {}),
        }

    def check_size(self, topics: Sequence[TopicLanes]) -> None:
        """Raise ProducerError when ``message_size`` cannot hold the metadata."""
        lanes = max(t.lanes or 1 for t in topics)
        need = metadata_size(self.format, self.producer_id, lanes)
        if self.message_size < need:
            raise ProducerError(
                f"message_size {self.message_size} B is below the {self.format} format's metadata size "
                f"{need} B (producer id, lane, sequence, timestamp, checksum); use message_size >= {need}"
            )

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
    ) -> Manifest:
        """Produce until ``count`` records per topic or ``duration`` seconds, then flush.

        With ``rate`` and ``duration`` but no ``count``, each topic gets exactly
        ``round(rate * duration)`` records (the integral, for a :class:`RateProfile`).
        Returns the manifest (not yet written).

        ``warmup_topic``: a topic outside the mirrored set.  One record is produced to it
        and acknowledged before the schedule starts, so the client's connection and
        idempotent-producer id (~0.5 s on Tansu) are not counted as mirror latency.

        ``on_start`` is called once, right when the schedule's clock starts (after the
        warm-up): scheduled faults are timed from there.

        ``on_counts`` gets the counts per topic about once a second and once at the end
        (see :data:`CountsCallback`), for live metrics.  The manifest's stats get
        ``sent_per_second``: ``[UTC epoch second, records]`` pairs over all topics, by each
        record's own produce timestamp.
        """
        profile = validate_rate(rate)
        if not topics:
            raise ProducerError("no topics to produce to")
        if count is None and duration is None:
            raise ProducerError("give a count (records per topic) or a duration (seconds)")
        if count is not None and (not isinstance(count, int) or count < 0):
            raise ProducerError(f"count must be a non-negative number of records per topic, got {count!r}")
        if duration is not None and (not isinstance(duration, (int, float)) or duration <= 0):
            raise ProducerError(f"duration must be a positive number of seconds, got {duration!r}")
        if count is None and profile is not None and duration is not None:
            count = round(profile.allowed(duration))
        self.check_size(topics)

        from confluent_kafka import KafkaException, Producer

        lanes_max = max(t.lanes or 1 for t in topics)
        enc = RecordEncoder(self.format, self.producer_id, self.message_size, lanes_max)
        try:
            producer = (self.client_factory or Producer)(self.config)
        except KafkaException as exc:
            raise ProducerError(f"cannot create a producer for {self.bootstrap_servers}: {exc}") from None

        warmup_seconds = self._warm_up(producer, warmup_topic) if warmup_topic else None

        per_topic: list[tuple[str, int, list[_Lane]]] = []
        for t in topics:
            lanes = [_Lane(LaneManifest(t.topic, lane, lane % t.partitions)) for lane in range(t.lanes or 1)]
            per_topic.append((t.topic, t.partitions, lanes))

        def on_delivery(lane: _Lane, seq: int, err: Any, msg: Any) -> None:
            if err is None:
                lane.ack(seq)
            else:
                lane.fail(seq, err.name() if hasattr(err, "name") else str(err))

        sent = [0] * len(per_topic)
        behind_max = 0
        warned = False
        if on_start is not None:
            on_start()
        started_us = time.time_ns() // 1000
        t0 = time.monotonic()
        next_progress = t0 + PROGRESS_EVERY
        # Records per second of their own produce timestamp, for the report's timeline:
        # the verifier groups arrivals by that same timestamp, so "sent" and "received" of
        # a second compare exactly (recovery figures rely on it).  Per record this costs
        # one comparison and one addition; the dict is touched once per second.
        per_second: dict[int, int] = {}
        cur_sec, sec_end, cur_n = 0, 0, 0
        counts_at = (t0, [0] * len(per_topic))
        next_counts = t0 + COUNTS_EVERY

        def report_counts(now: float, final: bool = False) -> None:
            nonlocal counts_at
            assert on_counts is not None
            then, sent_then = counts_at
            span = max(now - then, 1e-9)
            counts = {}
            for i, (topic, _parts, lanes) in enumerate(per_topic):
                counts[topic] = {
                    "sent": sent[i],
                    "acked": sum(lane.manifest.acked_count for lane in lanes),
                    "failed": sum(b - a + 1 for lane in lanes for a, b in lane.manifest.failed),
                    "rate": 0.0 if final else round((sent[i] - sent_then[i]) / span, 3),
                }
            counts_at = (now, list(sent))
            on_counts(self.producer_id, counts)
        produce = producer.produce
        poll = producer.poll
        now_us = time.time_ns
        batch = 2000  # records per topic per loop pass when unthrottled or far behind
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
                for i, (topic, _parts, lanes) in enumerate(per_topic):
                    limit = count if count is not None else 1 << 62
                    if profile is not None:
                        allowed = min(limit, int(profile.allowed(elapsed)) + 1)
                        behind = allowed - sent[i]
                        if behind > behind_max:
                            behind_max = behind
                    else:
                        allowed = min(limit, sent[i] + batch)
                    if sent[i] < limit:
                        done = False
                    n = min(allowed - sent[i], batch)
                    nlanes = len(lanes)
                    s0 = sent[i]
                    for k in range(s0, s0 + n):
                        lane_no = k % nlanes
                        lane = lanes[lane_no]
                        seq = lane.manifest.sent
                        ts = now_us() // 1000
                        if ts >= sec_end:
                            if cur_n:
                                per_second[cur_sec] = per_second.get(cur_sec, 0) + cur_n
                            cur_sec, cur_n = ts // 1_000_000, 0
                            sec_end = (cur_sec + 1) * 1_000_000
                        cur_n += 1
                        value, headers = enc.encode(lane_no, seq, ts)
                        while True:
                            try:
                                produce(
                                    topic, value, enc.key(lane_no),
                                    partition=lane.manifest.partition,
                                    headers=headers,
                                    on_delivery=partial(on_delivery, lane, seq),
                                )
                                break
                            except BufferError:
                                poll(0.05)
                        lane.manifest.sent = seq + 1
                    sent[i] = s0 + n
                    if profile is not None and sent[i] < limit:
                        wait = min(wait, profile.time_of(sent[i]) - elapsed)
                if done:
                    break
                # A quarter second's worth behind is a stall a user must hear about; less
                # is scheduling noise that the next loop pass absorbs.
                if profile is not None and not warned and behind_max > max(profile.rate_at(elapsed) * 0.25, 10):
                    warned = True
                    warnings.warn(
                        PytestKafkaMirrorWarning(
                            f"producer {self.producer_id} cannot reach {profile.rate_at(elapsed):g} msg/s per topic on "
                            f"{len(per_topic)} topic(s): {behind_max} records behind schedule after {elapsed:.1f} s. "
                            "Lower the rate, use fewer/larger messages, or use several producer processes."
                        ),
                        stacklevel=2,
                    )
                poll(max(0.0, wait) if wait > 0.0005 else 0)
                if progress is not None and now >= next_progress:
                    progress({"producer_id": self.producer_id, "sent": sum(sent), "elapsed": elapsed})
                    next_progress = now + PROGRESS_EVERY
                if on_counts is not None and now >= next_counts:
                    report_counts(now)
                    next_counts = now + COUNTS_EVERY
            produce_seconds = time.monotonic() - t0
            if cur_n:
                per_second[cur_sec] = per_second.get(cur_sec, 0) + cur_n
            unflushed = producer.flush(self.flush_timeout)
        except KeyboardInterrupt:
            producer.flush(min(self.flush_timeout, 5))
            raise
        finished_us = time.time_ns() // 1000

        errors: dict[str, int] = {}
        lane_manifests: list[LaneManifest] = []
        for _topic, _parts, lanes in per_topic:
            for lane in lanes:
                lane.manifest.acked = _merge(lane.manifest.acked)
                lane.manifest.failed = _merge(lane.manifest.failed)
                for k, v in lane.errors.items():
                    errors[k] = errors.get(k, 0) + v
                lane_manifests.append(lane.manifest)
        total_sent = sum(sent)
        acked = sum(m.acked_count for m in lane_manifests)
        stats = {
            "sent": total_sent,
            "acked": acked,
            "failed": sum(b - a + 1 for m in lane_manifests for a, b in m.failed),
            "unreported": unflushed,
            "errors": errors,
            "produce_seconds": round(produce_seconds, 6),
            "achieved_rate_per_topic": round(total_sent / len(per_topic) / produce_seconds, 3) if produce_seconds > 0 else None,
            "max_behind_schedule": behind_max if profile is not None else None,
            "rate_warning": warned,
            "warmup_seconds": warmup_seconds,
            "sent_per_second": sorted([s, n] for s, n in per_second.items()),
        }
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
            started_us=started_us,
            finished_us=finished_us,
            topics={t.topic: (target_names or {}).get(t.topic, t.topic) for t in topics},
            lanes=lane_manifests,
            stats=stats,
        )
