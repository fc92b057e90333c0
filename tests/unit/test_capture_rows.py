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


#: records the columnar path decodes (the producer's body shape) and a few it must leave to
#: the per-record loop (a foreign or damaged record, a warm-up, a record with headers)
BODY_SHAPES = ("body",) * 12 + ("corrupt-body", "foreign", "body-no-key", "warmup", "headers")


def _body_message(shape: str, part: int, off: int, lane: int, seq: int) -> Any:
    if shape == "corrupt-body":  # a payload byte changed: decoded here, its checksum wrong
        m = _message("body", part, off, "p1", lane, seq)
        from confluent_kafka import Message

        value = m.value()
        return Message(topic="target", partition=part, offset=off, key=m.key(),
                       value=value[:-3] + (b"A" if value[-3:-2] != b"A" else b"B") + value[-2:], timestamp=m.timestamp())
    return _message(shape, part, off, "p1", lane, seq)


def _capture(msgs: list[Any], cuts: list[int], decoder: bool) -> tuple[RowBuilder, SegmentRows, Any]:
    """``msgs`` in consume() batches cut at ``cuts``, through the per-record loop, or as one
    chunk through the columnar path (the per-record loop batch by batch when it declines),
    as the capture process does."""
    from pytest_kafka_mirror.capture.columns import ColumnDecoder

    rb = RowBuilder({"target": "source"}, LiveFigures([1.0, 5.0]))
    rows = SegmentRows()
    offsets: dict[tuple[str, int], int] = {}
    bounds = [0, *sorted(c for c in cuts if c < len(msgs)), len(msgs)]
    batches = [(msgs[a:b], ARRIVAL + i) for i, (a, b) in enumerate(pairwise(bounds)) if b > a]
    cd = ColumnDecoder(rb, min_records=1)
    if not (decoder and cd.add(batches, rows, offsets)):
        for batch, arrival in batches:
            assert rb.add(batch, arrival, rows, offsets) == len(batch)
    return rb, rows, cd


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(records=st.lists(st.tuples(
    st.sampled_from(BODY_SHAPES), st.integers(0, 2), st.integers(0, 2),
    st.integers(0, 40).map(lambda s: s if s < 30 else CHUNK_BITS - 35 + s)), min_size=1, max_size=150),
    cuts=st.lists(st.integers(0, 150), max_size=4))
def test_the_columnar_path_gives_the_per_record_loop_s_rows_and_counts(records: list[Any], cuts: list[int],
                                                                        tmp_path: Path) -> None:
    """Whatever it decodes or declines: the rows (as written to the segment), bitmaps,
    counts, live figures and next offsets of the per-record loop."""
    offsets: Counter[int] = Counter()
    msgs = []
    for shape, part, lane, seq in records:
        msgs.append(_body_message(shape, part, offsets[part], lane, seq))
        offsets[part] += 1
    (rb, rows, _), (fast, fast_rows, decoder) = _capture(msgs, cuts, False), _capture(msgs, cuts, True)
    writer = SegmentWriter(tmp_path / "capture")
    try:
        assert writer._table(fast_rows).to_pylist() == writer._table(rows).to_pylist()
    finally:
        writer.close()
    assert list(fast_rows) == list(rows) and len(fast_rows) == len(rows)
    assert {k: (bm.distinct, bm.chunks) for k, bm in fast.seen.items()} == {
        k: (bm.distinct, bm.chunks) for k, bm in rb.seen.items()}
    assert fast.counts == rb.counts and fast.live.to_dict() == rb.live.to_dict()
    decodable = all(shape in ("body", "corrupt-body") for shape, *_ in records)
    assert decoder.chunks == (1 if decodable else 0)


def test_the_columnar_path_declines_a_gap_and_changes_nothing() -> None:
    """Offsets that do not follow each other (a record the broker showed late, a
    transaction marker): the per-record loop's gap guard handles them."""
    from pytest_kafka_mirror.capture.columns import ColumnDecoder

    msgs = [_message("body", 0, off, "p1", 0, off) for off in (*range(10), *range(11, 20))]
    rb = RowBuilder({"target": "source"}, LiveFigures([1.0]))
    rows, offsets = SegmentRows(), {("target", 0): 0}
    assert not ColumnDecoder(rb, min_records=1).add([(msgs, ARRIVAL)], rows, offsets)
    assert not rows and not rb.seen and rb.counts["records"] == 0 and offsets == {("target", 0): 0}
    assert not ColumnDecoder(rb, min_records=1).add([(msgs[:10], ARRIVAL)], rows, {("target", 0): 3})  # resumes at 3
    assert ColumnDecoder(rb, min_records=1).add([(msgs[:10], ARRIVAL)], rows, offsets)
    assert offsets == {("target", 0): 10} and len(rows) == 10 and rb.seen[("source", "p1", 0)].distinct == 10
