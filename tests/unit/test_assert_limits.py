"""Assertion limits are checked when the assertion is called (a bad limit is a ValueError
naming the argument, never a check that cannot fail), and a failure of the latency limits
alone is headed by the breach.  Reports built by hand: no Spark."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_kafka_mirror.verify.failover import FailoverReport
from pytest_kafka_mirror.verify.report import LatencyStats, MirrorMismatchError, MirrorReport


def _clean(p99_ms: float = 1500.0) -> MirrorReport:
    latency = LatencyStats(count=1200, min_ms=1.0, mean_ms=20.0, p50_ms=10.0, p90_ms=50.0, p99_ms=p99_ms,
                           p999_ms=p99_ms, max_ms=p99_ms)
    return MirrorReport("/runs/1", expected=1200, received=1200, distinct=1200, latency=latency,
                        latency_by_topic={"orders": latency})


@pytest.mark.parametrize(
    "call,message",
    [
        (lambda r: r.assert_ok(p99_ms=-1), r"^assert_ok\(p99_ms=-1\): p99_ms must be a number of milliseconds > 0, "
                                           r"or None for no limit$"),
        (lambda r: r.assert_ok(max_ms=0), r"assert_ok\(max_ms=0\): max_ms must be a number of milliseconds > 0"),
        (lambda r: r.assert_ok(p50_ms=float("nan")), r"assert_ok\(p50_ms=nan\)"),
        (lambda r: r.assert_ok(p90_ms="100"), r"assert_ok\(p90_ms='100'\)"),
        (lambda r: r.assert_ok(max_reordered=-1), r"assert_ok\(max_reordered=-1\): max_reordered must be a whole "
                                                  r"number >= 0"),
        (lambda r: r.assert_ok(max_reordered=1.5), r"assert_ok\(max_reordered=1.5\)"),
        (lambda r: r.assert_latency(p999_ms=-5), r"assert_latency\(p999_ms=-5\)"),
        (lambda r: r.assert_in_order(-1), r"assert_in_order\(max_reordered=-1\)"),
        (lambda r: r.assert_no_duplicates(True), r"assert_no_duplicates\(max_duplicated=True\)"),
        (lambda r: r.assert_recovers_within(-1, p99_ms=100), r"assert_recovers_within\(seconds=-1\): seconds must be "
                                                             r"a number of seconds >= 0"),
        (lambda r: r.assert_recovers_within(5, p99_ms=0), r"assert_recovers_within\(p99_ms=0\)"),
        (lambda r: r.assert_recovers_within(5, p99_ms=100, after=-2), r"assert_recovers_within\(after=-2\)"),
    ],
)
def test_bad_limits_raise_value_error_naming_the_argument(call: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call(_clean(p99_ms=1.0))  # the report itself passes every limit: the argument is what fails


def test_good_limits_are_accepted() -> None:
    report = _clean(p99_ms=100.0)
    report.assert_ok(p99_ms=100, max_ms=100.5, max_reordered=0, p50_ms=None)
    report.assert_in_order(0)
    report.assert_no_duplicates(3)
    report.assert_latency(p50_ms=10, p99_ms=1e9)


def test_latency_only_failure_is_headed_by_the_breach() -> None:
    report = _clean(p99_ms=1500.0)
    report.capture = {"reason": "manifest satisfied"}
    for assertion in (report.assert_ok, report.assert_latency):
        with pytest.raises(MirrorMismatchError) as e:
            assertion(p99_ms=1000, p50_ms=100)
        lines = str(e.value).splitlines()
        assert lines[:3] == [
            "latency over the limit in /runs/1: p99 1500 ms (limit 1000 ms)",
            "records: expected 1200, received 1200 (1200 distinct)",
            "capture ended: manifest satisfied",
        ]
        assert "mirror mismatch" not in str(e.value)
        assert "latency p99 1500 ms exceeds the limit 1000 ms (by topic: orders 1500 ms)" in lines


def test_latency_with_a_data_failure_stays_a_mirror_mismatch() -> None:
    report = _clean(p99_ms=1500.0)
    report.lost, report.received, report.distinct = 5, 1195, 1195
    with pytest.raises(MirrorMismatchError) as e:
        report.assert_ok(p99_ms=1000)
    msg = str(e.value)
    assert msg.startswith("mirror mismatch in /runs/1: expected 1200, received 1195 (1195 distinct): lost 5")
    assert msg.split("\n\n")[-1].startswith("latency p99 1500 ms exceeds the limit 1000 ms")


@pytest.mark.parametrize(
    "call,message",
    [
        (lambda r: r.assert_rereads_at_most(-1), r"assert_rereads_at_most\(limit=-1\): limit must be a whole number"),
        (lambda r: r.assert_checkpoints_fresh(max_seconds=-0.5), r"assert_checkpoints_fresh\(max_seconds=-0.5\)"),
        (lambda r: r.assert_checkpoints_fresh(max_records=2.5), r"assert_checkpoints_fresh\(max_records=2.5\)"),
        (lambda r: r.assert_heartbeats(max_lag_ms=0), r"assert_heartbeats\(max_lag_ms=0\)"),
        (lambda r: r.assert_ok(max_rereads=-3), r"assert_ok\(max_rereads=-3\)"),
        (lambda r: r.assert_ok(max_heartbeat_lag_ms=-1), r"assert_ok\(max_heartbeat_lag_ms=-1\)"),
    ],
)
def test_failover_limits_are_checked_when_called(call: Any, message: str) -> None:
    from pytest_kafka_mirror.verify.failover import FailoverReport as FullReport

    for cls in (FailoverReport, FullReport):
        with pytest.raises(ValueError, match=message):
            call(cls(run_dir="/runs/1", read_at=0.0, waited_s=0.0, reset="latest", settings={}))


def test_a_failure_names_the_captures_consumer_restarts() -> None:
    # capture/watchdog.py: a stall of the instrument's own is named with the failure it may explain
    report = _clean(p99_ms=1500.0)
    why = "3 partition(s) read nothing for 5.0 s while the target grew: t/0 at offset 1,504 (target's end 2,310)"
    report.capture = {"reason": "satisfied", "consumer_restarts": [
        {"at": 1796678801.5, "partitions": 3, "behind": 806, "why": why}, {"at": 1796678811.5, "why": "again"}]}
    with pytest.raises(MirrorMismatchError) as e:
        report.assert_ok(p99_ms=1000)
    lines = str(e.value).splitlines()
    assert lines[2:4] == ["capture ended: satisfied",
                          f"capture restarted its consumer 2 times, the records it had not read arriving late by it "
                          f"(first at 21:26:41 UTC: {why})"]
