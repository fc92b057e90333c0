"""Fault knobs of the reference mirror, without Kafka: each knob's effect and its ledger.

Records are encoded as the producer encodes them, fed through a ``FaultEngine`` the way
the mirror process feeds it (in consumer batches), and what comes out is decoded as the
capture decodes it into a synthetic run directory.  The oracle's report of that run must
then show exactly what the engine's ledger says it injected.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_kafka_mirror.produce.records import RecordEncoder, decode
from pytest_kafka_mirror.replicators import FaultLedger, Knobs, parse_knobs, parse_replicator_spec
from pytest_kafka_mirror.replicators.reference.knobs import FaultEngine, Ledger, MirrorRecord, ledger_dump
from pytest_kafka_mirror.verify import MirrorReport
from pytest_kafka_mirror.verify.oracle import oracle_report
from tests.fakes import unstarted_cluster
from tests.synthetic import BASE_TS_US, SyntheticRun

TOPIC = "orders"
LANES = 4
PARTITIONS = 2
COUNT = 40  # records per lane


def _source(*, producers: tuple[str, ...] = ("p1",), fmt: str = "headers") -> list[MirrorRecord]:
    """Source records in consumer order: COUNT per lane, lane L in partition L % PARTITIONS."""
    out = []
    offsets = [0] * PARTITIONS
    for pid in producers:
        enc = RecordEncoder(fmt, pid, 120, LANES)
        for seq in range(COUNT):
            for lane in range(LANES):
                p = lane % PARTITIONS
                value, headers = enc.encode(lane, seq, BASE_TS_US + seq * 1000)
                out.append(MirrorRecord.decoded(TOPIC, p, offsets[p], enc.key(lane), value, headers, 0))
                offsets[p] += 1
    return out


def _mirror(engine: FaultEngine, records: list[MirrorRecord], *, batch: int = 7, step: float = 0.001) -> list[MirrorRecord]:
    """Feed ``records`` in consumer batches, advancing the clock; then let an hour pass."""
    out: list[MirrorRecord] = []
    now = 0.0
    for i in range(0, len(records), batch):
        now += step
        for rec in records[i:i + batch]:
            out += engine.feed(rec, now)
        out += engine.tick(now)
    return out + engine.tick(now + 3600)


def _report(tmp_path: Path, out: list[MirrorRecord], producers: tuple[str, ...] = ("p1",)) -> MirrorReport:
    """What the verifier reports when ``out`` arrives on the target in this order."""
    run = SyntheticRun(tmp_path, target_prefix="")
    for pid in producers:
        for lane in range(LANES):
            run.lane(TOPIC, pid=pid, lane=lane, partition=lane % PARTITIONS, acked=range(COUNT))
    for rec in out:
        d = decode(rec.key, rec.value, rec.headers)
        run.add_row(topic=TOPIC, partition=rec.partition, kind=d.kind.value, producer_id=d.producer_id, lane=d.lane,
                    seq=d.seq, produce_ts_us=d.ts_us, arrival_ts_us=(d.ts_us or BASE_TS_US) + 1000,
                    checksum_ok=d.checksum_ok, damage=d.damage)
    return oracle_report(run.write())


def _run(tmp_path: Path, knobs: Knobs, **source: Any) -> tuple[MirrorReport, FaultLedger, list[MirrorRecord]]:
    engine = FaultEngine(TOPIC, knobs, PARTITIONS)
    out = _mirror(engine, _source(**source))
    ledger = FaultLedger(ledger_dump({TOPIC: (knobs, engine.ledger, engine)}, 1))
    return _report(tmp_path, out, source.get("producers", ("p1",))), ledger, out


def _missing(report: MirrorReport) -> dict[tuple[str, int], list[int]]:
    return {(s.producer_id, s.lane): [q for r in s.missing_ranges for q in range(r.first, r.last + 1)]
            for s in report.lanes if s.missing_ranges}


def _clean_apart_from(report: MirrorReport, *figures: str) -> None:
    __tracebackhide__ = True
    others = {k: v for k, v in report.totals.items() if k not in ("expected", "received", "distinct", *figures)}
    assert others == dict.fromkeys(others, 0)


# -- each knob: exactly what the ledger says ---------------------------------------------------


def test_no_knobs_is_a_faithful_copy(tmp_path: Path) -> None:
    report, ledger, _ = _run(tmp_path, Knobs())
    assert not Knobs().active and ledger.topics[TOPIC]["injected"] == {}
    assert report.received == report.expected == LANES * COUNT
    _clean_apart_from(report)


def test_drop_rate(tmp_path: Path) -> None:
    report, ledger, _ = _run(tmp_path, Knobs(drop=0.1, seed=3))
    n = ledger.count(TOPIC, "drop")
    assert 0 < n < LANES * COUNT // 4
    assert report.lost + report.unseen == n
    assert _missing(report) == ledger.lanes(TOPIC, "drop")
    _clean_apart_from(report, "lost", "unseen")


def test_drop_ranges_and_a_lost_producer(tmp_path: Path) -> None:
    knobs = Knobs(drop_seqs=((1, 5, 9), (2, 39, 39)), lose_producers=("p2",))
    report, ledger, _ = _run(tmp_path, knobs, producers=("p1", "p2"))
    # p2's records are gone before the drop stage: they count as the lost producer's only.
    assert ledger.lanes(TOPIC, "drop") == {("p1", 1): list(range(5, 10)), ("p1", 2): [39]}
    assert ledger.count(TOPIC, "lose_producer") == LANES * COUNT
    assert (report.lost, report.unseen) == (5, 1 + LANES * COUNT)
    assert all(report.lane(TOPIC, "p2", lane).unseen == COUNT for lane in range(LANES))


def test_the_mirror_s_status_counts_what_the_knobs_dropped(tmp_path: Path) -> None:
    """'read N records, produced M' and how many the knobs kept back (it said 'copied 4003
    records' when 40 were dropped)."""
    from pytest_kafka_mirror.replicators.reference.control import FaultControl

    knobs = Knobs(drop_seqs=((1, 5, 9), (2, 39, 39)), lose_producers=("p2",))
    control = FaultControl(None, None, lambda rec: None, lambda text: None)
    assert control.dropped() == {} and control.dropped_words() == ""
    engine = FaultEngine(TOPIC, knobs, PARTITIONS, control.ledgers.setdefault(TOPIC, Ledger()))
    out = _mirror(engine, _source(producers=("p1", "p2")))
    assert control.dropped() == {"drop": 6, "lose_producer": LANES * COUNT}
    assert 2 * LANES * COUNT - len(out) == 6 + LANES * COUNT
    assert control.dropped_words() == f", dropped {6 + LANES * COUNT} by fault knobs (drop 6, lose_producer {LANES * COUNT})"


def test_the_mirror_s_status_is_its_last_status_line(tmp_path: Path) -> None:
    """What a readiness timeout quotes: the status line (it looked for 'copied ', which the
    mirror no longer writes, and said 'running, no status line yet')."""
    from types import SimpleNamespace

    from pytest_kafka_mirror.replicators.reference import ReferenceReplicator

    mirror = ReferenceReplicator("a:1", "b:2", tmp_path, topics="^km-")
    log = ("12:00:00 ready: a:1 -> b:2, topics /^km-/\n"
           "12:00:05 read 4003 records, produced 3963, dropped 40 by fault knobs (drop 40), 0 delivery errors\n"
           "12:00:06 something else\n")
    mirror.process = SimpleNamespace(log_tail=lambda n: log)  # type: ignore[assignment]
    assert mirror.status() == "12:00:05 read 4003 records, produced 3963, dropped 40 by fault knobs (drop 40), " \
                              "0 delivery errors"


def test_duplicate_rate_and_replay(tmp_path: Path) -> None:
    report, ledger, _ = _run(tmp_path, Knobs(duplicate=0.1, seed=1))
    assert report.duplicated == ledger.count(TOPIC, "duplicate") > 0
    _clean_apart_from(report, "duplicated")

    report, ledger, out = _run(tmp_path / "replay", Knobs(replay=((3, 10, 19),)))
    assert ledger.seqs(TOPIC, "replay", "p1", 3) == list(range(10, 20))
    assert report.duplicated == 10 and report.reordered == 0  # later copies are not reorders
    _clean_apart_from(report, "duplicated")
    lane3 = [r.seq for r in out if r.lane == 3]
    assert lane3[:31] == [*range(20), *range(10, 20), 20]  # re-sent right after 19, as a restart would


def test_reorder_window(tmp_path: Path) -> None:
    report, ledger, out = _run(tmp_path, Knobs(reorder=6, seed=2))
    assert report.reordered == ledger.count(TOPIC, "reorder") > 0
    _clean_apart_from(report, "reordered")
    # Nothing moves out of its window of 6 source offsets.
    offsets = {p: [r.offset for r in out if r.partition == p] for p in range(PARTITIONS)}
    assert all(sorted(o) == list(range(len(o))) for o in offsets.values())
    assert all(abs(o[i] - i) < 6 for o in offsets.values() for i in range(len(o)))


def test_corrupt_and_strip_headers(tmp_path: Path) -> None:
    report, ledger, _ = _run(tmp_path, Knobs(corrupt=0.1, seed=4))
    assert report.corrupted == ledger.count(TOPIC, "corrupt") > 0
    _clean_apart_from(report, "corrupted")

    report, ledger, _ = _run(tmp_path / "body", Knobs(corrupt=0.1, seed=4), fmt="body")
    assert report.corrupted == ledger.count(TOPIC, "corrupt") > 0

    report, ledger, _ = _run(tmp_path / "strip", Knobs(strip_headers=0.1, seed=5))
    n = ledger.count(TOPIC, "strip_headers")
    assert report.headers_lost == n > 0
    assert report.lost + report.unseen == n and _missing(report) == ledger.lanes(TOPIC, "strip_headers")

    report, ledger, _ = _run(tmp_path / "strip-body", Knobs(strip_headers=1.0), fmt="body")
    assert ledger.count(TOPIC, "strip_headers") == 0 and report.headers_lost == 0  # nothing to strip


@pytest.mark.parametrize("fmt", ["headers", "body"])
def test_metadata_damage_knobs(tmp_path: Path, fmt: str) -> None:
    """strip_header, rewrite_header, drop_key on the records damage_rate picks: each damaged
    record is reported as such, matched when its identity survived, missing when not."""
    everything = LANES * COUNT
    headers = fmt == "headers"
    report, ledger, _ = _run(tmp_path / "strip", Knobs(strip_header=("km.t",), damage_rate=0.3, seed=6), fmt=fmt)
    n = ledger.count(TOPIC, "strip_header")
    assert (0 < n < everything) if headers else n == 0  # the body format has no header to strip
    assert report.metadata_damaged == report.latency.untimed == n and report.damaged_unmatched == 0
    assert report.damage == ({"km.t": {"missing": n, "altered": 0}} if n else {})
    assert report.received == report.distinct == everything and report.lost + report.unseen == 0
    _clean_apart_from(report, "metadata_damaged")

    report, ledger, _ = _run(tmp_path / "rewrite", Knobs(rewrite_header=("km.s",), damage_rate=0.3, seed=6), fmt=fmt)
    n = ledger.count(TOPIC, "rewrite_header")
    assert (0 < n < everything) if headers else n == 0
    assert report.metadata_damaged == report.damaged_unmatched == n  # no sequence: matched to nothing
    assert report.damage == ({"km.s": {"missing": 0, "altered": n}} if n else {})
    assert report.lost + report.unseen == n and _missing(report) == ledger.lanes(TOPIC, "rewrite_header")
    _clean_apart_from(report, "metadata_damaged", "lost", "unseen")

    report, ledger, _ = _run(tmp_path / "key", Knobs(drop_key=True, damage_rate=0.3, seed=6), fmt=fmt)
    n = ledger.count(TOPIC, "drop_key")
    assert 0 < n < everything and report.metadata_damaged == n
    assert report.damage == {"key": {"missing": n, "altered": 0}}
    if headers:  # km.l names the lane: every record still counts
        assert report.damaged_unmatched == 0 and report.received == everything
        _clean_apart_from(report, "metadata_damaged")
    else:  # the key was the lane: matched to nothing
        assert report.damaged_unmatched == n == report.lost + report.unseen
        assert _missing(report) == ledger.lanes(TOPIC, "drop_key")


@pytest.mark.parametrize("fmt", ["headers", "body"])
def test_a_faithful_copy_with_an_added_header_passes(tmp_path: Path, fmt: str) -> None:
    report, ledger, out = _run(tmp_path, Knobs(add_header="mirror.source"), fmt=fmt)
    assert ledger.count(TOPIC, "add_header") == LANES * COUNT
    assert all(r.headers and r.headers[0] == ("mirror.source", b"added-by-the-mirror") for r in out)
    assert report.received == LANES * COUNT and report.metadata_damaged == 0
    report.assert_ok()


def test_lane_split(tmp_path: Path) -> None:
    report, ledger, _ = _run(tmp_path, Knobs(split_lanes=((0, 30), (3, 0))))
    assert ledger.lanes(TOPIC, "split") == {("p1", 0): list(range(30, COUNT)), ("p1", 3): list(range(COUNT))}
    assert report.lane_split == 1  # lane 3 moved whole: one partition, just not its own
    assert report.lane(TOPIC, "p1", 0).partitions == [0, 1] and report.lane(TOPIC, "p1", 3).partitions == [0]
    _clean_apart_from(report, "lane_split")

    report, ledger, _ = _run(tmp_path / "rate", Knobs(split=0.05, seed=6))
    assert report.lane_split == len(ledger.lanes(TOPIC, "split")) > 0


def test_stop_before_the_tail(tmp_path: Path) -> None:
    report, ledger, _ = _run(tmp_path, Knobs(stop_tail=3))
    assert ledger.lanes(TOPIC, "stop_tail") == {("p1", lane): [37, 38, 39] for lane in range(LANES)}
    assert (report.lost, report.unseen) == (0, 3 * LANES)
    _clean_apart_from(report, "unseen")


def test_delay_and_jitter_keep_partition_order() -> None:
    engine = FaultEngine(TOPIC, Knobs(delay_ms=100, jitter_ms=50, seed=1), PARTITIONS)
    records = _source()
    early = [r for rec in records[:20] for r in engine.feed(rec, 0.0)]
    assert early == [] and engine.tick(0.099) == []
    out = engine.tick(0.2)
    assert len(out) == 20
    later = _mirror(engine, records[20:])
    for p in range(PARTITIONS):
        offsets = [r.offset for r in out + later if r.partition == p]
        assert offsets == sorted(offsets) == list(range(len(records) // PARTITIONS))


def test_release_sends_buffers_but_not_the_held_tail() -> None:
    engine = FaultEngine(TOPIC, Knobs(delay_ms=10_000, stop_tail=2, reorder=4), PARTITIONS)
    out = [r for rec in _source() for r in engine.feed(rec, 0.0)]
    assert out == []
    released = engine.release()
    assert len(released) == LANES * (COUNT - 2)
    # The tail is the last 2 records *sent* per lane: the reorder stage comes first, so in
    # its shuffled order.
    held = {key: sorted(seqs) for key, seqs in engine.held().items()}
    assert held == {("p1", lane): [38, 39] for lane in range(LANES)}
    ledger = Ledger()
    ledger.discard_held(engine)
    assert {key: sorted(seqs) for key, seqs in ledger.seqs["stop_tail"].items()} == held


# -- determinism ------------------------------------------------------------------------


@pytest.mark.parametrize("knobs", [
    Knobs(drop=0.2, seed=9), Knobs(duplicate=0.2, corrupt=0.1, strip_headers=0.1, split=0.1, seed=9),
    Knobs(reorder=5, seed=9), Knobs(stop_tail=4, drop=0.05, seed=9),
])
def test_batching_does_not_change_the_outcome(knobs: Knobs) -> None:
    runs = []
    for batch in (1, 7, 500):
        engine = FaultEngine(TOPIC, knobs, PARTITIONS)
        out = _mirror(engine, _source(), batch=batch)
        runs.append(([(r.partition, r.offset, r.value, r.headers) for r in out],
                     ledger_dump({TOPIC: (knobs, engine.ledger, engine)}, 1)))
    assert runs[0] == runs[1] == runs[2]


def test_the_seed_picks_other_records() -> None:
    def dropped(seed: int) -> list[int]:
        engine = FaultEngine(TOPIC, Knobs(drop=0.2, seed=seed), PARTITIONS)
        _mirror(engine, _source())
        return engine.ledger.seqs["drop"][("p1", 0)]

    assert dropped(1) == dropped(1) != dropped(2)


# -- knobs as values and spec strings ---------------------------------------------------------


def test_knobs_parse_print_and_round_trip() -> None:
    text = "seed=7,drop=0.01,drop_seqs=0:10:19/2:5:5,reorder=8,lose_producers=pA/pB,split_lanes=1:100"
    knobs = parse_knobs(text)
    assert knobs == Knobs(seed=7, drop=0.01, drop_seqs=((0, 10, 19), (2, 5, 5)), reorder=8,
                          lose_producers=("pA", "pB"), split_lanes=((1, 100),))
    assert parse_knobs(str(knobs)) == knobs and str(Knobs()) == "none"
    assert Knobs.from_dict(knobs.to_dict()) == knobs and knobs.active and not Knobs(seed=3).active
    assert Knobs.from_dict({"drop_seqs": [[0, 1, 2]]}).drop_seqs == ((0, 1, 2),)  # as JSON gives it back
    spec = parse_replicator_spec("reference:drop=0.5")
    assert spec.faults == Knobs(drop=0.5) and str(spec) == "reference:drop=0.5"
    assert parse_replicator_spec("reference").faults == Knobs()
    damage = parse_knobs("strip_header=km.t/km.s,rewrite_header=km.p,drop_key=true,add_header=x.y,damage_rate=0.5")
    assert damage == Knobs(strip_header=("km.t", "km.s"), rewrite_header=("km.p",), drop_key=True, add_header="x.y",
                           damage_rate=0.5)
    assert parse_knobs(str(damage)) == damage and Knobs.from_dict(damage.to_dict()) == damage
    assert Knobs(strip_header="km.t").strip_header == ("km.t",)


@pytest.mark.parametrize(("make", "message"), [
    (lambda: Knobs(drop=1.5), r"fault knob drop=1\.5: must be a rate between 0 and 1"),
    (lambda: Knobs(reorder=-1), r"fault knob reorder=-1: must be a whole number >= 0"),
    (lambda: Knobs(drop_seqs=((0, 9, 3),)), r"drop_seqs=.*: must be \(lane, first, last\) ranges with first <= last"),
    (lambda: Knobs.from_dict({"dorp": 0.1}), r"unknown fault knobs \['dorp'\]; known: seed, drop, "),
    (lambda: parse_knobs("drop"), r"fault knob 'drop' is not NAME=VALUE with NAME one of: seed, drop"),
    (lambda: parse_knobs("drop=lots"), r"fault knob 'drop=lots': 'lots' is not a valid value"),
    (lambda: parse_knobs("drop_key=maybe"), r"fault knob 'drop_key=maybe': 'maybe' is not a valid value"),
    (lambda: Knobs(strip_header=("",)), r"fault knob strip_header=\(''.*must be header names"),
    (lambda: parse_replicator_spec("reference:delay_ms=-5"),
     r"replicator spec 'reference:delay_ms=-5': fault knob delay_ms=-5\.0: must be a number of milliseconds >= 0"),
])
def test_bad_knobs_are_one_clear_error(make: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make()


def test_ledger_queries() -> None:
    ledger = FaultLedger({"generation": 3, "topics": {TOPIC: {"knobs": {"drop": 0.5}, "injected": {
        "drop": {"count": 4, "lanes": {"p1/0": [[1, 2]], "p-x/1": [[7, 8]]}}}}}})
    assert ledger.count(TOPIC, "drop") == 4 and ledger.count(TOPIC, "corrupt") == 0 and ledger.count("x", "drop") == 0
    assert ledger.seqs(TOPIC, "drop") == [1, 2, 7, 8] and ledger.seqs(TOPIC, "drop", "p-x") == [7, 8]
    assert ledger.lanes(TOPIC, "drop") == {("p1", 0): [1, 2], ("p-x", 1): [7, 8]}
    assert ledger.knobs(TOPIC) == Knobs(drop=0.5) and "drop" in repr(ledger)
    with pytest.raises(KeyError, match="unknown ledger knob 'dropped'"):
        ledger.count(TOPIC, "dropped")


def test_replicator_spec_knobs_reach_the_reference_mirror(tmp_path: Path) -> None:
    from pytest_kafka_mirror.config import resolve_settings
    from pytest_kafka_mirror.session import KafkaMirrorSession

    settings = resolve_settings({}, lambda key: None, {"KAFKA_MIRROR_REPLICATOR": "reference:drop=0.25,seed=4"},
                                rootdir=tmp_path)
    cluster = unstarted_cluster("127.0.0.1:1")
    rep = KafkaMirrorSession(settings).make_replicator(cluster, cluster, tmp_path)  # type: ignore[arg-type]
    assert rep.default_faults == Knobs(drop=0.25, seed=4)  # type: ignore[attr-defined]
    assert "faults seed=4,drop=0.25" in rep.describe()
    rep.set_faults("km-x", Knobs(corrupt=0.5))  # not running: written for its start
    data = json.loads((tmp_path / "faults.json").read_text())
    assert data["default"] == {"seed": 4, "drop": 0.25} and data["topics"] == {"km-x": {"corrupt": 0.5}}
    with pytest.raises(Exception, match=r"env KAFKA_MIRROR_REPLICATOR: replicator spec 'reference:drop=2'"):
        resolve_settings({}, lambda key: None, {"KAFKA_MIRROR_REPLICATOR": "reference:drop=2"}, rootdir=tmp_path)
