"""The capture's stall watch (``capture/watchdog.py``): when its consumer is restarted."""

from __future__ import annotations

import pytest

from pytest_kafka_mirror.capture.watchdog import MAX_WAIT_S, STALL_S, StallWatch

A, B = ("t", 0), ("t", 1)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _watch(positions: dict[tuple[str, int], int]) -> tuple[StallWatch, Clock]:
    clock = Clock()
    return StallWatch(positions, clock=clock), clock


def _samples(watch: StallWatch, clock: Clock, ends: list[dict[tuple[str, int], int]]) -> list[str | None]:
    """One sample a second."""
    said = []
    for sample in ends:
        said.append(watch.check(sample))
        clock.now += 1.0
    return said


def test_a_partition_that_reads_nothing_while_the_target_grows_restarts_the_consumer_after_the_stall_time() -> None:
    positions = {A: 100, B: 50}
    watch, clock = _watch(positions)
    said = _samples(watch, clock, [{A: 100 + 300 * i, B: 50} for i in range(8)])
    # the first sample sees the position, the second the growth: STALL_S after that, a restart
    assert said[:1 + int(STALL_S)] == [None] * (1 + int(STALL_S))
    why = said[1 + int(STALL_S)]
    assert why is not None and "1 partition(s) read nothing for 5.0 s" in why and "t/0 at offset 100" in why, why
    assert watch.restarts[0]["partitions"] == 1 and watch.restarts[0]["behind"] == 100 + 300 * 6 - 100
    assert said[-1] is None  # the wait starts again
    assert len(watch.restarts) == 1


def test_a_consumer_that_reads_on_behind_the_target_is_left_alone() -> None:
    positions = {A: 0}
    watch, clock = _watch(positions)
    for i in range(30):
        positions[A] = 100 * i  # reading, far behind
        assert watch.check({A: 100 * i + 5_000}) is None
        clock.now += 1.0
    assert watch.restarts == []


def test_an_idle_partition_and_a_closing_transaction_marker_are_not_a_stall() -> None:
    # idle: the end offset ahead by thousands (records the capture never receives: aborted
    # ones) but not growing; a marker: the end one ahead of the next offset, growing with it
    positions = {A: 10, B: 20}
    watch, clock = _watch(positions)
    assert _samples(watch, clock, [{A: 5_000, B: 21}] * 30) == [None] * 30
    positions[B] = 40
    assert _samples(watch, clock, [{A: 5_000, B: 41}] * 30) == [None] * 30


def test_a_stall_that_stays_while_the_target_grows_waits_twice_as_long_each_time_and_a_move_starts_over() -> None:
    positions = {A: 0}
    watch, clock = _watch(positions)
    said = _samples(watch, clock, [{A: 10 + i} for i in range(200)])
    at = [i for i, why in enumerate(said) if why is not None]
    gaps = [b - a for a, b in zip(at, at[1:])]
    # after a restart, the next sample's growth starts a wait twice as long
    assert gaps[:4] == [1 + 2 * STALL_S, 1 + 4 * STALL_S, 1 + 8 * STALL_S, 1 + MAX_WAIT_S], at
    positions[A] = 500
    said = _samples(watch, clock, [{A: 600 + i} for i in range(10)])
    assert [i for i, why in enumerate(said) if why is not None] == [1 + int(STALL_S)]


def test_partitions_it_does_not_read_are_not_watched() -> None:
    watch, clock = _watch({A: 0})
    assert _samples(watch, clock, [{B: 100 * i} for i in range(20)]) == [None] * 20


@pytest.mark.parametrize("stuck", [1, 5])
def test_the_reason_names_the_partitions_and_how_far_behind(stuck: int) -> None:
    positions = {("t", p): 0 for p in range(stuck)}
    watch, clock = _watch(positions)
    said = _samples(watch, clock, [{("t", p): 10 * i for p in range(stuck)} for i in range(1, 9)])
    why = next(w for w in said if w is not None)
    assert f"{stuck} partition(s)" in why and "t/0 at offset 0 (target's end" in why
    assert (" and 2 more" in why) == (stuck == 5), why


def test_a_burst_the_consumer_stopped_in_front_of_is_a_stall_though_the_target_grows_no_more() -> None:
    # the position got to 400 and the next 600 records were appended before a sample showed
    # it: measured against the sample before (end 400), not the first one at 400 (end 1,000)
    positions = {A: 200}
    watch, clock = _watch(positions)
    assert watch.check({A: 400}) is None
    clock.now += 1.0
    positions[A] = 400
    said = _samples(watch, clock, [{A: 1_000}] * 20)
    assert [i for i, why in enumerate(said) if why is not None] == [1 + int(STALL_S)]  # once: no growth after it


def test_offsets_a_consumer_never_receives_cost_one_restart_at_the_most() -> None:
    # an aborted transaction's records appended just before the position's first sample: one
    # restart, then none while the end offset stays (the new consumer cannot move either)
    positions = {A: 100}
    watch, clock = _watch(positions)
    said = _samples(watch, clock, [{A: 101}, {A: 120}] + [{A: 120}] * 120)
    assert sum(why is not None for why in said) == 1
