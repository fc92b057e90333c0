"""Fault scheduling without Kafka: timing, markers, errors, argument checks."""

from __future__ import annotations

import time

import pytest

from pytest_kafka_mirror.faults import FaultError, FaultSchedule, action, at, kill, restart, start


class Target:
    name = "thing"

    def __init__(self) -> None:
        self.calls: list[tuple[str, float]] = []

    def kill(self) -> None:
        self.calls.append(("kill", time.monotonic()))

    def start(self) -> None:
        self.calls.append(("start", time.monotonic()))

    def stop(self) -> None:
        self.calls.append(("stop", time.monotonic()))


def test_faults_apply_in_time_order_and_leave_markers() -> None:
    t = Target()
    schedule = FaultSchedule([at(0.2, start(t)), at(0.05, kill(t))])
    t0 = time.monotonic()
    schedule.start()
    markers = schedule.finish(5)
    assert [c[0] for c in t.calls] == ["kill", "start"]
    # never early: each fault at or after its offset
    assert t.calls[0][1] - t0 >= 0.05 - 0.002 and t.calls[1][1] - t0 >= 0.2 - 0.002
    assert [(m.label, m.kind, m.planned) for m in markers] == [("kill thing", "outage", 0.05), ("start thing", "heal", 0.2)]
    assert all(m.t >= m.planned - 0.002 and m.error is None for m in markers)


def test_a_failing_fault_is_recorded_and_the_rest_still_runs() -> None:
    t = Target()

    def boom() -> None:
        raise RuntimeError("no such broker")

    schedule = FaultSchedule([at(0, action("break", boom)), at(0.01, kill(t))])
    schedule.start()
    markers = schedule.finish(5)
    assert markers[0].error == "RuntimeError: no such broker"
    assert [m.label for m in schedule.errors()] == ["break"]
    assert t.calls and t.calls[0][0] == "kill"


def test_restart_falls_back_to_stop_then_start() -> None:
    t = Target()
    restart(t)()
    assert [c[0] for c in t.calls] == ["stop", "start"]


def test_misuse_is_explained() -> None:
    with pytest.raises(FaultError, match="cannot pause: it has no lifecycle control"):
        from pytest_kafka_mirror.faults import pause

        pause(object())
    with pytest.raises(TypeError, match=r"needs a fault such as kill\(replicator\)"):
        at(1, "kill")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="seconds >= 0"):
        at(-1, kill(Target()))
    with pytest.raises(TypeError, match=r"takes at\(SECONDS, fault\) entries"):
        FaultSchedule([kill(Target())])  # type: ignore[list-item]


def test_an_unstarted_schedule_cancels_cleanly() -> None:
    t = Target()
    schedule = FaultSchedule([at(30, kill(t))])
    schedule.start()
    schedule.cancel()
    assert t.calls == [] and schedule.markers == []


def test_labels_say_what_was_hit() -> None:
    class Rep:
        spec = "mm2:/opt/kafka"

        def target_topic(self, t: str) -> str:
            return t

        def kill(self) -> None: ...

    class Broker:
        name, spec = "target", "tansu"

        def capabilities(self) -> None: ...

        def restart(self) -> None: ...

    assert kill(Rep()).label == "kill replicator (mm2:/opt/kafka)"
    assert restart(Broker()).label == "restart target broker (tansu)"
    assert kill(Target()).label == "kill thing"
