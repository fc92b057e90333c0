"""Offset syncs: what a translation could have been (MM2's OffsetSyncStore replayed)."""

from __future__ import annotations

import time
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ...replicators._checkpoints import CheckpointSettings


#: A sync stamped up to this long before a checkpoint may not have been read yet by the task
#: that translated (MM2's checkpoint task reads the offset-syncs topic in the background).
SYNC_READ_LAG_S = 1.0
#: A sync stamped up to this long after a checkpoint may have been used: MM2 stamps a
#: checkpoint before it lists the group's offsets and translates them
#: (``MirrorCheckpointTask.sourceRecordsForGroup``); so does the reference mirror.
SYNC_LEAD_S = 1.0
_KEY = ("", 0)


@dataclass(frozen=True)
class SeenSync:
    """An offset sync as read from the offset-syncs topic (``seq``: its offset there)."""

    topic: str  # source topic
    partition: int
    upstream: int
    downstream: int
    time_ms: int  # the record's timestamp: when the replicator wrote it
    seq: int


@dataclass(frozen=True)
class SyncEvidence:
    """What the offset syncs allowed for one translation of ``upstream`` (a checkpoint's)."""

    upstream: int
    emitted: int  # syncs of the partition in the topic, over the whole run
    sync: SeenSync | None  # the latest one at or before ``upstream`` the translation could have used
    best: int | None  # MM2's rule on ``sync``: the best translation the syncs allowed
    floor: int | None  # the worst MM2's sync store gives from the syncs it could have read (None: no bound)
    kept: int | None  # what MM2's sync store gives after every sync it could have read
    newest: SeenSync | None  # the newest of those


#: MM2's OffsetSyncStore designs (``CheckpointSettings.sync_store``)
EXPONENTIAL, LATEST = "exponential", "latest"


def _store_translate(syncs: list[tuple[int, int]] | None, upstream: int, store: str = EXPONENTIAL) -> int | None:
    """``OffsetSyncStore.translateDownstream`` on one partition's syncs (newest first):
    3.4.1+ (``exponential``, 64 syncs): one past the newest sync at or before ``upstream``
    (the sync's own downstream offset when at it); up to 3.4.0 (``latest``, the newest sync
    only): the sync's downstream offset plus the upstream step.  -1: nothing at or before."""
    if syncs is None:
        return None
    sync = next((s for s in syncs if s[0] <= upstream), syncs[-1])
    if sync[0] > upstream:
        return -1
    if store == LATEST:
        return sync[1] + (upstream - sync[0])
    return sync[1] + (0 if sync[0] == upstream else 1)


class SyncHistory:
    """The offset syncs of one source partition in topic order, and what MirrorMaker 2's
    ``OffsetSyncStore`` translated from them at any moment.

    The store is replayed sync by sync with the reference mirror's line-for-line port
    (:class:`~pytest_kafka_mirror.replicators._checkpoints.SyncStore`): MM2 3.4.1+ keeps 64
    syncs per partition, exponentially spaced back from the newest, rebuilt on a restart
    by reading the topic from the start; a sync whose upstream offset goes back (a
    re-copy) clears the older ones.  ``store=LATEST``: MM2 up to 3.4.0, which keeps the
    newest sync only.  A translation stamped at T used the syncs read by
    then: some prefix of the topic, between those stamped before ``T - read_lag_s`` and
    those stamped before ``T + lead_s``; its floor is the worst of those prefixes.
    """

    def __init__(self, syncs: Sequence[SeenSync], *, read_lag_s: float = SYNC_READ_LAG_S,
                 lead_s: float = SYNC_LEAD_S, store: str = EXPONENTIAL) -> None:
        from ...replicators._checkpoints import SyncStore

        if store not in (EXPONENTIAL, LATEST):
            raise ValueError(f"store {store!r}: {EXPONENTIAL} or {LATEST}")
        self.store = store
        self.syncs = list(syncs)
        self.read_lag_ms, self.lead_ms = int(read_lag_s * 1000), int(lead_s * 1000)
        kept = SyncStore() if store == EXPONENTIAL else None  # LATEST: the newest sync is the whole store
        self.states: list[list[tuple[int, int]] | None] = [None]  # states[k]: the store after k syncs
        self.generation: list[int] = [0]  # generation[k]: the first sync the store after k syncs may hold
        self.stamped: list[int] = []  # running maximum of the timestamps, for bisect
        start = 0
        for i, s in enumerate(self.syncs):
            if i and s.upstream < self.syncs[i - 1].upstream:  # upstream rewind: the store starts over
                start = i
            if kept is not None:
                kept.apply(_KEY, s.upstream, s.downstream)
            self.states.append(kept.syncs[_KEY] if kept is not None else [(s.upstream, s.downstream)])
            self.generation.append(start)
            self.stamped.append(max(s.time_ms, self.stamped[-1] if self.stamped else s.time_ms))

    def evidence(self, upstream: int, time_ms: int | None) -> SyncEvidence:
        """For a translation of ``upstream`` stamped ``time_ms`` (None: after every sync)."""
        n = len(self.syncs)
        lo = n if time_ms is None else bisect_right(self.stamped, time_ms - self.read_lag_ms)
        hi = n if time_ms is None else bisect_right(self.stamped, time_ms + self.lead_ms)
        usable = [d for k in range(lo, hi + 1) if (d := self.translate(k, upstream)) is not None and d >= 0]
        before = [s for s in self.syncs[self.generation[hi]:hi] if s.upstream <= upstream]
        sync = max(before, key=lambda s: (s.upstream, s.seq)) if before else None
        best = None if sync is None else _store_translate([(sync.upstream, sync.downstream)], upstream, self.store)
        return SyncEvidence(upstream, n, sync, best, min(usable) if usable else None,
                            self.translate(hi, upstream), self.syncs[hi - 1] if hi else None)

    def translate(self, k: int, upstream: int) -> int | None:
        """What the store translated ``upstream`` to after the first ``k`` syncs (-1: not at all)."""
        return _store_translate(self.states[k], upstream, self.store)


def read_offset_syncs(bootstrap: str, topic: str, *, quiet: float = 0.5,
                      limit: float = 30.0) -> tuple[list[SeenSync] | None, bool]:
    """Every offset sync in partition 0 of ``topic`` from offset 0, in order, and whether
    the read finished: until nothing new came for ``quiet`` seconds (never the high
    watermark: Tansu's are wrong), at most ``limit`` seconds.  None: no such topic."""
    from confluent_kafka import Consumer, TopicPartition

    from ..._kafkalog import admin_client, with_logger
    from ...replicators.mm2_records import OffsetSync, RecordFormatError

    topics = admin_client(bootstrap).list_topics(timeout=10).topics
    if topic not in topics or topics[topic].error is not None:
        return None, True
    consumer = Consumer(with_logger({"bootstrap.servers": bootstrap, "group.id": "kafka-mirror-failover-syncs",
                                     "enable.auto.commit": False, "enable.partition.eof": True,
                                     "fetch.wait.max.ms": 10, "fetch.queue.backoff.ms": 1}))
    out: list[SeenSync] = []
    t0 = time.monotonic()
    heard: float | None = None  # the last message or end-of-partition event: the broker answers
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        while time.monotonic() - t0 < limit:
            for m in consumer.consume(1000, 0.05):
                heard = time.monotonic()
                if m.error():
                    continue
                try:
                    s = OffsetSync.decode(m.key(), m.value())
                except RecordFormatError:
                    continue  # not an offset sync: MM2 could not use it either
                out.append(SeenSync(s.topic, s.partition, s.upstream_offset, s.downstream_offset, m.timestamp()[1],
                                    m.offset()))
            if heard is not None and time.monotonic() - heard >= quiet:
                return out, True
    finally:
        consumer.close()
    return out, False


def _offset_syncs(settings: CheckpointSettings, source_bootstrap: str | None,
                  target_bootstrap: str) -> tuple[list[SeenSync] | None, str, str | None]:
    """(syncs, why not read, a note when the read did not finish)."""
    topic, where = settings.offset_syncs_topic, settings.syncs_location
    bootstrap = target_bootstrap if where == "target" else source_bootstrap
    if bootstrap is None:
        return None, (f"the offset syncs ({topic}) are on the source cluster (offset-syncs.topic.location=source) "
                      "and check_failover was not given source_bootstrap"), None
    syncs, complete = read_offset_syncs(bootstrap, topic)
    if syncs is None:
        return None, f"no offset-syncs topic {topic} on the {where} cluster", None
    note = None if complete else f"the offset syncs in {topic} kept coming for 30 s: read {len(syncs)} of them"
    return syncs, "", note


