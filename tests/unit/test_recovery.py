"""Recovery, backlog and catch-up figures from a timeline and fault markers (no Spark)."""

from __future__ import annotations

from pytest_kafka_mirror.verify._recovery import discovery_seconds, recoveries, with_missing_so_far

T0 = 1_700_000_000


def sec(i: int, sent: int = 100, received: int | None = None, arrived: int | None = None, p99: float | None = 20.0):
    return {"t": T0 + i, "sent": sent, "received": sent if received is None else received,
            "arrived": sent if arrived is None else arrived, "p50_ms": None if p99 is None else p99 / 2, "p99_ms": p99}


def test_recovery_after_a_pause_is_the_first_second_of_the_last_healthy_streak() -> None:
    timeline = [sec(0), sec(1), sec(2, arrived=0, p99=3500), sec(3, arrived=0, p99=2600), sec(4, arrived=400, p99=900),
                sec(5, p99=300), sec(6), sec(7)]
    markers = [{"time": T0 + 2.2, "label": "pause", "kind": "outage"},
               {"time": T0 + 4.1, "label": "resume", "kind": "heal"}]
    [r] = recoveries(timeline, markers, p99_ms=1000)
    # second 4 is the first healthy one (p99 900 <= 1000, all received): recovered at T0+4
    assert (r.recovered_time, r.seconds, r.seconds_after_heal) == (T0 + 4, 1.8, 0.0)
    assert r.peak_p99_ms == 3500 and r.catch_up_rate == 400
    assert r.backlog == 200  # two seconds of records produced, none arrived yet


def test_never_recovers_when_the_last_seconds_are_unhealthy() -> None:
    timeline = [sec(0), sec(1, p99=5000), sec(2, received=90)]
    [r] = recoveries(timeline, [{"at_us": (T0 + 1) * 1_000_000, "label": "kill", "kind": "outage"}], p99_ms=1000)
    assert r.recovered_time is None and r.seconds is None


def test_a_relapse_restarts_the_streak() -> None:
    timeline = [sec(0), sec(1, p99=5000), sec(2), sec(3, p99=5000), sec(4), sec(5)]
    [r] = recoveries(timeline, [{"time": T0 + 1, "label": "f", "kind": "outage"}], p99_ms=1000)
    assert r.recovered_time == T0 + 4 and r.seconds == 3


def test_since_replaces_markers_and_heals_are_not_episodes() -> None:
    timeline = [sec(0), sec(1, sent=1000, p99=3000), sec(2, p99=1500), sec(3)]
    markers = [{"time": T0 + 3, "label": "heal", "kind": "heal"}]
    assert recoveries(timeline, markers, p99_ms=1000) == []
    [r] = recoveries(timeline, markers, p99_ms=1000, since=T0 + 2, label="burst end")
    assert (r.label, r.seconds) == ("burst end", 1)


def test_missing_so_far_is_cumulative() -> None:
    tl = with_missing_so_far([sec(0, received=95), sec(1), sec(2, received=0)])
    assert [e["missing_so_far"] for e in tl] == [5, 5, 105]


def test_discovery() -> None:
    assert discovery_seconds(3_500_000, 1_000_000) == 2.5
    assert discovery_seconds(None, 1) is None


def test_report_assertion_names_the_fault_and_shows_the_seconds() -> None:
    import pytest

    from pytest_kafka_mirror.verify import MirrorMismatchError, MirrorReport

    report = MirrorReport("run", timeline=[sec(0), sec(1, p99=4000), sec(2, p99=3000), sec(3)],
                          markers=[{"time": T0 + 1, "label": "kill replicator", "kind": "outage", "t": 1.0}],
                          producers=[{"started_us": T0 * 1_000_000}])
    report.assert_recovers_within(2, p99_ms=1000)  # recovered at T0+3: 2 s
    with pytest.raises(MirrorMismatchError) as err:
        report.assert_recovers_within(1, p99_ms=1000)
    text = str(err.value)
    assert "kill replicator at 1.00 s: recovered after 2 s; peak p99 4000 ms, backlog 0 records" in text
    assert "     2 s: 100, 100, 100, 3000 ms" in text
    [r] = report.recovery(1000, after=0.5)
    assert r.label == "0.5 s after the start" and r.seconds == 2.5
    with pytest.raises(MirrorMismatchError, match="nothing to recover from"):
        MirrorReport("run", timeline=[sec(0)]).assert_recovers_within(1, p99_ms=1)


def test_discovery_from_the_report() -> None:
    from pytest_kafka_mirror.verify import MirrorReport

    report = MirrorReport("run", topic_firsts={"new": {"first_produce_us": 1_000_000, "first_arrival_us": 2_250_000}})
    assert report.discovery_seconds("new") == 1.25
