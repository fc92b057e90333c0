"""Synthetic run directories for verifier tests: manifests + capture Parquet, no Kafka.

A run is described compactly, lane by lane, in arrival order::

    run = SyntheticRun(tmp_path)
    orders = run.lane("orders", pid="p1", lane=0, partition=0, acked=range(100))
    orders.deliver(range(50), latency_ms=5).deliver([51, 50, 52], partition=0)
    run.foreign("orders", partition=0, evidence="b'junk'")
    run.write()

Produce time of seq ``s`` is ``base + s`` ms, so latencies are exact and known.  Target
offsets are assigned per (target topic, partition) in the order ``deliver`` is called.
``lane.in_source(seqs)`` writes the source log (``RUN_DIR/source``) for three-log
reconciliation; ``SyntheticRun(..., source_log=True)`` writes one even when it is empty.
``run.on_schedule()`` gives the manifests the per-second counts of a producer that sent
seq ``s`` at ``base + s`` ms (the timeline's ``sent``; a stall needs them).

The expected report of a synthetic run is ``pytest_kafka_mirror.verify.oracle.oracle_report``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pytest_kafka_mirror.rundir import (
    CAPTURE_DIR,
    CAPTURE_SCHEMA_FIELDS,
    SOURCE_DIR,
    LaneManifest,
    Manifest,
    capture_schema,
)
from pytest_kafka_mirror.verify.report import MirrorReport, compact_ranges

__all__ = ["BASE_TS_US", "SyntheticLane", "SyntheticRun", "assert_same_report", "to_ranges"]

BASE_TS_US = 1_700_000_000_000_000

Latency = float | Sequence[float] | Callable[[int], float]


def to_ranges(seqs: Iterable[int] | Iterable[tuple[int, int]]) -> list[list[int]]:
    """Inclusive ranges from a ``range``, a list of seqs, or a list of ``(a, b)`` pairs."""
    items: list[Any] = list(seqs)
    if items and isinstance(items[0], tuple):
        return [[int(a), int(b)] for a, b in items]
    return [[a, b] for a, b in compact_ranges(items)]


@dataclass
class SyntheticLane:
    """One (topic, producer, lane) of a synthetic run; ``deliver`` appends capture rows."""

    run: SyntheticRun
    topic: str
    pid: str
    lane: int
    partition: int
    manifest: LaneManifest | None

    def deliver(self, seqs: Iterable[int], *, partition: int | None = None, latency_ms: Latency = 1.0,
                checksum_ok: bool | None = True, kind: str = "headers", damage: str | None = None,
                timed: bool = True) -> SyntheticLane:
        """Records ``seqs`` arrive on the target, in this order, in ``partition`` (default: the lane's).

        ``damage``: the capture's damage text of each (``"key=missing"``); ``timed=False``:
        their km.t header is gone (no produce time, ``km.t=missing`` added to the damage).
        """
        if not timed:
            damage = ",".join(sorted([*(damage.split(",") if damage else []), "km.t=missing"]))
        part = self.partition if partition is None else partition
        for i, seq in enumerate(seqs):
            if callable(latency_ms):
                lat = latency_ms(seq)
            elif isinstance(latency_ms, (int, float)):
                lat = float(latency_ms)
            else:
                lat = float(latency_ms[i])
            produce = BASE_TS_US + seq * 1000
            self.run.add_row(
                topic=self.topic, partition=part, kind=kind, producer_id=self.pid, lane=self.lane, seq=seq,
                produce_ts_us=produce if timed else None, arrival_ts_us=produce + round(lat * 1000),
                checksum_ok=checksum_ok, damage=damage,
            )
        return self

    def unmatched(self, *, partition: int | None = None, count: int = 1, damage: str = "km.s=missing") -> SyntheticLane:
        """Records of this lane arrive with their sequence header gone: ours, damaged, and
        matched to nothing sent."""
        for _ in range(count):
            self.run.add_row(topic=self.topic, partition=self.partition if partition is None else partition,
                             kind="headers", producer_id=self.pid, lane=self.lane, produce_ts_us=BASE_TS_US,
                             arrival_ts_us=BASE_TS_US + 1000, checksum_ok=True, damage=damage)
        return self

    def in_source(self, seqs: Iterable[int]) -> SyntheticLane:
        """Records ``seqs`` are in the source log (the source topic, the lane's partition)."""
        for seq in seqs:
            self.run.add_row(
                topic=self.topic, target_topic=self.topic, partition=self.partition, kind="headers",
                producer_id=self.pid, lane=self.lane, seq=seq, produce_ts_us=BASE_TS_US + seq * 1000,
                arrival_ts_us=BASE_TS_US + seq * 1000, checksum_ok=True, source=True,
            )
        return self


@dataclass
class SyntheticRun:
    """Builder of a run directory (see the module docstring)."""

    __test__ = False  # not a test class, despite living under tests/

    run_dir: Path
    #: source topic -> target topic (MM2's default policy prefixes the source alias)
    target_prefix: str = "src."
    #: write a source log (RUN_DIR/source) even when no lane put anything in it
    source_log: bool = False
    rows: list[dict[str, Any]] = field(default_factory=list)
    source_rows: list[dict[str, Any]] = field(default_factory=list)
    manifests: dict[str, Manifest] = field(default_factory=dict)
    _offsets: dict[tuple[str, int, bool], int] = field(default_factory=dict)

    def target(self, topic: str) -> str:
        return self.target_prefix + topic

    def lane(self, topic: str, *, pid: str, lane: int, partition: int | None = None,
             acked: Iterable[int] | Iterable[tuple[int, int]] = (), failed: Iterable[int] = (),
             aborted: Iterable[int] = (), sent: int | None = None, in_manifest: bool = True,
             compacted: bool = False) -> SyntheticLane:
        """Declare a lane; ``in_manifest=False`` makes a lane nobody acknowledged (phantoms);
        ``aborted``: seqs of transactions the source aborted; ``compacted``: its topic is
        compacted (the producer's manifest says so)."""
        part = lane if partition is None else partition
        if not in_manifest:
            return SyntheticLane(self, topic, pid, lane, part, None)
        m = self.manifests.setdefault(pid, Manifest(
            producer_id=pid, format="headers", message_size=100, rate=None,
            started_us=BASE_TS_US, finished_us=BASE_TS_US + 10**6, topics={}, lanes=[],
        ))
        m.topics[topic] = self.target(topic)
        if compacted and topic not in m.compacted:
            m.compacted.append(topic)
        acked_ranges = to_ranges(acked)
        failed_ranges = to_ranges(failed)
        aborted_ranges = to_ranges(aborted)
        top = max([b for _, b in acked_ranges + failed_ranges + aborted_ranges], default=-1)
        lm = LaneManifest(topic=topic, lane=lane, partition=part, sent=top + 1 if sent is None else sent,
                          acked=acked_ranges, failed=failed_ranges, aborted=aborted_ranges)
        m.lanes.append(lm)
        return SyntheticLane(self, topic, pid, lane, part, lm)

    def add_row(self, *, topic: str | None, partition: int, target_topic: str | None = None, source: bool = False,
                **values: Any) -> None:
        """Append one capture row (of the source log when ``source``); unspecified columns are
        null, the offset is the next one of its topic partition."""
        tt = target_topic or self.target(topic or "")
        offset = self._offsets.get((tt, partition, source), 0)
        self._offsets[(tt, partition, source)] = offset + 1
        row: dict[str, Any] = {name: None for name, _ in CAPTURE_SCHEMA_FIELDS}
        row.update(topic=topic, target_topic=tt, partition=partition, offset=offset, size=100, **values)
        if row["arrival_ts_us"] is not None:
            row["record_ts_ms"] = row["arrival_ts_us"] // 1000
        (self.source_rows if source else self.rows).append(row)

    def foreign(self, topic: str, *, partition: int = 0, count: int = 1, evidence: str = "b'junk'") -> None:
        for _ in range(count):
            self.add_row(topic=topic, partition=partition, kind="foreign", evidence=evidence,
                         arrival_ts_us=BASE_TS_US)

    def headerless(self, topic: str, *, lane: int, partition: int | None = None, count: int = 1) -> None:
        for _ in range(count):
            self.add_row(topic=topic, partition=lane if partition is None else partition, kind="headerless",
                         lane=lane, checksum_ok=True, arrival_ts_us=BASE_TS_US)

    def on_schedule(self) -> SyntheticRun:
        """Give every manifest the producer's per-second counts and produce seconds of a
        schedule: seq ``s`` (acknowledged or failed) sent at ``base + s`` ms, production
        ending after the highest one (``stats["sent_per_second"]``, ``["produce_seconds"]``)."""
        for m in self.manifests.values():
            counts: dict[int, int] = {}
            top = -1
            for lm in m.lanes:
                for a, b in lm.acked + lm.failed:
                    top = max(top, b)
                    for seq in range(a, b + 1):
                        t = (BASE_TS_US + seq * 1000) // 1_000_000
                        counts[t] = counts.get(t, 0) + 1
            m.stats["sent_per_second"] = sorted([t, n] for t, n in counts.items())
            m.stats["produce_seconds"] = (top + 1) / 1000
        return self

    def write(self, *, segments: int = 1, capture: bool = True) -> Path:
        """Write manifests and ``segments`` capture files (``capture=False``: no capture dir)."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        self.run_dir.mkdir(parents=True, exist_ok=True)
        for m in self.manifests.values():
            m.write(self.run_dir)
        schema = capture_schema()

        def segments_of(rows: list[dict[str, Any]], cap: Path) -> None:
            cap.mkdir(parents=True, exist_ok=True)
            per = -(-len(rows) // segments) if rows else 0
            for i in range(segments):
                chunk = rows[i * per:(i + 1) * per] if per else []
                if chunk or i == 0:
                    pq.write_table(pa.Table.from_pylist(chunk, schema=schema), cap / f"part-{i:05d}.parquet")

        if capture:
            segments_of(self.rows, self.run_dir / CAPTURE_DIR)
        if self.source_log or self.source_rows:
            segments_of(self.source_rows, self.run_dir / SOURCE_DIR / CAPTURE_DIR)
        return self.run_dir


def built_and_verified(spark: Any, run_dir: Path, build: Callable[[Path], SyntheticRun],
                       ) -> tuple[SyntheticRun, MirrorReport]:
    """``build(run_dir)`` (a run directory's builder) and its verification by ``spark``:
    what a module-scoped fixture of a verified synthetic run returns."""
    from pytest_kafka_mirror.verify import verify_run

    run = build(run_dir)
    return run, verify_run(run.run_dir, spark=spark)


def assert_same_report(got: MirrorReport, want: MirrorReport) -> None:
    """``got == want``, compared piece by piece so that a difference reads well."""
    __tracebackhide__ = True
    got_lanes = {(s.topic, s.producer_id, s.lane): s for s in got.lanes}
    want_lanes = {(s.topic, s.producer_id, s.lane): s for s in want.lanes}
    assert sorted(got_lanes) == sorted(want_lanes)
    for key, lane in want_lanes.items():
        assert got_lanes[key] == lane, key
    assert got.totals == want.totals
    assert sorted(got.examples) == sorted(want.examples)
    for kind, rows in want.examples.items():
        assert got.examples[kind] == rows, kind
    assert got.latency == want.latency
    assert got.latency_by_topic == want.latency_by_topic
    assert_same_timeline(got.timeline, want.timeline)
    assert replace(got, timeline=[]) == replace(want, timeline=[])


def assert_same_timeline(got: list[dict[str, Any]], want: list[dict[str, Any]]) -> None:
    """Counts exact; per-second percentiles never below the exact value, at most 1 % above
    (the job's bucketed percentiles, ``verify/_timeline.py``)."""
    __tracebackhide__ = True
    assert [e["t"] for e in got] == [e["t"] for e in want]
    for g, w in zip(got, want, strict=True):
        assert {k: v for k, v in g.items() if not k.endswith("_ms")} == {
            k: v for k, v in w.items() if not k.endswith("_ms")}, w["t"]
        for name in ("p50_ms", "p99_ms"):
            if w[name] is None:
                assert g[name] is None, (w["t"], name)
            else:
                assert w[name] - 1e-9 <= g[name] <= w[name] + abs(w[name]) * 0.01 + 1e-9, (w["t"], name, g[name], w[name])
