"""Capture: read the target topics into columnar segments, stamping arrival time.

The capture runs as its own process (``python -m pytest_kafka_mirror.capture``) so that
its arrival timestamps do not wait on the producer for the GIL.  It:

* assigns every partition of the (mapped) target topics from the beginning as soon as
  they appear in the target's metadata (the replicator creates them), re-checking for
  added partitions;
* decodes each record (:func:`records.decode`), stamps the wall-clock arrival time once
  per consumed batch, and appends a row to in-memory columns that are written to a
  Parquet segment every ``SEGMENT_ROWS`` rows or ``SEGMENT_SECONDS`` seconds, so memory
  stays flat whatever the run length;
* keeps, per (topic, producer, lane), a sparse bitmap of the sequences seen, and stops
  ``settle`` seconds after the manifests (written when every producer of the run is done)
  are satisfied, or when ``drain_timeout`` seconds pass with no new record after the
  producers finished.  Records that are not ours are counted and kept as evidence.

:class:`Capture` is the controller used by the plugin; it starts the process, waits for
it to report ready, and waits for it to finish.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from bisect import bisect_left
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from .rundir import CAPTURE_DIR, CAPTURE_SCHEMA_FIELDS, CAPTURE_STATUS, load_manifests, write_json_atomic

__all__ = ["Capture", "CaptureError", "PRODUCE_DONE", "SeenBitmap"]

PRODUCE_DONE = "produce-done"
READY = "capture.ready"
PROGRESS = "capture-progress.json"
SEGMENT_ROWS = 200_000
SEGMENT_SECONDS = 5.0
CHUNK_BITS = 1 << 16


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
        """True when every sequence of the inclusive ranges is marked."""
        full = b"\xff" * (CHUNK_BITS // 8)
        for a, b in ranges:
            s = a
            while s <= b:
                if s & 0xFFFF == 0 and b - s + 1 >= CHUNK_BITS:
                    chunk = self.chunks.get(s >> 16)
                    if chunk is None or chunk != full:
                        return False
                    s += CHUNK_BITS
                else:
                    if s not in self:
                        return False
                    s += 1
        return True


# --------------------------------------------------------------------------- process side
class LiveFigures:
    """Identified arrivals per source topic and a cumulative latency histogram, for live
    metrics (``metrics.py`` reads them from the progress file).

    Counted per consumed batch with C-level work (slices, a sort, one bisect per bound),
    not per record: every copy counts, as it arrives.
    """

    def __init__(self, bounds_ms: Sequence[float]) -> None:
        self.bounds_us = [round(b * 1000) for b in bounds_ms]
        self.bounds_ms = list(bounds_ms)
        self.by_topic: Counter[str] = Counter()
        self.cumulative = [0] * len(bounds_ms)
        self.count = 0
        self.sum_us = 0

    def add_batch(self, topics: Sequence[str], produce_ts_us: Sequence[int | None], arrival_us: int) -> None:
        self.by_topic.update(t for t, p in zip(topics, produce_ts_us, strict=True) if p is not None)
        pts = sorted(p for p in produce_ts_us if p is not None)
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
    def __init__(self, out_dir: Path) -> None:
        self.out_dir = out_dir
        out_dir.mkdir(parents=True, exist_ok=True)
        self.cols: dict[str, list[Any]] = {name: [] for name, _ in CAPTURE_SCHEMA_FIELDS}
        self.segments = 0
        self.rows = 0
        self.last_flush = time.monotonic()

    def pending(self) -> int:
        return len(self.cols["offset"])

    def flush(self) -> None:
        self.last_flush = time.monotonic()
        if not self.pending():
            return
        import pyarrow as pa
        import pyarrow.parquet as pq

        from .rundir import capture_schema

        table = pa.table(self.cols, schema=capture_schema())
        tmp = self.out_dir / f".part-{self.segments:05d}.parquet.tmp"
        pq.write_table(table, tmp, compression="zstd")
        os.replace(tmp, self.out_dir / f"part-{self.segments:05d}.parquet")
        self.segments += 1
        self.rows += table.num_rows
        for v in self.cols.values():
            v.clear()


def _run(args: argparse.Namespace) -> int:
    from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

    from .records import FOREIGN, Kind, decode
    from .verify.job import DEFAULT_BOUNDS

    run_dir = Path(args.run_dir)
    mapping: dict[str, str] = json.loads(args.topics)  # target -> source
    stopping = False

    def on_term(signum: int, frame: Any) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)

    consumer = Consumer({
        "bootstrap.servers": args.bootstrap,
        "group.id": f"kafka-mirror-capture-{os.getpid()}",  # never joined: assign() only
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
    })
    writer = _Writer(run_dir / CAPTURE_DIR)
    cols = writer.cols
    c_topic, c_ttopic, c_part, c_off = cols["topic"], cols["target_topic"], cols["partition"], cols["offset"]
    c_kind, c_pid, c_lane, c_seq = cols["kind"], cols["producer_id"], cols["lane"], cols["seq"]
    c_pts, c_ats, c_rts, c_size = cols["produce_ts_us"], cols["arrival_ts_us"], cols["record_ts_ms"], cols["size"]
    c_ok, c_ev = cols["checksum_ok"], cols["evidence"]

    assigned: dict[str, int] = {}
    seen: dict[tuple[str, str, int], SeenBitmap] = {}
    counts = {"records": 0, "ours": 0, "foreign": 0, "headerless": 0, "duplicates_seen": 0}
    live = LiveFigures(DEFAULT_BOUNDS)
    t_start = time.monotonic()
    last_progress = t_start  # last time a record arrived
    produce_done_at: float | None = None
    satisfied_at: float | None = None
    manifests: list[Any] | None = None
    next_meta = 0.0
    next_check = 0.0
    next_status = 0.0
    reason = "terminated"

    def refresh_assignment() -> None:
        md = consumer.list_topics(timeout=5)
        new = []
        for target in mapping:
            t = md.topics.get(target)
            if t is None or t.error is not None:
                continue
            n = len(t.partitions)
            have = assigned.get(target, 0)
            if n > have:
                new += [TopicPartition(target, p, 0) for p in range(have, n)]
                assigned[target] = n
        if new:
            consumer.incremental_assign(new)
            write_progress()

    def write_progress() -> None:
        write_json_atomic(
            run_dir / PROGRESS,
            {**counts, "elapsed": round(time.monotonic() - t_start, 3), "partitions": assigned, **live.to_dict()},
        )

    def satisfied() -> bool:
        assert manifests is not None
        for m in manifests:
            for lane in m.lanes:
                acked = lane.acked_count
                if not acked:
                    continue
                bm = seen.get((lane.topic, m.producer_id, lane.lane))
                if bm is None or bm.distinct < acked or not bm.covers(lane.acked):
                    return False
        return True

    (run_dir / READY).write_text(str(os.getpid()))
    while not stopping:
        now = time.monotonic()
        # Poll metadata often while a target topic is missing (the replicator creates it),
        # then once a second for added partitions.
        if (now >= next_meta and len(assigned) < len(mapping)) or now >= next_meta + 1.0:
            try:
                refresh_assignment()
            except KafkaException as exc:
                print(f"capture: metadata refresh failed (will retry): {exc}", flush=True)
            next_meta = now + 0.05
        msgs = consumer.consume(500, 0.01)
        if msgs:
            arrival = time.time_ns() // 1000
            first = len(c_pts)  # this batch's rows start here (the writer flushes only below)
            for m in msgs:
                if m.error():
                    if m.error().code() != KafkaError._PARTITION_EOF:
                        print(f"capture: consume error: {m.error()}", flush=True)
                    continue
                target = m.topic()
                source = mapping.get(target, target)
                key, value, headers = m.key(), m.value(), m.headers()
                try:
                    d = decode(key, value, headers)
                    size = (len(key) if key else 0) + (len(value) if value else 0)
                    if headers:
                        size += sum(len(k) + (len(v) if v else 0) for k, v in headers)
                    evidence = (
                        f"key={(key or b'')[:40]!r} value={(value or b'')[:80]!r}" if d.kind is Kind.FOREIGN else None
                    )
                except Exception as exc:  # noqa: BLE001 - one odd record must not end the capture
                    d, size, evidence = FOREIGN, 0, f"undecodable record: {exc!r}"[:200]
                c_topic.append(source)
                c_ttopic.append(target)
                c_part.append(m.partition())
                c_off.append(m.offset())
                c_kind.append(d.kind.value)
                c_pid.append(d.producer_id)
                c_lane.append(d.lane)
                c_seq.append(d.seq)
                c_pts.append(d.ts_us)
                c_ats.append(arrival)
                c_rts.append(m.timestamp()[1])
                c_size.append(size)
                c_ok.append(d.checksum_ok)
                c_ev.append(evidence)
                if d.kind is Kind.FOREIGN:
                    counts["foreign"] += 1
                elif d.kind is Kind.HEADERLESS:
                    counts["headerless"] += 1
                elif d.seq is not None and d.lane is not None and d.producer_id is not None:
                    counts["ours"] += 1
                    k = (source, d.producer_id, d.lane)
                    bm = seen.get(k)
                    if bm is None:
                        bm = seen[k] = SeenBitmap()
                    if not bm.add(d.seq):
                        counts["duplicates_seen"] += 1
            counts["records"] += len(msgs)
            live.add_batch(c_topic[first:], c_pts[first:], arrival)
            last_progress = time.monotonic()
            if writer.pending() >= SEGMENT_ROWS:
                writer.flush()
        now = time.monotonic()
        if writer.pending() and now - writer.last_flush >= SEGMENT_SECONDS:
            writer.flush()
        if produce_done_at is None and (run_dir / PRODUCE_DONE).exists():
            produce_done_at = now
            manifests = load_manifests(Path(args.manifest_dir) if args.manifest_dir else run_dir)
        if produce_done_at is not None and now >= next_check:
            next_check = now + 0.1
            if satisfied_at is None and satisfied():
                satisfied_at = now
            if satisfied_at is not None and now - satisfied_at >= args.settle:
                reason = "satisfied"
                break
            if now - max(last_progress, produce_done_at) >= args.drain_timeout:
                reason = "drain-timeout"
                break
        if args.max_runtime and now - t_start >= args.max_runtime:
            reason = "max-runtime"
            break
        if now >= next_status:
            next_status = now + 1.0
            write_progress()
    writer.flush()
    consumer.close()
    write_progress()  # the final counts, for the last scrape
    status = {
        "reason": reason,
        **counts,
        "segments": writer.segments,
        "rows": writer.rows,
        "elapsed": round(time.monotonic() - t_start, 3),
        "idle_seconds": round(time.monotonic() - last_progress, 3),
        "settle": args.settle,
        "drain_timeout": args.drain_timeout,
        "partitions": assigned,
    }
    write_json_atomic(run_dir / CAPTURE_STATUS, status)
    print(f"capture: {json.dumps(status)}", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="kafka-mirror-capture")
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--run-dir", required=True)
    ap.add_argument("--topics", required=True, help='JSON object {"target topic": "source topic"}')
    ap.add_argument("--drain-timeout", type=float, default=30.0)
    ap.add_argument("--settle", type=float, default=0.5)
    ap.add_argument("--max-runtime", type=float, default=0.0)
    ap.add_argument("--manifest-dir", default="", help="where the manifests are (default: the run directory)")
    return _run(ap.parse_args(argv))


# --------------------------------------------------------------------------- controller side
class Capture:
    """Starts the capture process for one run and waits for its end."""

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
    ) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.run_dir = Path(run_dir)
        # The source capture of a run writes into RUN_DIR/source but reads RUN_DIR's manifests.
        self.manifest_dir = Path(manifest_dir) if manifest_dir is not None else None
        self.topics = topics  # source -> target
        self.drain_timeout = drain_timeout
        self.settle = settle
        self.startup_timeout = startup_timeout
        self.process: Any = None

    def start(self) -> Capture:
        from ._process import ManagedProcess, wait_until

        self.run_dir.mkdir(parents=True, exist_ok=True)
        argv = [
            sys.executable, "-m", "pytest_kafka_mirror.capture",
            "--bootstrap", self.bootstrap_servers,
            "--run-dir", str(self.run_dir),
            "--topics", json.dumps({t: s for s, t in self.topics.items()}),
            "--drain-timeout", str(self.drain_timeout),
            "--settle", str(self.settle),
        ]
        if self.manifest_dir is not None:
            argv += ["--manifest-dir", str(self.manifest_dir)]
        proc = self.process = ManagedProcess("capture", argv, self.run_dir / "capture.log").start()
        try:
            wait_until(
                lambda: (self.run_dir / READY).exists() or not proc.running,
                self.startup_timeout,
                "the capture process to start",
                on_timeout=lambda: f"\n{proc.log_tail()}",
            )
        except TimeoutError as exc:
            proc.kill()
            raise CaptureError(str(exc)) from None
        if not proc.running and not (self.run_dir / CAPTURE_STATUS).exists():
            raise CaptureError(f"the capture process died during start-up: {proc.describe_exit()}")
        return self

    def producers_done(self) -> None:
        """Tell the capture every manifest is written: it may now decide it is complete."""
        (self.run_dir / PRODUCE_DONE).write_text(str(time.time()))

    def progress(self) -> dict[str, Any]:
        try:
            return dict(json.loads((self.run_dir / PROGRESS).read_text()))
        except (OSError, ValueError):
            return {}

    def wait(self, timeout: float | None = None) -> dict[str, Any]:
        """Wait for the capture to end by itself; returns capture-status.json."""
        import subprocess

        if self.process is None:
            raise CaptureError("the capture was never started")
        # The capture ends at the latest drain_timeout after its last record; allow for a
        # slow shutdown on top.  A capture that keeps receiving records runs on.
        limit = timeout if timeout is not None else None
        t0 = time.monotonic()
        while True:
            try:
                self.process.wait(timeout=1.0)
                break
            except subprocess.TimeoutExpired:
                if limit is not None and time.monotonic() - t0 > limit:
                    self.process.stop()
                    raise CaptureError(
                        f"the capture did not finish within {limit:g} s (progress: {self.progress()}); "
                        "it was stopped. Hint: raise --kafka-mirror-drain-timeout or check the replicator."
                    ) from None
        return self.status()

    def wait_assigned(self, partitions: dict[str, int], timeout: float, hint: str = "") -> float:
        """Wait until the capture reads every partition of the target topics; returns seconds waited.

        ``partitions`` maps target topic -> expected partition count.
        """
        from ._process import wait_until

        t0 = time.monotonic()

        def ready() -> bool:
            if self.process is not None and not self.process.running:
                raise CaptureError(f"the capture process died: {self.process.describe_exit()}")
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
        if self.process is not None:
            self.process.stop(timeout=10.0)


if __name__ == "__main__":
    sys.exit(main())
