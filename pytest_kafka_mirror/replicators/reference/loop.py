"""The copy loop of the reference mirror: consume the source, produce to the target.

Every record is copied with its key, value, headers, timestamp and partition.  Topics
without active fault knobs take the fast path (no decoding); the others go through their
fault engine (``control.py``).  Between batches the loop does the periodic work: offset
syncs, the fault control file, topic discovery, commits and a status line.  While a
rebalance pauses the mirror (``discovery.py``) it consumes nothing.  With ``max_rate``
(``behaviour.py``) a token bucket decides how many records the next batch may hold.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ...processes.managed import wait_until
from .control import FaultControl
from .discovery import Discovery
from .groups import GroupSync
from .knobs import MirrorRecord
from .positions import DeliveryStats, Positions

__all__ = ["CopyLoop", "Throttle"]

STATUS_EVERY = 5.0
CONTROL_EVERY = 0.05
#: how long a produce waits for the producer to learn of a grown target partition
PARTITION_WAIT_S = 30.0
#: the largest batch a consume returns
BATCH = 500


class Throttle:
    """At most ``rate`` records/s: a token bucket holding at most ``burst_s`` seconds of
    records, so an idle spell does not let a burst above the rate through."""

    def __init__(self, rate: float, now: float, burst_s: float = 0.1) -> None:
        self.rate = rate
        self.cap = max(1.0, rate * burst_s)
        self.tokens = 0.0
        self.at = now

    def allowed(self, now: float) -> int:
        """Records the next batch may hold (0: wait :meth:`wait_s` first)."""
        self.tokens = min(self.cap, self.tokens + (now - self.at) * self.rate)
        self.at = now
        return int(self.tokens)

    def wait_s(self) -> float:
        return max(0.0, (1.0 - self.tokens) / self.rate)

    def spend(self, n: int) -> None:
        self.tokens -= n


class CopyLoop:
    """Runs until :attr:`stopping` is set (SIGTERM), then flushes and commits."""

    def __init__(self, *, consumer: Any, gaps: Any, producer: Any, prefix: str, discovery: Discovery,
                 control: FaultControl, positions: Positions, groups: GroupSync, stats: DeliveryStats,
                 commit_interval: float, log: Callable[[str], None], max_rate: float = 0.0) -> None:
        self.consumer = consumer
        self.gaps = gaps
        self.producer = producer
        self.prefix = prefix
        self.discovery = discovery
        self.control = control
        self.positions = positions
        self.groups = groups
        self.stats = stats
        self.commit_interval = commit_interval
        self.log = log
        self.read = 0  # records of the mirrored topics read from the source
        self.produced = 0  # records produced to the target (fault stages may drop, hold or add)
        self.stopping = False
        self.throttle = Throttle(max_rate, time.monotonic()) if max_rate > 0 else None

    def send(self, rec: MirrorRecord) -> None:
        """Produce a record that went through fault stages (not committed)."""
        from confluent_kafka import KafkaException

        while True:
            try:
                self.producer.produce(self.prefix + rec.topic, rec.value, rec.key, partition=rec.partition,
                                      headers=rec.headers, timestamp=rec.timestamp or 0, on_delivery=self.stats)
                self.produced += 1
                return
            except BufferError:
                self.producer.poll(0.05)
            except KafkaException as exc:
                self._await_partition((self.prefix + rec.topic, rec.partition), exc)

    def _await_partition(self, tp: tuple[str, int], exc: Exception) -> None:
        """A partition the producer does not know yet (a target topic that just grew): ask
        for the topic's metadata until it is there (librdkafka refreshes it only every few
        minutes by itself); any other error, or PARTITION_WAIT_S without it, is raised."""
        from confluent_kafka import KafkaError

        if exc.args[0].code() != KafkaError._UNKNOWN_PARTITION:
            raise exc
        def known() -> bool:
            topic = self.producer.list_topics(tp[0], timeout=5).topics.get(tp[0])
            return topic is not None and tp[1] in topic.partitions

        try:
            wait_until(known, PARTITION_WAIT_S, f"partition {tp[1]} of {tp[0]!r}", interval=0.1)
        except TimeoutError:
            raise exc from None

    def copy(self, msgs: list[Any], now: float) -> None:
        """One consumed batch.  The hot path: written out, with locals, as it runs per record."""
        from confluent_kafka import KafkaError, KafkaException

        produce, poll = self.producer.produce, self.producer.poll
        engines = self.control.engines
        hb_topic = self.groups.hb_topic
        committed, sent = self.positions.committed, self.positions.sent
        on_delivery = self.positions.on_delivery
        prefix = self.prefix
        for m in msgs:
            if m.error():
                if m.error().code() != KafkaError._PARTITION_EOF:
                    self.log(f"consume error: {m.error()}")
                continue
            topic = m.topic()
            if topic == hb_topic:
                self.groups.relay_heartbeat(m, produce, self.stats)
                committed[(topic, m.partition())] = m.offset() + 1
                continue
            self.read += 1
            engine = engines.get(topic)
            if engine is not None:
                rec = MirrorRecord.decoded(topic, m.partition(), m.offset(), m.key(), m.value(), m.headers(),
                                           m.timestamp()[1])
                for out in engine.feed(rec, now):
                    self.send(out)
                continue
            target_tp = (prefix + topic, m.partition())
            while True:
                try:
                    produce(target_tp[0], m.value(), m.key(), partition=m.partition(), headers=m.headers(),
                            timestamp=m.timestamp()[1], on_delivery=on_delivery)
                    self.produced += 1
                    break
                except BufferError:
                    poll(0.05)
                except KafkaException as exc:
                    self._await_partition(target_tp, exc)
            sent(target_tp, m.offset())

    def run(self) -> None:
        next_status = time.monotonic() + STATUS_EVERY
        next_control = 0.0
        while not self.stopping:
            now = time.monotonic()
            batch = BATCH if self.throttle is None else min(BATCH, self.throttle.allowed(now))
            if self.discovery.paused(now):
                time.sleep(0.01)
            elif batch < 1:
                time.sleep(min(0.01, self.throttle.wait_s()) if self.throttle else 0.01)
            else:
                msgs = self.consumer.consume(batch, 0.01)
                if self.throttle is not None:
                    self.throttle.spend(len(msgs))
                self.copy(self.gaps.filter(msgs), time.monotonic())
                now = time.monotonic()
                for engine in self.control.engines.values():
                    for out in engine.tick(now):
                        self.send(out)
            self.producer.poll(0)
            self.groups.tick(now)
            if now >= next_control:
                self.control.read(self.discovery.assigned)
                next_control = now + CONTROL_EVERY
            self.discovery.tick(now)
            if now - self.positions.last_commit >= self.commit_interval:
                self.positions.commit(self.control.engines)
            if now >= next_status:
                self.log(self.status())
                next_status = now + STATUS_EVERY

    def status(self) -> str:
        s = self.stats
        return (f"read {self.read} records, produced {self.produced}{self.control.dropped_words()}, "
                f"{s.errors} delivery errors"
                f"{' (last: ' + s.last_error + ')' if s.errors else ''}{self.groups.status()}, "
                f"offset gaps re-read {self.gaps.refetched}, taken as absent {self.gaps.accepted}")

    def finish(self) -> int:
        """Release the fault stages, flush, stop the group work, commit; unflushed count."""
        self.control.release_all()
        left = int(self.producer.flush(10))
        self.groups.stop()
        self.positions.commit(self.control.engines)  # after the flush: every copied record acknowledged (or frozen)
        self.consumer.close()
        self.control.write_ledger()
        return left
