"""The producer's "cannot reach" warning: lag in seconds behind its own schedule,
reported only when it is sustained or growing; never for a brief stall or a backlog being
absorbed (a step down after a burst).

The producer runs on a virtual clock: its module's ``time`` is replaced by :class:`Clock`,
and the fake client moves that clock by what each call costs, so a client that can deliver
half the rate, or stalls for half a second, is exact, and a run of seconds takes
milliseconds.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from pytest_kafka_mirror.produce import producer as producer_module
from pytest_kafka_mirror._warnings import PytestKafkaMirrorWarning
from pytest_kafka_mirror.produce.producer import LAG_LIMIT_S, LAG_WINDOW_S, MirrorProducer, TopicLanes, _LagWatch
from pytest_kafka_mirror.rundir import Manifest

EPOCH = 1_780_000_000.0


class Clock:
    """Stands in for the ``time`` module inside ``producer.py``."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def time(self) -> float:
        return EPOCH + self.now

    def time_ns(self) -> int:
        return round((EPOCH + self.now) * 1e9)

    def sleep(self, seconds: float) -> None:
        self.now += max(seconds, 0.0)


class ClockedClient:
    """A client whose produce call ``i`` costs ``cost(i)`` seconds of the virtual clock.

    Every record is acknowledged (with ``delivery.report.only.error`` nothing is reported);
    a poll costs its timeout, or 20 µs (a loop pass) when it has none.
    """

    def __init__(self, clock: Clock, cost: Callable[[int], float]) -> None:
        self.clock, self.cost = clock, cost
        self.n = 0
        self.sent_at: list[float] = []

    def produce(self, topic: str, value: bytes, key: bytes | None = None, *args: Any, **kw: Any) -> None:
        self.clock.now += self.cost(self.n)
        self.sent_at.append(self.clock.now)
        self.n += 1

    def poll(self, timeout: float = 0) -> int:
        self.clock.now += timeout if timeout else 20e-6
        return 0

    def flush(self, timeout: float = 0) -> int:
        return 0

    def __len__(self) -> int:
        return 0


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[Clock]:
    c = Clock()
    monkeypatch.setattr(producer_module, "time", c)
    yield c


def _run(clock: Clock, cost: Callable[[int], float], rate: Any, duration: float,
         topics: int = 1) -> tuple[Manifest, list[warnings.WarningMessage], ClockedClient]:
    client = ClockedClient(clock, cost)
    p = MirrorProducer("fake:1", client_factory=lambda config: client, producer_id="plag")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        m = p.run([TopicLanes(f"t{i}", 1) for i in range(topics)], rate=rate, duration=duration)
    return m, [w for w in caught if issubclass(w.category, PytestKafkaMirrorWarning)], client


def test_step_down_after_a_burst_does_not_warn(clock: Clock) -> None:
    # The scenario that warned wrongly (test_burst_10x): 2000 msg/s, then 200 msg/s.  This client
    # manages 1900 msg/s, so the burst ends ~50 ms (~100 records) behind, and the step down
    # absorbs that at once.  The old rule compared those records with a quarter second of
    # the *new* rate (50 records) and warned.
    m, caught, client = _run(clock, lambda i: 1 / 1900, [(0, 2000), (1, 200)], duration=4)
    assert caught == []
    assert m.stats["rate_warning"] is False
    assert client.n == 2000 + 600
    assert m.stats["max_behind_schedule"] > 200 * 0.25  # the figure the old rule warned on
    assert 0.02 < m.stats["max_lag_s"] < LAG_LIMIT_S
    assert m.stats["lag_over_limit_s"] == 0


@pytest.mark.parametrize("capacity", [0.5, 0.9])
def test_a_starved_producer_warns_once_with_rate_lag_and_duration(clock: Clock, capacity: float) -> None:
    # a client that delivers only part of the 1000 msg/s: the lag grows without end
    rate = 1000
    m, caught, client = _run(clock, lambda i: 1 / (rate * capacity), rate, duration=6)
    assert len(caught) == 1
    msg = str(caught[0].message)
    assert msg.startswith("producer plag cannot reach 1000 msg/s per topic on 1 topic(s): it sent ")
    got = re.search(r"it sent ([\d.]+) msg/s per topic over the last ([\d.]+) s and is ([\d.]+) s behind its schedule "
                    r"\(([\d.]+) s [\d.]+ s earlier; more than 0.25 s behind for ([\d.]+) s, since ([\d.]+) s", msg)
    assert got, msg
    sent_rate, span, lag, lag_then, above, since = map(float, got.groups())
    assert sent_rate == pytest.approx(rate * capacity, rel=0.01)
    assert span >= LAG_WINDOW_S and above >= LAG_WINDOW_S
    assert lag >= lag_then > LAG_LIMIT_S
    # the lag grows by 1 - capacity seconds a second: above 0.25 s from 0.25 / (1 - capacity) s
    assert since == pytest.approx(0.25 / (1 - capacity), abs=0.15)
    assert "processes=N" in msg
    assert m.stats["rate_warning"] is True
    assert client.n == 6000  # it still sends every record of the schedule, late
    # the lag at the end: the last record was due at ~6 s and left at 6 / capacity s
    assert m.stats["max_lag_s"] == pytest.approx(6 / capacity - 6, abs=0.03)
    assert m.stats["lag_over_limit_s"] > LAG_WINDOW_S


def test_a_lag_shorter_than_the_window_does_not_warn(clock: Clock) -> None:
    # half the rate for a 1 s schedule: more than 0.25 s behind from 0.5 s to the end at
    # 2 s, under LAG_WINDOW_S; the stats still show it
    m, caught, _ = _run(clock, lambda i: 1 / 500, 1000, duration=1)
    assert caught == []
    assert m.stats["max_lag_s"] == pytest.approx(1.0, abs=0.03)
    assert 1.0 < m.stats["lag_over_limit_s"] < LAG_WINDOW_S


def test_a_brief_stall_then_catching_up_does_not_warn(clock: Clock) -> None:
    # one 0.5 s pause at record 500, otherwise ten times faster than the rate
    m, caught, client = _run(clock, lambda i: 0.5 if i == 500 else 1e-4, 1000, duration=3)
    assert caught == []
    assert m.stats["rate_warning"] is False
    assert client.n == 3000
    assert m.stats["max_lag_s"] == pytest.approx(0.5, abs=0.01)
    assert 0 < m.stats["lag_over_limit_s"] < 0.5


def test_a_long_backlog_being_absorbed_does_not_warn(clock: Clock) -> None:
    # a 3 s stall, then 1.5x the rate: more than 0.25 s behind for ~5.5 s, but shrinking
    m, caught, _ = _run(clock, lambda i: 3.0 if i == 500 else 1 / 1500, 1000, duration=12)
    assert caught == []
    assert m.stats["max_lag_s"] == pytest.approx(3.0, abs=0.01)
    assert m.stats["lag_over_limit_s"] > LAG_WINDOW_S


def test_repeated_brief_stalls_do_not_add_up(clock: Clock) -> None:
    # a 0.4 s stall every second record-wise, caught up in between: each time the lag drops
    # under the limit, the watch starts again
    m, caught, _ = _run(clock, lambda i: 0.4 if i % 1000 == 999 else 1e-4, 1000, duration=8)
    assert caught == []
    assert m.stats["max_lag_s"] == pytest.approx(0.4, abs=0.01)


def test_several_topics_lag_is_the_latest_topic(clock: Clock) -> None:
    # two topics at 1000 msg/s each through a client that manages 1000 msg/s in total
    m, caught, _ = _run(clock, lambda i: 1e-3, 1000, duration=4, topics=2)
    assert len(caught) == 1
    assert "cannot reach 1000 msg/s per topic on 2 topic(s): it sent 500 msg/s per topic" in str(caught[0].message)


def test_lag_watch_rule() -> None:
    w = _LagWatch(limit=0.25, window=2.0)
    # above the limit for 2 s and growing: triggers, returning the window's first sample
    assert w.add(0.0, 0.3, 0) is None
    assert w.add(1.0, 0.5, 10) is None
    assert w.add(2.0, 0.6, 20) == (0.0, 0.3, 0)
    # constant: still a producer that does not catch up
    w = _LagWatch(limit=0.25, window=2.0)
    for t in range(5):
        hit = w.add(float(t), 1.0, t)
    assert hit == (2.0, 1.0, 2)
    # shrinking: never, however long
    w = _LagWatch(limit=0.25, window=2.0)
    assert all(w.add(t / 10, 5.0 - t / 100, t) is None for t in range(200))
    # dipping under the limit restarts the window
    w = _LagWatch(limit=0.25, window=2.0)
    assert w.add(0.0, 0.3, 0) is None
    assert w.add(1.5, 0.2, 0) is None
    assert w.add(1.6, 0.3, 0) is None
    assert w.add(3.0, 0.9, 0) is None
    assert w.add(3.6, 0.9, 0) == (1.6, 0.3, 0)
    assert w.longest_above == pytest.approx(1.5)  # 0.0 to 1.5; the current stretch is still open
    w.close(4.0)
    assert w.max_lag == 0.9 and w.longest_above == pytest.approx(2.4)


def test_the_seconds_a_producer_was_behind_are_kept_with_their_largest_lag() -> None:
    """``stats["behind_s"]``: per second of the schedule, the largest lag above the limit
    (the capacity figures tell the producer's pace from the replicator's with it)."""
    watch = _LagWatch()
    for elapsed, lag in ((0.5, 0.1), (1.2, 0.3), (1.5, 0.6), (1.9, 0.4), (2.5, 0.2), (3.1, 0.8)):
        watch.add(elapsed, lag, 0)
    assert watch.behind == {1: 0.6, 3: 0.8}  # 0.1 and 0.2 are under LAG_LIMIT_S: on schedule
    assert LAG_LIMIT_S < 0.3
