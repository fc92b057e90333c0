"""GapGuard: a record the broker shows after a later one of its partition is re-read, not
skipped; a gap that stays is taken as absent after the wait; order is kept."""

from __future__ import annotations

from dataclasses import dataclass, field

from pytest_kafka_mirror.capture.gaps import GapGuard


@dataclass
class Msg:
    t: str
    p: int
    o: int
    err: object = None

    def error(self) -> object:
        return self.err

    def topic(self) -> str:
        return self.t

    def partition(self) -> int:
        return self.p

    def offset(self) -> int:
        return self.o


@dataclass
class FakeConsumer:
    seeks: list[tuple[str, int, int]] = field(default_factory=list)

    def seek(self, tp) -> None:
        self.seeks.append((tp.topic, tp.partition, tp.offset))


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def offsets(msgs) -> list[tuple[str, int, int]]:
    return [(m.t, m.p, m.o) for m in msgs]


def guard() -> tuple[GapGuard, FakeConsumer, Clock]:
    consumer, clock = FakeConsumer(), Clock()
    g = GapGuard(consumer, wait=0.25, clock=clock)
    g.start("a", 0, 0)
    g.start("a", 1, 0)
    return g, consumer, clock


def test_consecutive_offsets_pass_through_untouched() -> None:
    g, consumer, _ = guard()
    batch = [Msg("a", 0, 0), Msg("a", 1, 0), Msg("a", 0, 1), Msg("a", 1, 1)]
    assert g.filter(batch) is batch
    assert consumer.seeks == [] and g.to_dict() == {"refetched": 0, "accepted": 0, "accepted_offsets": 0, "open": 0}


def test_a_record_shown_after_a_later_one_is_re_read_in_order() -> None:
    g, consumer, clock = guard()
    # offset 2 of a/0 is not visible yet: 3 and 4 come first; a/1 goes on regardless
    out = g.filter([Msg("a", 0, 0), Msg("a", 0, 1), Msg("a", 0, 3), Msg("a", 1, 0), Msg("a", 0, 4), Msg("a", 1, 1)])
    assert offsets(out) == [("a", 0, 0), ("a", 0, 1), ("a", 1, 0), ("a", 1, 1)]
    assert consumer.seeks == [("a", 0, 2)]
    clock.now += 0.05
    out = g.filter([Msg("a", 0, 3)])  # still not there: re-read again
    assert out == [] and consumer.seeks == [("a", 0, 2), ("a", 0, 2)]
    clock.now += 0.05
    out = g.filter([Msg("a", 0, 2), Msg("a", 0, 3), Msg("a", 0, 4)])
    assert offsets(out) == [("a", 0, 2), ("a", 0, 3), ("a", 0, 4)]
    assert g.to_dict() == {"refetched": 1, "accepted": 0, "accepted_offsets": 0, "open": 0}
    # a re-delivery of handled offsets is dropped
    assert offsets(g.filter([Msg("a", 0, 4), Msg("a", 0, 5)])) == [("a", 0, 5)]


def test_a_gap_that_stays_is_taken_as_absent_after_the_wait() -> None:
    g, consumer, clock = guard()
    assert offsets(g.filter([Msg("a", 0, 0), Msg("a", 0, 3)])) == [("a", 0, 0)]
    clock.now += 0.24
    assert g.filter([Msg("a", 0, 3)]) == []
    clock.now += 0.02  # open 0.26 s: a transaction marker, compaction, a deleted record
    assert offsets(g.filter([Msg("a", 0, 3), Msg("a", 0, 4)])) == [("a", 0, 3), ("a", 0, 4)]
    assert len(consumer.seeks) == 2
    assert g.to_dict() == {"refetched": 0, "accepted": 1, "accepted_offsets": 2, "open": 0}


def test_errors_pass_through_and_unknown_partitions_start_where_they_are() -> None:
    g, consumer, _ = guard()
    err = Msg("a", 0, -1, err="EOF")
    out = g.filter([err, Msg("b", 0, 7), Msg("b", 0, 8)])  # b/0 was never started: its first offset is taken
    assert out[0] is err and offsets(out[1:]) == [("b", 0, 7), ("b", 0, 8)]
    assert consumer.seeks == []
