"""What the target holds at failover: the checkpoints, the committed offsets of the witness
groups, the heartbeats (read with ``assign()``, never a group join)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ...replicators._checkpoints import CheckpointSettings
from .syncs import SeenSync

FAILOVER_FILE = "failover.json"
RESETS = ("latest", "earliest")


class FailoverError(RuntimeError):
    """The failover check cannot run (no witnesses, no capture, a cluster that does not answer)."""


@dataclass(frozen=True)
class SeenCheckpoint:
    """A checkpoint as read from the checkpoints topic (``seq``: its offset there)."""

    group: str
    topic: str  # target topic
    partition: int
    upstream: int
    downstream: int
    time_ms: int  # the record's timestamp: when the replicator computed it
    seq: int


@dataclass
class TargetState:
    checkpoints: list[SeenCheckpoint] = field(default_factory=list)
    synced: dict[str, dict[tuple[str, int], int]] | None = None
    heartbeats: list[int] = field(default_factory=list)  # timestamps (ms) of the replicated heartbeats
    heartbeats_topic_exists: bool = False
    checkpoints_topic_exists: bool = False
    read_at: float = 0.0
    syncs: list[SeenSync] | None = None  # the offset-syncs topic in order; None: not read (syncs_note says why)
    syncs_note: str = "the offset syncs were not read"


class TargetReader:
    """Reads the checkpoints topic, the replicated heartbeats and the groups' committed
    offsets from the target, incrementally (the wait for convergence polls it; the group
    sync scenario watches a group's offsets with it)."""

    def __init__(self, bootstrap: str, settings: CheckpointSettings, groups: Sequence[str], emitter: str | None) -> None:
        from confluent_kafka import Consumer

        from ..._kafkalog import admin_client, with_logger

        self.settings = settings
        self.groups = list(groups)
        self.emitter = emitter.encode() if emitter else None
        self.admin = admin_client(bootstrap)
        self.consumer = Consumer(with_logger({
            "bootstrap.servers": bootstrap, "group.id": "kafka-mirror-failover-reader", "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "enable.partition.eof": True, "fetch.wait.max.ms": 10,
            "fetch.queue.backoff.ms": 1,
        }))
        self.state = TargetState()
        self.assigned: set[str] = set()
        self.eof: dict[str, bool] = {}

    def _assign(self) -> None:
        from confluent_kafka import TopicPartition

        wanted = {self.settings.names.checkpoints_topic} if self.settings.no_checkpoints() is None else set()
        if self.settings.emit_heartbeats:
            wanted.add(self.settings.names.remote_heartbeats_topic)
        missing = wanted - self.assigned
        if not missing:
            return
        topics = self.admin.list_topics(timeout=10).topics
        new = [t for t in missing if t in topics and topics[t].error is None]
        if new:
            self.consumer.incremental_assign([TopicPartition(t, 0, 0) for t in new])
            self.assigned.update(new)
            self.eof.update({t: False for t in new})
        self.state.checkpoints_topic_exists = self.settings.names.checkpoints_topic in self.assigned
        self.state.heartbeats_topic_exists = self.settings.names.remote_heartbeats_topic in self.assigned

    def read(self, limit: float = 15.0) -> TargetState:
        """Read what is there now: until every assigned partition reported its end and
        nothing new came for 0.2 s (bounded by ``limit`` seconds)."""
        from confluent_kafka import KafkaError

        from ...replicators._checkpoints import EMITTER_HEADER
        from ...replicators.mm2_records import Checkpoint, Heartbeat, RecordFormatError

        self._assign()
        groups = set(self.groups)
        t0 = time.monotonic()
        quiet_since = time.monotonic()
        cp_topic = self.settings.names.checkpoints_topic
        while self.assigned and time.monotonic() - t0 < limit:
            msgs: list[Any] = self.consumer.consume(500, 0.05)
            for m in msgs:
                if m.error():
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        self.eof[m.topic()] = True
                    continue
                self.eof[m.topic()] = False
                quiet_since = time.monotonic()
                try:
                    if m.topic() == cp_topic:
                        cp = Checkpoint.decode(m.key(), m.value())
                        if cp.group in groups:
                            self.state.checkpoints.append(SeenCheckpoint(
                                cp.group, cp.topic, cp.partition, cp.upstream_offset, cp.downstream_offset,
                                m.timestamp()[1], m.offset()))
                    else:
                        if self.emitter is not None and (EMITTER_HEADER, self.emitter) not in (m.headers() or []):
                            continue
                        self.state.heartbeats.append(Heartbeat.decode(m.key(), m.value()).timestamp_ms)
                except RecordFormatError:
                    continue  # not an MM2 record: nothing a failing-over consumer could use either
            if all(self.eof.values()) and time.monotonic() - quiet_since >= 0.2:
                break
        if self.settings.no_group_sync() is None:
            self.state.synced = {g: self.committed(g) for g in self.groups}
        self.state.read_at = time.time()
        return self.state

    def committed(self, group: str) -> dict[tuple[str, int], int]:
        """``group``'s committed offsets on the target now (partitions without one left out)."""
        from confluent_kafka import ConsumerGroupTopicPartitions

        futures = self.admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)], request_timeout=10)
        tps = futures[group].result(timeout=15).topic_partitions or []
        return {(tp.topic, tp.partition): tp.offset for tp in tps if tp.error is None and tp.offset >= 0}

    def close(self) -> None:
        self.consumer.close()


