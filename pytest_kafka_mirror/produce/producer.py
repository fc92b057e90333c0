"""MirrorProducer: sequence-numbered test records at a controlled rate, and the manifest.

The rate is per topic and is a ceiling: after ``t`` seconds at most ``floor(t * rate) + 1``
records have been handed to the client for each topic (``profile.py``: the rate profile,
the topics' lanes and the argument checks).  A producer that cannot keep up warns once
(``lag.py``: when, and why not for a brief stall or a backlog being absorbed).

**Timestamps and coordinated omission.**  A throttled record carries its *due time* (its
place in the rate schedule), not the moment the producer got round to it: a producer that
stalls cannot hide the stall from the latency figures, which are measured from when the
record should have left.  How late the producer itself was is reported separately, as the
schedule slip (``stats["schedule_slip_ms"]``: p50 / p99 / max, see ``slip.py``).
Unthrottled records carry the time they were handed to the client.

**Acknowledgements.**  Only failures are reported by the client; after the final flush
every record neither reported failed nor left in the queue was acknowledged (``manifest.py``
keeps the send state and builds the manifest's lanes and stats from it).

Per record the send loop (:meth:`_SendLoop.send`) does a due-time multiply, the header or
body formatting and the client call; everything else (acknowledgements,
rate accounting, per-second counts' dictionary, slip, lag) happens per pass or per failure.
The client call takes its arguments by position (:data:`PRODUCE_ARGS`): confluent-kafka
parses keywords against its eight names on every call, 0.5 us a record with three of them
(a third of the call).  A headers-format record's failure callback is a bound method, made
in C (``MethodType(report, k)``), not an object with a Python ``__init__`` (0.1 us less).
The figures are in ``benchmarks/`` (docs/performance.md).
"""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
import warnings
from collections.abc import Callable, Sequence
from types import MethodType
from typing import Any

from ..processes.managed import wait_until
from ..rundir import Manifest

# The names marked F401 were defined here before lag.py, manifest.py and profile.py, and
# are still imported from here.
from .lag import (
    LAG_LIMIT_S,  # noqa: F401
    LAG_WINDOW_S,  # noqa: F401
    _LagWatch,
    lag_warning,
)
from .manifest import (
    _complement,  # noqa: F401
    _merge,  # noqa: F401
    _ranges,  # noqa: F401
    _Seconds,
    _Topic,
    live_counts,
    run_stats,
)
from .profile import (
    ProducerError,
    RateProfile,
    TopicLanes,
    validate_rate,  # noqa: F401
    validate_run,
)
from .records import FORMATS, HDR_PRODUCER, HDR_SEQ, HDR_TS, SEQ_WIDTH, VARIANTS, RecordEncoder, metadata_size
from .slip import SlipHistogram

__all__ = ["MirrorProducer", "ProducerError", "RateProfile", "TopicLanes", "new_producer_id"]

log = logging.getLogger("pytest_kafka_mirror.producer")

PROGRESS_EVERY = 10.0
#: Seconds between two ``on_counts`` calls (live metrics).
COUNTS_EVERY = 1.0
#: Records per topic per send pass, at most (unthrottled, or far behind the schedule).
BATCH = 2000
#: ``Producer.produce``'s parameters in their order, which the send loop passes by position
#: (``callback`` is ``on_delivery``'s alias; timestamp 0: the client's clock);
#: tests/unit/test_producer.py checks the client still takes them so
PRODUCE_ARGS = ("topic", "value", "key", "partition", "callback", "on_delivery", "timestamp", "headers")

#: ``on_counts(producer_id, {topic: {"sent", "acked", "failed", "rate"}})``: cumulative counts
#: of one producer, and its send rate over the last interval (0 once it is done).  While
#: producing, ``acked`` is sent - failed - in flight (the client's queue, shared out between
#: topics by records sent), never decreasing; exact once the producer is done.
CountsCallback = Callable[[str, dict[str, dict[str, float]]], None]


def new_producer_id() -> str:
    return "p" + uuid.uuid4().hex[:7]


class _SendLoop:
    """The send passes of one run, on the schedule's clock.

    A pass hands every topic what is due (throttled: up to its schedule, unthrottled: a
    batch), at most :data:`BATCH` records each; between passes the loop watches the lag,
    waits in the client's poll until the next record is due, and reports progress and live
    counts.  Only :meth:`send` does per-record work; everything else here is per pass.
    """

    def __init__(self, producer_id: str, client: Any, enc: RecordEncoder, state: list[_Topic],
                 profile: RateProfile | None, *, count: int | None, duration: float | None) -> None:
        self.producer_id = producer_id
        self.client, self.enc, self.state, self.profile = client, enc, state, profile
        self.count, self.duration = count, duration
        self.limit = count if count is not None else 1 << 62  # records per topic
        self.seconds = _Seconds()
        self.slip = SlipHistogram()
        self.behind_max = 0  # records (stats["max_behind_schedule"], kept for its readers)
        self.lag_watch = _LagWatch()
        self.warned = False
        self.wall0_us, self.t0 = 0, 0.0  # the schedule's start: UTC epoch µs, monotonic seconds
        self.counts_at: tuple[float, list[int]] = (0.0, [])  # the last on_counts: when, sent per topic

    def start(self, start_at: float | None, on_start: Callable[[], None] | None) -> None:
        """Start the schedule's clock: now, or at ``start_at`` (UTC epoch seconds, waited for);
        ``on_start`` is called right before."""
        if start_at is not None:
            wait = start_at - time.time()
            if wait > 0:
                time.sleep(wait)
        if on_start is not None:
            on_start()
        if start_at is not None:
            self.wall0_us = round(start_at * 1e6)
            self.t0 = time.monotonic() - max(0.0, time.time() - start_at)
        else:
            self.wall0_us, self.t0 = time.time_ns() // 1000, time.monotonic()
        self.counts_at = (self.t0, [0] * len(self.state))

    def run(self, should_stop: Callable[[], bool] | None, progress: Callable[[dict[str, Any]], None] | None,
            on_counts: CountsCallback | None) -> float:
        """Send passes until every topic has its records, the duration is over or
        ``should_stop`` says so; returns the seconds since the schedule's start."""
        t0, poll = self.t0, self.client.poll
        send_pass = self._pass if self.profile is not None else self._pass_unthrottled
        next_progress, next_counts = t0 + PROGRESS_EVERY, t0 + COUNTS_EVERY
        while True:
            now = time.monotonic()
            elapsed = now - t0
            if self.duration is not None and elapsed >= self.duration and self.count is None:
                break
            if should_stop is not None and should_stop():
                break
            wait = send_pass(elapsed)
            if wait is None:
                break
            poll(max(0.0, wait) if wait > 0.0005 else 0)
            if progress is not None and now >= next_progress:
                progress({"producer_id": self.producer_id, "sent": sum(t.sent for t in self.state), "elapsed": elapsed})
                next_progress = now + PROGRESS_EVERY
            if on_counts is not None and now >= next_counts:
                self.report_counts(on_counts, now)
                next_counts = now + COUNTS_EVERY
        produce_seconds = time.monotonic() - t0
        self.lag_watch.close(produce_seconds)
        return produce_seconds

    def _pass_unthrottled(self, pass_at: float) -> float | None:
        """A batch of every topic not yet done; the seconds to wait in the client's poll
        after it, None once every topic has all its records."""
        limit, done = self.limit, True
        for t in self.state:
            if t.sent < limit:
                done = False
                self.send(t, t.sent, t.sent + min(limit - t.sent, BATCH), None)
        return None if done else 0.01

    def _pass(self, pass_at: float) -> float | None:
        """What is due of every topic at ``pass_at`` (seconds into the schedule); the seconds
        until the next record is due (at most 10 ms), None once every topic is done."""
        profile, limit = self.profile, self.limit
        assert profile is not None
        done, wait = True, 0.01
        # at pass_at: the lag (how late the next record of the topic furthest behind is), records sent
        lag, sent_now = -1.0, sum(t.sent for t in self.state)
        for t in self.state:
            if t.sent < limit:
                done = False
                topic_lag, topic_wait = self._send_due(t, pass_at)
                lag, wait = max(lag, topic_lag), min(wait, topic_wait)
        if done:
            if limit:
                # the last record's lag: the passes' lags miss it when the last pass is long
                self.lag_watch.max_lag = max(self.lag_watch.max_lag,
                                             time.monotonic() - self.t0 - profile.time_of(limit - 1))
            return None
        since = self.lag_watch.add(pass_at, lag, sent_now)
        if since is not None and not self.warned:
            self.warned = True
            # stacklevel: the caller of MirrorProducer.run (run -> _SendLoop.run -> _pass)
            warnings.warn(lag_warning(self.producer_id, profile, len(self.state), self.lag_watch, since, pass_at, lag,
                                      sent_now), stacklevel=4)
        return wait

    def _send_due(self, t: _Topic, pass_at: float) -> tuple[float, float]:
        """Send the records of ``t`` due by now (at most :data:`BATCH`); returns its lag at
        ``pass_at`` and the seconds until its next record is due (10 ms once it is done)."""
        profile, t0 = self.profile, self.t0
        assert profile is not None
        elapsed = time.monotonic() - t0
        allowed = min(self.limit, int(profile.allowed(elapsed)) + 1)
        self.behind_max = max(self.behind_max, allowed - t.sent)
        lag = pass_at - profile.time_of(t.sent)
        for k0, k1, a, b in profile.segments(t.sent, min(allowed, t.sent + BATCH)):
            # due time of record k: a + k * b seconds from the schedule's start
            self.slip.add_even((elapsed - a - k0 * b) * 1e6, b * 1e6, k1 - k0)
            self.send(t, k0, k1, (self.wall0_us + a * 1e6, b * 1e6))
        if t.sent < self.limit:
            return lag, profile.time_of(t.sent) - (time.monotonic() - t0)
        return lag, 0.01

    def report_counts(self, on_counts: CountsCallback, now: float, final: bool = False) -> None:
        then, sent_then = self.counts_at
        in_flight = 0 if final else len(self.client)
        counts = live_counts(self.state, in_flight, max(now - then, 1e-9), sent_then, final)
        self.counts_at = (now, [t.sent for t in self.state])
        on_counts(self.producer_id, counts)

    def await_partition(self, exc: Exception, topic: str, partition: int) -> None:
        """After ``produce`` raised ``exc``: when the client does not know ``partition`` yet
        (a partition added to the topic mid-run, e.g. ``add_partitions(...)``: the client
        refreshes its metadata only every few minutes), ask for the topic's metadata until
        it knows it, then return so the send is retried; re-raise anything else, and
        ProducerError after :data:`PARTITION_WAIT_S`."""
        from confluent_kafka import KafkaError, KafkaException

        if not (isinstance(exc, KafkaException) and exc.args and exc.args[0].code() == KafkaError._UNKNOWN_PARTITION):
            raise exc
        seen: list[Any] = [None]

        def known() -> bool:
            seen[0] = meta = self.client.list_topics(topic, timeout=5).topics.get(topic)
            return meta is not None and partition in meta.partitions

        try:
            wait_until(known, PARTITION_WAIT_S, f"partition {partition} of {topic!r}", interval=0.1,
                       pause=self.client.poll)
        except TimeoutError:
            meta = seen[0]
            raise ProducerError(f"topic {topic!r} has no partition {partition} after {PARTITION_WAIT_S:g} s "
                                f"(the client's metadata: {sorted(meta.partitions) if meta else 'no topic'})") from None

    def send(self, t: _Topic, k0: int, k1: int, due: tuple[float, float] | None) -> None:
        """Hand records ``k0 .. k1-1`` of topic ``t`` to the client, in that order.

        ``due`` = ``(a, b)``: record k is due at ``a + k * b`` UTC epoch microseconds and
        carries that time; None: unthrottled, records carry the time they are handed over.
        The two formats get a hot loop each (:meth:`_send_headers`, :meth:`_send_body`: the
        per-second bookkeeping repeated in both) rather than a branch or a call per record.
        Both walk the records a sequence at a time (record k is sequence ``k // lanes`` of
        lane ``k % lanes``): what a sequence's records share (its payload variant, its
        ``km.s`` header) is made once for all its lanes, and a lane's key, partition and
        ``km.l`` header come from one tuple (:attr:`_Topic.lane_parts`), without a ``divmod``
        and three lookups per record.
        """
        if k1 > k0:
            (self._send_headers if self.enc.fmt == "headers" else self._send_body)(t, k0, k1, due)

    def _send_headers(self, t: _Topic, k0: int, k1: int, due: tuple[float, float] | None) -> None:
        """:meth:`send` of the headers format."""
        seconds, variants, nv, nl, lanes = self.seconds, self.enc.variants, VARIANTS, t.lanes, t.lane_parts
        produce, poll, topic, now_ns, bound, report = self.client.produce, self.client.poll, t.name, time.time_ns, \
            MethodType, t.on_delivery
        a, b = due if due is not None else (0.0, 0.0)
        throttled = due is not None
        p_hdr = (HDR_PRODUCER, self.enc.producer_id.encode())
        start, end, n = seconds.start, seconds.end, seconds.n
        k = k0
        try:
            for seq in range(k0 // nl, (k1 - 1) // nl + 1):
                base = seq * nl
                row = lanes if k0 <= base and base + nl <= k1 else lanes[max(k0 - base, 0):k1 - base]
                value, seq_hdr = variants[seq % nv], (HDR_SEQ, b"%010d" % seq)
                for lane, key, part, lane_hdr in row:
                    k = base + lane
                    ts = int(a + k * b) if throttled else now_ns() // 1000
                    if not start <= ts < end:
                        seconds.start, seconds.n = start, n
                        seconds.switch(ts)
                        start, end, n = seconds.start, seconds.end, 0
                    n += 1
                    while True:
                        try:
                            # by position (PRODUCE_ARGS); the failure callback: report(k, err, msg)
                            produce(topic, value, key, part, bound(report, k), None, 0,
                                    [p_hdr, lane_hdr, seq_hdr, (HDR_TS, b"%016d" % ts)])
                            break
                        except BufferError:
                            poll(0.05)
                        except Exception as exc:  # noqa: BLE001 - a partition added since the client's metadata
                            self.await_partition(exc, topic, part)
        except BaseException:
            # Ctrl-C (or an error) inside the batch: records k0 .. k-1 were handed to the
            # client and may be acknowledged; the manifest must count them as sent.
            t.sent = k
            raise
        seconds.start, seconds.end, seconds.n = start, end, n
        t.sent = k1

    def _send_body(self, t: _Topic, k0: int, k1: int, due: tuple[float, float] | None) -> None:
        """:meth:`send` of the body format (a failure is identified from the record's value)."""
        seconds, variants, nv, nl, lanes = self.seconds, self.enc.variants, VARIANTS, t.lanes, t.lane_parts
        produce, poll, topic, now_ns = self.client.produce, self.client.poll, t.name, time.time_ns
        a, b = due if due is not None else (0.0, 0.0)
        throttled = due is not None
        pid = self.enc.producer_id.encode()
        start, end, n = seconds.start, seconds.end, seconds.n
        k = k0
        try:
            for seq in range(k0 // nl, (k1 - 1) // nl + 1):
                base = seq * nl
                row = lanes if k0 <= base and base + nl <= k1 else lanes[max(k0 - base, 0):k1 - base]
                payload = variants[seq % nv]
                for lane, key, part, _ in row:
                    k = base + lane
                    ts = int(a + k * b) if throttled else now_ns() // 1000
                    if not start <= ts < end:
                        seconds.start, seconds.n = start, n
                        seconds.switch(ts)
                        start, end, n = seconds.start, seconds.end, 0
                    n += 1
                    value = b"%s;%010d;%016d;%s" % (pid, seq, ts, payload)
                    while True:
                        try:
                            produce(topic, value, key, part)
                            break
                        except BufferError:
                            poll(0.05)
                        except Exception as exc:  # noqa: BLE001 - a partition added since the client's metadata
                            self.await_partition(exc, topic, part)
        except BaseException:
            t.sent = k  # as in _send_headers
            raise
        seconds.start, seconds.end, seconds.n = start, end, n
        t.sent = k1


#: How long a send waits for the client to learn of a partition added to its topic.
PARTITION_WAIT_S = 15.0


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
        #: after a Ctrl-C in run(): the manifest of what was acknowledged until then
        self.interrupted: Manifest | None = None
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
        loop = _SendLoop(self.producer_id, producer, enc, state, profile, count=count, duration=duration)
        loop.start(start_at, on_start)
        self.interrupted = None
        try:
            produce_seconds = loop.run(should_stop, progress, on_counts)
            unflushed = producer.flush(self.flush_timeout)
            unaccounted = self._purge(producer) if unflushed else 0
        except KeyboardInterrupt:
            # What the source acknowledged so far, for the caller to write: Ctrl-C leaves a
            # run directory that can still be verified (its records up to the interrupt).
            unflushed = producer.flush(min(self.flush_timeout, 5))
            unaccounted = self._purge(producer) if unflushed else 0
            self.interrupted = self._manifest(
                loop, state, topics, profile, target_names, warmup_seconds, time.monotonic() - loop.t0,
                unflushed, unaccounted)
            self.interrupted.stats["interrupted"] = True
            raise
        manifest = self._manifest(loop, state, topics, profile, target_names, warmup_seconds, produce_seconds,
                                  unflushed, unaccounted)
        if on_counts is not None:
            loop.report_counts(on_counts, time.monotonic(), final=True)
        return manifest

    def _manifest(self, loop: Any, state: list[Any], topics: Sequence[Any], profile: Any,
                  target_names: dict[str, str] | None, warmup_seconds: float | None, produce_seconds: float,
                  unflushed: int, unaccounted: int) -> Manifest:
        """What the source acknowledged, per lane, with the run's stats (logged)."""
        finished_us = time.time_ns() // 1000
        lanes, stats = run_stats(
            state, throttled=profile is not None, unflushed=unflushed, produce_seconds=produce_seconds,
            behind_max=loop.behind_max, lag_watch=loop.lag_watch, warned=loop.warned, warmup_seconds=warmup_seconds,
            seconds=loop.seconds, slip=loop.slip,
        )
        self._log_outcome(stats, unaccounted)
        return Manifest(
            producer_id=self.producer_id,
            format=self.format,
            message_size=self.message_size,
            rate=profile.to_json() if profile is not None else None,
            started_us=loop.wall0_us,
            finished_us=finished_us,
            topics={t.topic: (target_names or {}).get(t.topic, t.topic) for t in topics},
            lanes=lanes,
            stats=stats,
        )

    def _log_outcome(self, stats: dict[str, Any], unaccounted: int) -> None:
        """Log what the run's stats say; records left unaccounted for go into the stats."""
        if unaccounted:
            # Left in the client after a purge: which ones is unknown, so they stay counted
            # as acknowledged (a record that then never arrives is reported missing).
            stats["unaccounted"] = unaccounted
            log.error("producer %s: %d records neither delivered nor purged; counted as acknowledged",
                      self.producer_id, unaccounted)
        if stats["errors"]:
            log.warning("producer %s: %d delivery errors %s", self.producer_id, stats["failed"], stats["errors"])
        log.info(
            "producer %s: sent %s, acknowledged %s in %.1f s (%.0f msg/s per topic)",
            self.producer_id, f"{stats['sent']:,}", f"{stats['acked']:,}", stats["produce_seconds"],
            stats["achieved_rate_per_topic"] or 0,
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

    def _purge(self, producer: Any) -> int:
        """After a flush timeout: purge what is left, so its reports say which records
        never got an answer; returns how many are still unaccounted for."""
        try:
            producer.purge(in_queue=True, in_flight=True)
        except Exception as exc:
            log.error("producer %s: purge after the flush timeout failed: %s", self.producer_id, exc)
            return len(producer)
        with contextlib.suppress(TimeoutError):  # then count what is left
            wait_until(lambda: not len(producer), 5.0, "the purged records' reports", interval=0.1, pause=producer.poll)
        return len(producer)
