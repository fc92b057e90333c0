"""A stall is named: arrivals on the target stopped while the source went on acknowledging.

Synthetic runs on a schedule (``SyntheticRun.on_schedule``: seq ``s`` of every lane
produced at ``base + s`` ms, so 1000 records/s per lane), verified by Spark and checked
against the oracle; the stall's figures are exact.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_kafka_mirror.cli import main
from pytest_kafka_mirror.verify import MirrorMismatchError, MirrorReport, verify_run
from pytest_kafka_mirror.verify.oracle import oracle_report
from tests.synthetic import BASE_TS_US, SyntheticRun, assert_same_report

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

MM2_SAYS = {"spec": "mm2:4.3.1", "health": "",
            "status": "MirrorMaker 2's Connect status (mm2-status): MirrorSourceConnector RUNNING, task 0 RUNNING"}


def _verified(spark: SparkSession, run: SyntheticRun) -> MirrorReport:
    """The Spark report of ``run`` (on its schedule), checked against the oracle's."""
    run.on_schedule().write()
    report = verify_run(run.run_dir, spark=spark, write_report=False)
    assert_same_report(report, oracle_report(run.run_dir))
    return report


def _stalled(run_dir: Path) -> SyntheticRun:
    """40 s of three lanes (1000 records/s each): lanes 0 and 1 stop arriving 8.2 s in, lane
    0 lost 3000-3099 before that, lane 2 (of the first second only) never arrived at all."""
    run = SyntheticRun(run_dir)
    run.lane("orders", pid="p1", lane=0, acked=range(40_000)).deliver([*range(3000), *range(3100, 8150)], latency_ms=50)
    run.lane("orders", pid="p1", lane=1, acked=range(40_000)).deliver(range(8000), latency_ms=100)
    run.lane("orders", pid="p1", lane=2, acked=range(1000))
    return run


def test_a_stall_says_when_arrivals_stopped_and_how_many_the_source_acknowledged_after(
        spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = _verified(spark, _stalled(tmp_path / "run"))

    assert (report.lost, report.unseen) == (100, 31_850 + 32_000 + 1000)
    # The last arrival: lane 0's seq 8149, produced 8.149 s in, 50 ms on the way.  From
    # second 8 on, 2 x 32,000 records were produced of which 150 (lane 0's 8000-8149)
    # arrived; lane 2's unseen records and lane 0's lost ones are of earlier seconds.
    assert report.stall == {
        "last_arrival_us": BASE_TS_US + 8_199_000, "at_s": 8.199, "production_end_us": BASE_TS_US + 40_000_000,
        "quiet_s": 31.801, "gap_s": round(8.149 / (8150 - 100 + 8000 - 1), 6), "threshold_s": 2.0,
        "acked_after": 64_000 - 150,
    }

    report.replicator = MM2_SAYS
    with pytest.raises(MirrorMismatchError) as e:
        report.assert_ok()
    lines = str(e.value).splitlines()
    # BASE_TS_US is 2023-11-14 22:13:20 UTC
    assert lines[1] == ("arrivals stopped 8.2 s into the run (22:13:28 UTC), 31.8 s before production ended: the "
                        "source acknowledged 63,850 more records from that second on, and none of them arrived; "
                        f"the replicator (mm2:4.3.1) says: {MM2_SAYS['status']}")
    assert sum(MM2_SAYS["status"] in line for line in lines) == 1  # said once, on the stall's line
    with pytest.raises(MirrorMismatchError) as e:
        report.assert_latency(p99_ms=50)  # a latency failure heads with the breach, the stall follows the totals
    assert str(e.value).splitlines()[2].startswith("arrivals stopped 8.2 s into the run (22:13:28 UTC)")

    path = report.write(tmp_path / "report.json")
    assert json.loads(path.read_text())["stall"] == report.stall
    assert MirrorReport.load(path) == report
    assert main(["show", str(path)]) == 1
    assert lines[1] in capsys.readouterr().out.splitlines()


@pytest.mark.parametrize(("case", "last_seq"), [
    ("complete", 39_999),  # everything arrived
    ("tail within 2 s of the end", 38_500),  # quiet 1.5 s: records in flight at the end, not a stall
])
def test_a_run_without_a_stall_reports_none(spark: SparkSession, tmp_path: Path, case: str, last_seq: int) -> None:
    run = SyntheticRun(tmp_path / "run")
    run.lane("orders", pid="p1", lane=0, acked=range(40_000)).deliver(range(last_seq + 1), latency_ms=5)
    report = _verified(spark, run)
    assert report.unseen == 39_999 - last_seq
    assert report.stall is None
    if report.unseen:
        with pytest.raises(MirrorMismatchError) as e:
            report.assert_ok()
        assert "arrivals stopped" not in str(e.value)
    assert json.loads(report.write(tmp_path / "report.json").read_text())["stall"] is None


@pytest.mark.parametrize(("last_seq", "stalled"), [(35_000, False), (32_000, True)])
def test_a_sparse_run_stalls_only_after_five_of_its_gaps(spark: SparkSession, tmp_path: Path, last_seq: int,
                                                         stalled: bool) -> None:
    """One record a second: 5 gaps are 5 s, more than the 2 s a dense run stalls after."""
    run = SyntheticRun(tmp_path / "run")
    seqs = range(0, 40_000, 1000)
    run.lane("orders", pid="p1", lane=0, acked=[(s, s) for s in seqs]).deliver(range(0, last_seq + 1, 1000))
    report = _verified(spark, run)
    # production ends after the highest seq, 39,000: 39.001 s in; the last arrival 1 ms after it was produced
    quiet = round(39.001 - last_seq / 1000 - 0.001, 3)
    assert report.unseen == (39_000 - last_seq) // 1000
    if not stalled:
        assert report.stall is None  # 4 s quiet: over 2 s, but not over 5 gaps of 1 s
        return
    assert report.stall == {
        "last_arrival_us": BASE_TS_US + last_seq * 1000 + 1000, "at_s": 32.001,
        "production_end_us": BASE_TS_US + 39_001_000, "quiet_s": quiet, "gap_s": 1.0, "threshold_s": 5.0,
        "acked_after": 7,
    }
