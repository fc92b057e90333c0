"""Records that arrive with their metadata damaged: the verifier's exact counts and messages.

A replicator (a Connect transform, a header converter) can remove or rewrite the ``km.*``
headers or the key.  Such a record is still ours: whatever identifies it counts for
delivery, duplicates and order, and the damage is a class of its own.  The
Spark job and the oracle must agree here as everywhere (``test_oracle_agreement.py`` adds
damaged records to its generated histories).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_kafka_mirror.verify import MirrorMismatchError, MirrorReport, verify_run
from pytest_kafka_mirror.verify.oracle import oracle_report
from tests.synthetic import SyntheticRun, assert_same_report, built_and_verified

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def _build(run_dir: Path) -> SyntheticRun:
    run = SyntheticRun(run_dir)
    # km.t gone from every record (DropHeaders km.t): all arrived, none with a produce time
    run.lane("orders", pid="p1", lane=0, acked=range(100)).deliver(range(100), timed=False)
    # the key gone from ten records, rewritten on five (km.l still names the lane); one duplicate
    lane1 = run.lane("orders", pid="p1", lane=1, acked=range(50))
    lane1.deliver(range(35)).deliver(range(35, 45), damage="key=missing").deliver(range(45, 50), damage="key=altered")
    lane1.deliver([3], damage="key=missing")
    # km.s gone from five: ours, but matched to nothing (their records count as unseen)
    run.lane("orders", pid="p1", lane=2, acked=range(20)).deliver(range(15)).unmatched(count=5)
    # a body-format lane untouched, for contrast
    run.lane("payments", pid="p1", lane=0, acked=range(30)).deliver(range(30), kind="body", latency_ms=7)
    run.write(segments=2)
    return run


@pytest.fixture(scope="module")
def damaged(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> tuple[SyntheticRun, MirrorReport]:
    return built_and_verified(spark, tmp_path_factory.mktemp("damaged"), _build)


def test_damaged_records_count_for_delivery_and_the_damage_is_exact(
        damaged: tuple[SyntheticRun, MirrorReport]) -> None:
    report = damaged[1]
    assert (report.expected, report.received, report.distinct) == (200, 100 + 51 + 15 + 30, 100 + 50 + 15 + 30)
    assert (report.lost, report.unseen, report.duplicated, report.foreign) == (0, 5, 1, 0)
    assert report.metadata_damaged == 100 + 10 + 5 + 1 + 5
    assert report.damaged_unmatched == 5
    assert report.damage == {"km.t": {"missing": 100, "altered": 0}, "key": {"missing": 11, "altered": 5},
                             "km.s": {"missing": 5, "altered": 0}}
    assert report.lane("orders", "p1", 2).missing_ranges[0].kind == "unseen"
    # latency: the records without a produce time are counted, not silently dropped
    assert (report.latency.count, report.latency.untimed) == (50 + 15 + 30, 100)
    assert report.latency_by_topic["orders"].untimed == 100
    assert report.latency_by_topic["payments"].untimed == 0
    assert len(report.examples["metadata_damaged"]) == 20  # the cap; 121 in all


def test_the_oracle_agrees_on_damaged_records(damaged: tuple[SyntheticRun, MirrorReport]) -> None:
    run, report = damaged
    assert_same_report(report, oracle_report(run.run_dir))


def test_assert_ok_names_the_damage_first(damaged: tuple[SyntheticRun, MirrorReport]) -> None:
    report = damaged[1]
    with pytest.raises(MirrorMismatchError) as e:
        report.assert_ok(allow_duplicates=True)
    lines = str(e.value).splitlines()
    assert lines[0].endswith(
        ": 121 records of ours arrived with damaged metadata (key altered on 5, key missing on 11, km.s missing "
        "on 5, km.t missing on 100), 5 of them too damaged to match to a record sent (the records they carry "
        "count as missing below)")
    assert lines[1] == ("records: expected 200, received 196 (195 distinct): unseen 5, duplicated 1, "
                        "metadata damaged 121")
    text = str(e.value)
    assert text.index("metadata damaged: 121 records of ours") > text.index("at-least-once violated")
    assert "  100 records had no usable produce time (km.t): not in the latency figures" in lines
    with pytest.raises(MirrorMismatchError, match="metadata damaged: 121 records"):
        report.assert_metadata_intact()
    with pytest.raises(MirrorMismatchError) as e:
        report.assert_ok(allow_duplicates=True, allow_metadata_damage=True)
    assert "metadata damaged:" not in str(e.value)  # tolerated; the loss is not
    report.assert_no_foreign()


def test_latency_limits_say_records_arrived_without_a_produce_time(tmp_path: Path, spark: SparkSession) -> None:
    run = SyntheticRun(tmp_path)
    run.lane("orders", pid="p1", lane=0, acked=range(10)).deliver(range(10), timed=False)
    run.write()
    report = verify_run(run.run_dir, spark=spark)
    assert (report.received, report.lost + report.unseen, report.latency.count, report.latency.untimed) == (10, 0, 0, 10)
    with pytest.raises(MirrorMismatchError, match=r"p99: no record with a produce time arrived \(10 without one\)"):
        report.assert_latency(p99_ms=100)
    report.assert_no_loss()


def test_an_intact_run_reports_no_damage(tmp_path: Path, spark: SparkSession) -> None:
    run = SyntheticRun(tmp_path)
    run.lane("orders", pid="p1", lane=0, acked=range(10)).deliver(range(10))
    run.write()
    report = verify_run(run.run_dir, spark=spark)
    report.assert_ok()
    assert (report.metadata_damaged, report.damage, report.latency.untimed) == (0, {}, 0)


def test_a_capture_written_before_the_damage_column_still_verifies(tmp_path: Path, spark: SparkSession) -> None:
    """Segments of an older capture have no ``damage`` column: read as null."""
    import pyarrow.parquet as pq

    run = SyntheticRun(tmp_path)
    run.lane("orders", pid="p1", lane=0, acked=range(10)).deliver(range(10))
    run.write()
    for path in (tmp_path / "capture").glob("*.parquet"):
        pq.write_table(pq.read_table(path).drop_columns(["damage"]), path)
    report = verify_run(run.run_dir, spark=spark)
    assert (report.received, report.metadata_damaged) == (10, 0)
    assert_same_report(report, oracle_report(run.run_dir))
