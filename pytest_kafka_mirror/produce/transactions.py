"""A transactional producer: test records in transactions, each committed or aborted.

For the scenarios of transactions on the source (``scenarios/test_transactions.py``)::

    p = TransactionalProducer("127.0.0.1:9092")
    manifest = p.run([TopicLanes("orders", 2)], transactions=12, records=20, abort_every=3)

Transaction ``i`` (from 0) writes ``records`` records to every lane of every topic and is
aborted when ``(i + 1) % abort_every == 0``, else committed; the lanes' sequences run on
across transactions, so the aborted ones leave holes.  The manifest's lanes say what
happened to each sequence: ``acked`` (the broker took it and its transaction committed),
``aborted`` (the broker took it, then its transaction was aborted: a ``read_committed``
consumer must never see it, a ``read_uncommitted`` one does), ``failed`` (its delivery
failed, or its transaction's outcome is unknown because the commit or abort itself
failed).  The verifier expects the acked sequences and counts an aborted one that
arrives as a phantom, and as ``aborted_arrived``.

Records are the same as :class:`~.producer.MirrorProducer`'s (format, size, lanes, the
send time in each), produced at a bounded pace: ``interval`` seconds between two
transactions, the whole run bounded by ``timeout`` per transaction step.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

from ..rundir import LaneManifest, Manifest
from .manifest import _ranges
from .producer import ProducerError, TopicLanes, new_producer_id
from .records import FORMATS, RecordEncoder

__all__ = ["TransactionalProducer"]

log = logging.getLogger("pytest_kafka_mirror.produce.transactions")


class _Lane:
    __slots__ = ("aborted", "acked", "failed", "lane", "partition", "sent", "topic")

    def __init__(self, topic: str, lane: int, partition: int) -> None:
        self.topic, self.lane, self.partition = topic, lane, partition
        self.sent = 0
        self.acked: list[int] = []
        self.aborted: list[int] = []
        self.failed: list[int] = []

    def manifest(self) -> LaneManifest:
        return LaneManifest(self.topic, self.lane, self.partition, sent=self.sent, acked=_ranges(self.acked),
                            failed=_ranges(self.failed), aborted=_ranges(self.aborted))


class TransactionalProducer:
    """Produces test records in transactions (see the module docstring)."""

    def __init__(self, bootstrap_servers: str, *, format: str = "headers", message_size: int = 200,
                 producer_id: str | None = None, config: dict[str, Any] | None = None,
                 timeout: float = 30.0) -> None:
        if format not in FORMATS:
            raise ProducerError(f"format must be one of {', '.join(FORMATS)}, got {format!r}")
        self.format = format
        self.message_size = message_size
        self.producer_id = producer_id or new_producer_id()
        self.timeout = timeout
        self.config = {
            "bootstrap.servers": bootstrap_servers,
            "transactional.id": f"kafka-mirror-{self.producer_id}",
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            "message.timeout.ms": int(timeout * 1000),
            "socket.connection.setup.timeout.ms": 5000,
            "message.max.bytes": max(1_000_000, message_size + 65_536),
            **(config or {}),
        }

    def run(self, topics: Sequence[TopicLanes], *, transactions: int, records: int, abort_every: int = 3,
            interval: float = 0.2, target_names: dict[str, str] | None = None) -> Manifest:
        """Produce ``transactions`` transactions of ``records`` records per lane; return the
        manifest (``stats["transactions"]``: committed, aborted and failed counts).

        A capture ends once every acknowledged (committed) record arrived: let the last
        transaction commit (``transactions % abort_every != 0``) when the aborted ones
        that a replicator copies must be counted too."""
        for name, value, low in (("transactions", transactions, 1), ("records", records, 1),
                                 ("abort_every", abort_every, 1)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ProducerError(f"{name} must be an integer >= {low}, got {value!r}")
        from confluent_kafka import KafkaException, Producer

        from .._kafkalog import with_logger

        lanes_of = max(t.lanes or 1 for t in topics)
        enc = RecordEncoder(self.format, self.producer_id, self.message_size, lanes_of)
        lanes = [_Lane(t.topic, lane, lane % t.partitions) for t in topics for lane in range(t.lanes or 1)]
        client = Producer(with_logger(self.config))
        started_us = time.time_ns() // 1000
        outcome = {"committed": 0, "aborted": 0, "failed": 0}
        per_second: dict[int, int] = {}
        try:
            client.init_transactions(self.timeout)
            for i in range(transactions):
                abort = (i + 1) % abort_every == 0
                done = self._transaction(client, enc, lanes, records, abort, per_second, KafkaException)
                outcome[done] += 1
                if i + 1 < transactions:
                    time.sleep(interval)
        finally:
            client.flush(self.timeout)
        manifests = [lane.manifest() for lane in lanes]
        stats = {
            "sent": sum(lane.sent for lane in lanes),
            "acked": sum(m.acked_count for m in manifests),
            "aborted_records": sum(len(lane.aborted) for lane in lanes),
            "failed": sum(len(lane.failed) for lane in lanes),
            "transactions": outcome,
            "produce_seconds": round((time.time_ns() // 1000 - started_us) / 1e6, 6),
            "sent_per_second": sorted([s, n] for s, n in per_second.items()),
            "timestamps": "sent",
        }
        log.info("transactions: %(committed)d committed, %(aborted)d aborted, %(failed)d failed", outcome)
        return Manifest(producer_id=self.producer_id, format=self.format, message_size=self.message_size, rate=None,
                        started_us=started_us, finished_us=time.time_ns() // 1000,
                        topics={t.topic: (target_names or {}).get(t.topic, t.topic) for t in topics},
                        lanes=manifests, stats=stats)

    def _transaction(self, client: Any, enc: RecordEncoder, lanes: list[_Lane], records: int, abort: bool,
                     per_second: dict[int, int], kafka_exception: type[Exception]) -> str:
        """One transaction: ``records`` records per lane, then commit or abort; returns
        ``"committed"``, ``"aborted"`` or ``"failed"`` (the outcome is unknown)."""
        client.begin_transaction()
        sent: list[tuple[_Lane, int, list[Any]]] = []
        for lane in lanes:
            for _ in range(records):
                seq, lane.sent = lane.sent, lane.sent + 1
                ts = time.time_ns() // 1000
                per_second[ts // 1_000_000] = per_second.get(ts // 1_000_000, 0) + 1
                value, headers = enc.encode(lane.lane, seq, ts)
                errors: list[Any] = []
                client.produce(lane.topic, value, enc.key(lane.lane), partition=lane.partition, headers=headers,
                               on_delivery=lambda err, msg, errors=errors: errors.append(err) if err else None)
                sent.append((lane, seq, errors))
        # Delivery first: abort_transaction() purges what the client still holds, which then
        # never reached the broker (nothing to abort there, nothing a consumer could see).
        client.flush(self.timeout)
        try:
            if abort:
                client.abort_transaction(self.timeout)
            else:
                client.commit_transaction(self.timeout)
        except kafka_exception as exc:
            log.warning("transaction %s failed: %s", "abort" if abort else "commit", exc)
            for lane, seq, _ in sent:
                lane.failed.append(seq)
            return "failed"
        for lane, seq, errors in sent:
            (lane.failed if errors else lane.aborted if abort else lane.acked).append(seq)
        return "aborted" if abort else "committed"
