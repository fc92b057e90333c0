"""One capture process: the consume loop, the partition assignment and the stop decision.

:class:`~.target.Capture` starts it as ``python -m pytest_kafka_mirror.capture.process``
(one per partition group); the module docstring of :mod:`.target` says what it does.
Three threads: the consume loop (main), the segment writer (:mod:`.segments`: Parquet
segments and the progress files), and the metadata reader (:class:`_Partitions`); the
main thread does no file or metadata I/O per batch, so the records behind it never wait.
Once a second it shows the metadata thread's latest end offsets to its stall watch
(:mod:`.watchdog`), which has a consumer that stopped fetching replaced.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .._kafkalog import admin_client, serve
from ..rundir import CAPTURE_DIR, CAPTURE_STATUS, LaneManifest, load_manifests, write_json_atomic
from .columns import CHUNK_RECORDS, ColumnDecoder
from .gaps import GapGuard
from .rows import LiveFigures, RowBuilder
from .segments import SEGMENT_ROWS, SEGMENT_SECONDS, SegmentWriteError, SegmentWriter
from .target import (
    CONSUMER_CONFIG,
    ERROR_PREFIX,
    PRODUCE_DONE,
    PRODUCED_GLOB,
    PROGRESS,
    READY,
    STATE,
    group_file,
)
from .watchdog import StallWatch

__all__ = ["main"]

#: Records asked of one consume() call.
BATCH = 500
#: A consumed batch waits at most this long to be decoded with the ones after it.
CHUNK_WAIT_S = 0.02

#: a target topic still missing this long after the start is logged with what the metadata
#: said, every as long again (a replicator creates it within seconds; the note showed why a
#: capture once never saw a topic MM2 had created: its metadata thread shared the consumer,
#: see :class:`_Partitions`)
MISSING_NOTE_S = 10.0


class _Partitions:
    """The partition counts of the target topics, read by a thread of their own.

    In the consume loop, a metadata request made every record behind it wait: ~0.2 ms
    usually, but ~50-300 ms for the first ones (connecting, a topic not there yet) and up
    to its 5 s timeout while a broker restarts (a fault of the run).  The thread asks
    every 0.05 s while a target topic is missing (the replicator creates it), then once a
    second for added partitions.  ``client`` is a handle of its own (an admin client: its
    calls may run in parallel), never the capture's consumer: since confluent-kafka 2.16 a
    consumer serves one caller at a time, and a waiting call retries every 1 ms while the
    consume loop takes the consumer back within microseconds, so a ``list_topics`` on it
    waited as long as the loop ran (measured on Tansu: 1 answer in 40 s, against 293 in
    15 s with a handle of its own).
    """

    def __init__(self, client: Any, topics: Sequence[str], log: Callable[[str], None],
                 sample: Callable[[Any, dict[str, int]], None] | None = None) -> None:
        self.client = client
        #: called with the client and the partition counts once a second, from this thread
        #: (the end-offset samples of :class:`_EndOffsets`)
        self.sample = sample
        self.topics = list(topics)
        self.log = log
        #: target topic -> partitions, a new dict (and a new version) for each change
        self.counts: dict[str, int] = {}
        self.version = 0
        #: when the last metadata request answered (monotonic), and what it said of each
        #: target topic it did not list usable (absent, or its error): the evidence of :meth:`missing`
        self.answered_at: float | None = None
        self.answers = 0
        self.absent: dict[str, str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._work, name="capture-metadata", daemon=True)
        self._thread.start()

    def _work(self) -> None:
        while not self._stop.is_set():
            try:
                md = self.client.list_topics(timeout=5)
                counts = {t: len(md.topics[t].partitions) for t in self.topics
                          if t in md.topics and md.topics[t].error is None}
                listed = len(md.topics)
                self.absent = {t: str(md.topics[t].error) if t in md.topics else f"absent ({listed} topics listed)"
                               for t in self.topics if t not in counts}
                self.answered_at = time.monotonic()
                self.answers += 1
                if counts != self.counts:
                    self.counts = counts
                    self.version += 1
                if self.sample is not None and counts:
                    self.sample(self.client, counts)
            except Exception as exc:  # noqa: BLE001 - whatever failed, the next round asks again
                self.log(f"capture: metadata refresh failed (will retry): {exc}")
            serve(self.client)  # the client's log messages
            self._stop.wait(0.05 if len(self.counts) < len(self.topics) else 1.0)

    def missing(self, now: float) -> str | None:
        """What the metadata said of the target topics not found yet (None: all found)."""
        if len(self.counts) >= len(self.topics):
            return None
        answered = "never" if self.answered_at is None else f"{now - self.answered_at:.1f} s ago"
        said = "; ".join(f"{t}: {why}" for t, why in sorted(self.absent.items()))
        return f"last metadata answer {answered}: {said or 'nothing yet'}"

    def close(self) -> None:
        """Stop and join the thread (a request times out after 5 s)."""
        self._stop.set()
        self._thread.join(10.0)


class _EndOffsets:
    """The capture's own lag behind the target: once a second, the target topics' end
    offsets (``ListOffsets`` latest, from the metadata thread's admin client) and this
    process's read positions (the next offset of each of its partitions), summed per target
    topic.  The status keeps them as ``end_offsets``: ``measured`` (False on a target that
    cannot report end offsets: Tansu's are wrong after multi-record batches), ``why``,
    ``topics`` (target -> source) and ``samples`` (``[UTC epoch s, {target topic: [end
    offsets, read]}]``); ``verify/_capacity.py`` compares their growth over the backlog
    window.  At most :data:`MAX_SAMPLES` are kept (one a second: hours)."""

    MAX_SAMPLES = 20_000

    def __init__(self, measured: bool, why: str, mapping: dict[str, str], positions: dict[tuple[str, int], int],
                 group: int, groups: int) -> None:
        self.measured, self.why, self.mapping = measured, why, mapping
        self.positions = positions  # the consume loop's next offsets (GapGuard.next), read as a copy
        self.group, self.groups = group, groups
        self.samples: list[list[Any]] = []
        self.next_at = 0.0
        #: the latest sample's end offset of each partition, and how many samples were taken
        #: (the consume loop's :class:`.watchdog.StallWatch` reads them)
        self.ends: dict[tuple[str, int], int] = {}
        self.taken = 0

    def sample(self, client: Any, counts: dict[str, int]) -> None:
        from confluent_kafka import TopicPartition
        from confluent_kafka.admin import OffsetSpec

        now = time.monotonic()
        if not self.measured or now < self.next_at or len(self.samples) >= self.MAX_SAMPLES:
            return
        self.next_at = now + 1.0
        tps = [TopicPartition(t, p) for t, n in counts.items() for p in range(n) if p % self.groups == self.group]
        if not tps:
            return
        asked = time.time()
        read = dict(self.positions)  # before the end offsets: the lag is never understated
        futures = client.list_offsets({tp: OffsetSpec.latest() for tp in tps}, request_timeout=5)
        ends = {(tp.topic, tp.partition): max(int(future.result().offset), 0) for tp, future in futures.items()}
        at = (asked + time.time()) / 2  # the brokers answered somewhere in between: the middle
        self.ends, self.taken = ends, self.taken + 1
        sums: dict[str, list[int]] = {}
        for (topic, partition), end in ends.items():
            entry = sums.setdefault(topic, [0, 0])
            entry[0] += end
            entry[1] += read.get((topic, partition), 0)
        self.samples.append([round(at, 3), sums])

    def to_dict(self) -> dict[str, Any]:
        return {"measured": self.measured, "why": self.why, "topics": self.mapping, "samples": self.samples}


def _log(text: str) -> None:
    print(text, flush=True)


def _close_quietly(consumer: Any) -> None:
    try:
        consumer.close()
    except Exception as exc:  # noqa: BLE001 - its replacement reads on whatever this one says
        _log(f"capture: closing the stalled consumer failed: {exc}")


def _awaited(lane: LaneManifest, compacted: bool) -> tuple[int, list[list[int]]]:
    """What the capture waits for of a lane: the number of acknowledged records and their
    ranges; of a lane of a compacted topic, its latest acknowledged record only."""
    if compacted:
        latest = max(b for _, b in lane.acked)
        return 1, [[latest, latest]]
    return lane.acked_count, lane.acked


class _CaptureProcess:
    """One capture process (of ``args.groups``): the consume loop and its stop decision."""

    def __init__(self, args: argparse.Namespace) -> None:
        from ..rundir import DEFAULT_BOUNDS

        self.args = args
        self.run_dir = Path(args.run_dir)
        self.group, self.groups = args.group, args.groups
        self.mapping: dict[str, str] = json.loads(args.topics)  # target -> source
        self.manifest_dir = Path(args.manifest_dir) if args.manifest_dir else self.run_dir
        self.stopping = False
        self.consumer = self._new_consumer()
        prefix = "part" if self.groups <= 1 else f"part-g{self.group}"
        self.writer = SegmentWriter(self.run_dir / CAPTURE_DIR, prefix)
        # Offsets must follow each other: a broker showing a later record first (Tansu,
        # several producers on one partition) must not make the capture skip one.
        self.gaps = GapGuard(self.consumer, log=lambda text: _log(f"capture: {text}"))
        self.live = LiveFigures(DEFAULT_BOUNDS)
        self.rows = RowBuilder(self.mapping, self.live, _log)
        self.columns = ColumnDecoder(self.rows)
        #: consumed batches not decoded yet (:meth:`consume`), with their arrival stamps
        self.pending: list[tuple[list[Any], int]] = []
        self.pending_records = 0
        self.last_decode = time.monotonic()
        self.seen, self.counts, self.warmup_ends = self.rows.seen, self.rows.counts, self.rows.warmup_ends
        self.partitions: _Partitions | None = None
        self.end_offsets = _EndOffsets(args.end_offsets != "skip", args.end_offsets_why, self.mapping,
                                       self.gaps.next, self.group, self.groups)
        self.watch = StallWatch(self.gaps.next)
        self.watched = 0  # the end-offset samples the watch has seen
        self.partitions_version = 0
        self.assigned: dict[str, int] = {}
        self.t_start = time.monotonic()
        self.last_record = self.t_start  # monotonic time of the last record
        self.last_record_wall = time.time()
        self.lanes: list[tuple[tuple[str, str, int], int, list[list[int]]]] | None = None
        self.complete: set[tuple[str, str, int]] = set()
        # the stop decision's state (see should_stop)
        self.produce_done_at: float | None = None
        self.all_satisfied_at: float | None = None
        self.next_done_check = self.next_check = 0.0

    def file(self, name: str) -> Path:
        return self.run_dir / group_file(name, self.group, self.groups)

    def _new_consumer(self) -> Any:
        from confluent_kafka import Consumer

        from .._kafkalog import with_logger

        return Consumer(with_logger({
            "bootstrap.servers": self.args.bootstrap,
            "group.id": f"kafka-mirror-capture-{os.getpid()}",  # never joined: assign() only
            **CONSUMER_CONFIG,
        }))

    def watch_fetch(self) -> None:
        """A new sample of the target's end offsets shown to the watch (:mod:`.watchdog`):
        when the consumer stalled, a new one reads on from the same offsets."""
        if self.end_offsets.taken == self.watched:
            return
        self.watched = self.end_offsets.taken
        why = self.watch.check(self.end_offsets.ends)
        if why is not None:
            self.restart_consumer(why)

    def restart_consumer(self, why: str) -> None:
        """Read every assigned partition on with a new consumer, from the next offsets of
        the gap guard (the records consumed so far are decoded first)."""
        from confluent_kafka import TopicPartition

        self.decode()
        old, self.consumer = self.consumer, self._new_consumer()
        self.gaps.consumer = self.consumer
        self.consumer.incremental_assign([TopicPartition(t, p, off) for (t, p), off in self.gaps.next.items()])
        # closed aside: a consumer that stalled may take its time to let its brokers go
        threading.Thread(target=_close_quietly, args=(old,), name="capture-old-consumer", daemon=True).start()
        _log(f"capture: restarted its consumer: {why}")

    # -- assignment ------------------------------------------------------------------
    def assign(self, counts: dict[str, int]) -> None:
        """Assign the partitions of ``counts`` (target topic -> partitions) not assigned yet."""
        from confluent_kafka import TopicPartition

        new = []
        for target, n in counts.items():
            have = self.assigned.get(target, 0)
            if n > have:
                new += [TopicPartition(target, p, 0) for p in range(have, n) if p % self.groups == self.group]
                self.assigned[target] = n
        if new:
            for tp in new:
                self.gaps.start(tp.topic, tp.partition, tp.offset)
            self.consumer.incremental_assign(new)
            self.write_progress()

    def progress(self) -> dict[str, Any]:
        return {**self.counts, "elapsed": round(time.monotonic() - self.t_start, 3), "partitions": dict(self.assigned),
                **self.live.to_dict()}

    def write_progress(self) -> None:
        """The progress file, written by the segment writer's thread (no file I/O in the loop)."""
        self.writer.write_json(self.file(PROGRESS), self.progress())

    # -- the consume loop --------------------------------------------------------------
    def consume(self) -> None:
        """One batch, stamped with its arrival, kept with the batches before it until a
        chunk of them is decoded (:meth:`decode`): when they reach ``CHUNK_RECORDS``, when
        a batch is not full (the capture caught up: decoded at once) or ``CHUNK_WAIT_S``
        after the first.  A record's arrival is the time its batch came, whenever decoded.

        While an offset gap is open (:class:`.gaps.GapGuard`: the partition was sought back
        to re-read it) every batch is decoded at once, as it comes: the guard takes the
        first record of the partition it is handed after a seek for the first one the broker
        shows from there, and accepts the gap at it once it has waited.  A batch fetched
        before the seek but handed over after it would start further on: accepted there, the
        gap would swallow the records in between (measured: MirrorMaker 2 with exactly-once
        on real Kafka, its transaction markers gaps, lost 125-1,263 records a run)."""
        msgs = self.consumer.consume(BATCH, 0.01)
        now = time.monotonic()
        if msgs:
            self.pending.append((msgs, time.time_ns() // 1000))
            self.pending_records += len(msgs)
            self.last_record = now
            self.last_record_wall = time.time()
        if self.pending and (len(msgs) < BATCH or self.pending_records >= CHUNK_RECORDS or self.gaps.open
                             or now - self.last_decode >= CHUNK_WAIT_S):
            self.decode()

    def decode(self) -> None:
        """The batches consumed so far: rows, seen sequences, live figures, offsets checked
        — as one chunk by the columnar path (:mod:`.columns`), or, where it declines, batch
        by batch by the per-record loop (:class:`RowBuilder`), which handles gaps."""
        batches, self.pending, self.pending_records = self.pending, [], 0
        self.last_decode = time.monotonic()
        if not batches:
            return
        rows, gaps = self.writer.rows, self.gaps
        if gaps.open or not self.columns.add(batches, rows, gaps.next):
            for msgs, arrival in batches:
                if gaps.open:
                    self.rows.add(gaps.filter(msgs), arrival, rows)
                else:
                    handled = self.rows.add(msgs, arrival, rows, gaps.next)
                    if handled < len(msgs):  # a gap: the guard seeks back and keeps what may be handled
                        self.rows.add(gaps.resume(msgs, handled), arrival, rows)
        if len(rows) >= SEGMENT_ROWS:
            self.writer.cut()

    def loop(self) -> str:
        """Consume until a stop condition holds; returns the reason."""
        args = self.args
        next_status = next_missing_note = 0.0
        client = admin_client(args.bootstrap, {"socket.connection.setup.timeout.ms": 5000})
        partitions = self.partitions = _Partitions(client, list(self.mapping), _log, self.end_offsets.sample)
        while not self.stopping:
            if partitions.version != self.partitions_version:
                self.partitions_version = partitions.version
                self.assign(partitions.counts)
            self.consume()
            now = time.monotonic()
            if now - self.writer.last_cut >= SEGMENT_SECONDS:
                self.writer.cut()
            reason = self.should_stop(now)
            if reason is not None:
                return reason
            if args.max_runtime and now - self.t_start >= args.max_runtime:
                return "max-runtime"
            if now >= next_status:
                next_status = now + 1.0
                self.write_progress()
                self.watch_fetch()
            if now >= next_missing_note and now - self.t_start >= MISSING_NOTE_S:
                next_missing_note = now + MISSING_NOTE_S
                said = partitions.missing(now)
                if said is not None:
                    _log(f"capture: target topics not found after {now - self.t_start:.0f} s, {said}")
        return "terminated"

    # -- when to stop ----------------------------------------------------------------
    def production_done(self) -> bool:
        if (self.run_dir / PRODUCE_DONE).exists():
            return True
        want = self.args.producers
        return bool(want) and len(list(self.manifest_dir.glob(PRODUCED_GLOB))) >= want

    def load_lanes(self) -> None:
        """The lanes this process answers for: acknowledged records, source partition in its
        group.  Of a compacted topic only the latest record of a lane is awaited: the older
        ones may have been compacted away before the replicator read them."""
        self.lanes = [
            ((lane.topic, m.producer_id, lane.lane), *_awaited(lane, lane.topic in m.compacted))
            for m in load_manifests(self.manifest_dir)
            for lane in m.lanes
            if lane.acked_count and lane.partition % self.groups == self.group
        ]

    def satisfied(self) -> bool:
        assert self.lanes is not None
        for key, acked, ranges in self.lanes:
            if key in self.complete:
                continue
            bm = self.seen.get(key)
            if bm is None or bm.distinct < acked or not bm.covers(ranges):
                return False
            self.complete.add(key)  # bits are only ever set: complete stays complete
        return True

    def others(self) -> list[dict[str, Any]]:
        """The other processes' view (multi-process capture)."""
        out = []
        for g in range(self.groups):
            if g == self.group:
                continue
            try:
                out.append(json.loads((self.run_dir / group_file(STATE, g, self.groups)).read_text()))
            except (OSError, ValueError):
                out.append({})
        return out

    def should_stop(self, now: float) -> str | None:
        """"satisfied" or "drain-timeout" once production is done (checked every 0.1 s), else None."""
        args = self.args
        if self.produce_done_at is None:
            if now < self.next_done_check:
                return None
            self.next_done_check = now + 0.05  # a stat (or a listing) per batch adds up
            if not self.production_done():
                return None
            self.produce_done_at = now
            self.load_lanes()
        if now < self.next_check:
            return None
        self.next_check = now + 0.1
        self.decode()  # every batch consumed so far counts
        mine = self.satisfied()
        last_wall = self.last_record_wall
        everyone = mine
        if self.groups > 1:
            self.writer.write_json(self.file(STATE), {"satisfied": mine, "last_record": last_wall})
            for other in self.others():
                everyone = everyone and bool(other.get("satisfied"))
                last_wall = max(last_wall, float(other.get("last_record", 0.0)))
        if not everyone:
            self.all_satisfied_at = None
        elif self.all_satisfied_at is None:
            self.all_satisfied_at = now
        if self.all_satisfied_at is not None and now - self.all_satisfied_at >= args.settle:
            return "satisfied"
        idle = min(now - max(self.last_record, self.produce_done_at), time.time() - last_wall)
        if now - self.produce_done_at >= args.drain_timeout and idle >= args.drain_timeout:
            return "drain-timeout"
        return None

    # -- the whole process -------------------------------------------------------------
    def run(self) -> int:
        self.file(STATE).unlink(missing_ok=True)
        self.file(READY).write_text(str(os.getpid()))
        try:
            reason = self.loop()
        finally:
            # Every way out (stop, a write error, Ctrl-C): the threads joined, every segment
            # cut so far on disk, then the consumer closed.
            try:
                if self.partitions is not None:
                    self.partitions.close()
                self.decode()  # the batches consumed last are rows too
                self.writer.close()
            finally:
                self.consumer.close()
        self.finish(reason)
        return 0

    def finish(self, reason: str) -> None:
        """The final progress and the status, written after the last segment is on disk."""
        args = self.args
        write_json_atomic(self.file(PROGRESS), self.progress())  # the final counts, for the last scrape
        status = {
            "reason": reason,
            **self.counts,
            "segments": self.writer.segments,
            "rows": self.writer.written,
            "elapsed": round(time.monotonic() - self.t_start, 3),
            "idle_seconds": round(time.monotonic() - self.last_record, 3),
            "settle": args.settle,
            "drain_timeout": args.drain_timeout,
            "partitions": self.assigned,
            "offset_gaps": self.gaps.to_dict(),
            "columnar_chunks": self.columns.chunks,
            "warmup_ends": self.warmup_ends,
            "metadata_answers": self.partitions.answers if self.partitions is not None else 0,
            "end_offsets": self.end_offsets.to_dict(),
            "consumer_restarts": self.watch.restarts,
        }
        if self.groups > 1:
            status["group"] = [self.group, self.groups]
        write_json_atomic(self.file(CAPTURE_STATUS), status)
        shown = {**status, "end_offsets": {k: v for k, v in status["end_offsets"].items() if k != "samples"}}
        print(f"capture: {json.dumps(shown)}", flush=True)


def _tune_malloc() -> None:
    """Large blocks from the heap, and the heap kept: the columnar path allocates a few
    hundred KB a chunk (the joined values, its byte matrices), which glibc maps and unmaps
    each time above its 128 KB threshold, and every page of a fresh mapping faults (measured
    on this project's VM: joining 4,096 values of 100 B, 75 ns a record against 6 with the
    heap).  Bounded by the capture's chunk size; a libc without mallopt is left alone."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.mallopt(-3, 64 << 20)  # M_MMAP_THRESHOLD: blocks up to 64 MB from the heap
        libc.mallopt(-1, 256 << 20)  # M_TRIM_THRESHOLD: the heap's top kept up to 256 MB
    except (OSError, AttributeError):
        pass


def _tune_gc() -> None:
    """Fewer cyclic collections: a capture allocates a row per record and ~500 messages per
    batch, which at the default threshold (700) ran a collection per batch, over messages
    still in use: ~15% of the loop's time.  What is imported by now (pyarrow, the client,
    pytest) is frozen: the collections that remain do not walk it.  Nothing in the loop
    makes reference cycles, so collecting them rarely costs no memory."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 100)


def _run(args: argparse.Namespace, *, tune: bool = False) -> int:
    """Run one capture; ``tune`` (the capture process's own entry point only, never a
    caller in its own process such as a test) also tunes the whole interpreter."""
    proc = _CaptureProcess(args)
    if tune:
        # The consume loop takes the GIL back from the writer and metadata threads within
        # 1 ms rather than 5 (the default): a record consumed then waits at most that long.
        sys.setswitchinterval(0.001)
        _tune_malloc()
        _tune_gc()  # after _CaptureProcess: pyarrow and the client are imported, then frozen

    def on_term(signum: int, frame: Any) -> None:
        proc.stopping = True

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    return proc.run()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="kafka-mirror-capture")
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--run-dir", required=True)
    ap.add_argument("--topics", required=True, help='JSON object {"target topic": "source topic"}')
    ap.add_argument("--drain-timeout", type=float, default=30.0)
    ap.add_argument("--settle", type=float, default=0.5)
    ap.add_argument("--max-runtime", type=float, default=0.0)
    ap.add_argument("--manifest-dir", default="", help="where the manifests are (default: the run directory)")
    ap.add_argument("--producers", type=int, default=0,
                    help="production is done once this many `kafka-mirror produce` commands finished "
                         "(produced-*.json); 0: wait for the produce-done file")
    ap.add_argument("--group", type=int, default=0, help="this process's partition group")
    ap.add_argument("--groups", type=int, default=1, help="capture processes: partition P goes to group P %% GROUPS")
    ap.add_argument("--end-offsets", choices=("sample", "skip"), default="sample",
                    help="sample the target's end offsets once a second (the capture's own lag), or not (a target "
                         "that cannot report them)")
    ap.add_argument("--end-offsets-why", default="", help="why (the cluster's capability, as it says)")
    args = ap.parse_args(argv)
    from .._kafkalog import log_to

    log_to(sys.stdout, "capture")  # librdkafka's messages into the log file, deduplicated
    return _run_or_fail(args, tune=True)


def _run_or_fail(args: argparse.Namespace, *, tune: bool = False) -> int:
    try:
        return _run(args, tune=tune)
    except SegmentWriteError as exc:
        # One line, which the controller finds (ERROR_PREFIX) and puts first in its
        # CaptureError; no status file: the run cannot be verified.
        print(f"{ERROR_PREFIX}{exc}", flush=True)
        return 1


if __name__ == "__main__":
    sys.exit(main())
