"""Rate control and manifest bookkeeping, against a fake client with exact timing."""

from __future__ import annotations

import time
from typing import Any

import pytest

from pytest_kafka_mirror._warnings import PytestKafkaMirrorWarning
from pytest_kafka_mirror.producer import MirrorProducer, ProducerError, RateProfile, TopicLanes, _merge
from pytest_kafka_mirror.records import Kind, decode


class FakeError:
    def __init__(self, name: str) -> None:
        self._name = name

    def name(self) -> str:
        return self._name


class FakeClient:
    """Records every produce call; delivery reports fire on poll/flush, failing chosen seqs."""

    def __init__(self, config: dict[str, Any], *, fail: set[int] | None = None, lose: set[int] | None = None,
                 delay: float = 0.0, slow_calls: int = 1 << 60, reorder: bool = False) -> None:
        self.config = config
        self.calls: list[tuple[float, str, int, bytes | None, bytes, Any]] = []
        self.pending: list[Any] = []
        self.fail = fail or set()
        self.lose = lose or set()  # never reported (as if the process died)
        self.delay = delay
        self.slow_calls = slow_calls  # the first slow_calls produce calls take `delay` each
        self.reorder = reorder
        self.n = 0

    def produce(self, topic: str, value: bytes, key: bytes | None = None, *, partition: int, headers: Any = None, on_delivery: Any) -> None:
        if self.delay and self.n < self.slow_calls:
            time.sleep(self.delay)
        self.calls.append((time.monotonic(), topic, partition, key, value, headers))
        i = self.n
        self.n += 1
        if i not in self.lose:
            self.pending.append((on_delivery, FakeError("_MSG_TIMED_OUT") if i in self.fail else None))

    def poll(self, timeout: float = 0) -> int:
        pending, self.pending = self.pending, []
        if self.reorder:
            pending.reverse()
        for cb, err in pending:
            cb(err, None)
        if timeout:
            time.sleep(min(timeout, 0.001))
        return len(pending)

    def flush(self, timeout: float = 0) -> int:
        self.poll()
        return 0


def _producer(client: FakeClient, **kw: Any) -> MirrorProducer:
    return MirrorProducer("fake:1", client_factory=lambda cfg: client, producer_id="ptest", **kw)


def test_never_exceeds_the_rate_and_sends_exactly_rate_times_duration() -> None:
    client = FakeClient({})
    m = _producer(client).run([TopicLanes("a", 2), TopicLanes("b", 3)], rate=500, duration=1.0)
    per_topic = {t: [c for c in client.calls if c[1] == t] for t in ("a", "b")}
    assert {t: len(v) for t, v in per_topic.items()} == {"a": 500, "b": 500}
    for calls in per_topic.values():
        t0 = calls[0][0]
        for k, call in enumerate(calls):
            # record k may leave at the earliest k/rate seconds after the first (1 ms clock slack)
            assert call[0] - t0 >= k / 500 - 0.001, f"record {k} sent early"
    # a ceiling, never exceeded (how close to it a loaded machine gets is a benchmark figure)
    assert m.stats["achieved_rate_per_topic"] <= 500 * 1.01
    assert not m.stats["rate_warning"]


def test_lanes_route_by_key_and_partition_and_sequences_are_per_lane() -> None:
    client = FakeClient({})
    m = _producer(client, format="body").run([TopicLanes("a", 2, lanes=4)], rate=None, count=12)
    parts = {}
    for _, _, partition, key, value, headers in client.calls:
        d = decode(key, value, headers)
        assert d.kind is Kind.BODY and d.producer_id == "ptest"
        parts.setdefault(d.lane, []).append((partition, d.seq))
    assert parts == {lane: [(lane % 2, s) for s in range(3)] for lane in range(4)}
    assert [(l.lane, l.partition, l.sent, l.acked) for l in m.lanes] == [(lane, lane % 2, 3, [[0, 2]]) for lane in range(4)]


def test_manifest_records_acked_failed_and_unreported_ranges() -> None:
    # one lane: record i == seq i
    client = FakeClient({}, fail={3, 4, 9}, lose={7})
    m = _producer(client).run([TopicLanes("a", 1)], rate=None, count=12)
    lane = m.lanes[0]
    assert lane.sent == 12
    assert lane.acked == [[0, 2], [5, 6], [8, 8], [10, 11]]
    assert lane.failed == [[3, 4], [9, 9]]
    assert lane.acked_count == 8
    assert m.stats["failed"] == 3 and m.stats["errors"] == {"_MSG_TIMED_OUT": 3}


def test_out_of_order_delivery_reports_still_give_merged_ranges() -> None:
    client = FakeClient({}, reorder=True)
    m = _producer(client).run([TopicLanes("a", 1)], rate=None, count=100)
    assert m.lanes[0].acked == [[0, 99]]


def test_warns_once_when_the_rate_cannot_be_reached() -> None:
    client = FakeClient({}, delay=0.01, slow_calls=40)  # a 0.4 s stall, then full speed
    with pytest.warns(PytestKafkaMirrorWarning, match=r"cannot reach 4000 msg/s per topic") as rec:
        m = _producer(client).run([TopicLanes("a", 1)], rate=4000, count=2000)
    assert len([w for w in rec if issubclass(w.category, PytestKafkaMirrorWarning)]) == 1
    assert m.stats["rate_warning"] is True
    assert m.stats["max_behind_schedule"] > 1000
    assert len(client.calls) == 2000


def test_no_warning_for_short_scheduling_noise() -> None:
    client = FakeClient({}, delay=0.01, slow_calls=5)  # a 50 ms stall
    m = _producer(client).run([TopicLanes("a", 1)], rate=4000, count=1000)
    assert m.stats["rate_warning"] is False


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"rate": 0, "count": 1}, "rate must be a positive number"),
        ({"rate": -5, "count": 1}, "rate must be a positive number"),
        ({"rate": float("nan"), "count": 1}, "rate must be a positive number"),
        ({"rate": 10}, "give a count"),
        ({"rate": 10, "count": -1}, "count must be a non-negative"),
        ({"rate": 10, "duration": 0}, "duration must be a positive"),
    ],
)
def test_bad_run_arguments(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ProducerError, match=message):
        _producer(FakeClient({})).run([TopicLanes("a", 1)], **kwargs)


def test_message_size_below_metadata() -> None:
    with pytest.raises(ProducerError, match=r"message_size 20 B is below the headers format's metadata size \d+ B"):
        _producer(FakeClient({}), message_size=20).run([TopicLanes("a", 1)], rate=1, count=1)


def test_bad_format() -> None:
    with pytest.raises(ProducerError, match="format must be one of headers, body"):
        MirrorProducer("x:1", format="avro")


def test_merge() -> None:
    assert _merge([[5, 6], [0, 2], [3, 4], [8, 8]]) == [[0, 6], [8, 8]]


def test_a_rate_profile_is_a_ceiling_at_every_step() -> None:
    client = FakeClient({})
    steps = [(0, 200), (0.3, 2000), (0.5, 200)]
    m = _producer(client).run([TopicLanes("a", 2)], rate=steps, duration=1.0)
    profile = RateProfile(steps)
    # 0.3 s at 200 + 0.2 s at 2000 + 0.5 s at 200 = 60 + 400 + 100 records
    assert len(client.calls) == 560 == round(profile.allowed(1.0))
    t0 = client.calls[0][0]
    for k, call in enumerate(client.calls):
        assert call[0] - t0 >= profile.time_of(k) - 0.001, f"record {k} sent early"
    assert m.rate == [[0.0, 200.0], [0.3, 2000.0], [0.5, 200.0]]


def test_rate_profile_arithmetic() -> None:
    p = RateProfile([(0, 10), (2, 100)])
    assert (p.allowed(1), p.allowed(2), p.allowed(3)) == (10, 20, 120)
    assert (p.time_of(10), p.time_of(20), p.time_of(120)) == (1, 2, 3)
    assert (p.rate_at(1.9), p.rate_at(2)) == (10, 100)


@pytest.mark.parametrize(
    "steps,message",
    [([(1, 10)], "starts at t=0"), ([(0, 10), (0, 20)], "must increase"), ([(0, 10), (1, 0)], "must be positive"),
     ([], "starts at t=0")],
)
def test_bad_rate_profiles(steps: list[tuple[float, float]], message: str) -> None:
    with pytest.raises(ProducerError, match=message):
        _producer(FakeClient({})).run([TopicLanes("a", 1)], rate=steps, duration=1)


def test_sent_per_second_counts_each_record_in_the_second_of_its_own_timestamp() -> None:
    from collections import Counter

    client = FakeClient({})
    m = _producer(client).run([TopicLanes("a", 2)], rate=400, duration=2.5)
    seconds: Counter[int] = Counter()
    for _t, _topic, _part, key, value, headers in client.calls:
        d = decode(key, value, headers)
        assert d.ts_us is not None
        seconds[d.ts_us // 1_000_000] += 1
    assert sorted([s, n] for s, n in seconds.items()) == m.stats["sent_per_second"]
