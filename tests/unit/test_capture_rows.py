"""The capture's hot loop (:meth:`RowBuilder.add`) against the slow path it replaces: every
record classified by :func:`records.decode`, one whole row per record.

The loop decodes the producer's shapes inline and stores a row as a value tuple plus a
run tuple shared by a run of records (:class:`SegmentRows`); whatever mix of shapes,
lanes, partitions, duplicates and foreign records arrives, the rows, the Arrow table
written to the segment, the seen bitmaps and the counts must be what the slow path gives.
"""

from __future__ import annotations

from collections import Counter
from itertools import pairwise
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_kafka_mirror.capture.rows import CHUNK_BITS, LiveFigures, RowBuilder
from pytest_kafka_mirror.capture.segments import SegmentRows, SegmentWriter
from pytest_kafka_mirror.produce.records import Kind, RecordEncoder, decode, warmup_value

ARRIVAL = 1_700_000_000_000_000
SHAPES = ("headers", "body", "reordered", "no-key", "headerless", "foreign", "warmup", "corrupt",
          # metadata damaged: a header stripped, re-encoded or truncated, the key replaced
          "no-ts", "text-seq", "short-ts", "other-key", "body-no-key", "no-pid")


def _message(shape: str, part: int, off: int, pid: str, lane: int, seq: int) -> Any:
    from confluent_kafka import Message

    fmt = "body" if shape.startswith("body") else "headers"
    enc = RecordEncoder(fmt, pid, 120, 3)
    key: bytes | None = enc.key(lane)
    value, headers = enc.encode(lane, seq, 1_000_000 + seq)
    if shape == "reordered":  # a replicator that adds a header of its own and reorders
        headers = [("replicator", b"x"), *reversed(headers or [])]
    elif shape == "no-key":
        key = None
    elif shape == "headerless":  # the replicator dropped the headers
        headers = None
    elif shape == "foreign":
        key, value, headers = b"k", b"not ours", None
    elif shape == "warmup":
        key, value, headers = None, warmup_value(part, "nonce", 5), None
    elif shape == "corrupt":  # a payload byte changed on the way
        value = value[:-1] + (b"A" if value[-1:] != b"A" else b"B")
    elif shape in ("no-ts", "no-pid"):
        headers = [(n, v) for n, v in headers or [] if n != ("km.t" if shape == "no-ts" else "km.p")]
    elif shape == "text-seq":
        headers = [(n, b'"%s"' % v if n == "km.s" else v) for n, v in headers or []]
    elif shape == "short-ts":
        headers = [(n, v[:8] if n == "km.t" else v) for n, v in headers or []]
    elif shape == "other-key":
        key = b"9"
    elif shape == "body-no-key":
        key = None
    return Message(topic="target", partition=part, offset=off, key=key, value=value, headers=headers,
                   timestamp=(1, 7_000 + off))


def _expected(m: Any) -> tuple[Any, ...] | None:
    """The slow path's row of ``m`` (None: a warm-up record, counted, not kept)."""
    key, value, headers = m.key(), m.value(), m.headers()
    d = decode(key, value, headers)
    if d.kind is Kind.WARMUP:
        return None
    size = (len(key) if key else 0) + (len(value) if value else 0) + sum(len(k) + len(v) for k, v in headers or [])
    return ("source", "target", m.partition(), m.offset(), d.kind.value, d.producer_id, d.lane, d.seq, d.ts_us,
            ARRIVAL, m.timestamp()[1], size, d.checksum_ok, d.kind is Kind.FOREIGN, d.damage)


records = st.lists(st.tuples(
    st.sampled_from(SHAPES), st.integers(0, 2), st.sampled_from(["p1", "p2"]), st.integers(0, 2),
    st.integers(0, 40).map(lambda s: s if s < 30 else CHUNK_BITS - 35 + s),  # across a chunk's edge
), max_size=120)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(records=records, cuts=st.lists(st.integers(0, 120), max_size=3))
def test_the_hot_loop_gives_the_slow_path_s_rows_and_counts(records: list[Any], cuts: list[int],
                                                             tmp_path: Path) -> None:
    offsets: Counter[int] = Counter()
    msgs = []
    for shape, part, pid, lane, seq in records:
        msgs.append(_message(shape, part, offsets[part], pid, lane, seq))
        offsets[part] += 1
    rb = RowBuilder({"target": "source"}, LiveFigures([1.0]))
    rows = SegmentRows()
    next_offsets: dict[tuple[str, int], int] = {}
    bounds = [0, *sorted(c for c in cuts if c < len(msgs)), len(msgs)]
    for a, b in pairwise(bounds):  # in batches, as consumed
        assert rb.add(msgs[a:b], ARRIVAL, rows, next_offsets) == b - a

    expected = [row for row in map(_expected, msgs) if row is not None]
    got = [(*row[:-2], row[-2] is not None, row[-1]) for row in rows]
    assert got == expected
    writer = SegmentWriter(tmp_path / "capture")
    try:
        table = writer._table(rows)
    finally:
        writer.close()
    assert table.schema == writer.schema and [tuple(r.values()) for r in table.to_pylist()] == list(rows)

    ours = [(r[5], r[6], r[7]) for r in expected if r[4] in ("headers", "body") and None not in r[5:8]]
    by_lane: dict[tuple[str, str, int], set[int]] = {}
    for pid, lane, seq in ours:
        by_lane.setdefault(("source", pid, lane), set()).add(seq)
    assert {k: bm.distinct for k, bm in rb.seen.items()} == {k: len(v) for k, v in by_lane.items()}
    assert all(seq in rb.seen[k] for k, seqs in by_lane.items() for seq in seqs)
    kinds = Counter(r[4] for r in expected)
    assert rb.counts == {"records": len(msgs), "ours": len(ours), "foreign": kinds["foreign"],
                         "headerless": kinds["headerless"], "damaged": sum(r[-1] is not None for r in expected),
                         "warmup": len(msgs) - len(expected),
                         "duplicates_seen": len(ours) - sum(map(len, by_lane.values()))}
    assert rb.live.to_dict()["by_topic"] == ({"source": len(ours)} if ours else {})
    timed = [r for r in expected if r[4] in ("headers", "body") and None not in r[5:9]]
    assert rb.live.to_dict()["latency"]["count"] == len(timed)  # no produce time: counted, no latency


def test_rows_keep_their_order_and_share_runs() -> None:
    rows = SegmentRows()
    a = ("s", "t", 0, 0, "headers", "p", 1, 10, 5, 9, 3, 100, True, None, None)
    rows += [a, (*a[:3], 1, *a[4:7], 11, *a[8:])]  # one run
    rows.append((*a[:3], 2, "foreign", None, None, None, None, 9, 3, 8, None, "key=b'k'", None))  # its own run
    rows.append((*a[:3], 3, *a[4:7], 12, *a[8:]))
    rows.append((*a[:3], 4, *a[4:7], 13, None, *a[9:14], "km.t=missing"))  # damaged: a run of its own
    rows.append((*a[:3], 5, *a[4:7], 14, None, *a[9:14], "km.t=missing"))  # ... shared by the same damage
    assert [r[3] for r in rows] == [0, 1, 2, 3, 4, 5] and len(rows) == 6
    assert [run[0] for run in rows.runs] == [0, 2, 3, 4]
    assert list(SegmentRows(rows)) == list(rows)


def test_a_lane_of_a_compacted_topic_is_awaited_by_its_latest_record() -> None:
    """The capture stops once the latest record of every key of a compacted topic arrived:
    the older ones may have been compacted away before the replicator read them."""
    from pytest_kafka_mirror.capture.process import _awaited
    from pytest_kafka_mirror.rundir import LaneManifest

    lane = LaneManifest("state", 0, 0, sent=12, acked=[[0, 4], [6, 9]], failed=[[5, 5], [10, 11]])
    assert _awaited(lane, compacted=False) == (9, [[0, 4], [6, 9]])
    assert _awaited(lane, compacted=True) == (1, [[9, 9]])
