"""Recovery, backlog and catch-up figures from a timeline and fault markers (no Spark)."""

from __future__ import annotations

import pytest

from pytest_kafka_mirror.verify._recovery import HOLD_S, discovery_seconds, recoveries, with_missing_so_far

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


def test_a_blip_after_a_held_recovery_does_not_undo_it_and_a_long_relapse_does() -> None:
    # healthy for HOLD_S seconds from 2 on, then one second over the SLO (a loaded host), healthy again
    blip = [sec(0), sec(1, p99=5000), sec(2), sec(3), sec(4), sec(5, p99=1100), sec(6), sec(7)]
    [r] = recoveries(blip, [{"time": T0 + 1, "label": "f", "kind": "outage"}], p99_ms=1000)
    assert HOLD_S == 3 and r.recovered_time == T0 + 2 and not r.in_drain
    # a relapse of HOLD_S seconds starts the search again
    relapse = [*blip[:5], sec(5, p99=1100), sec(6, p99=1100), sec(7, p99=1100), sec(8), sec(9)]
    [r] = recoveries(relapse, [{"time": T0 + 1, "label": "f", "kind": "outage"}], p99_ms=1000)
    assert r.recovered_time == T0 + 8
    # a blip in the last second of production is no recovery by its end: the drain decides
    tail = [*blip[:5], sec(5, p99=1100)]
    [r] = recoveries(tail, [{"time": T0 + 1, "label": "f", "kind": "outage"}], p99_ms=1000)
    assert r.in_drain and r.recovered_time == T0 + 6
    # a blip that lost records is forgiven for the recovery time too: the loss is the loss check's (assert_ok)
    lossy = [*blip[:5], sec(5, received=90), sec(6), sec(7)]
    [r] = recoveries(lossy, [{"time": T0 + 1, "label": "f", "kind": "outage"}], p99_ms=1000)
    assert r.recovered_time == T0 + 2


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


def drain(i: int, arrived: int):
    """A second after production ended: nothing sent, ``arrived`` records of the backlog arrived."""
    return sec(i, sent=0, arrived=arrived, p99=None)


def paused_past_the_end(last_arrival: int):
    """Produced seconds 0-5 at 100/s; paused from T0+2: seconds 2-5 arrive only after production
    ended (their p99 well over any SLO), the backlog's last records in second ``last_arrival``."""
    stuck = [sec(i, arrived=0, p99=(last_arrival - i) * 1000.0) for i in range(2, 6)]
    backlog = [drain(i, 0) for i in range(6, last_arrival)] + [drain(last_arrival, 400)]
    return [sec(0), sec(1), *stuck, *backlog]


PAUSE = {"time": T0 + 2, "label": "pause replicator", "kind": "outage", "t": 2.0}


def test_recovery_in_the_drain_is_when_the_last_record_arrived() -> None:
    [r] = recoveries(paused_past_the_end(8), [PAUSE, {"time": T0 + 7.5, "label": "resume", "kind": "heal"}],
                     p99_ms=1000)
    # every second of production after the pause is late, the backlog cleared in second 8:
    # recovered at its end, by arrival time
    assert (r.recovered_time, r.seconds, r.in_drain, r.missing) == (T0 + 9, 7, True, 0)
    assert (r.production_end, r.data_end, r.seconds_after_heal) == (T0 + 6, T0 + 9, 1.5)
    assert r.backlog == 400 and r.peak_p99_ms == 6000


def test_a_recovery_in_the_drain_passes_just_inside_the_limit_and_fails_just_outside() -> None:
    from pytest_kafka_mirror.verify import MirrorMismatchError, MirrorReport

    report = MirrorReport("run", timeline=paused_past_the_end(8), markers=[PAUSE],
                          producers=[{"started_us": T0 * 1_000_000}])
    report.assert_recovers_within(7, p99_ms=1000)  # recovered 7 s after the pause, 3 s after production ended
    with pytest.raises(MirrorMismatchError) as err:
        report.assert_recovers_within(6.9, p99_ms=1000)
    text = str(err.value)
    assert ("pause replicator at 2.00 s: recovered after 7 s, in the drain: the last record produced arrived by "
            "3 s after production ended; peak p99 6000 ms, backlog 400 records") in text
    assert "     8 s: 0, 0, 400, n/a" in text  # the drain's seconds are shown too


def test_a_limit_longer_than_production_is_the_one_applied() -> None:
    from pytest_kafka_mirror.verify import MirrorMismatchError, MirrorReport

    # 6 s of production, the pause at 2 s: a 15 s limit reaches 11 s past production's end
    report = MirrorReport("run", timeline=paused_past_the_end(16), markers=[PAUSE],
                          producers=[{"started_us": T0 * 1_000_000}])
    report.assert_recovers_within(15, p99_ms=1000)  # the backlog cleared in second 16: 15 s
    with pytest.raises(MirrorMismatchError, match=r"recovered after 15 s, in the drain: the last record produced "
                                                  r"arrived by 11 s after production ended"):
        report.assert_recovers_within(14, p99_ms=1000)


def test_data_ending_before_the_limit_without_a_recovery_fails_saying_so() -> None:
    from pytest_kafka_mirror.verify import MirrorMismatchError, MirrorReport

    # seconds 4 and 5 lost 30 records each: the backlog never clears, the data ends in second 8
    timeline = paused_past_the_end(8)
    timeline[4]["received"] = timeline[5]["received"] = 70
    report = MirrorReport("run", timeline=timeline, markers=[PAUSE], producers=[{"started_us": T0 * 1_000_000}])
    [r] = report.recovery(1000)
    assert (r.recovered_time, r.seconds, r.in_drain, r.missing, r.data_end) == (None, None, False, 60, T0 + 9)
    with pytest.raises(MirrorMismatchError) as err:
        report.assert_recovers_within(15, p99_ms=1000)
    assert ("pause replicator at 2.00 s: not recovered by the end of the data, 7 s after the fault: 60 records "
            "produced since never arrived; the data ends before the 15 s limit, so it cannot show a recovery "
            "within it; peak p99 6000 ms") in str(err.value)
    with pytest.raises(MirrorMismatchError) as err:
        report.assert_recovers_within(5, p99_ms=1000)  # the data reached the limit: no excuse to give
    assert "not recovered by the end of the data, 7 s after the fault: 60 records produced since never arrived; peak" \
        in str(err.value)


def test_a_recovery_during_production_is_not_moved_to_the_drain() -> None:
    # healthy again from second 4 through the end of production: the drain's seconds change nothing
    timeline = [sec(0), sec(1), sec(2, arrived=0, p99=3000), sec(3, p99=1500), sec(4), sec(5), drain(6, 20)]
    [r] = recoveries(timeline, [PAUSE], p99_ms=1000)
    assert (r.recovered_time, r.seconds, r.in_drain) == (T0 + 4, 2, False)


def test_a_fault_after_production_recovers_when_its_backlog_cleared() -> None:
    timeline = [sec(0), sec(1, arrived=50, p99=2500), drain(2, 30), drain(3, 20)]
    [r] = recoveries(timeline, [], p99_ms=1000, since=T0 + 2.5, label="late")
    assert (r.recovered_time, r.seconds, r.in_drain) == (T0 + 4, 1.5, True)
    [r] = recoveries(timeline, [], p99_ms=1000, since=T0 + 5, label="after the data")
    assert (r.recovered_time, r.seconds, r.in_drain) == (T0 + 5, 0, True)
