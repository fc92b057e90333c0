"""The verifier: exact figures on synthetic run directories, and readable failure messages.

Spark is slow to start and each verification costs about a second even on tiny data, so
most checks share a few run directories verified once per module: the "zoo" holds one
lane per anomaly, the "clean" run has known latencies, and a seeded random run is checked
lane by lane against the brute-force oracle (``pytest_kafka_mirror.verify.oracle``).
"""

from __future__ import annotations

import itertools
import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_kafka_mirror.verify import (
    LaneStats,
    LatencyStats,
    MirrorMismatchError,
    MirrorReport,
    get_spark,
    verify_run,
)
from pytest_kafka_mirror.verify import job as job_module
from pytest_kafka_mirror.verify.connect import _local_cores
from pytest_kafka_mirror.verify.oracle import oracle_report
from pytest_kafka_mirror.verify.report import MissingRange, compact_ranges, format_ranges, format_table
from pytest_kafka_mirror.verify.spark import SparkSessionConflictError
from tests.synthetic import SyntheticRun, assert_same_report, built_and_verified

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

LaneKey = tuple[str, str, int]


def _check_against_oracle(run: SyntheticRun, report: MirrorReport, **kw: Any) -> None:
    assert_same_report(report, oracle_report(run.run_dir, **kw))


# -- the zoo: one lane per anomaly ---------------------------------------------------------


def _build_zoo(run_dir: Path) -> SyntheticRun:
    run = SyntheticRun(run_dir)
    lane = run.lane
    lane("orders", pid="p1", lane=0, acked=range(100)).deliver(range(100), latency_ms=5)  # clean
    lane("orders", pid="p1", lane=1, acked=range(100)).deliver([*range(10), *range(15, 50), *range(51, 90)])
    lane("orders", pid="p1", lane=2, acked=range(50))  # nothing arrived
    lane("orders", pid="p1", lane=3, acked=range(20)).deliver(range(20)).deliver([3, 3, 7])
    lane("orders", pid="p1", lane=4, acked=range(5)).deliver([0, 1, 3, 2, 4])
    lane("orders", pid="p1", lane=5, acked=range(6)).deliver([0, 5, 1, 2, 3, 4])
    lane("orders", pid="p1", lane=6, acked=range(6)).deliver([0, 1, 2, 1, 3, 5, 4, 5])
    lane("orders", pid="p1", lane=7, acked=range(10), failed=[10, 11], sent=15).deliver([*range(10), 10, 13, 20])
    corrupt = lane("orders", pid="p1", lane=8, acked=range(10)).deliver(range(4))
    corrupt.deliver([4], checksum_ok=False).deliver([5]).deliver([6], checksum_ok=False).deliver(range(7, 10))
    lane("orders", pid="p1", lane=9, acked=range(10)).deliver(range(5)).deliver(range(5, 10), partition=1)
    # Adjacent manifest ranges (12-19, 20-29) must merge: the unseen tail is one range.
    lane("orders", pid="p1", lane=10, acked=[(0, 9), (12, 19), (20, 29)], failed=[10, 11]).deliver(
        [*range(6), 8, 9, 12, 13, 16])
    lane("orders", pid="p1", lane=11, acked=range(10)).deliver(range(3, 10))
    # Across the range join's seq bucket boundary (2**16).
    lane("orders", pid="p1", lane=12, acked=range(65530, 65546)).deliver(
        [s for s in range(65530, 65546) if s not in (65536, 65540)])
    lane("orders", pid="p2", lane=0, acked=range(30))  # a whole producer lost
    lane("orders", pid="p2", lane=1, acked=range(30))
    lane("orders", pid="ghost", lane=0, in_manifest=False).deliver([0, 1, 2])
    lane("payments", pid="p1", lane=0, acked=range(40)).deliver(range(40), latency_ms=20, kind="body")
    lane("payments", pid="p1", lane=1, acked=range(10)).deliver([*range(5), 50])
    run.foreign("orders", partition=0, count=2, evidence="b'not ours'")
    run.headerless("payments", lane=0, count=3)
    run.write(segments=3)
    return run


@pytest.fixture(scope="module")
def zoo(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> tuple[SyntheticRun, MirrorReport]:
    return built_and_verified(spark, tmp_path_factory.mktemp("zoo"), _build_zoo)


def test_zoo_lanes_match_the_oracle(zoo: tuple[SyntheticRun, MirrorReport]) -> None:
    _check_against_oracle(*zoo)


def test_zoo_totals_are_exact(zoo: tuple[SyntheticRun, MirrorReport]) -> None:
    _, report = zoo
    assert report.totals == {
        "expected": 100 + 100 + 50 + 20 + 5 + 6 + 6 + 10 + 10 + 10 + 28 + 10 + 16 + 60 + 40 + 10,
        "received": 100 + 84 + 23 + 5 + 6 + 8 + 13 + 10 + 10 + 11 + 7 + 14 + 3 + 40 + 6,
        "distinct": 100 + 84 + 20 + 5 + 6 + 6 + 13 + 10 + 10 + 11 + 7 + 14 + 3 + 40 + 6,
        "lost": 6 + 4 + 3 + 2 + 5,  # lanes 1, 10, 11, 12 and payments/1 (whose phantom 50 proves it)
        "unseen": 10 + 50 + 13 + 60,  # lane 1's tail, lane 2, lane 10's tail, producer p2
        "duplicated": 3 + 2,
        "reordered": 1 + 4 + 1,
        "phantom": 3 + 3 + 1,
        "corrupted": 2,
        "headers_lost": 3,
        "metadata_damaged": 0,  # tests/unit/test_metadata_damage.py
        "foreign": 2,
        "lane_split": 1,
        # lane 12 was sent from 0 but acked from 65530; lanes 7 and 10 have unacked 10-14 and
        # 10-11, of which 10 and 13 of lane 7 arrived (as phantoms).
        "never_acked": 65530 + 3 + 2,
        "lost_by_replicator": 0,
        "missing_in_source": 0,
        "aborted_arrived": 0,  # test_aborted_transactions_that_arrive_are_phantoms_counted_apart
        "latest_missing": 0,  # test_compacted_topics_count_the_latest_record_of_each_key
        "compacted_away": 0,
    }


@pytest.mark.parametrize(
    ("key", "missing"),
    [
        (("orders", "p1", 1), [(10, 14, "lost"), (50, 50, "lost"), (90, 99, "unseen")]),
        (("orders", "p1", 2), [(0, 49, "unseen")]),
        (("orders", "p1", 10), [(6, 7, "lost"), (14, 15, "lost"), (17, 29, "unseen")]),
        (("orders", "p1", 11), [(0, 2, "lost")]),
        (("orders", "p1", 12), [(65536, 65536, "lost"), (65540, 65540, "lost")]),
        (("orders", "p2", 0), [(0, 29, "unseen")]),
        (("payments", "p1", 1), [(5, 9, "lost")]),
    ],
)
def test_missing_ranges_proven_loss_vs_tail(zoo: tuple[SyntheticRun, MirrorReport], key: LaneKey,
                                            missing: list[tuple[int, int, str]]) -> None:
    stats = zoo[1].lane(*key)
    assert [(r.first, r.last, r.kind) for r in stats.missing_ranges] == missing
    assert stats.missing_range_count == len(missing)


def test_reorder_counts_first_occurrences_only(zoo: tuple[SyntheticRun, MirrorReport]) -> None:
    report = zoo[1]
    assert [report.lane("orders", "p1", n).reordered for n in (4, 5, 6)] == [1, 4, 1]
    assert report.lane("orders", "p1", 3).reordered == 0  # late duplicates are not reorders
    assert report.lane("orders", "p1", 9).partitions == [1, 9]


def test_examples(zoo: tuple[SyntheticRun, MirrorReport]) -> None:
    ex = zoo[1].examples
    dups = [(r["lane"], r["seq"], r["copies"]) for r in ex["duplicated"]]
    assert dups == [(3, 3, 3), (3, 7, 2), (6, 1, 2), (6, 5, 2)]
    assert [(r["topic"], r["producer_id"], r["lane"], r["seq"], r["why"]) for r in ex["phantom"]] == [
        ("orders", "ghost", 0, 0, "unknown producer"), ("orders", "ghost", 0, 1, "unknown producer"),
        ("orders", "ghost", 0, 2, "unknown producer"), ("orders", "p1", 7, 10, "delivery failed"),
        ("orders", "p1", 7, 13, "not acknowledged"), ("orders", "p1", 7, 20, "never sent"),
        ("payments", "p1", 1, 50, "never sent"),
    ]
    assert [(r["lane"], r["seq"], r["after_seq"]) for r in ex["reordered"]] == [
        (4, 2, 3), (5, 1, 5), (5, 2, 5), (5, 3, 5), (5, 4, 5), (6, 4, 5)]
    assert [(r["lane"], r["seq"], r["partition"]) for r in ex["corrupted"]] == [(8, 4, 8), (8, 6, 8)]
    assert [(r["seq"], r["last_seq"], r["count"]) for r in ex["unseen"]][:2] == [(90, 99, 10), (0, 49, 50)]
    foreign = {(r["target_topic"], r["partition"], r["evidence"]) for r in ex["foreign"]}
    assert foreign == {("src.orders", 0, "b'not ours'")}
    assert len(ex["headers_lost"]) == 3
    dup = ex["duplicated"][0]
    assert dup["at"].count(":") == 3 and dup["partition"] == 3


def test_latency_and_body_format_per_topic(zoo: tuple[SyntheticRun, MirrorReport]) -> None:
    report = zoo[1]
    assert report.latency_by_topic["payments"].count == 40 + 5
    assert report.latency_by_topic["payments"].max_ms == 20.0
    assert report.latency_by_topic["orders"].max_ms == 5.0
    assert sum(report.latency.histogram) == report.latency.count


def test_assert_no_loss_message(zoo: tuple[SyntheticRun, MirrorReport]) -> None:
    with pytest.raises(MirrorMismatchError) as excinfo:
        zoo[1].assert_no_loss()
    msg = str(excinfo.value)
    # What arrived without its metadata heads the message, the totals follow.
    assert msg.splitlines()[0].endswith(": 3 records of ours arrived without any km.* header")
    assert msg.splitlines()[1] == (
        "records: expected 481, received 340 (335 distinct): lost 20, unseen 133, duplicated 5, reordered 6, phantom 7, "
        "corrupted 2, headers lost 3, foreign 2, lane split 1, never acked 65535")
    for line in [
        "  orders/p1/lane 1 (target partition 1): lost 10-14, 50; unseen 90-99",
        "  orders/p1/lane 2 (source partition 2, nothing arrived): unseen 0-49",
        "  orders/p1/lane 10 (target partition 10): lost 6-7, 14-15; unseen 17-29",
        "  orders/p2/lane 1 (source partition 1, nothing arrived): unseen 0-29",
        "  payments/p1/lane 1 (target partition 1): lost 5-9",
    ]:
        assert line in msg.splitlines()
    assert "examples (unseen: " in msg and "duplicates" not in msg
    # The traceback points at the test, not into the report module.
    assert all("report.py" not in str(entry.path) for entry in excinfo.traceback.filter(excinfo))


def test_assertion_messages(zoo: tuple[SyntheticRun, MirrorReport]) -> None:
    report = zoo[1]
    with pytest.raises(MirrorMismatchError, match=r"out of order: 6 records .*\(allowed 0\)") as e:
        report.assert_in_order()
    assert "  orders/p1/lane 5 (target partition 5): 4 reordered" in str(e.value)
    report.assert_in_order(max_reordered=6)
    with pytest.raises(MirrorMismatchError, match="duplicates: 5 extra copies arrived") as e:
        report.assert_no_duplicates(max_duplicated=4)
    assert "  orders/p1/lane 3 (target partition 3): 3 duplicated: seqs " in str(e.value)
    assert "  orders/p1/lane 6 (target partition 6): 2 duplicated: seqs 1, 5" in str(e.value)  # each range named
    with pytest.raises(MirrorMismatchError) as eo:
        report.assert_exactly_once()
    assert "at-least-once violated" in str(eo.value) and "lane 6 (target partition 6): 2 duplicated: seqs 1, 5" in str(eo.value)
    six = report.lane("orders", "p1", 6)
    assert ([str(r) for r in six.duplicate_ranges], six.duplicate_range_count) == (["1", "5"], 2)
    report.assert_no_duplicates(max_duplicated=5)
    with pytest.raises(MirrorMismatchError, match="phantoms: 7 records") as e:
        report.assert_no_phantoms()
    assert "  orders/ghost/lane 0 (target partition 0): 3 phantom (no such lane in any manifest)" in str(e.value)
    with pytest.raises(MirrorMismatchError, match="corruption: 2 records") as e:
        report.assert_no_corruption()
    assert "  orders/p1/lane 8 (target partition 8): 2 corrupted" in str(e.value)
    with pytest.raises(MirrorMismatchError, match="headers lost: 3 records"):
        report.assert_headers_intact()
    with pytest.raises(MirrorMismatchError, match="foreign records: 2 records"):
        report.assert_no_foreign()
    with pytest.raises(MirrorMismatchError, match=r"orders/p1/lane 9 \(target partitions 1, 9\): split"):
        report.assert_no_lane_split()


GOLDEN = Path(__file__).parent / "golden"


def _golden(name: str, text: str) -> None:
    """``text`` equals the golden file ``name``; KAFKA_MIRROR_UPDATE_GOLDEN=1 rewrites it."""
    __tracebackhide__ = True
    path = GOLDEN / name
    if os.environ.get("KAFKA_MIRROR_UPDATE_GOLDEN"):
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
    assert text == path.read_text(), f"message differs from {path} (KAFKA_MIRROR_UPDATE_GOLDEN=1 to accept)"


def test_assert_ok_message_golden(zoo: tuple[SyntheticRun, MirrorReport]) -> None:
    """The whole diff-like message of the zoo: totals, per-lane ranges, examples, truncation."""
    with pytest.raises(MirrorMismatchError) as e:
        zoo[1].assert_ok(p99_ms=1)
    _golden("zoo-assert-ok.txt", str(e.value).replace(str(zoo[0].run_dir), "RUN_DIR") + "\n")


@pytest.fixture(scope="module")
def reconciled(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> MirrorReport:
    """A run with a source log: the replicator lost some records, the source others."""
    run = SyntheticRun(tmp_path_factory.mktemp("reconciled"))
    orders = run.lane("orders", pid="p1", lane=0, acked=range(100), failed=[102], sent=105)
    orders.deliver([*range(20), *range(30, 90), 101]).in_source([*range(25), *range(27, 105)])
    run.lane("orders", pid="p1", lane=1, acked=range(50)).deliver(range(50)).in_source(range(50))
    # Only the source lost records here: a broker restart wiped 40-49 before they were mirrored.
    run.lane("orders", pid="p2", lane=0, acked=range(50)).deliver(range(40)).in_source(range(40))
    report = verify_run(run.write(), spark=spark)
    assert_same_report(report, oracle_report(run.run_dir))
    return report


def test_reconciliation_counts_and_ranges(reconciled: MirrorReport) -> None:
    report = reconciled
    assert report.reconciled
    # p1/0 misses 20-29 and 90-99, both lost (the phantom 101 arrived later); p2/0 misses 40-49.
    assert (report.lost, report.unseen, report.lost_by_replicator, report.missing_in_source) == (20, 10, 18, 12)
    assert report.never_acked == 4  # 100-104 were not acknowledged; 101 arrived (a phantom)
    lane = report.lane("orders", "p1", 0)
    assert (lane.lost_by_replicator, lane.missing_in_source, lane.never_acked, lane.phantom) == (18, 2, 4, 1)
    assert [(r.first, r.last, r.kind) for r in lane.source_missing_ranges] == [(25, 26, "source")]
    assert [(r.first, r.last, r.kind) for r in report.lane("orders", "p2", 0).source_missing_ranges] == [
        (40, 49, "source")]
    assert report.examples["phantom"][0]["why"] == "not acknowledged"


def test_reconciled_loss_message_golden(reconciled: MirrorReport) -> None:
    with pytest.raises(MirrorMismatchError) as e:
        reconciled.assert_no_loss()
    _golden("reconciled-assert-no-loss.txt", str(e.value).replace(reconciled.run_dir, "RUN_DIR") + "\n")
    # Excusing what the source lost still fails on what the replicator lost, and only that.
    with pytest.raises(MirrorMismatchError) as e:
        reconciled.assert_no_loss(allow_source_loss=True)
    msg = str(e.value)
    assert "-- tolerated (allow_source_loss=True)" in msg
    assert "orders/p1/lane 0" in msg and "orders/p2/lane 0" not in msg


def test_aborted_transactions_that_arrive_are_phantoms_counted_apart(spark: SparkSession, tmp_path: Path) -> None:
    """Records of aborted transactions are never expected; those that arrive are phantoms
    and ``aborted_arrived`` (exactly), with the reason in the examples; those that do not
    arrive are not ``never_acked`` (the source did take them)."""
    run = SyntheticRun(tmp_path)
    # transactions of 10: 0-9 committed, 10-19 aborted, 20-29 committed, 30-39 aborted, 40-41 failed
    lane = run.lane("orders", pid="tx", lane=0, acked=[(0, 9), (20, 29)], aborted=[*range(10, 20), *range(30, 40)],
                    failed=[40, 41])
    lane.deliver([*range(10), *range(13, 17), *range(20, 30), 41])  # 13-16 of an aborted one came through
    run.lane("orders", pid="tx", lane=1, acked=range(20), aborted=range(20, 30)).deliver(range(20))
    report = verify_run(run.write(), spark=spark)
    assert_same_report(report, oracle_report(run.run_dir))
    assert (report.expected, report.distinct, report.phantom, report.aborted_arrived, report.aborted) == (40, 45, 5, 4, 30)
    assert (report.lost, report.unseen, report.never_acked) == (0, 0, 1)  # 40: failed and absent
    assert [(s.lane, s.phantom, s.aborted_arrived) for s in report.lanes] == [(0, 5, 4), (1, 0, 0)]
    assert sorted({r["why"] for r in report.examples["phantom"]}) == ["aborted transaction", "delivery failed"]
    with pytest.raises(MirrorMismatchError, match=r"4 of them from transactions the source aborted \(30 aborted"):
        report.assert_ok()


# -- compacted topics: a lane is a key, its latest record must arrive --------------------------


def _build_compacted(run_dir: Path) -> SyntheticRun:
    """A compacted topic ("state"), one lane per case, beside an ordinary one ("orders");
    the source log is captured too (reconciliation leaves the compacted lanes out)."""
    run = SyntheticRun(run_dir)

    def key(n: int, acked: range = range(10)) -> Any:
        return run.lane("state", pid="p1", lane=n, acked=acked, compacted=True)

    key(0, range(20)).deliver([3, 7, 12, 19])  # older ones compacted away: fine
    key(1).deliver([2, 5, 8]).in_source([2, 5, 8, 9])  # the latest (9) never arrived
    key(2).deliver([4, 9, 6])  # 6 after 9 in one target partition: reordered
    key(3).deliver([1, 9, 9])  # a duplicate
    key(4)  # nothing arrived: its latest is missing
    key(5).deliver([9, 12])  # 12 was never sent: a phantom
    run.lane("orders", pid="p1", lane=0, acked=range(10)).deliver([*range(5), *range(6, 10)]).in_source(range(10))
    run.write()
    return run


@pytest.fixture(scope="module")
def compacted(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> tuple[SyntheticRun, MirrorReport]:
    return built_and_verified(spark, tmp_path_factory.mktemp("compacted"), _build_compacted)


@pytest.mark.parametrize("one_round", [True, False], ids=["one-round", "two-rounds"])
def test_compacted_topics_match_the_oracle(compacted: tuple[SyntheticRun, MirrorReport], spark: SparkSession,
                                           monkeypatch: pytest.MonkeyPatch, one_round: bool) -> None:
    run, report = compacted
    if not one_round:  # the gaps of the ordinary lane in a second round, as in a large capture
        monkeypatch.setattr(job_module, "_ONE_ROUND_ROWS", 0)
        report = verify_run(run.run_dir, spark=spark, write_report=False)
    _check_against_oracle(run, report)


def test_compacted_topics_count_the_latest_record_of_each_key(compacted: tuple[SyntheticRun, MirrorReport]) -> None:
    report = compacted[1]
    assert report.totals == {
        "expected": 20 + 5 * 10 + 10, "received": 4 + 3 + 3 + 3 + 0 + 2 + 9, "distinct": 4 + 3 + 3 + 2 + 0 + 2 + 9,
        "lost": 1, "unseen": 0,  # orders' 5; the compacted lanes' older records are not lost
        "duplicated": 1, "reordered": 1, "phantom": 1, "corrupted": 0, "headers_lost": 0, "metadata_damaged": 0,
        "foreign": 0, "lane_split": 0, "never_acked": 0,
        "lost_by_replicator": 1, "missing_in_source": 0,  # orders' 5 was in the source log
        "aborted_arrived": 0,
        "latest_missing": 2,  # keys 1 and 4
        "compacted_away": 16 + 6 + 7 + 8 + 9 + 9,
    }
    assert report.reconciled
    lanes = {s.lane: s for s in report.lanes if s.topic == "state"}
    assert [(n, s.latest_seq, s.latest_missing, s.compacted_away) for n, s in sorted(lanes.items())] == [
        (0, 19, 0, 16), (1, 9, 1, 6), (2, 9, 0, 7), (3, 9, 0, 8), (4, 9, 1, 9), (5, 9, 0, 9)]
    for s in lanes.values():
        assert s.compacted and (s.lost, s.unseen, s.missing_ranges, s.missing_range_count) == (0, 0, [], 0)
        assert (s.lost_by_replicator, s.missing_in_source, s.source_missing_ranges) == (0, 0, [])
    orders = report.lane("orders", "p1", 0)
    assert not orders.compacted and orders.latest_seq is None
    assert [(r.first, r.last, r.kind) for r in orders.missing_ranges] == [(5, 5, "lost")]
    assert [(r["lane"], r["seq"], r["after_seq"]) for r in report.examples["reordered"]] == [(2, 6, 9)]
    assert [(r["lane"], r["seq"], r["why"]) for r in report.examples["phantom"]] == [(5, 12, "never sent")]
    assert [r["lane"] for r in report.examples["lost"]] == [0]  # orders only: no compacted lane is listed


def test_compacted_topic_whose_latest_records_arrived_passes(spark: SparkSession, tmp_path: Path) -> None:
    run = SyntheticRun(tmp_path)
    for n in range(3):
        run.lane("state", pid="p1", lane=n, acked=range(50), compacted=True).deliver([n, 20 + n, 49])
    report = verify_run(run.write(), spark=spark)
    assert_same_report(report, oracle_report(run.run_dir))
    report.assert_ok()
    assert (report.latest_missing, report.compacted_away, report.lost, report.unseen) == (0, 3 * 47, 0, 0)


def test_latest_missing_message(compacted: tuple[SyntheticRun, MirrorReport]) -> None:
    run, report = compacted
    with pytest.raises(MirrorMismatchError) as e:
        report.assert_no_loss()
    msg = str(e.value)
    assert ("latest value missing: 2 of 6 lanes (keys) of compacted topics never received their latest "
            "acknowledged record") in msg
    assert "  state/p1/lane 1 (target partition 1): latest seq 9 never arrived (3 distinct of 10 acknowledged arrived)" in (
        msg.splitlines())
    assert "  state/p1/lane 4 (source partition 4, nothing arrived): latest seq 9 never arrived (0 distinct of 10 " \
           "acknowledged arrived)" in msg.splitlines()
    with pytest.raises(MirrorMismatchError) as e:
        report.assert_ok()
    _golden("compacted-assert-ok.txt", str(e.value).replace(str(run.run_dir), "RUN_DIR") + "\n")


def test_allow_source_loss_passes_when_only_the_source_lost(reconciled: MirrorReport) -> None:
    from dataclasses import replace

    only_source = replace(reconciled, lanes=[s for s in reconciled.lanes if s.producer_id == "p2"],
                          lost=0, unseen=10, lost_by_replicator=0, missing_in_source=10)
    only_source.assert_no_loss(allow_source_loss=True)
    with pytest.raises(MirrorMismatchError, match="at-least-once violated: 10 of 200"):
        only_source.assert_no_loss()
    with pytest.raises(ValueError, match=r"allow_source_loss=True needs the source log .* capture_source=True"):
        replace(only_source, reconciled=False).assert_ok(allow_source_loss=True)


def test_assert_ok_reports_every_failure(zoo: tuple[SyntheticRun, MirrorReport]) -> None:
    report = zoo[1]
    with pytest.raises(MirrorMismatchError) as e:
        report.assert_ok(p99_ms=1)
    sections = [s.split(":")[0] for s in str(e.value).split("\n\n")[1:]]
    assert sections == [
        "at-least-once violated", "corruption", "duplicates", "out of order", "phantoms", "headers lost",
        "foreign records", "lanes split", "latency p99 20 ms exceeds the limit 1 ms (by topic",
    ]
    with pytest.raises(MirrorMismatchError) as e:
        report.assert_ok(allow_duplicates=True, max_reordered=10, allow_phantoms=True, allow_headers_lost=True,
                         allow_foreign=True, allow_lane_split=True)
    assert [s.split(":")[0] for s in str(e.value).split("\n\n")[1:]] == ["at-least-once violated", "corruption"]


def test_report_json_written_and_loaded(zoo: tuple[SyntheticRun, MirrorReport]) -> None:
    run, report = zoo
    loaded = MirrorReport.load(run.run_dir)  # verify_run wrote RUN_DIR/report.json
    assert loaded == report
    assert json.loads((run.run_dir / "report.json").read_text())["lost"] == 20


# -- clean run with known latencies --------------------------------------------------------


def test_clean_run(spark: SparkSession, tmp_path: Path) -> None:
    run = SyntheticRun(tmp_path)
    for n in range(2):  # latencies 1..100 ms, twice
        run.lane("orders", pid="p1", lane=n, acked=range(100)).deliver(range(100), latency_ms=lambda s: s % 100 + 1)
    run.lane("payments", pid="p2", lane=0, acked=range(50)).deliver(range(50), latency_ms=1000)
    (tmp_path / "capture-status.json").write_text('{"reason": "manifest satisfied"}')
    report = verify_run(run.write(), spark=spark)

    assert report.totals == dict.fromkeys(report.totals, 0) | {"expected": 250, "received": 250, "distinct": 250}
    report.assert_ok(p50_ms=63, max_ms=1000)
    assert report.capture == {"reason": "manifest satisfied"}
    lat = report.latency
    assert (lat.count, lat.min_ms, lat.p50_ms, lat.p90_ms, lat.max_ms) == (250, 1.0, 63.0, 1000.0, 1000.0)
    assert lat.mean_ms == pytest.approx(240.4)
    orders = report.latency_by_topic["orders"]
    assert (orders.p50_ms, orders.p90_ms, orders.p99_ms, orders.p999_ms) == (50.0, 90.0, 99.0, 100.0)
    assert report.histogram_bounds_ms[:7] == [1, 2, 5, 10, 20, 50, 100]
    assert orders.histogram[:7] == [2, 2, 6, 10, 20, 60, 100] and sum(orders.histogram) == 200
    assert lat.histogram[9] == 50  # (500, 1000]
    assert report.summary().startswith("expected 250, received 250, distinct 250, lost 0, unseen 0")
    assert report.summary().endswith("latency p50 63 ms, p99 1000 ms")

    with pytest.raises(MirrorMismatchError) as e:
        report.assert_latency(p50_ms=100, p99_ms=999)
    msg = str(e.value)
    assert "latency p99 1000 ms exceeds the limit 999 ms (by topic: orders 99 ms, payments 1000 ms)" in msg
    assert "p50" not in msg.splitlines()[2] and "capture ended: manifest satisfied" in msg


# -- empty captures, caps, random runs --------------------------------------------------------


@pytest.mark.parametrize("capture", ["missing", "empty-dir", "zero-rows"])
def test_nothing_captured(spark: SparkSession, tmp_path: Path, capture: str) -> None:
    run = SyntheticRun(tmp_path)
    run.lane("orders", pid="p1", lane=0, acked=[(0, 9), (20, 29)])
    run.write(capture=capture == "zero-rows")
    if capture == "empty-dir":
        (tmp_path / "capture").mkdir()
    report = verify_run(tmp_path, spark=spark, write_report=False)
    assert (report.expected, report.received, report.unseen, report.lost) == (20, 0, 20, 0)
    assert [str(r) for r in report.lanes[0].missing_ranges] == ["0-9", "20-29"]
    assert report.latency == LatencyStats(histogram=[0] * 16)
    assert not (tmp_path / "report.json").exists()
    with pytest.raises(MirrorMismatchError, match=r"lane 0 \(source partition 0, nothing arrived\): unseen 0-9, 20-29"):
        report.assert_no_loss()


def test_caps_keep_counts_exact(spark: SparkSession, tmp_path: Path) -> None:
    run = SyntheticRun(tmp_path)
    run.lane("orders", pid="p1", lane=0, acked=range(1000)).deliver(range(0, 1000, 3)).deliver(range(0, 60, 3))
    report = verify_run(run.write(), spark=spark, examples=3, max_ranges=5, histogram_bounds_ms=[2, 0.5])
    lane = report.lanes[0]
    assert (lane.lost, lane.unseen, lane.duplicated, lane.missing_range_count) == (666, 0, 20, 333)
    assert ([str(r) for r in lane.duplicate_ranges], lane.duplicate_range_count) == (["0", "3", "6", "9", "12"], 20)
    assert [str(r) for r in lane.missing_ranges] == ["1-2", "4-5", "7-8", "10-11", "13-14"]
    assert len(report.examples["duplicated"]) == 3 and len(report.examples["lost"]) == 3
    assert report.histogram_bounds_ms == [0.5, 2.0] and report.latency.histogram == [0, 334, 0]
    with pytest.raises(MirrorMismatchError, match=r"lost 1-2, 4-5, 7-8, 10-11, 13-14; \.\.\. and 328 more ranges"):
        report.assert_no_loss()


def test_random_run_matches_the_oracle(spark: SparkSession, tmp_path: Path) -> None:
    rnd = random.Random(20240611)
    run = SyntheticRun(tmp_path)
    for n in range(40):
        topic, pid = rnd.choice(["a", "b"]), rnd.choice(["p1", "p2", "p3"])
        size = rnd.randrange(1, 60)
        acked = [s for s in range(size) if rnd.random() > 0.1]
        seqs = [s for s in range(size + rnd.randrange(3)) if rnd.random() > 0.15]  # drops and phantoms
        seqs += rnd.sample(seqs, k=min(len(seqs), rnd.randrange(3)))  # duplicates
        for _ in range(rnd.randrange(3)):  # local reorders
            if len(seqs) > 3:
                i = rnd.randrange(len(seqs) - 3)
                seqs[i:i + 3] = rnd.sample(seqs[i:i + 3], 3)
        lane = run.lane(topic, pid=pid, lane=n, partition=n % 4, acked=acked, in_manifest=rnd.random() > 0.05)
        cut = rnd.randrange(len(seqs) + 1) if rnd.random() < 0.1 else len(seqs)  # occasional lane split
        lane.deliver(seqs[:cut], checksum_ok=rnd.random() > 0.1).deliver(seqs[cut:], partition=n % 4 + 4)
    report = verify_run(run.write(segments=2), spark=spark, write_report=False)
    _check_against_oracle(run, report)


# -- errors, session, import cost ----------------------------------------------------------------


def test_verify_run_needs_a_manifest(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        verify_run(tmp_path / "nope")
    with pytest.raises(FileNotFoundError, match=r"no manifest-\*\.json in run directory"):
        verify_run(tmp_path)


def test_spark_session_is_shared_and_tuned(spark: SparkSession) -> None:
    assert get_spark("local[2]") is spark
    conf = spark.sparkContext.getConf()
    assert conf.get("spark.ui.enabled") == "false"
    assert spark.conf.get("spark.sql.shuffle.partitions") == "2"
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"
    with pytest.raises(SparkSessionConflictError, match=r"master 'local\[2\]' already runs"):
        get_spark("local[3]")


def test_a_plugin_session_leaves_a_running_spark_session_to_its_owner(spark: SparkSession) -> None:
    """A KafkaMirrorSession that found the SparkSession running (this suite's ``spark``
    fixture, a user's pytest-spark, the outer session of an in-process pytester run) uses it
    and does not stop it: stopping it killed its owner's JVM (a serial run of this suite
    failed later with py4j's ConnectionRefusedError)."""
    from pytest_kafka_mirror.config import resolve_settings
    from pytest_kafka_mirror.session import KafkaMirrorSession

    session = KafkaMirrorSession(resolve_settings({}, lambda key: None, {}))
    assert session.get_spark() is spark
    session.stop_spark()
    assert spark.range(3).count() == 3  # still alive


def test_a_jvm_that_cannot_start_is_one_error_saying_why_and_its_files_do_not_stay(tmp_path: Path) -> None:
    """pyspark says only "Java gateway process exited before sending its port number" (the
    JVM's stderr is kept from the terminal): the error quotes what the JVM said instead.
    Run in a process of its own (one Spark JVM per process); a started and stopped session
    leaves no kafka-mirror-spark-PID directory behind either."""
    code = (
        "import os, sys, tempfile\n"
        "from pytest_kafka_mirror.verify.spark import SparkStartError, get_spark, stop_spark\n"
        "where = os.path.join(tempfile.gettempdir(), f'kafka-mirror-spark-{os.getpid()}')\n"
        "try:\n"
        "    get_spark('local[1]', driver_memory='12qq')\n"
        "except SparkStartError as exc:\n"
        "    print(exc)\n"
        "assert not os.path.exists(where), 'left after a failed start'\n"
        "assert get_spark('local[1]').range(3).count() == 3 and os.path.exists(where)\n"
        "stop_spark()\n"
        "assert not os.path.exists(where), 'left after stop_spark'\n"
    )
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env,
                         cwd=Path(__file__).resolve().parents[2])
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.startswith("the Spark JVM (master local[1], driver memory 12qq) did not start; it said:\n")
    assert "Invalid maximum heap size: -Xmx12qq" in out.stdout, out.stdout
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("kafka-mirror-spark-")] == []


def test_local_cores() -> None:
    assert [_local_cores(m) for m in ("local", "local[3]", "local[2, 4]", "spark://h:7077", "yarn")] == [
        1, 3, 2, None, None]


def test_import_does_not_load_pyspark() -> None:
    code = (
        "import sys, pytest_kafka_mirror.verify;"
        "sys.exit(any(m.split('.')[0] in ('pyspark', 'py4j') for m in sys.modules))"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).resolve().parents[2])


# -- pure formatting (no Spark) ----------------------------------------------------------------


def test_compact_and_format_ranges() -> None:
    assert compact_ranges([1301, *range(1200, 1250), 1249, 2990]) == [(1200, 1249), (1301, 1301), (2990, 2990)]
    assert compact_ranges([]) == []
    ranges = [MissingRange(1200, 1249, "lost"), MissingRange(1301, 1301, "lost")]
    assert format_ranges(ranges) == "1200-1249, 1301"
    assert format_ranges([(0, 1), (3, 3), (5, 9)], limit=2) == "0-1, 3, ... and 1 more range"
    assert format_ranges([(0, 1)], total=8) == "0-1, ... and 7 more ranges"


@settings(database=None)  # no .hypothesis/ directory in the repository
@given(st.sets(st.integers(-50, 200)))
def test_compact_ranges_property(seqs: set[int]) -> None:
    ranges = compact_ranges(seqs)
    assert {s for a, b in ranges for s in range(a, b + 1)} == seqs
    assert all(b1 + 1 < a2 for (_, b1), (a2, _) in itertools.pairwise(ranges))  # sorted, disjoint, not adjacent


def test_format_table() -> None:
    table = format_table([{"seq": 1, "why": "never sent"}, {"seq": 22, "why": None}], ["seq", "why"], limit=1)
    assert table.splitlines() == ["    seq  why", "    1    never sent", "    ... and 1 more"]


def _lost_report(lanes: int) -> MirrorReport:
    stats = [LaneStats("orders", "p-1a2b", n, partitions=[n], expected=3000, received=2950, distinct=2950, lost=40,
                       unseen=10, missing_ranges=[MissingRange(1200, 1239, "lost"), MissingRange(2990, 2999, "unseen")],
                       missing_range_count=2) for n in range(lanes)]
    return MirrorReport("/runs/1", expected=3000 * lanes, received=2950 * lanes, distinct=2950 * lanes,
                        lost=40 * lanes, unseen=10 * lanes, lanes=stats)


def test_message_caps_lanes_and_round_trips(tmp_path: Path) -> None:
    report = _lost_report(25)
    with pytest.raises(MirrorMismatchError) as e:
        report.assert_ok()
    lines = str(e.value).splitlines()
    assert lines[0] == (
        "mirror mismatch in /runs/1: expected 75000, received 73750 (73750 distinct): lost 1000, unseen 250")
    assert "  orders/p-1a2b/lane 3 (target partition 3): lost 1200-1239; unseen 2990-2999" in lines
    assert lines[-2:] == [
        "  ... and 5 more lanes",
        "  Hint: capture the source too (capture_source=True) to tell replicator loss from source loss.",
    ]
    assert MirrorReport.load(report.write(tmp_path / "r.json")) == report
    assert MirrorReport.from_dict(json.loads(json.dumps(report.to_dict()))) == report


def test_latency_limits_without_data() -> None:
    report = MirrorReport("/runs/2")
    with pytest.raises(MirrorMismatchError, match="nothing to verify: the source acknowledged no record"):
        report.assert_ok()  # a verification that saw nothing to check fails
    with pytest.raises(MirrorMismatchError, match="latency p99.9: no record arrived, limit 5 ms"):
        report.assert_latency(p999_ms=5)


# -- how the job runs ----------------------------------------------------------------------


def test_small_captures_run_without_code_generation_and_the_settings_come_back(spark: SparkSession) -> None:
    from pytest_kafka_mirror.verify.job import _SMALL_CAPTURE_ROWS, _job_conf

    keys = ("spark.sql.codegen.wholeStage", "spark.sql.codegen.factoryMode")
    before = {key: spark.conf.get(key, None) for key in keys}
    with _job_conf(spark, _SMALL_CAPTURE_ROWS - 1):
        assert {key: spark.conf.get(key) for key in keys} == dict(zip(keys, ("false", "NO_CODEGEN"), strict=True))
    assert {key: spark.conf.get(key, None) for key in keys} == before
    with _job_conf(spark, _SMALL_CAPTURE_ROWS):
        assert {key: spark.conf.get(key, None) for key in keys} == before


@pytest.mark.parametrize("large", [False, True], ids=["small", "large"])
def test_large_captures_aggregate_sorted_records_as_they_stream(spark: SparkSession, tmp_path: Path,
                                                                large: bool) -> None:
    """A large capture's job sorts the windowed records once and aggregates them with sort
    aggregates (a hash table of every distinct seq spills, then sorts anyway); the gaps
    window then reads ``firsts`` in its own order, without sorting it again.  A small one
    keeps the hash aggregates."""
    from pytest_kafka_mirror.verify.job import _SMALL_CAPTURE_ROWS, _Job, _job_conf, manifest_lanes

    run = SyntheticRun(tmp_path)
    run.lane("orders", pid="p1", lane=0, acked=range(30)).deliver([*range(10), *range(12, 30)])
    run.write()
    lanes, topics = manifest_lanes(tmp_path)
    with _job_conf(spark, _SMALL_CAPTURE_ROWS if large else 0):
        job = _Job(spark, tmp_path, lanes, topics, examples=0, max_ranges=10, large=large)
        try:
            firsts = job._firsts()._jdf.queryExecution().executedPlan().toString()
            holes = job._holes_query([0], job.firsts)
            assert holes is not None
            gaps = holes._jdf.queryExecution().executedPlan().toString()
        finally:
            job.release()
    assert ("SortAggregate" in firsts, "HashAggregate" in firsts) == ((True, False) if large else (False, True))
    # Between the cached scan and the lag window: a sort only when the cache is not sorted.
    # A small capture's first copies are a local checkpoint, a large one's a columnar cache.
    stored = "InMemoryTableScan" if large else "Scan ExistingRDD"
    below_window = gaps[gaps.index("lag(seq"):gaps.index(stored)]
    assert ("Sort [" in below_window) == (not large)


def test_a_second_verification_compiles_no_generated_code(spark: SparkSession, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The code a large capture's job generates is the same from one verification to the
    next, and the driver keeps it compiled: with Spark's default of 100 cached classes, each
    verification compiled its hundred-odd classes again."""
    monkeypatch.setattr(job_module, "_SMALL_CAPTURE_ROWS", 0)  # this small run as a large one
    _build_zoo(tmp_path).write()
    metrics = spark.sparkContext._jvm.org.apache.spark.metrics.source.CodegenMetrics
    compilations = []
    for _ in range(2):
        before = metrics.METRIC_COMPILATION_TIME().getCount()
        verify_run(tmp_path, spark=spark, write_report=False)
        compilations.append(metrics.METRIC_COMPILATION_TIME().getCount() - before)
    # (the first may find its classes compiled by an earlier test of this JVM already)
    assert compilations[1] == 0, compilations


def _temporary_views(spark: SparkSession) -> set[str]:
    return {t.name for t in spark.catalog.listTables() if t.isTemporary}


@pytest.mark.parametrize("large", [False, True], ids=["checkpoint", "cache"])
def test_a_verification_leaves_nothing_stored(spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              large: bool) -> None:
    """The first copies, a local checkpoint (small captures) or an in-memory cache (large
    ones), are dropped when the verification ends, and so are the temporary views its
    queries read."""
    if large:
        monkeypatch.setattr(job_module, "_SMALL_CAPTURE_ROWS", 0)
    _build_zoo(tmp_path).write()
    stored = spark.sparkContext._jsc.getPersistentRDDs
    before = stored().size(), _temporary_views(spark)
    verify_run(tmp_path, spark=spark, write_report=False)
    assert (stored().size(), _temporary_views(spark)) == before


def test_a_small_capture_is_verified_in_one_round(spark: SparkSession, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A small capture's gaps (every range) and latencies (one bucket per value) are counted
    in the first round of queries, one Spark action of one task over the capture read into
    one partition: the same report as in two rounds, and a clean run needs no second round."""
    rounds: list[list[str]] = []
    collect = job_module._collect
    monkeypatch.setattr(job_module, "_collect", lambda queries, *a, **k: rounds.append(sorted(queries))
                        or collect(queries, *a, **k))
    plans: list[Any] = []  # of the actions' queries
    plan, firsts = job_module._plan, job_module._Job._firsts
    monkeypatch.setattr(job_module, "_plan", lambda frame: plans.append(frame._jdf.queryExecution().executedPlan())
                        or plan(frame))
    cached: list[str] = []

    def planned_firsts(self: Any) -> Any:
        frame = firsts(self)
        cached.append(frame._jdf.queryExecution().executedPlan().toString())
        return frame

    monkeypatch.setattr(job_module._Job, "_firsts", planned_firsts)
    _build_zoo(tmp_path / "zoo").write()  # holes, unacknowledged ranges, phantoms, every kind of example
    one = verify_run(tmp_path / "zoo", spark=spark, write_report=False).to_dict()
    assert "holes" in rounds[0] and rounds[1] == ["located"], rounds
    # the capture is read into one partition: no shuffle, the first round is one action of one task
    assert len(plans) == 2, [p.toString() for p in plans]
    assert plans[0].outputPartitioning().numPartitions() == 1, plans[0].toString()
    for shown in (cached[0], plans[0].toString()):
        assert "Exchange" not in shown.replace("BroadcastExchange", ""), shown
    monkeypatch.setattr(job_module, "_ONE_ROUND_ROWS", 0)
    rounds.clear()
    two = verify_run(tmp_path / "zoo", spark=spark, write_report=False).to_dict()
    assert "holes" not in rounds[0] and "holes" in rounds[1], rounds
    assert one == two

    clean = SyntheticRun(tmp_path / "clean")
    clean.lane("orders", pid="p1", lane=0, acked=range(200)).deliver(range(200), latency_ms=5)
    clean.write()
    monkeypatch.setattr(job_module, "_ONE_ROUND_ROWS", 50_000)
    rounds.clear()
    assert verify_run(tmp_path / "clean", spark=spark, write_report=False).lost == 0
    assert rounds[1:] in ([], [[]]), rounds


def test_a_job_that_fails_to_start_leaves_no_view_behind(spark: SparkSession, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The temporary views a job made before it failed (a Ctrl-C while it is set up) are dropped."""
    def interrupted(self: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(job_module._Job, "_firsts", interrupted)
    _build_zoo(tmp_path).write()
    before = _temporary_views(spark)
    with pytest.raises(KeyboardInterrupt):
        verify_run(tmp_path, spark=spark, write_report=False)
    assert _temporary_views(spark) == before


def test_every_query_of_a_large_capture_reads_the_cached_first_copies(spark: SparkSession, tmp_path: Path) -> None:
    """The queries over ``firsts`` scan its cache, never the capture again.  (Dropping a
    temporary view uncaches the frame it names: with ``SparkSession.sql(text, firsts=...)``,
    which drops its views after each query, every query but the first read the capture.)"""
    from pytest_kafka_mirror.verify._latency import LatencyPlan
    from pytest_kafka_mirror.verify._timeline import timeline_query
    from pytest_kafka_mirror.verify.job import _SMALL_CAPTURE_ROWS, _Job, _job_conf, manifest_lanes

    _build_zoo(tmp_path).write()
    lanes, topics = manifest_lanes(tmp_path)
    with _job_conf(spark, _SMALL_CAPTURE_ROWS):
        job = _Job(spark, tmp_path, lanes, topics, examples=5, max_ranges=10, large=True)
        try:
            queries = {
                "ranges": job._range_query(), "holes": job._holes_query([0, 1], job.firsts),
                "latency": LatencyPlan(job.query, job._LATENCIES, [1.0], firsts=job.firsts).buckets_query(),
                "timeline": timeline_query(job.query, job.firsts), "candidates": job._candidate_queries()["candidates"],
            }
            plans = {name: q._jdf.queryExecution().executedPlan().toString() for name, q in queries.items()}
        finally:
            job.release()
    # A cached relation's plan shows the plan that built it (one capture scan each).
    read = {name: (plan.count("InMemoryTableScan") > 0, plan.count("FileScan") - plan.count("InMemoryRelation"))
            for name, plan in plans.items()}
    assert read == {name: (True, 0) for name in plans}


def test_queries_wait_for_the_cache_and_raise_its_error(spark: SparkSession) -> None:
    """``_collect`` has every query wait for ``after`` (the cache's build, while the query
    is planned), runs them once it returned, and raises its error in the caller."""
    import threading

    from pytest_kafka_mirror.verify.job import _Background, _collect

    planned: list[str] = []
    release = threading.Event()

    def after() -> None:
        planned.append("after")
        assert release.wait(30)

    queries = {f"q{i}": spark.range(5).selectExpr(f"id * {i} AS v") for i in range(3)}
    cache = _Background(release.wait, "test-cache")
    result: dict[str, Any] = {}
    worker = threading.Thread(target=lambda: result.update(_collect(queries, spark, after=after)))
    worker.start()
    try:
        waited = 0.0
        while planned.count("after") < 3 and waited < 30:  # every query planned, each waiting for the cache
            release.wait(0.05)
            waited += 0.05
        assert planned.count("after") == 3 and not result
    finally:
        release.set()
        worker.join(30)
    cache.wait()
    assert result == {f"q{i}": [{"v": n * i} for n in range(5)] for i in range(3)}

    def broken() -> None:
        raise RuntimeError("the cache could not be built")

    failed = _Background(broken, "test-cache-error")
    with pytest.raises(RuntimeError, match="could not be built"):
        _collect(queries, spark, after=failed.wait)
    failed.wait(raise_error=False)  # and release() does not raise it again


def test_a_job_released_before_its_cache_was_built_cancels_the_build(spark: SparkSession) -> None:
    """An error or Ctrl-C between starting the cache's build and the first round: releasing
    the job does not wait for the build to end (minutes on a large run)."""
    import threading

    from pytest_kafka_mirror.processes.managed import wait_until
    from pytest_kafka_mirror.verify._sql import Queries
    from pytest_kafka_mirror.verify.job import _Background, _Job

    job = _Job.__new__(_Job)
    job.spark, job.union, job.checkpoint, job.query = spark, None, False, Queries(spark)
    job.firsts = spark.range(10**13).selectExpr("max(id % 1000) AS m")  # runs for many minutes
    job.cached = _Background(lambda: job.firsts.collect(), "test-cache")
    # released while the build runs as a Spark job, not before it began
    wait_until(lambda: bool(spark.sparkContext.statusTracker().getActiveJobsIds()), 60, "the cache's Spark job")
    assert job.cached.running()
    releasing = threading.Thread(target=job.release, daemon=True)
    releasing.start()
    releasing.join(30)
    try:
        assert not releasing.is_alive(), "release() waited for the cache's build"
        assert not job.cached.running()
    finally:
        if releasing.is_alive():
            spark.sparkContext.cancelAllJobs()
            releasing.join(30)
