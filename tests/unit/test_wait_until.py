"""``processes.managed.wait_until``, the one polling loop: what it returns, how it pauses,
what its timeout says."""

from __future__ import annotations

import pytest

from pytest_kafka_mirror.processes.managed import wait_until


def test_it_returns_what_the_predicate_found() -> None:
    answers = iter([None, 0, "", 7])
    assert wait_until(lambda: next(answers), 5, "an answer", interval=0) == 7


def test_it_pauses_as_told_between_two_calls() -> None:
    pauses: list[float] = []
    calls = iter([False, False, True])
    wait_until(lambda: next(calls), 5, "the third call", interval=0.25, pause=pauses.append)
    assert pauses == [0.25, 0.25]


def test_the_timeout_names_what_was_awaited_and_what_was_seen_last() -> None:
    seen = ["nothing"]

    def look() -> bool:
        seen[0] = "partitions [0, 1]"
        return False

    with pytest.raises(TimeoutError, match=r"^timed out after 0 s waiting for partition 2 \(last: partitions \[0, 1\]\)$"):
        wait_until(look, 0, "partition 2", on_timeout=lambda: f" (last: {seen[0]})")


def test_an_error_of_the_predicate_ends_the_wait() -> None:
    def exited() -> bool:
        raise RuntimeError("the process exited")

    with pytest.raises(RuntimeError, match="exited"):
        wait_until(exited, 60, "a process that exits")
