"""Failover correctness: are consumer groups' translated offsets on the target safe to resume from?

When the source is gone, consumers move to the target and resume from their group's
offsets translated by the replicator: the group's committed offsets on the target
(MirrorMaker 2's ``sync.group.offsets.enabled``) or the checkpoints topic
(``<source>.checkpoints.internal``, what ``RemoteClusterUtils.translateOffsets`` reads).
:func:`check_failover` reads both the way a failing-over consumer would, after the run,
and checks them against the data — never against watermarks (Tansu's are wrong): the
witness groups (:mod:`~pytest_kafka_mirror.witness`) know exactly which records each
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
    what the resuming consumer reads a second time.  MM2 translates to at most one past
    its latest offset sync, and writes a sync at least every ``offset.lag.max`` records,
    so a fresh checkpoint re-reads fewer than about ``offset.lag.max`` records.
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

from .verify.failover_report import MAX_SHOWN, FailoverEntry, FailoverReport, when
from .witness import WitnessLog, load_witness_logs

if TYPE_CHECKING:
    from .replicators._checkpoints import CheckpointSettings

__all__ = ["FAILOVER_FILE", "FailoverEntry", "FailoverError", "FailoverReport", "check_failover"]

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


class _TargetReader:
    """Reads the checkpoints topic, the replicated heartbeats and the groups' committed
    offsets from the target, incrementally (the wait for convergence polls it)."""

    def __init__(self, bootstrap: str, settings: CheckpointSettings, groups: Sequence[str], emitter: str | None) -> None:
        from confluent_kafka import Consumer
        from confluent_kafka.admin import AdminClient

        self.settings = settings
        self.groups = list(groups)
        self.emitter = emitter.encode() if emitter else None
        self.admin = AdminClient({"bootstrap.servers": bootstrap})
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": "kafka-mirror-failover-reader", "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "enable.partition.eof": True, "fetch.wait.max.ms": 10,
            "fetch.queue.backoff.ms": 1,
        })
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

        from .mm2_records import Checkpoint, Heartbeat, RecordFormatError
        from .replicators._checkpoints import EMITTER_HEADER

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
    from .rundir import CAPTURE_DIR, CAPTURE_STATUS

    wanted = set(topics)
    parts: dict[tuple[str, int], _Partition] = {}
    files = sorted((run_dir / CAPTURE_DIR).glob("part-*.parquet"))
    status_path = run_dir / CAPTURE_STATUS
    status = json.loads(status_path.read_text()) if status_path.exists() else {}
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
        p = parts[key] = _Partition(end=rs[-1][0] + 1)
        for off, pid, lane, seq in rs:
            if pid is None or lane is None or seq is None:
                continue
            offs, seqs = p.lanes.setdefault((pid, lane), ([], []))
            offs.append(off)
            seqs.append(seq)
    return parts, status


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


def check_failover(
    run_dir: str | os.PathLike[str],
    target_bootstrap: str,
    settings: CheckpointSettings,
    topics: Mapping[str, str],
    *,
    wait: float | None = None,
    reset: str = "latest",
    emitter: str | None = None,
) -> FailoverReport:
    """Fail over the run's witness groups to the target and check their translated offsets.

    ``topics`` maps source to target topic names; ``settings`` says what the replicator
    does about groups (``replicator.checkpoints``); ``emitter`` keeps only the heartbeats
    of that reference mirror.  The failover happens once every witnessed commit is
    translated (checkpoint and, with group offset sync, the target group's offset), or
    after ``wait`` seconds at the latest (default: from the replicator's intervals;
    ``0``: at once).  ``reset`` is the failing-over consumer's ``auto.offset.reset`` for
    partitions without a translation.  Writes ``RUN_DIR/failover.json``.
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
    reader = _TargetReader(target_bootstrap, settings, [log.group for log in logs], emitter)
    t0 = time.monotonic()
    try:
        while True:
            state = reader.read()
            if _converged(logs, parts, state, settings, rename) or time.monotonic() - t0 >= wait:
                break
            time.sleep(min(0.5, max(0.05, wait - (time.monotonic() - t0))))
    finally:
        reader.close()
    from .rundir import load_manifests

    starts = [m.started_us / 1e6 for m in load_manifests(run) if m.started_us]
    report = evaluate(logs, parts, state, settings, rename, reset=reset, run_dir=str(run),
                      waited_s=round(time.monotonic() - t0, 3), since=min(starts) if starts else None)
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
) -> FailoverReport:
    """The checks on data already read (pure: the tests feed it hand-built states).

    ``since``: when production started (epoch seconds); heartbeats before it are not counted.
    """
    report = FailoverReport(run_dir, state.read_at, waited_s, reset, settings.to_dict())
    if not settings.emit_checkpoints:
        report.not_run["checkpoints"] = "the replicator emits no checkpoints (emit.checkpoints.enabled=false)"
    elif not state.checkpoints_topic_exists:
        report.notes.append(f"no checkpoints topic {settings.names.checkpoints_topic} on the target")
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
                if settings.emit_checkpoints:
                    last = seq[-1] if seq else None
                    report.entries.append(_entry(log, topic, target, p, commits, part, "checkpoint",
                                                 last.downstream if last else None, last, seq, reset, state.read_at))
                if synced_offsets is not None:
                    synced = synced_offsets.get(log.group, {}).get((target, p))
                    report.entries.append(_entry(log, topic, target, p, commits, part, "synced", synced, None, [],
                                                 reset, state.read_at))
    report.heartbeats, why = _heartbeats(state, settings, since)
    if why:
        report.not_run["heartbeats"] = why
    return report


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

