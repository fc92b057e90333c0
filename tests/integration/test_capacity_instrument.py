"""The capacity figures measure the replicator, not the instrument (``verify/_capacity.py``),
and the capture reads on when its consumer stops fetching (``capture/watchdog.py``).

On two Apache Kafka brokers (whose end offsets are exact, unlike Tansu's), the reference
mirror throttled to a known rate (``max_rate``) copies a backlog an unthrottled producer
built: the report's copy rate is that rate within 5 %, and it equals within 5 % the growth
rate of the target topic's end offsets, sampled by this test on its own admin client during
the same run.  The capture's own samples of those end offsets show it kept up (the figure
is not a lower bound).
"""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path

import pytest

from pytest_kafka_mirror.clusters import Cluster
from pytest_kafka_mirror.replicators.reference import Behaviour, ReferenceReplicator

#: records/s the mirror may copy: well below what it copies on a loaded 2-core machine
#: (about 2,200/s measured with a unit-test run beside it), so the throttle, not the
#: machine, sets its pace; the producer offers several times that
MAX_RATE = 1000.0
RECORDS = 12_000  # a backlog of some 10 s at MAX_RATE


class _EndOffsets:
    """The target topic's end offsets summed over its partitions, twice a second, from a
    thread and an admin client of this test's own."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        from pytest_kafka_mirror._kafkalog import admin_client

        self.admin = admin_client(bootstrap)
        self.topic, self.partitions = topic, partitions
        self.samples: list[tuple[float, int]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._work, name="test-end-offsets", daemon=True)
        self.thread.start()

    def _work(self) -> None:
        from confluent_kafka import TopicPartition
        from confluent_kafka.admin import OffsetSpec

        while not self.stop.is_set():
            asked = time.time()
            try:
                futures = self.admin.list_offsets(
                    {TopicPartition(self.topic, p): OffsetSpec.latest() for p in range(self.partitions)},
                    request_timeout=5)
                end = sum(max(f.result().offset, 0) for f in futures.values())
                self.samples.append(((asked + time.time()) / 2, end))  # answered in between: the middle
            except Exception:  # noqa: BLE001 - the topic may not exist yet: the next round asks again
                pass
            self.stop.wait(0.5)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(10)

    def at(self, t: float) -> float:
        """The end offsets at ``t``, linear between the samples around it."""
        before = max((s for s in self.samples if s[0] <= t), default=None)
        after = min((s for s in self.samples if s[0] >= t), default=None)
        assert before is not None and after is not None, (t, self.samples[:1], self.samples[-1:])
        if after[0] == before[0]:
            return float(before[1])
        return before[1] + (after[1] - before[1]) * (t - before[0]) / (after[0] - before[0])


def test_capacity_of_a_throttled_mirror_is_its_rate_and_the_targets_end_offsets_growth(
        tmp_path: Path, kafka_pair: tuple[Cluster, Cluster]) -> None:
    from pytest_kafka_mirror.facades import _end_offsets
    from pytest_kafka_mirror.run import MirrorRun

    src, dst = kafka_pair
    assert dst.capabilities().accurate_watermarks, dst.capabilities().reason("accurate_watermarks")
    src.ensure_topic("kafka-mirror-warmup")
    topic = src.create_topic(f"cap-{uuid.uuid4().hex[:6]}", 4)
    with ReferenceReplicator(src.bootstrap_servers, dst.bootstrap_servers, tmp_path / "mirror", topics="^cap-",
                             behaviour=Behaviour(max_rate=MAX_RATE)) as mirror:
        target = mirror.target_topic(topic)
        run = MirrorRun(tmp_path / "run", src.bootstrap_servers, dst.bootstrap_servers, {topic: target},
                        partitions={topic: 4}, drain_timeout=30, warmup_topic="kafka-mirror-warmup",
                        replicator=mirror, end_offsets=_end_offsets(dst))
        # sampling from before the first record (until the mirror creates the topic, asking fails: asked again)
        ends = _EndOffsets(dst.bootstrap_servers, target, 4)
        try:
            run.produce(rate=None, count=RECORDS, wait_for_target=True)
            report = run.verify()
        finally:
            ends.close()
    report.assert_ok()
    every = report.capacity["all"]
    assert every["copy_rate"] is not None and not every["lower_bound"], every
    # the producer outran the mirror: a backlog, copied over a window long enough to measure
    assert every["offered_rate"] > 1.2 * every["copy_rate"] and every["window_s"] >= 5, every
    assert every["copy_rate"] == pytest.approx(MAX_RATE, rel=0.05), every
    # the capture kept up with the target's end offsets: measured, and within the bound
    assert report.capture["end_offsets"]["measured"] and every["capture_behind_pct"] < 5.0, every
    # the cross-check: the end offsets' growth over the same window, sampled independently
    t0, t1 = every["window"]
    growth = (ends.at(t1) - ends.at(t0)) / (t1 - t0)
    assert every["copy_rate"] == pytest.approx(growth, rel=0.05), (every, growth)
    assert report.capacity["topics"][topic]["copy_rate"] == every["copy_rate"]


def test_a_capture_whose_consumer_stops_fetching_reads_on_with_a_new_one(
        tmp_path: Path, kafka_pair: tuple[Cluster, Cluster]) -> None:
    """``capture/watchdog.py``: the consumer paused behind the capture's back (what
    librdkafka did after a target broker restart: fetch nothing more) while the target
    grows is replaced within the stall time, and every record is read once."""
    import argparse
    import json

    import pyarrow.parquet as pq
    from confluent_kafka import Producer

    from pytest_kafka_mirror.capture import process as capture_process
    from pytest_kafka_mirror.capture.watchdog import STALL_S
    from pytest_kafka_mirror.processes.managed import wait_until
    from pytest_kafka_mirror.rundir import CAPTURE_DIR, CAPTURE_STATUS

    _, dst = kafka_pair
    topic = dst.create_topic(f"stall-{uuid.uuid4().hex[:6]}", 2)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    args = argparse.Namespace(bootstrap=dst.bootstrap_servers, run_dir=str(run_dir), topics=json.dumps({topic: topic}),
                              drain_timeout=30.0, settle=0.5, max_runtime=120.0, manifest_dir="", producers=0,
                              group=0, groups=1, end_offsets="sample", end_offsets_why="")
    capture = capture_process._CaptureProcess(args)
    stall, paused = threading.Event(), []
    consume = capture.consume

    def consume_or_stall() -> None:  # in the consume loop's thread, which owns the consumer
        if stall.is_set() and not paused:
            paused.append(capture.consumer)
            capture.consumer.pause(capture.consumer.assignment())
        consume()

    capture.consume = consume_or_stall  # type: ignore[method-assign]
    loop = threading.Thread(target=capture.run, name="test-capture", daemon=True)
    loop.start()
    producer = Producer({"bootstrap.servers": dst.bootstrap_servers, "linger.ms": 5})

    def produce(n: int) -> None:
        for i in range(n):
            producer.produce(topic, value=b"x" * 20, partition=i % 2)
        assert producer.flush(30) == 0

    def read() -> int:
        return sum(capture.gaps.next.values())

    try:
        wait_until(lambda: capture.end_offsets.taken > 0, 30, "the capture's first end-offset sample")
        produce(400)
        wait_until(lambda: read() == 400, 30, "the capture to read the first 400 records")
        stall.set()
        wait_until(lambda: bool(paused), 10, "the capture's consumer to be paused")
        t0 = time.monotonic()
        produce(600)
        wait_until(lambda: read() == 1000, 20 + 4 * STALL_S, "the capture to read on with a new consumer")
        took = time.monotonic() - t0
    finally:
        capture.stopping = True
        loop.join(30)
    status = json.loads((run_dir / CAPTURE_STATUS).read_text())
    restarts = status["consumer_restarts"]
    assert len(restarts) == 1 and restarts[0]["partitions"] == 2, restarts
    assert "read nothing for" in restarts[0]["why"] and capture.consumer is not paused[0]
    assert STALL_S <= took <= STALL_S + 10, took  # the samples are once a second: a few of them after the stall time
    rows = pq.read_table([str(p) for p in sorted((run_dir / CAPTURE_DIR).glob("*.parquet"))],
                         columns=["partition", "offset"]).to_pylist()
    assert status["rows"] == len(rows) == 1000
    assert len({(r["partition"], r["offset"]) for r in rows}) == 1000  # each record once: none skipped, none twice
