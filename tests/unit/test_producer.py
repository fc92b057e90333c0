"""Rate control and manifest bookkeeping, against a fake client with exact timing."""

from __future__ import annotations

import time
from itertools import pairwise
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_kafka_mirror.produce.producer import MirrorProducer, ProducerError, RateProfile, TopicLanes, _merge
from pytest_kafka_mirror.produce.records import Kind, decode


class FakeError:
    def __init__(self, name: str) -> None:
        self._name = name

    def name(self) -> str:
        return self._name


class FakeMessage:
    def __init__(self, topic: str, partition: int, key: bytes | None, value: bytes) -> None:
        self._t, self._p, self._k, self._v = topic, partition, key, value

    def topic(self) -> str:
        return self._t

    def partition(self) -> int:
        return self._p

    def key(self) -> bytes | None:
        return self._k

    def value(self) -> bytes:
        return self._v

    def headers(self) -> None:
        return None  # as confluent-kafka: delivery reports carry no headers


class FakeClient:
    """Records every produce call; delivery reports fire on poll/flush as librdkafka's do.

    ``fail``: produce calls (by index) whose delivery fails; ``lose``: calls never answered
    (they stay queued: flush returns how many, purge reports them).  With
    ``delivery.report.only.error`` (the producer's default) only failures are reported, to the
    record's own callback or else the configuration's ``on_delivery``.
    """

    def __init__(self, config: dict[str, Any], *, fail: set[int] | None = None, lose: set[int] | None = None,
                 delay: float = 0.0, slow_calls: int = 1 << 60, reorder: bool = False) -> None:
        self.config = config
        self.calls: list[tuple[float, str, int, bytes | None, bytes, Any]] = []
        self.pending: list[Any] = []
        self.stuck: list[Any] = []
        self.fail = fail or set()
        self.lose = lose or set()  # never reported (as if the broker never answered)
        self.delay = delay
        self.slow_calls = slow_calls  # the first slow_calls produce calls take `delay` each
        self.reorder = reorder
        self.n = 0

    def produce(self, topic: str, value: bytes, key: bytes | None = None, partition: int = -1, callback: Any = None,
                on_delivery: Any = None, timestamp: int = 0, headers: Any = None) -> None:
        """confluent-kafka's parameters, in its order (the producer passes them by position)."""
        on_delivery = callback or on_delivery
        if self.delay and self.n < self.slow_calls:
            time.sleep(self.delay)
        self.calls.append((time.monotonic(), topic, partition, key, value, headers))
        i = self.n
        self.n += 1
        cb = on_delivery or self.config.get("on_delivery")
        entry = (cb, FakeMessage(topic, partition, key, value))
        (self.stuck if i in self.lose else self.pending).append((*entry, "_MSG_TIMED_OUT" if i in self.fail else None))

    def __len__(self) -> int:
        return len(self.pending) + len(self.stuck)

    def _report(self, entries: list[Any]) -> None:
        only_error = self.config.get("delivery.report.only.error")
        for cb, msg, err in entries:
            if cb is not None and (err is not None or not only_error):
                cb(FakeError(err) if err else None, msg)

    def poll(self, timeout: float = 0) -> int:
        pending, self.pending = self.pending, []
        if self.reorder:
            pending.reverse()
        self._report(pending)
        if timeout:
            time.sleep(min(timeout, 0.001))
        return len(pending)

    def flush(self, timeout: float = 0) -> int:
        self.poll()
        return len(self.stuck)

    def purge(self, in_queue: bool = True, in_flight: bool = True) -> None:
        stuck, self.stuck = self.stuck, []
        self.pending += [(cb, msg, "_PURGE_QUEUE") for cb, msg, _ in stuck]


def _producer(client: FakeClient, **kw: Any) -> MirrorProducer:
    def factory(config: dict[str, Any]) -> FakeClient:
        client.config = {**config, **client.config}  # the producer's configuration, as a real client gets it
        return client

    return MirrorProducer("fake:1", client_factory=factory, producer_id="ptest", **kw)


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


@settings(max_examples=40, deadline=None)
@given(fmt=st.sampled_from(["headers", "body"]), lanes=st.integers(1, 5), partitions=st.integers(1, 3),
       cuts=st.lists(st.integers(0, 23), max_size=6), due=st.booleans())
def test_a_send_pass_hands_over_exactly_its_records_in_order(fmt: str, lanes: int, partitions: int, cuts: list[int],
                                                              due: bool) -> None:
    """Passes ending anywhere in a sequence's lanes (:meth:`_SendLoop.send` walks a sequence
    at a time): records 0..23 are handed over once each, in order, record k as sequence
    k // lanes of lane k % lanes, with its lane's key, partition and headers, carrying its
    due time; each record's failure callback names it."""
    from pytest_kafka_mirror.produce.manifest import _Topic
    from pytest_kafka_mirror.produce.producer import _SendLoop
    from pytest_kafka_mirror.produce.records import RecordEncoder

    client = FakeClient({"delivery.report.only.error": True}, fail=set(range(24)))
    enc = RecordEncoder(fmt, "ptest", 120, lanes)
    t = _Topic(TopicLanes("a", partitions, lanes=lanes), enc)
    loop = _SendLoop("ptest", client, enc, [t], None, count=24, duration=None)
    loop.start(None, None)
    for k0, k1 in pairwise([0, *sorted(cuts), 24]):
        loop.send(t, k0, k1, (1e15, 10.0) if due else None)
        assert t.sent == k1
    got = [decode(key, value, headers) for _, _, _, key, value, headers in client.calls]
    assert [(d.lane, d.seq) for d in got] == [(k % lanes, k // lanes) for k in range(24)]
    assert [c[2] for c in client.calls] == [(k % lanes) % partitions for k in range(24)]
    if due:
        assert [d.ts_us for d in got] == [int(1e15 + k * 10.0) for k in range(24)]
    client.poll()
    if fmt == "headers":  # body failures go to the producer's own callback (test below)
        assert sorted(t.failed) == list(range(24))
    assert sum(n for _, n in loop.seconds.pairs()) == 24  # every record in the second of its timestamp


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
    assert m.stats["unreported"] == 1 and "unaccounted" not in m.stats


def test_out_of_order_delivery_reports_still_give_merged_ranges() -> None:
    client = FakeClient({}, reorder=True)
    m = _producer(client).run([TopicLanes("a", 1)], rate=None, count=100)
    assert m.lanes[0].acked == [[0, 99]]


def test_a_stall_it_catches_up_from_is_not_a_rate_warning() -> None:
    # A 0.4 s stall, then full speed: the lag is reported in the stats, but the producer
    # is not "unable to reach" the rate (the warning's rule is tested on a virtual clock
    # in test_producer_lag.py).
    client = FakeClient({}, delay=0.01, slow_calls=40)
    m = _producer(client).run([TopicLanes("a", 1)], rate=4000, count=2000)
    assert m.stats["rate_warning"] is False
    assert m.stats["max_behind_schedule"] > 1000
    assert m.stats["max_lag_s"] >= 0.3
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


def test_throttled_records_carry_their_due_time_coordinated_omission() -> None:
    # A 0.3 s stall at the start: the records due meanwhile leave late, but carry the time
    # they were due, so latency measured from them includes the producer's own delay.
    client = FakeClient({}, delay=0.1, slow_calls=3)
    steps = [(0, 200), (0.5, 1000)]
    m = _producer(client).run([TopicLanes("a", 3)], rate=steps, duration=1.0)
    profile = RateProfile(steps)
    due = [m.started_us + int(profile.time_of(k) * 1e6) for k in range(len(client.calls))]
    carried = [decode(key, value, headers).ts_us for _t, _topic, _p, key, value, headers in client.calls]
    assert all(abs(c - d) <= 1 for c, d in zip(carried, due, strict=True))  # µs rounding of the float product
    slip = m.stats["schedule_slip_ms"]
    assert m.stats["timestamps"] == "due" and slip["records"] == len(client.calls) == 600
    # the first record left ~0.1 s late (the first call sleeps before it is recorded), the stall shows in max / p99
    assert 90 <= slip["max"] <= 1000 and slip["p99"] >= 50 and slip["p50"] <= slip["p99"] <= slip["max"]


def test_unthrottled_records_carry_the_time_they_were_sent() -> None:
    client = FakeClient({})
    before = time.time_ns() // 1000
    m = _producer(client, format="body").run([TopicLanes("a", 2)], rate=None, count=100)
    ts = [decode(key, value, headers).ts_us for _t, _topic, _p, key, value, headers in client.calls]
    assert before <= ts[0] and ts == sorted(ts) and ts[-1] <= m.finished_us
    assert m.stats["timestamps"] == "sent" and m.stats["schedule_slip_ms"] is None


def test_body_format_failures_are_identified_from_the_record() -> None:
    # body records have no callback of their own: the failure report's value names the record
    client = FakeClient({}, fail={1, 6}, lose={9})
    m = _producer(client, format="body").run([TopicLanes("a", 2, lanes=2), TopicLanes("b", 1)], rate=None, count=6)
    calls = [(c[1], decode(c[3], c[4], c[5])) for c in client.calls]
    failed = {(calls[i][0], calls[i][1].lane, calls[i][1].seq) for i in (1, 6)}
    lost = {(calls[9][0], calls[9][1].lane, calls[9][1].seq)}
    got_failed = {(l.topic, l.lane, s) for l in m.lanes for a, b in l.failed for s in range(a, b + 1)}
    not_acked = {(l.topic, l.lane, s) for l in m.lanes for s in range(l.sent)
                 if not any(a <= s <= b for a, b in l.acked)}
    assert got_failed == failed and not_acked == failed | lost
    assert m.stats["failed"] == 2 and m.stats["unreported"] == 1


@pytest.mark.parametrize("fmt", ["headers", "body"])
def test_the_real_client_takes_the_send_loop_s_positional_arguments(fmt: str) -> None:
    """The send loop passes ``Producer.produce`` its arguments by position (PRODUCE_ARGS):
    with the real client and no broker, every record times out and its failure report
    names it, by its own callback (headers) or its value (body); the key and partition
    in the report are the ones passed (a parameter order the client changed would raise
    TypeError or route them elsewhere)."""
    import socket

    reported: list[tuple[int, bytes]] = []
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    producer = MirrorProducer(f"127.0.0.1:{port}", format=fmt, producer_id="preal", flush_timeout=10,
                              config={"message.timeout.ms": 300, "log_level": 0})
    real = producer.config.get("on_delivery")
    if real is not None:  # the body format's failure report: seen here, then handled as always
        producer.config["on_delivery"] = lambda err, msg: (reported.append((msg.partition(), msg.key())),
                                                           real(err, msg))
    m = producer.run([TopicLanes("a", 3, lanes=3)], rate=None, count=7)
    assert [(lane.lane, lane.partition, lane.sent, lane.acked, lane.failed) for lane in m.lanes] == [
        (0, 0, 3, [], [[0, 2]]), (1, 1, 2, [], [[0, 1]]), (2, 2, 2, [], [[0, 1]])], m.lanes
    assert m.stats["failed"] == 7 and not m.stats.get("unreported")
    if fmt == "body":
        assert sorted(reported) == [(k % 3, b"%d" % (k % 3)) for k in sorted(range(7), key=lambda k: k % 3)]


def test_start_at_starts_the_shared_schedule_at_that_wall_time() -> None:
    client = FakeClient({})
    start = time.time() + 0.3
    started: list[float] = []
    m = _producer(client).run([TopicLanes("a", 1)], rate=100, count=5, start_at=start,
                              on_start=lambda: started.append(time.time()))
    assert m.started_us == round(start * 1e6)
    assert started[0] >= start - 0.002
    ts = [decode(c[3], c[4], c[5]).ts_us for c in client.calls]
    assert ts == [m.started_us + k * 10_000 for k in range(5)]


def test_ctrl_c_leaves_the_manifest_of_what_was_acknowledged() -> None:
    """A KeyboardInterrupt mid-run: the producer keeps the manifest of the records the
    source acknowledged until then (MirrorRun writes it), and the interrupt goes on."""

    class Interrupted(FakeClient):
        def produce(self, *args: Any, **kw: Any) -> None:
            if self.n == 150:
                raise KeyboardInterrupt
            super().produce(*args, **kw)

    client = Interrupted({}, lose={140})  # one record never answered: not acknowledged
    producer = _producer(client)
    with pytest.raises(KeyboardInterrupt):
        producer.run([TopicLanes("a", 1)], rate=1000, duration=2.0)
    m = producer.interrupted
    assert m is not None and m.stats["interrupted"] is True
    [lane] = m.lanes
    assert lane.sent == 150 and lane.acked_count == 149 and [tuple(r) for r in lane.acked] == [(0, 139), (141, 149)]
