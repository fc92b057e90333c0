"""The capacity figures (``verify/_capacity.py``) from per-second flows built by hand:
what each figure is in a drain, a replicator that keeps up, a producer or a capture that
set the pace, and a stepped rate profile."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_kafka_mirror.rundir import Manifest
from pytest_kafka_mirror.verify._capacity import MIN_RUN_S, capacity_figures, with_slo

T0 = 1_700_000_000  # a UTC second


def manifest(topics: tuple[str, ...] = ("a",), rate: Any = None, *, size: int = 200, pid: str = "p1",
             behind: list[list[float]] | None = None, seconds: float = 10.0, achieved: float = 1000.0) -> Manifest:
    return Manifest(producer_id=pid, format="headers", message_size=size, rate=rate, started_us=T0 * 1_000_000,
                    finished_us=(T0 + 60) * 1_000_000, topics={t: t for t in topics}, lanes=[],
                    stats={"produce_seconds": seconds, "achieved_rate_per_topic": achieved, "behind_s": behind})


def producers(manifests: list[Manifest]) -> list[dict[str, Any]]:
    return [{"topics": sorted(m.topics), "achieved_rate_per_topic": m.stats["achieved_rate_per_topic"]}
            for m in manifests]


def rows(produced: dict[int, int], arrived: dict[int, int], topic: str = "a", pid: str = "p1") -> list[dict[str, Any]]:
    out = [{"kind": "produced", "topic": topic, "producer_id": pid, "t": T0 + t, "n": n} for t, n in produced.items()]
    out += [{"kind": "arrived", "topic": topic, "producer_id": pid, "t": T0 + t, "n": n} for t, n in arrived.items()]
    last_p, last_a = max(produced) + T0, max(arrived) + T0
    out.append({"kind": "ends", "topic": topic, "producer_id": None, "t": None, "n": None,
                "last_produce_us": last_p * 1_000_000 + 900_000, "last_arrival_us": last_a * 1_000_000 + 400_000})
    return out


def figures(flow: list[dict[str, Any]], manifests: list[Manifest], status: dict[str, Any] | None = None,
            timeline: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return capacity_figures(flow, manifests, producers(manifests), timeline or [], status or {})


def test_a_drain_is_measured_at_the_rate_the_backlog_arrived() -> None:
    # 10,000 records produced in one second, copied at 1,000/s for ten seconds
    cap = figures(rows({0: 10_000}, {t: 1000 for t in range(10)}), [manifest(achieved=10_000.0, seconds=1.0)])
    a = cap["all"]
    assert a["copy_rate"] == 1000.0 and a["copy_rate_mb"] == pytest.approx(1000 * 200 / 1e6)
    assert a["backlog_max"] == 9000 and not a["lower_bound"] and a["why"] == ""
    # seconds 1..9 had a second of work waiting: 2..8 once the partial edges are left out
    assert a["window"] == [T0 + 2, T0 + 9] and a["window_s"] == 7
    assert a["caught_up_s"] == pytest.approx(8.5) and a["offered_rate"] == 10_000.0
    assert cap["topics"]["a"]["copy_rate"] == 1000.0 and cap["topics"]["a"]["backlog_max"] == 9000


def test_a_replicator_that_keeps_up_has_no_copy_rate_and_says_why() -> None:
    cap = figures(rows({t: 1000 for t in range(10)}, {t: 1000 for t in range(10)}), [manifest()])
    a = cap["all"]
    assert a["copy_rate"] is None and a["copy_rate_mb"] is None and a["backlog_max"] == 0
    assert a["why"].startswith("no backlog: ") and a["offered_rate"] == 1000.0


def test_a_backlog_too_short_to_measure_is_named() -> None:
    cap = figures(rows({0: 2000}, {0: 0, 1: 1000, 2: 1000}), [manifest()])
    assert cap["all"]["copy_rate"] is None
    assert f"under {MIN_RUN_S} s is too short" in cap["all"]["why"] and cap["all"]["backlog_max"] == 2000


def test_a_pause_is_not_part_of_the_rate() -> None:
    # paused for seconds 1-4 while 5,000 records waited, then copied at 1,000/s
    arrived = {0: 0, 1: 0, 2: 0, 3: 0, 4: 0, **{t: 1000 for t in range(5, 10)}}
    cap = figures(rows({0: 5000}, arrived), [manifest()])
    assert cap["all"]["copy_rate"] == 1000.0 and cap["all"]["window"] == [T0 + 6, T0 + 9]


def test_a_producer_behind_its_schedule_makes_the_rate_a_lower_bound() -> None:
    flow = rows({0: 10_000}, {t: 1000 for t in range(10)})
    cap = figures(flow, [manifest(rate=1000.0, behind=[[4, 0.8]])])
    a = cap["all"]
    assert a["lower_bound"] and a["copy_rate"] == 1000.0
    assert a["why"] == ("a producer was behind its offered rate (up to 0.80 s behind its schedule) in 2 of the "
                        "window's 7 s: the copy rate is at least 1,000 records/s")
    # lag outside the window does not count
    assert not figures(flow, [manifest(rate=1000.0, behind=[[30, 2.0]])])["all"]["lower_bound"]


def sampled(read_share: float, measured: bool = True) -> dict[str, Any]:
    """End offsets growing 1,000/s over the run, the capture reading ``read_share`` of it."""
    samples = [[T0 + t + 0.5, {"tgt.a": [1000 * t, int(1000 * t * read_share)]}] for t in range(12)]
    return {"end_offsets": {"measured": measured, "why": "", "topics": {"tgt.a": "a"}, "groups": [samples]}}


def test_a_capture_behind_the_targets_end_offsets_makes_the_rate_a_lower_bound() -> None:
    flow = rows({0: 10_000}, {t: 1000 for t in range(10)})
    slow = figures(flow, [manifest()], sampled(0.62))
    assert slow["all"]["lower_bound"] and slow["topics"]["a"]["lower_bound"]
    assert slow["all"]["why"] == "the capture read 38 % behind the target's end offsets: the copy rate is at least " \
                                 "1,000 records/s"
    assert slow["all"]["capture_behind_pct"] == pytest.approx(38.0)
    ok = figures(flow, [manifest()], sampled(0.99))
    assert not ok["all"]["lower_bound"] and ok["all"]["capture_behind_pct"] == pytest.approx(1.0)
    # one capture process's own status: its samples, not merged into groups
    own = sampled(0.62)["end_offsets"]
    single = {"end_offsets": {**own, "samples": own.pop("groups")[0]}}
    assert figures(flow, [manifest()], single)["all"] == slow["all"]


def test_a_target_that_cannot_report_end_offsets_says_the_capture_lag_was_not_measured() -> None:
    status = {"end_offsets": {"measured": False, "why": "Tansu 0.6 reports wrong high watermarks"}}
    cap = figures(rows({0: 10_000}, {t: 1000 for t in range(10)}), [manifest()], status)
    assert not cap["all"]["lower_bound"]
    assert cap["all"]["why"] == ("the capture's lag behind the target was not measured (Tansu 0.6 reports wrong high "
                                 "watermarks)")


def stepped_run(capacity: int, slow_from: int | None = None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Steps of 1,000 / 2,000 / 4,000 records/s, 5 s each, through a replicator of ``capacity``
    records/s; latency 20 ms while it keeps up, growing with the backlog after."""
    produced = {t: (1000, 2000, 4000)[t // 5] for t in range(15)}
    arrived, timeline, backlog = {}, [], 0
    for t in range(20):
        backlog += produced.get(t, 0)
        arrived[t] = min(backlog, capacity)
        backlog -= arrived[t]
        p99 = 20.0 if backlog == 0 else 1000.0 * backlog / capacity
        timeline.append({"t": T0 + t, "p50_ms": p99 / 2, "p99_ms": p99 if t < 15 else None})
    return rows(produced, arrived), timeline


def test_steps_find_the_highest_sustained_rate() -> None:
    flow, timeline = stepped_run(3000)
    rate = [[0, 1000.0], [5, 2000.0], [10, 4000.0]]
    cap = figures(flow, [manifest(rate=rate, seconds=15.0)], timeline=timeline)
    steps = cap["steps"]
    assert [s["offered_rate"] for s in steps] == [1000.0, 2000.0, 4000.0]
    assert [s["copy_rate"] for s in steps] == [1000.0, 2000.0, 3000.0]
    assert [s["sustained"] for s in steps] == [True, True, False]
    assert steps[2]["backlog_start"] == 1000 and steps[2]["backlog_end"] == 5000 and steps[2]["p99_ms"] > 1000
    assert cap["max_sustainable_rate"] == 2000.0 and not cap["max_sustainable_lower_bound"]
    assert cap["max_sustainable_why"].startswith("the step at 4,000 records/s was not sustained: p99 ")
    # a looser SLO does not pass a step whose backlog grew
    loose = with_slo(cap, 2000.0)
    assert loose["max_sustainable_rate"] == 2000.0 and loose["slo_p99_ms"] == 2000.0
    assert loose["steps"][2]["why"] == "the backlog grew by 4,000 records (more than 5 % of the step's, 1,000)"
    # a tighter one fails the lower steps too
    assert with_slo(cap, 15.0)["max_sustainable_rate"] is None
    # two topics: the offered rates are over all topics
    two = figures(flow, [manifest(("a", "b"), rate=rate, seconds=15.0)], timeline=timeline)
    assert [s["offered_rate"] for s in two["steps"]] == [2000.0, 4000.0, 8000.0]


def test_the_records_in_flight_at_a_higher_step_are_not_backlog_growth() -> None:
    # a replicator that keeps up one second behind: at each step up, a second's more records
    # are in flight (the backlog rises once, to the new rate) and then stay level
    produced = {t: (1000, 2000, 4000)[t // 5] for t in range(15)}
    arrived = {t + 1: n for t, n in produced.items()}
    timeline = [{"t": T0 + t, "p50_ms": 500.0, "p99_ms": 900.0} for t in range(15)]
    cap = figures(rows(produced, arrived), [manifest(rate=[[0, 1000.0], [5, 2000.0], [10, 4000.0]], seconds=15.0)],
                  timeline=timeline)
    assert [(s["backlog_start"], s["backlog_end"]) for s in cap["steps"]] == [(1000, 1000), (2000, 2000),
                                                                              (4000, 4000)]
    assert [s["sustained"] for s in cap["steps"]] == [True, True, True]
    # the same run with the backlog growing inside the last step is not sustained
    slower = {**arrived, **{t: 3000 for t in range(12, 16)}}
    judged = figures(rows(produced, slower), [manifest(rate=[[0, 1000.0], [5, 2000.0], [10, 4000.0]], seconds=15.0)],
                     timeline=timeline)
    assert [s["sustained"] for s in judged["steps"]] == [True, True, False]


def test_every_step_sustained_is_a_lower_bound_and_unsteps_runs_say_why() -> None:
    flow, timeline = stepped_run(10_000)
    cap = figures(flow, [manifest(rate=[[0, 1000.0], [5, 2000.0], [10, 4000.0]], seconds=15.0)], timeline=timeline)
    assert cap["max_sustainable_rate"] == 4000.0 and cap["max_sustainable_lower_bound"]
    assert "the knee is above it" in cap["max_sustainable_why"]
    plain = figures(flow, [manifest(rate=1000.0)], timeline=timeline)
    assert plain["steps"] == [] and plain["max_sustainable_rate"] is None
    assert plain["max_sustainable_why"].startswith("no stepped rate profile")


def test_a_step_the_producer_could_not_offer_is_not_sustained() -> None:
    flow, timeline = stepped_run(10_000)
    cap = figures(flow, [manifest(rate=[[0, 1000.0], [5, 2000.0], [10, 4000.0]], seconds=15.0,
                                  behind=[[12, 1.5]])], timeline=timeline)
    assert [s["sustained"] for s in cap["steps"]] == [True, True, False]
    assert cap["steps"][2]["why"].startswith("the producer was behind its schedule (up to 1.5 s)")
    assert cap["max_sustainable_rate"] == 2000.0 and cap["max_sustainable_lower_bound"]


def test_the_captures_end_offset_samples_merge_per_process_and_survive_a_second_merge() -> None:
    from pytest_kafka_mirror.capture.target import _merge_end_offsets

    one = {"measured": True, "why": "probed", "topics": {"tgt.a": "a"}, "samples": [[1.0, {"tgt.a": [5, 4]}]]}
    two = {"measured": True, "why": "", "topics": {"tgt.b": "b"}, "samples": [[1.5, {"tgt.b": [7, 7]}]]}
    merged = _merge_end_offsets([{"end_offsets": one}, {"end_offsets": two}])
    assert merged == {"measured": True, "why": "probed", "topics": {"tgt.a": "a", "tgt.b": "b"},
                      "groups": [one["samples"], two["samples"]]}
    # one process: its status file is the merged one, which a later merge reads again
    once = _merge_end_offsets([{"end_offsets": one}])
    assert _merge_end_offsets([{"end_offsets": once}]) == once
    assert not _merge_end_offsets([{"end_offsets": one}, {"end_offsets": {**two, "measured": False}}])["measured"]
