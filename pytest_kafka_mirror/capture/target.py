"""Capture: read the target topics into columnar segments, stamping arrival time.

The capture runs as its own process (``python -m pytest_kafka_mirror.capture.target``) so that
its arrival timestamps do not wait on the producer for the GIL.  It:

* assigns every partition of the (mapped) target topics from the beginning as soon as
  they appear in the target's metadata (the replicator creates them), re-checking for
  added partitions;
* decodes each record, stamps the wall-clock arrival time once per consumed batch, and
  keeps a row per record that is written to a Parquet segment every ``SEGMENT_ROWS`` rows
  or ``SEGMENT_SECONDS`` seconds, so memory stays flat whatever the run length;
* keeps, per (topic, producer, lane), a sparse bitmap of the sequences seen, and stops
  ``settle`` seconds after the manifests (written when every producer of the run is done)
  are satisfied, or when ``drain_timeout`` seconds pass with no new record after the
  producers finished.  Records that are not ours are counted and kept as evidence.

**Per-record work** is what limits a capture process (a bare consume loop reads several
times faster, see the README's Performance section), so the loop decodes records as the
producer writes them inline — four ``km.*`` headers in order, or a ``pid;seq;ts;``
body — and hands anything else to :func:`records.decode`, which classifies it exactly as
before; a row is one tuple (columns are built when a segment is written); the seen bitmap
of the previous record's lane is reused; live figures are counted per batch.

**Several processes** (``Capture(processes=N)``, ``kafka-mirror capture --processes N``)
split the partitions: process I reads partition P of every topic when ``P % N == I`` and
writes its own segments (``part-gI-NNNNN.parquet``) and files (``capture-gI.ready``,
``capture-progress-gI.json``, ``capture-status-gI.json``, ``capture-state-gI.json``).
Each process checks the lanes whose source partition is in its group, and they stop
together: when every process reports its lanes complete (then ``settle``), or when no
process received anything for ``drain_timeout`` seconds.  A replicator that moves records
to partitions of another group leaves that lane incomplete for its process, so such a run
ends by the drain timeout, with every record captured.  The controller merges the
statuses into ``capture-status.json``.

:class:`Capture` is the controller used by the plugin; it starts the processes, waits for
them to report ready, and waits for them to finish.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
import zlib
from bisect import bisect_left
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from ..rundir import CAPTURE_DIR, CAPTURE_STATUS, load_manifests, write_json_atomic
from .gaps import GapGuard

__all__ = ["PRODUCE_DONE", "Capture", "CaptureError", "SeenBitmap", "group_file", "merge_progress"]

PRODUCE_DONE = "produce-done"
#: Written by each ``kafka-mirror produce`` when its manifests are in the run directory
#: (``produced-<producer id>.json``): a capture on another host counts them (``--producers``).
PRODUCED_GLOB = "produced-*.json"
READY = "capture.ready"
PROGRESS = "capture-progress.json"
#: Per process of a multi-process capture: its view of the shared stop decision.
STATE = "capture-state.json"
SEGMENT_ROWS = 100_000
SEGMENT_SECONDS = 5.0
CHUNK_BITS = 1 << 16
_FULL_CHUNK = b"\xff" * (CHUNK_BITS // 8)


#: The capture's consumer settings (besides servers and group id); the benchmarks' bare
#: consume loop uses them too, so that it measures the same client work.
CONSUMER_CONFIG: dict[str, Any] = {
    "enable.auto.commit": False,
    "fetch.queue.backoff.ms": 1,
    "fetch.wait.max.ms": 10,
    "fetch.error.backoff.ms": 10,
    # Partitions are assigned at offset 0 rather than OFFSET_BEGINNING: resolving
    # BEGINNING costs ~0.5 s on Tansu, which would show up as latency of the first
    # records.  A log whose start moved past 0 is caught by the reset to earliest.
    "auto.offset.reset": "earliest",
    "enable.partition.eof": False,
    "socket.connection.setup.timeout.ms": 5000,
}


def group_file(name: str, group: int, groups: int) -> str:
    """File ``name`` of capture process ``group`` of ``groups``: unchanged for a single
    process, else with ``-gI`` before the extension (``capture-progress-g1.json``)."""
    if groups <= 1:
        return name
    stem, _, ext = name.partition(".")
    return f"{stem}-g{group}.{ext}"


class CaptureError(RuntimeError):
    """The capture process failed or did not finish in time."""


class SeenBitmap:
    """Sparse bitmap of sequence numbers: 8 KiB chunks, allocated on first use."""

    __slots__ = ("chunks", "distinct")

    def __init__(self) -> None:
        self.chunks: dict[int, bytearray] = {}
        self.distinct = 0

    def add(self, seq: int) -> bool:
        """Mark ``seq``; return True if it was new."""
        chunk = self.chunks.get(seq >> 16)
        if chunk is None:
            chunk = self.chunks[seq >> 16] = bytearray(CHUNK_BITS // 8)
        i = (seq & 0xFFFF) >> 3
        bit = 1 << (seq & 7)
        if chunk[i] & bit:
            return False
        chunk[i] |= bit
        self.distinct += 1
        return True

    def __contains__(self, seq: int) -> bool:
        chunk = self.chunks.get(seq >> 16)
        return chunk is not None and bool(chunk[(seq & 0xFFFF) >> 3] & (1 << (seq & 7)))

    def covers(self, ranges: Iterable[Iterable[int]]) -> bool:
        """True when every sequence of the inclusive ranges is marked.

        Whole chunks compare as bytes, and so do the whole bytes of a partial chunk: the
        capture asks this every 0.1 s once producers are done, over every lane.
        """
        for a, b in ranges:
            s = a
            while s <= b:
                base = s & ~0xFFFF
                e = min(b, base + 0xFFFF)  # last seq of this range in this chunk
                chunk = self.chunks.get(s >> 16)
                if chunk is None:
                    return False
                if e - s + 1 == CHUNK_BITS:
                    if chunk != _FULL_CHUNK:
                        return False
                else:
                    lo, hi = s - base, e - base
                    first_full, last_full = (lo + 7) >> 3, ((hi + 1) >> 3) - 1
                    if first_full <= last_full and chunk[first_full : last_full + 1].strip(b"\xff"):
                        return False
                    # the bits outside whole bytes, at either end
                    edges = range(lo, min(hi + 1, first_full * 8)) if first_full <= last_full else range(lo, hi + 1)
                    tail = range(max((last_full + 1) * 8, lo), hi + 1) if first_full <= last_full else range(0)
                    for bit in (*edges, *tail):
                        if not chunk[bit >> 3] & (1 << (bit & 7)):
                            return False
                s = e + 1
        return True


# --------------------------------------------------------------------------- process side
class LiveFigures:
    """Identified arrivals per source topic and a cumulative latency histogram, for live
    metrics (``metrics.py`` reads them from the progress file).

    Counted per consumed batch with C-level work (a Counter update, a sort, one bisect per
    bound), not per record: every copy counts, as it arrives.
    """

    def __init__(self, bounds_ms: Sequence[float]) -> None:
        self.bounds_us = [round(b * 1000) for b in bounds_ms]
        self.bounds_ms = list(bounds_ms)
        self.by_topic: Counter[str] = Counter()
        self.cumulative = [0] * len(bounds_ms)
        self.count = 0
        self.sum_us = 0

    def add_batch(self, topics: Sequence[str], produce_ts_us: Sequence[int | None], arrival_us: int) -> None:
        """Records of one batch: their source topics and produce times (None: not ours)."""
        self.by_topic.update(t for t, p in zip(topics, produce_ts_us, strict=True) if p is not None)
        self._latencies(sorted(p for p in produce_ts_us if p is not None), arrival_us)

    def add_ours(self, topics: list[str], produce_ts_us: list[int], arrival_us: int) -> None:
        """Identified records of one batch (the capture loop collects only those)."""
        self.by_topic.update(topics)
        produce_ts_us.sort()
        self._latencies(produce_ts_us, arrival_us)

    def _latencies(self, pts: list[int], arrival_us: int) -> None:
        n = len(pts)
        if not n:
            return
        # latency <= bound  <=>  produce_ts >= arrival - bound
        for i, bound in enumerate(self.bounds_us):
            self.cumulative[i] += n - bisect_left(pts, arrival_us - bound)
        self.count += n
        self.sum_us += n * arrival_us - sum(pts)

    def to_dict(self) -> dict[str, Any]:
        return {
            "by_topic": dict(self.by_topic),
            "latency": {"bounds_ms": self.bounds_ms, "cumulative": self.cumulative, "count": self.count,
                        "sum_us": self.sum_us},
        }


class _Writer:
    """Rows (tuples in ``CAPTURE_SCHEMA_FIELDS`` order) to Parquet segments."""

    def __init__(self, out_dir: Path, prefix: str = "part") -> None:
        self.out_dir = out_dir
        self.prefix = prefix
        out_dir.mkdir(parents=True, exist_ok=True)
        self.rows: list[tuple[Any, ...]] = []
        self.segments = 0
        self.written = 0
        # pyarrow's import, the schema and the zstd writer cost ~0.3-0.6 s the first time:
        # paid here, before the capture reads anything, not in the first flush (which
        # stalled the consume loop and put ~600 ms into the latency of the records behind it).
        import pyarrow as pa
        import pyarrow.parquet as pq

        from ..rundir import capture_schema

        self.schema = capture_schema()
        pq.write_table(self.schema.empty_table(), pa.BufferOutputStream(), compression="zstd")
        self.last_flush = time.monotonic()

    def flush(self) -> None:
        self.last_flush = time.monotonic()
        if not self.rows:
            return
        import pyarrow as pa  # loaded by __init__: a dictionary lookup here
        import pyarrow.parquet as pq

        schema = self.schema
        columns = list(zip(*self.rows, strict=True))
        table = pa.Table.from_arrays([pa.array(col, type=f.type) for col, f in zip(columns, schema, strict=True)],
                                     schema=schema)
        name = f"{self.prefix}-{self.segments:05d}.parquet"
        tmp = self.out_dir / f".{name}.tmp"
        pq.write_table(table, tmp, compression="zstd")
        os.replace(tmp, self.out_dir / name)
        self.segments += 1
        self.written += table.num_rows
        self.rows = []


def _lane_key(key: bytes | None) -> int | None:
    return int(key) if key is not None and key.isdigit() and len(key) <= 5 else None


class _CaptureProcess:
    """One capture process (of ``args.groups``): the consume loop and its stop decision."""

    def __init__(self, args: argparse.Namespace) -> None:
        from confluent_kafka import Consumer

        from .._kafkalog import with_logger
        from ..rundir import DEFAULT_BOUNDS

        self.args = args
        self.run_dir = Path(args.run_dir)
        self.group, self.groups = args.group, args.groups
        self.mapping: dict[str, str] = json.loads(args.topics)  # target -> source
        self.manifest_dir = Path(args.manifest_dir) if args.manifest_dir else self.run_dir
        self.stopping = False
        self.consumer = Consumer(with_logger({
            "bootstrap.servers": args.bootstrap,
            "group.id": f"kafka-mirror-capture-{os.getpid()}",  # never joined: assign() only
            **CONSUMER_CONFIG,
        }))
        prefix = "part" if self.groups <= 1 else f"part-g{self.group}"
        self.writer = _Writer(self.run_dir / CAPTURE_DIR, prefix)
        # Offsets must follow each other: a broker showing a later record first (Tansu,
        # several producers on one partition) must not make the capture skip one.
        self.gaps = GapGuard(self.consumer, log=lambda text: print(f"capture: {text}", flush=True))
        self.assigned: dict[str, int] = {}
        self.seen: dict[tuple[str, str, int], SeenBitmap] = {}
        self.counts = {"records": 0, "ours": 0, "foreign": 0, "headerless": 0, "warmup": 0, "duplicates_seen": 0}
        #: "SOURCE_TOPIC:PARTITION" -> one past the offset of its last warm-up record on the target
        self.warmup_ends: dict[str, int] = {}
        self.live = LiveFigures(DEFAULT_BOUNDS)
        self.t_start = time.monotonic()
        self.last_record = self.t_start  # monotonic time of the last record
        self.last_record_wall = time.time()
        self.lanes: list[tuple[tuple[str, str, int], int, list[list[int]]]] | None = None
        self.complete: set[tuple[str, str, int]] = set()
        self.pids: dict[bytes, str] = {}

    def file(self, name: str) -> Path:
        return self.run_dir / group_file(name, self.group, self.groups)

    # -- assignment ------------------------------------------------------------------
    def refresh_assignment(self) -> None:
        from confluent_kafka import TopicPartition

        md = self.consumer.list_topics(timeout=5)
        new = []
        for target in self.mapping:
            t = md.topics.get(target)
            if t is None or t.error is not None:
                continue
            n = len(t.partitions)
            have = self.assigned.get(target, 0)
            if n > have:
                new += [TopicPartition(target, p, 0) for p in range(have, n) if p % self.groups == self.group]
                self.assigned[target] = n
        if new:
            for tp in new:
                self.gaps.start(tp.topic, tp.partition, tp.offset)
            self.consumer.incremental_assign(new)
        if new or len(self.assigned) == len(self.mapping):
            self.write_progress()

    def write_progress(self) -> None:
        write_json_atomic(self.file(PROGRESS), {
            **self.counts, "elapsed": round(time.monotonic() - self.t_start, 3), "partitions": self.assigned,
            **self.live.to_dict(),
        })

    # -- the hot loop ----------------------------------------------------------------
    def consume(self) -> None:
        """One batch: decode, keep rows, mark seen sequences, count live figures."""
        from confluent_kafka import KafkaError

        from ..produce.records import FOREIGN, HDR_LANE, HDR_PRODUCER, HDR_SEQ, HDR_TS, Kind, decode

        # Messages as Any: the client's stubs type every field optional, which the branches
        # below handle (a record without a key or value is decode()'s business).
        msgs: Sequence[Any] = self.gaps.filter(self.consumer.consume(500, 0.01))
        if not msgs:
            return
        arrival = time.time_ns() // 1000
        rows = self.writer.rows
        append = rows.append
        mapping_get = self.mapping.get
        seen, counts = self.seen, self.counts
        crc32 = zlib.crc32
        pids = self.pids  # producer ids seen, decoded once: one str object per producer, not per row
        if len(pids) > 4096:  # bounded, whatever arrives
            pids.clear()
        ours_topics: list[str] = []
        ours_pts: list[int] = []
        foreign = headerless = ours = dups = warmup = 0
        last: tuple[Any, Any, Any] = (None, None, None)
        bm: SeenBitmap | None = None
        pid: str
        lane: int
        seq: int
        pts: int
        for m in msgs:
            if m.error():
                if m.error().code() != KafkaError._PARTITION_EOF:
                    print(f"capture: consume error: {m.error()}", flush=True)
                continue
            target = m.topic()
            source = mapping_get(target, target)
            key, value, headers = m.key(), m.value(), m.headers()
            kind = None
            try:
                # The producer's own shapes, decoded inline; anything else (a replicator
                # that reorders or adds headers, a corrupted checksum field, foreign data)
                # goes through decode(), which classifies it exactly.
                if headers:
                    if len(headers) == 4:
                        (n0, v0), (n1, v1), (n2, v2), (n3, v3) = headers
                        if n0 == HDR_PRODUCER and n1 == HDR_LANE and n2 == HDR_SEQ and n3 == HDR_TS:
                            pid = pids.get(v0) or pids.setdefault(v0, v0.decode())
                            lane, seq, pts = int(v1), int(v2), int(v3)
                            ok = len(value) >= 8 and int(value[:8], 16) == crc32(value[8:])
                            size = (len(key) if key else 0) + len(value) + 16 + len(v0) + len(v1) + len(v2) + len(v3)
                            kind = "headers"
                elif value and key is not None and key.isdigit() and len(key) <= 5:
                    parts = value.split(b";", 3)
                    if len(parts) == 4 and parts[1].isdigit() and parts[2].isdigit():
                        payload = parts[3]
                        pid = pids.get(parts[0]) or pids.setdefault(parts[0], parts[0].decode())
                        lane, seq, pts = int(key), int(parts[1]), int(parts[2])
                        ok = len(payload) >= 8 and int(payload[:8], 16) == crc32(payload[8:])
                        size = len(key) + len(value)
                        kind = "body"
            except (ValueError, TypeError, AttributeError, UnicodeDecodeError):
                kind = None
            if kind is None:
                try:
                    d = decode(key, value, headers)
                    size = (len(key) if key else 0) + (len(value) if value else 0)
                    if headers:
                        size += sum(len(k) + (len(v) if v else 0) for k, v in headers)
                    evidence = (
                        f"key={(key or b'')[:40]!r} value={(value or b'')[:80]!r}" if d.kind is Kind.FOREIGN else None
                    )
                except Exception as exc:
                    d, size, evidence = FOREIGN, 0, f"undecodable record: {exc!r}"[:200]
                if d.kind is Kind.WARMUP:  # readiness proof, not a record of the run: counted, not kept
                    warmup += 1
                    # ... but it moves the partition's end of log (the failover checks use it)
                    end_key = f"{source}:{m.partition()}"
                    self.warmup_ends[end_key] = max(self.warmup_ends.get(end_key, 0), m.offset() + 1)
                    continue
                append((source, target, m.partition(), m.offset(), d.kind.value, d.producer_id, d.lane, d.seq,
                        d.ts_us, arrival, m.timestamp()[1], size, d.checksum_ok, evidence))
                if d.kind is Kind.FOREIGN:
                    foreign += 1
                    continue
                if d.kind is Kind.HEADERLESS:
                    headerless += 1
                    continue
                if d.seq is None or d.lane is None or d.producer_id is None:
                    continue
                pid, lane, seq, pts = d.producer_id, d.lane, d.seq, d.ts_us or 0
            else:
                append((source, target, m.partition(), m.offset(), kind, pid, lane, seq, pts, arrival,
                        m.timestamp()[1], size, ok, None))
            ours += 1
            ours_topics.append(source)
            ours_pts.append(pts)
            # SeenBitmap.add, inline, with the previous record's bitmap reused (records of
            # one partition mostly belong to one lane).
            if last[2] != lane or last[1] != pid or last[0] != source:
                last = (source, pid, lane)
                bm = seen.get(last)
                if bm is None:
                    bm = seen[last] = SeenBitmap()
            assert bm is not None
            chunk = bm.chunks.get(seq >> 16)
            if chunk is None:
                chunk = bm.chunks[seq >> 16] = bytearray(CHUNK_BITS // 8)
            i, bit = (seq & 0xFFFF) >> 3, 1 << (seq & 7)
            if chunk[i] & bit:
                dups += 1
            else:
                chunk[i] |= bit
                bm.distinct += 1
        counts["records"] += len(msgs)
        counts["ours"] += ours
        counts["foreign"] += foreign
        counts["headerless"] += headerless
        counts["warmup"] += warmup
        counts["duplicates_seen"] += dups
        self.live.add_ours(ours_topics, ours_pts, arrival)
        self.last_record = time.monotonic()
        self.last_record_wall = time.time()
        if len(rows) >= SEGMENT_ROWS:
            self.writer.flush()

    # -- when to stop ----------------------------------------------------------------
    def production_done(self) -> bool:
        if (self.run_dir / PRODUCE_DONE).exists():
            return True
        want = self.args.producers
        return bool(want) and len(list(self.manifest_dir.glob(PRODUCED_GLOB))) >= want

    def load_lanes(self) -> None:
        """The lanes this process answers for: acknowledged records, source partition in its group."""
        self.lanes = [
            ((lane.topic, m.producer_id, lane.lane), lane.acked_count, lane.acked)
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

    def run(self) -> int:
        args = self.args
        produce_done_at: float | None = None
        all_satisfied_at: float | None = None
        next_meta = next_check = next_status = 0.0
        reason = "terminated"
        self.file(STATE).unlink(missing_ok=True)
        self.file(READY).write_text(str(os.getpid()))
        while not self.stopping:
            now = time.monotonic()
            # Poll metadata often while a target topic is missing (the replicator creates it),
            # then once a second for added partitions.
            if (now >= next_meta and len(self.assigned) < len(self.mapping)) or now >= next_meta + 1.0:
                try:
                    self.refresh_assignment()
                except Exception as exc:
                    print(f"capture: metadata refresh failed (will retry): {exc}", flush=True)
                next_meta = now + 0.05
            self.consume()
            now = time.monotonic()
            if self.writer.rows and now - self.writer.last_flush >= SEGMENT_SECONDS:
                self.writer.flush()
            if produce_done_at is None and self.production_done():
                produce_done_at = now
                self.load_lanes()
            if produce_done_at is not None and now >= next_check:
                next_check = now + 0.1
                mine = self.satisfied()
                last_wall = self.last_record_wall
                everyone = mine
                if self.groups > 1:
                    write_json_atomic(self.file(STATE), {"satisfied": mine, "last_record": last_wall})
                    for other in self.others():
                        everyone = everyone and bool(other.get("satisfied"))
                        last_wall = max(last_wall, float(other.get("last_record", 0.0)))
                if not everyone:
                    all_satisfied_at = None
                elif all_satisfied_at is None:
                    all_satisfied_at = now
                if all_satisfied_at is not None and now - all_satisfied_at >= args.settle:
                    reason = "satisfied"
                    break
                idle = min(now - max(self.last_record, produce_done_at), time.time() - last_wall)
                if now - produce_done_at >= args.drain_timeout and idle >= args.drain_timeout:
                    reason = "drain-timeout"
                    break
            if args.max_runtime and now - self.t_start >= args.max_runtime:
                reason = "max-runtime"
                break
            if now >= next_status:
                next_status = now + 1.0
                self.write_progress()
        self.writer.flush()
        self.consumer.close()
        self.write_progress()  # the final counts, for the last scrape
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
            "warmup_ends": self.warmup_ends,
        }
        if self.groups > 1:
            status["group"] = [self.group, self.groups]
        write_json_atomic(self.file(CAPTURE_STATUS), status)
        print(f"capture: {json.dumps(status)}", flush=True)
        return 0


def _run(args: argparse.Namespace) -> int:
    proc = _CaptureProcess(args)

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
    args = ap.parse_args(argv)
    from .._kafkalog import log_to

    log_to(sys.stdout, "capture")  # librdkafka's messages into the log file, deduplicated
    return _run(args)


def merge_progress(parts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The progress of a multi-process capture as one: counts and live figures summed, a
    topic's partitions counted once every process has assigned its share of them."""
    if len(parts) == 1:
        return dict(parts[0])
    out: dict[str, Any] = {}
    for name in ("records", "ours", "foreign", "headerless", "warmup", "duplicates_seen"):
        out[name] = sum(int(p.get(name, 0)) for p in parts)
    out["elapsed"] = max((float(p.get("elapsed", 0.0)) for p in parts), default=0.0)
    topics = {t for p in parts for t in p.get("partitions", {})}
    out["partitions"] = {t: min(int(p.get("partitions", {}).get(t, 0)) for p in parts) for t in topics}
    by_topic: Counter[str] = Counter()
    latency: dict[str, Any] | None = None
    for p in parts:
        by_topic.update(p.get("by_topic", {}))
        h = p.get("latency")
        if h:
            if latency is None:
                latency = {"bounds_ms": h["bounds_ms"], "cumulative": [0] * len(h["cumulative"]), "count": 0,
                           "sum_us": 0}
            latency["cumulative"] = [a + b for a, b in zip(latency["cumulative"], h["cumulative"], strict=True)]
            latency["count"] += h["count"]
            latency["sum_us"] += h["sum_us"]
    out["by_topic"] = dict(by_topic)
    if latency is not None:
        out["latency"] = latency
    return out


# --------------------------------------------------------------------------- controller side
class Capture:
    """Starts the capture process(es) for one run and waits for their end.

    ``processes=N`` splits the partitions between N processes (see the module docstring),
    for a target that one process cannot keep up with.  ``producers``: production is done
    once that many ``kafka-mirror produce`` commands have finished writing to the run
    directory (a capture on another host than the producers); by default the controller
    says so (:meth:`producers_done`).
    """

    def __init__(
        self,
        bootstrap_servers: str,
        run_dir: str | os.PathLike[str],
        topics: dict[str, str],
        *,
        drain_timeout: float = 30.0,
        settle: float = 0.5,
        startup_timeout: float = 30.0,
        manifest_dir: str | os.PathLike[str] | None = None,
        processes: int = 1,
        producers: int = 0,
    ) -> None:
        if isinstance(processes, bool) or not isinstance(processes, int) or processes < 1:
            raise CaptureError(f"capture processes must be a whole number >= 1, got {processes!r}")
        self.bootstrap_servers = bootstrap_servers
        self.run_dir = Path(run_dir)
        # The source capture of a run writes into RUN_DIR/source but reads RUN_DIR's manifests.
        self.manifest_dir = Path(manifest_dir) if manifest_dir is not None else None
        self.topics = topics  # source -> target
        self.drain_timeout = drain_timeout
        self.settle = settle
        self.startup_timeout = startup_timeout
        self.processes_wanted = processes
        self.producers = producers
        self.procs: list[Any] = []

    @property
    def process(self) -> Any:
        """The (first) capture process, None before :meth:`start`."""
        return self.procs[0] if self.procs else None

    def _file(self, name: str, group: int) -> Path:
        return self.run_dir / group_file(name, group, self.processes_wanted)

    def start(self) -> Capture:
        from ..processes.managed import ManagedProcess, wait_until

        self.run_dir.mkdir(parents=True, exist_ok=True)
        n = self.processes_wanted
        for g in range(n):
            argv = [
                sys.executable, "-m", "pytest_kafka_mirror.capture.target",
                "--bootstrap", self.bootstrap_servers,
                "--run-dir", str(self.run_dir),
                "--topics", json.dumps({t: s for s, t in self.topics.items()}),
                "--drain-timeout", str(self.drain_timeout),
                "--settle", str(self.settle),
                "--producers", str(self.producers),
                "--group", str(g), "--groups", str(n),
            ]
            if self.manifest_dir is not None:
                argv += ["--manifest-dir", str(self.manifest_dir)]
            name = "capture" if n == 1 else f"capture {g}/{n}"
            self.procs.append(ManagedProcess(name, argv, self._file("capture.log", g)).start())

        def started() -> bool:
            return all(self._file(READY, g).exists() or not proc.running for g, proc in enumerate(self.procs))

        try:
            wait_until(started, self.startup_timeout, "the capture process to start",
                       on_timeout=lambda: "".join(f"\n{proc.log_tail()}" for proc in self.procs))
        except TimeoutError as exc:
            for proc in self.procs:
                proc.kill()
            raise CaptureError(str(exc)) from None
        for g, proc in enumerate(self.procs):
            if not proc.running and not self._file(CAPTURE_STATUS, g).exists():
                self.stop()
                raise CaptureError(f"the capture process died during start-up: {proc.describe_exit()}")
        return self

    def producers_done(self) -> None:
        """Tell the capture every manifest is written: it may now decide it is complete."""
        (self.run_dir / PRODUCE_DONE).write_text(str(time.time()))

    def progress(self) -> dict[str, Any]:
        parts = []
        for g in range(self.processes_wanted):
            try:
                parts.append(dict(json.loads(self._file(PROGRESS, g).read_text())))
            except (OSError, ValueError):
                parts.append({})
        return merge_progress(parts)

    def wait(self, timeout: float | None = None) -> dict[str, Any]:
        """Wait for the capture to end by itself; returns capture-status.json."""
        import subprocess

        if not self.procs:
            raise CaptureError("the capture was never started")
        # The capture ends at the latest drain_timeout after its last record; allow for a
        # slow shutdown on top.  A capture that keeps receiving records runs on.
        limit = timeout if timeout is not None else None
        t0 = time.monotonic()
        for proc in self.procs:
            while True:
                try:
                    proc.wait(timeout=1.0)
                    break
                except subprocess.TimeoutExpired:
                    if limit is not None and time.monotonic() - t0 > limit:
                        self.stop()
                        raise CaptureError(
                            f"the capture did not finish within {limit:g} s (progress: {self.progress()}); "
                            "it was stopped. Hint: raise --kafka-mirror-drain-timeout or check the replicator."
                        ) from None
        if self.processes_wanted > 1:
            self._merge_status()
        return self.status()

    def _merge_status(self) -> None:
        statuses = []
        for g, proc in enumerate(self.procs):
            path = self._file(CAPTURE_STATUS, g)
            if not path.exists():
                raise CaptureError(f"capture process {g} ended without writing {path.name}: {proc.describe_exit()}")
            statuses.append(json.loads(path.read_text()))
        reasons = sorted({st["reason"] for st in statuses})
        merged = merge_progress(statuses)
        merged.pop("by_topic", None)
        merged.pop("latency", None)
        merged.update(
            reason="satisfied" if reasons == ["satisfied"] else next(r for r in reasons if r != "satisfied"),
            segments=sum(st["segments"] for st in statuses),
            rows=sum(st["rows"] for st in statuses),
            idle_seconds=min(st["idle_seconds"] for st in statuses),
            settle=self.settle,
            drain_timeout=self.drain_timeout,
            processes=[{"reason": st["reason"], "records": st["records"], "elapsed": st["elapsed"]}
                       for st in statuses],
            offset_gaps={k: sum(st.get("offset_gaps", {}).get(k, 0) for st in statuses)
                         for k in ("refetched", "accepted", "accepted_offsets", "open")},
            warmup_ends={k: max(int(st.get("warmup_ends", {}).get(k, 0)) for st in statuses)
                         for k in {k for st in statuses for k in st.get("warmup_ends", {})}},
        )
        write_json_atomic(self.run_dir / CAPTURE_STATUS, merged)

    def wait_assigned(self, partitions: dict[str, int], timeout: float, hint: str = "") -> float:
        """Wait until the capture reads every partition of the target topics; returns seconds waited.

        ``partitions`` maps target topic -> expected partition count.
        """
        from ..processes.managed import wait_until

        t0 = time.monotonic()

        def ready() -> bool:
            for proc in self.procs:
                if not proc.running:
                    raise CaptureError(f"the capture process died: {proc.describe_exit()}")
            have = self.progress().get("partitions", {})
            return all(have.get(t, 0) >= n for t, n in partitions.items())

        try:
            wait_until(ready, timeout, f"target topics {sorted(partitions)} to appear on the target", interval=0.02)
        except TimeoutError as exc:
            have = self.progress().get("partitions", {})
            raise CaptureError(f"{exc} (the capture sees {have}). {hint}") from None
        return time.monotonic() - t0

    def status(self) -> dict[str, Any]:
        path = self.run_dir / CAPTURE_STATUS
        if not path.exists():
            raise CaptureError(
                f"the capture ended without writing {CAPTURE_STATUS}: "
                f"{self.process.describe_exit() if self.process else 'never started'}"
            )
        return dict(json.loads(path.read_text()))

    def stop(self) -> None:
        """SIGTERM: the capture writes what it has, and its status, then exits."""
        for proc in self.procs:
            proc.stop(timeout=10.0)
        if self.processes_wanted > 1 and all(self._file(CAPTURE_STATUS, g).exists()
                                             for g in range(self.processes_wanted)):
            self._merge_status()


if __name__ == "__main__":
    sys.exit(main())
