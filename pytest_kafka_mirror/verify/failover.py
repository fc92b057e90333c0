"""Failover correctness: are consumer groups' translated offsets on the target safe to resume from?

When the source is gone, consumers move to the target and resume from their group's
offsets translated by the replicator: the group's committed offsets on the target
(MirrorMaker 2's ``sync.group.offsets.enabled``) or the checkpoints topic
(``<source>.checkpoints.internal``, what ``RemoteClusterUtils.translateOffsets`` reads).
:func:`check_failover` reads both the way a failing-over consumer would, after the run,
and checks them against the data — never against watermarks (Tansu's are wrong): the
witness groups (:mod:`~pytest_kafka_mirror.capture.witness`) know exactly which records each
group had consumed at each committed offset, and the capture knows which record sits at
each target offset.  Per witness group and partition, and per way of translating
(``via="checkpoint"`` / ``"synced"``):

skipped (loss on failover)
    records the group had *not* consumed whose every copy on the target lies before the
    offset a resuming consumer starts at: it never reads them.  Checked at the failover
    moment (the group's last commit against the latest translation) and for every
    checkpoint of the run against the commit it translated (a failover could have
    happened right after it).
rereads
    copies at or after the resume offset of records the group had already consumed:
    what the resuming consumer reads a second time.  A figure, not a verdict: MM2
    translates to at most one past its latest offset sync, and how far apart its syncs
    are is not up to the translation (a backlog copied at full speed gets few of them).
coarser than the syncs (``sync_*`` fields)
    the offset syncs the replicator wrote (``mm2-offset-syncs.<target>.internal``, read
    from offset 0) say what MM2's algorithm could translate: for upstream offset U the
    latest sync at or before U, its downstream offset (+1 when U is past it), from the
    syncs its sync store kept (64 per partition, exponentially spaced back from the
    newest: :class:`SyncHistory` replays them).  A translation at least that good is
    MM2's design however many re-reads it leaves; a worse one is a translation bug.
    A checkpoint can only use syncs written before it: syncs stamped within
    :data:`SYNC_READ_LAG_S` before it may not have been read yet, within
    :data:`SYNC_LEAD_S` after it may have been.
beyond_end
    how far a translation points past the end of the target partition (as captured at
    the end of the run): "negative lag", records produced there after failover skipped.
rewinds
    checkpoints whose downstream offset went back while the group's upstream offset did
    not (MM2 guards against this since 3.x; restarts used to break it).
staleness
    at the failover moment: how many source offsets and seconds the latest checkpoint
    is behind the group's last commit; over the run: the longest time from a commit to
    the first checkpoint reflecting it.
heartbeats
    the replicated heartbeats topic (``<source>.heartbeats``): age of the newest
    heartbeat at failover (the replication lag MM2 users watch), the longest gap, count.

A partition without any translation falls back to the consumer's ``auto.offset.reset``
(``reset=``; Kafka's default ``latest``): that is what a real consumer would do, so an
untranslated partition shows as skipped records (latest) or re-reads (earliest), and
:meth:`FailoverReport.assert_translated` names it.  An empty partition needs no
translation (MM2 writes no checkpoint for it).

Checks that cannot run (checkpoints or group offset sync disabled, no heartbeats topic)
are listed in :attr:`FailoverReport.not_run` with the reason, never silently passed.
"""

from __future__ import annotations

import json
import os
import time
from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..capture.witness import WitnessLog, load_witness_logs
from .failover_report import MAX_SHOWN, when
from .failover_report import FailoverEntry as _BaseEntry
from .failover_report import FailoverReport as _BaseReport
from .report import format_table

if TYPE_CHECKING:
    from ..replicators._checkpoints import CheckpointSettings

__all__ = ["FAILOVER_FILE", "FailoverEntry", "FailoverError", "FailoverReport", "SeenSync", "SyncHistory",
           "check_failover", "read_offset_syncs"]

FAILOVER_FILE = "failover.json"
RESETS = ("latest", "earliest")


class FailoverError(RuntimeError):
    """The failover check cannot run (no witnesses, no capture, a cluster that does not answer)."""


# -- what the target holds ----------------------------------------------------------------------


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


class _TargetReader:
    """Reads the checkpoints topic, the replicated heartbeats and the groups' committed
    offsets from the target, incrementally (the wait for convergence polls it)."""

    def __init__(self, bootstrap: str, settings: CheckpointSettings, groups: Sequence[str], emitter: str | None) -> None:
        from confluent_kafka import Consumer
        from confluent_kafka.admin import AdminClient

        from .._kafkalog import with_logger

        self.settings = settings
        self.groups = list(groups)
        self.emitter = emitter.encode() if emitter else None
        self.admin = AdminClient(with_logger({"bootstrap.servers": bootstrap}))
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

        wanted = {self.settings.names.checkpoints_topic} if self.settings.emit_checkpoints else set()
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

        from ..replicators._checkpoints import EMITTER_HEADER
        from ..replicators.mm2_records import Checkpoint, Heartbeat, RecordFormatError

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
        if self.settings.emit_checkpoints and self.settings.sync_group_offsets:
            self.state.synced = {g: self._committed(g) for g in self.groups}
        self.state.read_at = time.time()
        return self.state

    def _committed(self, group: str) -> dict[tuple[str, int], int]:
        from confluent_kafka import ConsumerGroupTopicPartitions

        futures = self.admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)], request_timeout=10)
        tps = futures[group].result(timeout=15).topic_partitions or []
        return {(tp.topic, tp.partition): tp.offset for tp in tps if tp.error is None and tp.offset >= 0}

    def close(self) -> None:
        self.consumer.close()


# -- what the target topics hold, from the capture ------------------------------------------------


@dataclass
class _Partition:
    """One target partition as captured: per (producer, lane) the offsets and seqs, in offset order."""

    end: int = 0  # one past the highest offset captured (any record)
    lanes: dict[tuple[str, int], tuple[list[int], list[int]]] = field(default_factory=dict)

    def first_unconsumed(self, consumed: Mapping[tuple[str, int], list[tuple[int, int]]]) -> int:
        best = self.end
        for key, (offs, seqs) in self.lanes.items():
            ranges = consumed.get(key, [])
            starts = [a for a, _ in ranges]
            for off, seq in zip(offs, seqs, strict=True):
                if off >= best:
                    break
                if not _member(seq, ranges, starts):
                    best = off
                    break
        return best

    def evaluate(self, consumed: Mapping[tuple[str, int], list[tuple[int, int]]], resume: int) -> tuple[
            int, int, list[dict[str, Any]], list[dict[str, Any]]]:
        """(skipped, rereads, skipped examples, reread examples) for a consumer resuming at ``resume``."""
        skipped = rereads = 0
        skipped_rows: list[dict[str, Any]] = []
        reread_rows: list[dict[str, Any]] = []
        for (pid, lane), (offs, seqs) in sorted(self.lanes.items()):
            ranges = consumed.get((pid, lane), [])
            starts = [a for a, _ in ranges]
            last_copy: dict[int, int] = {}
            reread_here: list[tuple[int, int]] = []
            for off, seq in zip(offs, seqs, strict=True):
                if _member(seq, ranges, starts):
                    if off >= resume:
                        rereads += 1
                        reread_here.append((seq, off))
                else:
                    last_copy[seq] = max(off, last_copy.get(seq, -1))
            lost = sorted((seq, off) for seq, off in last_copy.items() if off < resume)
            skipped += len(lost)
            skipped_rows += _ranges_rows(pid, lane, lost)
            reread_rows += _ranges_rows(pid, lane, reread_here)
        skipped_rows.sort(key=lambda r: r["first_offset"])
        reread_rows.sort(key=lambda r: r["first_offset"])
        return skipped, rereads, skipped_rows, reread_rows


def _member(seq: int, ranges: list[tuple[int, int]], starts: list[int]) -> bool:
    i = bisect_right(starts, seq) - 1
    return i >= 0 and ranges[i][0] <= seq <= ranges[i][1]


def _ranges_rows(pid: str, lane: int, pairs: list[tuple[int, int]]) -> list[dict[str, Any]]:
    """(seq, offset) pairs -> rows of consecutive seqs: producer, lane, seqs, target offsets."""
    rows: list[dict[str, Any]] = []
    for seq, off in sorted(pairs):
        if rows and rows[-1]["last_seq"] == seq - 1:
            r = rows[-1]
            r["last_seq"], r["count"] = seq, r["count"] + 1
            r["first_offset"], r["last_offset"] = min(r["first_offset"], off), max(r["last_offset"], off)
        else:
            rows.append({"producer_id": pid, "lane": lane, "first_seq": seq, "last_seq": seq, "count": 1,
                         "first_offset": off, "last_offset": off})
    return rows


def _load_capture(run_dir: Path, topics: Iterable[str]) -> tuple[dict[tuple[str, int], _Partition], dict[str, Any]]:
    """Target partitions of ``topics`` (source names) as captured, and the capture status."""
    from ..rundir import CAPTURE_DIR, CAPTURE_STATUS

    wanted = set(topics)
    parts: dict[tuple[str, int], _Partition] = {}
    files = sorted((run_dir / CAPTURE_DIR).glob("part-*.parquet"))
    status_path = run_dir / CAPTURE_STATUS
    status = json.loads(status_path.read_text()) if status_path.exists() else {}
    for key, end in status.get("warmup_ends", {}).items():  # warm-up records are not rows, but in the log
        topic, _, p = key.rpartition(":")
        if topic in wanted:
            parts[(topic, int(p))] = _Partition(end=int(end))
    if not files:
        return parts, status
    import pyarrow.parquet as pq

    rows: dict[tuple[str, int], list[tuple[int, str | None, int | None, int | None]]] = {}
    for f in files:
        t = pq.read_table(f, columns=["topic", "partition", "offset", "producer_id", "lane", "seq"])
        for topic, part, off, pid, lane, seq in zip(*(t.column(c).to_pylist() for c in t.column_names), strict=True):
            if topic in wanted:
                rows.setdefault((topic, part), []).append((off, pid, lane, seq))
    for key, rs in rows.items():
        rs.sort(key=lambda r: r[0])
        p = parts[key] = _Partition(end=max(rs[-1][0] + 1, parts[key].end if key in parts else 0))
        for off, pid, lane, seq in rs:
            if pid is None or lane is None or seq is None:
                continue
            offs, seqs = p.lanes.setdefault((pid, lane), ([], []))
            offs.append(off)
            seqs.append(seq)
    return parts, status


# -- offset syncs: what a translation could have been ---------------------------------------------

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


def _store_translate(syncs: list[tuple[int, int]] | None, upstream: int) -> int | None:
    """``OffsetSyncStore.translateDownstream`` on one partition's 64 syncs (newest first)."""
    if syncs is None:
        return None
    sync = next((s for s in syncs if s[0] <= upstream), syncs[-1])
    if sync[0] > upstream:
        return -1
    return sync[1] + (0 if sync[0] == upstream else 1)


class SyncHistory:
    """The offset syncs of one source partition in topic order, and what MirrorMaker 2's
    ``OffsetSyncStore`` translated from them at any moment.

    The store is replayed sync by sync with the reference mirror's line-for-line port
    (:class:`~pytest_kafka_mirror.replicators._checkpoints.SyncStore`): MM2 3.6+ keeps 64
    syncs per partition, exponentially spaced back from the newest, rebuilt on a restart
    by reading the topic from the start; a sync whose upstream offset goes back (a
    re-copy) clears the older ones.  A translation stamped at T used the syncs read by
    then: some prefix of the topic, between those stamped before ``T - read_lag_s`` and
    those stamped before ``T + lead_s``; its floor is the worst of those prefixes.
    """

    def __init__(self, syncs: Sequence[SeenSync], *, read_lag_s: float = SYNC_READ_LAG_S,
                 lead_s: float = SYNC_LEAD_S) -> None:
        from ..replicators._checkpoints import SyncStore

        self.syncs = list(syncs)
        self.read_lag_ms, self.lead_ms = int(read_lag_s * 1000), int(lead_s * 1000)
        store = SyncStore()
        self.states: list[list[tuple[int, int]] | None] = [None]  # states[k]: the store after k syncs
        self.generation: list[int] = [0]  # generation[k]: the first sync the store after k syncs may hold
        self.stamped: list[int] = []  # running maximum of the timestamps, for bisect
        start = 0
        for i, s in enumerate(self.syncs):
            if i and s.upstream < self.syncs[i - 1].upstream:  # upstream rewind: the store starts over
                start = i
            store.apply(_KEY, s.upstream, s.downstream)
            self.states.append(store.syncs[_KEY])
            self.generation.append(start)
            self.stamped.append(max(s.time_ms, self.stamped[-1] if self.stamped else s.time_ms))

    def evidence(self, upstream: int, time_ms: int | None) -> SyncEvidence:
        """For a translation of ``upstream`` stamped ``time_ms`` (None: after every sync)."""
        n = len(self.syncs)
        lo = n if time_ms is None else bisect_right(self.stamped, time_ms - self.read_lag_ms)
        hi = n if time_ms is None else bisect_right(self.stamped, time_ms + self.lead_ms)
        usable = [d for k in range(lo, hi + 1) if (d := _store_translate(self.states[k], upstream)) is not None
                  and d >= 0]
        before = [s for s in self.syncs[self.generation[hi]:hi] if s.upstream <= upstream]
        sync = max(before, key=lambda s: (s.upstream, s.seq)) if before else None
        best = None if sync is None else sync.downstream + (0 if sync.upstream == upstream else 1)
        return SyncEvidence(upstream, n, sync, best, min(usable) if usable else None,
                            _store_translate(self.states[hi], upstream), self.syncs[hi - 1] if hi else None)


def read_offset_syncs(bootstrap: str, topic: str, *, quiet: float = 0.5,
                      limit: float = 30.0) -> tuple[list[SeenSync] | None, bool]:
    """Every offset sync in partition 0 of ``topic`` from offset 0, in order, and whether
    the read finished: until nothing new came for ``quiet`` seconds (never the high
    watermark: Tansu's are wrong), at most ``limit`` seconds.  None: no such topic."""
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient

    from .._kafkalog import with_logger
    from ..replicators.mm2_records import OffsetSync, RecordFormatError

    topics = AdminClient(with_logger({"bootstrap.servers": bootstrap})).list_topics(timeout=10).topics
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
    topic, where = settings.names.offset_syncs_topic, settings.syncs_location
    bootstrap = target_bootstrap if where == "target" else source_bootstrap
    if bootstrap is None:
        return None, (f"the offset syncs ({topic}) are on the source cluster (offset-syncs.topic.location=source) "
                      "and check_failover was not given source_bootstrap"), None
    syncs, complete = read_offset_syncs(bootstrap, topic)
    if syncs is None:
        return None, f"no offset-syncs topic {topic} on the {where} cluster", None
    note = None if complete else f"the offset syncs in {topic} kept coming for 30 s: read {len(syncs)} of them"
    return syncs, "", note


# -- the entries and the report, with the offset syncs as evidence --------------------------------


@dataclass
class FailoverEntry(_BaseEntry):
    """One witness group on one partition, translated one way, with the offset syncs the
    translation could have used (``sync_*``; None when the syncs were not read)."""

    offset_syncs: int | None = None  # syncs of this partition in the offset-syncs topic
    sync_for: int | None = None  # the upstream offset the translation was of (its checkpoint's)
    sync: dict[str, Any] | None = None  # the latest sync at or before it the translation could have used
    sync_best: int | None = None  # MM2's rule on that sync: the best translation the syncs allowed
    sync_floor: int | None = None  # the worst MM2's sync store gives from the syncs it could have read
    sync_kept: int | None = None  # what MM2's sync store gives after every sync it could have read
    sync_newest: dict[str, Any] | None = None  # the newest of those syncs
    sync_verdict: str | None = None  # "as synced" | "allowed" | "coarser" | "ahead" | "no sync"
    coarser: int = 0  # how far the translation is below sync_floor
    history_coarser: list[dict[str, Any]] = field(default_factory=list)  # checkpoints of the run below their floor

    def head(self) -> str:
        text = self.sync_text()
        return super().head() + (f"; {text}" if text else "")

    def sync_text(self) -> str:
        """Why the translation is what it is, by the offset syncs: MM2's design or a bug."""
        if self.offset_syncs is None:
            return ""
        n = f"{self.offset_syncs} offset sync{'' if self.offset_syncs == 1 else 's'} for this partition"
        if self.translated is None or self.sync_for is None:
            return n
        if self.sync is None:
            return f"{n}, none at or before upstream {self.sync_for} it could have used"
        head = (f"{n}, the latest at or before upstream {self.sync_for} it could have used is {self.sync['upstream']} "
                f"-> {self.sync['downstream']} (offset {self.sync['offset']} of the syncs topic, {self.sync['time']}),"
                f" so MM2 translates to {self.sync_best} at best")
        if self.sync_verdict == "coarser":
            return (f"{head}, {self.sync_floor} at worst from the syncs its store kept: translated {self.coarser} "
                    "below that, a translation bug")
        if self.sync_verdict == "ahead":
            return (f"{head}: translated {self.translated - (self.sync_best or 0)} past it (MM2 never translates past "
                    "a sync it has read)")
        if self.sync_verdict == "allowed":
            newest = self.sync_newest or {}
            return (f"{head}; but MM2's sync store keeps syncs exponentially spaced back from its newest "
                    f"({newest.get('upstream')} -> {newest.get('downstream')}), which gives {self.sync_kept} "
                    f"({self.sync_floor} at worst, if it had not read the latest ones yet): translated "
                    f"{self.translated}, as MM2's design allows ({self.rereads} re-reads)")
        why = f", all {self.rereads} re-reads from the spacing of the syncs (MM2's design)" if self.rereads else ""
        return f"{head}: as good as the syncs allow{why}"


def _sync_row(s: SeenSync | None) -> dict[str, Any] | None:
    return None if s is None else {"upstream": s.upstream, "downstream": s.downstream, "offset": s.seq,
                                   "time": when(s.time_ms / 1000)}


def _verdict(translated: int, ev: SyncEvidence) -> str:
    if ev.floor is not None and translated < ev.floor:
        return "coarser"
    if ev.best is None:
        return "no sync"
    if translated > ev.best:
        return "ahead"
    return "as synced" if translated == ev.best else "allowed"


def _add_sync_evidence(e: FailoverEntry, history: SyncHistory, seq: list[SeenCheckpoint]) -> None:
    """The syncs behind ``e``'s translation and behind every checkpoint of the run (pure)."""
    e.offset_syncs = len(history.syncs)
    if e.translated is None:
        return
    # a synced group offset is a checkpoint's downstream offset (MM2 syncs its latest checkpoints)
    cp = seq[-1] if e.via == "checkpoint" and seq else next(
        (c for c in reversed(seq) if c.downstream == e.translated), seq[-1] if seq else None)
    ev = history.evidence(cp.upstream if cp else e.committed, cp.time_ms if cp else None)
    e.sync_for, e.sync, e.sync_best, e.sync_floor = ev.upstream, _sync_row(ev.sync), ev.best, ev.floor
    e.sync_kept, e.sync_newest = ev.kept, _sync_row(ev.newest)
    e.sync_verdict = _verdict(e.translated, ev)
    e.coarser = max(0, ev.floor - e.translated) if ev.floor is not None else 0
    if e.via != "checkpoint":
        return
    for c in seq:
        cev = history.evidence(c.upstream, c.time_ms)
        if cev.floor is not None and c.downstream < cev.floor:
            row = {"time": when(c.time_ms / 1000), "upstream": c.upstream, "downstream": c.downstream,
                   "floor": cev.floor, "best": cev.best}
            sync = _sync_row(cev.sync) or {}
            row.update({f"sync_{k}": sync.get(k) for k in ("upstream", "downstream", "offset")})
            e.history_coarser.append(row)
    e.history_coarser = e.history_coarser[:MAX_SHOWN]


_COARSER_COLUMNS = ("time", "upstream", "downstream", "floor", "best", "sync_upstream", "sync_downstream",
                    "sync_offset")


@dataclass
class FailoverReport(_BaseReport):
    """The failover report, with the check that translations are as good as MM2's
    algorithm guarantees from the offset syncs the replicator wrote."""

    entries: list[FailoverEntry] = field(default_factory=list)  # type: ignore[assignment]

    def coarser_than_syncs(self) -> list[FailoverEntry]:
        """Entries translated (at failover, or by any checkpoint of the run) worse than the syncs allow."""
        return [e for e in self.entries if e.coarser or e.history_coarser]

    def figures(self) -> dict[str, Any]:
        f = super().figures()
        f["failover_coarser_than_syncs"] = None if "offset syncs" in self.not_run else len(self.coarser_than_syncs())
        return f

    def assert_as_syncs_allow(self, *, witnesses: Sequence[str] | None = None) -> None:
        """Every translation (the latest, and every checkpoint of the run) is at least what
        MirrorMaker 2's algorithm gives from the offset syncs the replicator had written
        and its sync store kept (see the module docs), however many re-reads that leaves;
        for the named ``witnesses`` (default all).  Fails when the syncs were not read."""
        __tracebackhide__ = True
        self._raise([self._check_syncs(witnesses, required=True)])

    def _syncs_checks(self, as_syncs_allow: bool | None) -> list[str | None]:
        if as_syncs_allow or (as_syncs_allow is None and "offset syncs" not in self.not_run):
            return [self._check_syncs(None, required=bool(as_syncs_allow))]
        return []

    def _check_syncs(self, witnesses: Sequence[str] | None, *, required: bool) -> str | None:
        if "offset syncs" in self.not_run:
            return f"offset syncs could not be checked: {self.not_run['offset syncs']}" if required else None
        bad = [e for e in self.coarser_than_syncs() if witnesses is None or e.witness in witnesses]
        if not bad:
            return None
        lines = [(f"translations coarser than the offset syncs allow: {len(bad)} group partitions (MM2 translates "
                  "upstream offset U from the latest sync at or before U that its store kept: that sync's downstream "
                  "offset, +1 when U is past it)")]
        for e in bad[:MAX_SHOWN]:
            lines.append(f"  {e.head()}")
            if e.history_coarser:
                lines.append("    checkpoints of the run below the worst the syncs allowed (floor; best: from the "
                             "latest sync):")
                lines.append(format_table(e.history_coarser, _COARSER_COLUMNS, limit=MAX_SHOWN))
        return "\n".join(lines)


# -- the check -------------------------------------------------------------------------------------


def _latest_commits(log: WitnessLog) -> dict[tuple[str, int], list[tuple[float, int]]]:
    """(topic, partition) -> [(commit time s, offset)] of the successful commits, in order."""
    out: dict[tuple[str, int], list[tuple[float, int]]] = {}
    for c in log.commits:
        if c.get("error"):
            continue
        for topic, parts in c["offsets"].items():
            for p, off in parts.items():
                out.setdefault((topic, int(p)), []).append((c["time_us"] / 1e6, int(off)))
    return out


def _converged(logs: Sequence[WitnessLog], parts: Mapping[tuple[str, int], _Partition], state: TargetState,
               settings: CheckpointSettings, rename: Mapping[str, str]) -> bool:
    """Every witnessed commit is checkpointed (and synced, with group offset sync) and its
    translation can no longer improve: it is exact, or a whole offset flush plus a
    checkpoint (and sync) interval passed since the commit (MM2 then has its best sync)."""
    if not settings.emit_checkpoints:
        return True
    settle = settings.flush_interval + settings.checkpoints_interval + 1.0
    if settings.sync_group_offsets:
        settle += settings.sync_interval
    latest: dict[tuple[str, str, int], SeenCheckpoint] = {}
    for cp in state.checkpoints:
        latest[(cp.group, cp.topic, cp.partition)] = cp
    now = time.time()
    for log in logs:
        for (topic, p), commits in _latest_commits(log).items():
            part = parts.get((topic, p), _Partition())
            if not commits or part.end == 0:
                continue
            at, upstream = commits[-1]
            seen = latest.get((log.group, rename.get(topic, topic), p))
            if seen is None or seen.upstream != upstream:
                return False
            if state.synced is not None and state.synced.get(log.group, {}).get((seen.topic, p)) != seen.downstream:
                return False
            exact = part.first_unconsumed(log.consumed_ranges(topic, p, upstream))
            if now - at < settle and seen.downstream != exact:
                return False
    return True


def _await_translations(reader: _TargetReader, logs: Sequence[WitnessLog], parts: Mapping[tuple[str, int], _Partition],
                        settings: CheckpointSettings, rename: Mapping[str, str], wait: float) -> TargetState:
    """Read the target until every witnessed commit is translated, at most ``wait`` seconds."""
    t0 = time.monotonic()
    try:
        while True:
            state = reader.read()
            if _converged(logs, parts, state, settings, rename) or time.monotonic() - t0 >= wait:
                return state
            time.sleep(min(0.5, max(0.05, wait - (time.monotonic() - t0))))
    finally:
        reader.close()


def check_failover(
    run_dir: str | os.PathLike[str],
    target_bootstrap: str,
    settings: CheckpointSettings,
    topics: Mapping[str, str],
    *,
    wait: float | None = None,
    reset: str = "latest",
    emitter: str | None = None,
    source_bootstrap: str | None = None,
    sync_read_lag: float = SYNC_READ_LAG_S,
) -> FailoverReport:
    """Fail over the run's witness groups to the target and check their translated offsets.

    ``topics`` maps source to target topic names; ``settings`` says what the replicator
    does about groups (``replicator.checkpoints``); ``emitter`` keeps only the heartbeats
    of that reference mirror.  The failover happens once every witnessed commit is
    translated (checkpoint and, with group offset sync, the target group's offset), or
    after ``wait`` seconds at the latest (default: from the replicator's intervals;
    ``0``: at once).  ``reset`` is the failing-over consumer's ``auto.offset.reset`` for
    partitions without a translation.  Writes ``RUN_DIR/failover.json``.

    The offset syncs are then read from the source cluster (``source_bootstrap``; without
    it the syncs check is in ``not_run``) or, with ``offset-syncs.topic.location=target``,
    from the target.  ``sync_read_lag``: how long after a sync was written the replicator
    may still have translated without it (:data:`SYNC_READ_LAG_S`; the reference mirror
    uses a sync before it writes it).
    """
    if reset not in RESETS:
        raise ValueError(f"reset={reset!r}: the consumer's auto.offset.reset, one of {', '.join(RESETS)}")
    run = Path(run_dir)
    logs = load_witness_logs(run)
    if not logs:
        raise FailoverError(f"no witness consumer groups in {run}: produce with "
                            "mirror_producer(..., witnesses=[witness('end'), ...]) to check failover")
    rename = dict(topics)
    witnessed = {t for log in logs for t in log.partitions}
    parts, capture_status = _load_capture(run, witnessed)
    if wait is None:
        wait = (2 * settings.checkpoints_interval + settings.flush_interval + 5.0
                + (settings.sync_interval if settings.sync_group_offsets else 0.0))
    t0 = time.monotonic()
    state = _await_translations(_TargetReader(target_bootstrap, settings, [log.group for log in logs], emitter),
                                logs, parts, settings, rename, wait)
    sync_note = None
    if settings.emit_checkpoints:
        state.syncs, state.syncs_note, sync_note = _offset_syncs(settings, source_bootstrap, target_bootstrap)
    from ..rundir import load_manifests

    starts = [m.started_us / 1e6 for m in load_manifests(run) if m.started_us]
    report = evaluate(logs, parts, state, settings, rename, reset=reset, run_dir=str(run),
                      waited_s=round(time.monotonic() - t0, 3), since=min(starts) if starts else None,
                      sync_read_lag=sync_read_lag)
    if sync_note:
        report.notes.append(sync_note)
    if capture_status.get("reason") not in (None, "satisfied"):
        report.notes.append(f"the capture ended by {capture_status.get('reason')}: the end of the target log is "
                            "what it read")
    for log in logs:
        if not log.complete or log.note:
            report.notes.append(f"witness {log.name}: {log.note}")
    report.write(run / FAILOVER_FILE)
    return report


def evaluate(
    logs: Sequence[WitnessLog],
    parts: Mapping[tuple[str, int], _Partition],
    state: TargetState,
    settings: CheckpointSettings,
    rename: Mapping[str, str],
    *,
    reset: str = "latest",
    run_dir: str = "",
    waited_s: float = 0.0,
    since: float | None = None,
    sync_read_lag: float = SYNC_READ_LAG_S,
) -> FailoverReport:
    """The checks on data already read (pure: the tests feed it hand-built states).

    ``since``: when production started (epoch seconds); heartbeats before it are not counted.
    ``sync_read_lag``: see :class:`SyncHistory`.
    """
    report = FailoverReport(run_dir, state.read_at, waited_s, reset, settings.to_dict())
    if not settings.emit_checkpoints:
        report.not_run["checkpoints"] = "the replicator emits no checkpoints (emit.checkpoints.enabled=false)"
    elif not state.checkpoints_topic_exists:
        report.notes.append(f"no checkpoints topic {settings.names.checkpoints_topic} on the target")
    histories = _sync_histories(state, report, sync_read_lag) if settings.emit_checkpoints else None
    synced_offsets = state.synced if settings.emit_checkpoints and settings.sync_group_offsets else None
    if synced_offsets is None:
        report.not_run["synced offsets"] = ("the replicator does not sync group offsets to the target "
                                            "(sync.group.offsets.enabled=false)")
    sequences: dict[tuple[str, str, int], list[SeenCheckpoint]] = {}
    for cp in sorted(state.checkpoints, key=lambda c: c.seq):
        sequences.setdefault((cp.group, cp.topic, cp.partition), []).append(cp)
    for log in logs:
        commits_by_tp = _latest_commits(log)
        for topic, plist in sorted(log.partitions.items()):
            target = rename.get(topic, topic)
            for p in plist:
                commits = commits_by_tp.get((topic, p), [])
                if not commits:
                    report.notes.append(f"witness {log.name} never committed {topic}[{p}]")
                    continue
                part = parts.get((topic, p), _Partition())
                seq = sequences.get((log.group, target, p), [])
                new: list[FailoverEntry] = []
                if settings.emit_checkpoints:
                    last = seq[-1] if seq else None
                    new.append(_entry(log, topic, target, p, commits, part, "checkpoint",
                                      last.downstream if last else None, last, seq, reset, state.read_at))
                if synced_offsets is not None:
                    synced = synced_offsets.get(log.group, {}).get((target, p))
                    new.append(_entry(log, topic, target, p, commits, part, "synced", synced, None, [],
                                      reset, state.read_at))
                for e in new:
                    if histories is not None:
                        _add_sync_evidence(e, histories.get((topic, p)) or SyncHistory([]), seq)
                report.entries += new
    report.heartbeats, why = _heartbeats(state, settings, since)
    if why:
        report.not_run["heartbeats"] = why
    return report


def _sync_histories(state: TargetState, report: FailoverReport,
                    read_lag: float) -> dict[tuple[str, int], SyncHistory] | None:
    """The offset syncs per source partition; None (and ``not_run``) when they were not read."""
    if state.syncs is None:
        report.not_run["offset syncs"] = state.syncs_note
        return None
    by_tp: dict[tuple[str, int], list[SeenSync]] = {}
    for s in sorted(state.syncs, key=lambda s: s.seq):
        by_tp.setdefault((s.topic, s.partition), []).append(s)
    return {tp: SyncHistory(syncs, read_lag_s=read_lag) for tp, syncs in by_tp.items()}


def _entry(log: WitnessLog, topic: str, target: str, p: int, commits: list[tuple[float, int]], part: _Partition,
           via: str, translated: int | None, latest: SeenCheckpoint | None, seq: list[SeenCheckpoint], reset: str,
           read_at: float) -> FailoverEntry:
    at, upstream = commits[-1]
    first_at = next(t for t, off in commits if off == upstream)
    consumed = log.consumed_ranges(topic, p, upstream)
    resume = translated if translated is not None else (part.end if reset == "latest" else 0)
    skipped, rereads, skipped_rows, reread_rows = part.evaluate(consumed, resume)
    e = FailoverEntry(
        group=log.group, witness=log.name, topic=topic, target_topic=target, partition=p, via=via,
        committed=upstream, committed_at=first_at, consumed_last=log.last_consumed(topic, p, upstream),
        translated=translated, translated_upstream=latest.upstream if latest else None, resume_at=resume,
        end_of_log=part.end, exact=part.first_unconsumed(consumed), skipped=skipped, rereads=rereads,
        beyond_end=max(0, resume - part.end), skipped_rows=skipped_rows[:MAX_SHOWN], reread_rows=reread_rows[:MAX_SHOWN],
    )
    if via != "checkpoint":
        return e
    e.checkpoints = len(seq)
    cp_up = latest.upstream if latest else None
    e.records_behind = max(0, upstream - (cp_up if cp_up is not None else 0)) if part.end else 0
    if e.records_behind:
        since = next((t for t, off in commits if off > (cp_up if cp_up is not None else -1)), at)
        e.seconds_behind = round(max(0.0, read_at - since), 3)
    else:
        e.seconds_behind = 0.0
    # every distinct committed offset: how long until a checkpoint reflected it
    delays: list[float] = []
    seen_offsets: set[int] = set()
    for t, off in commits:
        if off in seen_offsets or part.end == 0:
            continue
        seen_offsets.add(off)
        cp = next((c for c in seq if c.upstream >= off), None)
        if cp is None:
            e.never_translated.append(off)
        else:
            delays.append(max(0.0, cp.time_ms / 1000 - t))
    e.max_delay_s = round(max(delays), 3) if delays else None
    # every checkpoint against the commit it translated, and the rewinds
    prev: SeenCheckpoint | None = None
    for cp in seq:
        c_consumed = log.consumed_ranges(topic, p, cp.upstream)
        c_skipped, _, _, _ = part.evaluate(c_consumed, cp.downstream)
        beyond = max(0, cp.downstream - part.end)
        if c_skipped or beyond:
            e.history_rows.append({"time": when(cp.time_ms / 1000), "upstream": cp.upstream, "downstream": cp.downstream,
                                   "skipped": c_skipped, "exact": part.first_unconsumed(c_consumed),
                                   "beyond_end": beyond})
        e.history_skipped = max(e.history_skipped, c_skipped)
        e.history_beyond_end = max(e.history_beyond_end, beyond)
        if prev is not None and cp.downstream < prev.downstream and cp.upstream >= prev.upstream:
            e.rewinds.append({"time": when(cp.time_ms / 1000), "upstream_before": prev.upstream,
                              "downstream_before": prev.downstream, "upstream": cp.upstream,
                              "downstream": cp.downstream, "checkpoint_offset": cp.seq})
        prev = cp
    e.history_rows = e.history_rows[:MAX_SHOWN]
    return e


def _heartbeats(state: TargetState, settings: CheckpointSettings,
                since: float | None) -> tuple[dict[str, Any], str | None]:
    topic = settings.names.remote_heartbeats_topic
    if not settings.emit_heartbeats:
        return {"topic": topic}, "the replicator emits no heartbeats (emit.heartbeats.enabled=false)"
    if not state.heartbeats_topic_exists:
        return {"topic": topic}, f"no replicated heartbeats topic {topic} on the target"
    window_start_ms = int(since * 1000) if since is not None else 0
    read_ms = int(state.read_at * 1000)
    stamps = sorted({t for t in state.heartbeats if window_start_ms <= t <= read_ms})
    out: dict[str, Any] = {"topic": topic, "count": len(stamps), "newest_ms": None, "lag_ms": None,
                           "max_gap_ms": None, "gap_after_ms": None,
                           "interval_s": settings.heartbeats_interval}
    if stamps:
        out["newest_ms"] = stamps[-1]
        out["lag_ms"] = read_ms - stamps[-1]
        gaps = [(b - a, a) for a, b in pairwise(stamps)]
        if gaps:
            out["max_gap_ms"], out["gap_after_ms"] = max(gaps)
    return out, None

