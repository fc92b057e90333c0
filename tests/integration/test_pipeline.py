"""The pipeline without Spark: clusters, reference mirror, producer, capture."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pytest_kafka_mirror.clusters import ClusterError, make_cluster
from pytest_kafka_mirror.clusters.base import Cluster
from pytest_kafka_mirror.replicators import parse_naming
from pytest_kafka_mirror.replicators.reference import ReferenceReplicator
from pytest_kafka_mirror.run import MirrorRun

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, Cluster]]:
    d = tmp_path_factory.mktemp("clusters")
    src, dst = make_cluster("source", "tansu", d), make_cluster("target", "tansu", d)
    try:
        src.start()
        dst.start()
        src.ensure_topic("kafka-mirror-warmup")  # type: ignore[attr-defined]
        yield src, dst
    finally:
        src.stop()
        dst.stop()


@pytest.fixture(scope="module")
def mirror(clusters: tuple[Cluster, Cluster], tmp_path_factory: pytest.TempPathFactory) -> Iterator[ReferenceReplicator]:
    src, dst = clusters
    rep = ReferenceReplicator(
        src.bootstrap_servers, dst.bootstrap_servers, tmp_path_factory.mktemp("mirror"),
        topics=r"^it-", naming=parse_naming("prefix:source."),
    )
    with rep:
        yield rep


def _run(tmp_path: Path, clusters: tuple[Cluster, Cluster], mirror: ReferenceReplicator, topics: dict[str, int]) -> MirrorRun:
    src, dst = clusters
    for t, n in topics.items():
        src.create_topic(t, n)
    return MirrorRun(
        tmp_path / "run", src.bootstrap_servers, dst.bootstrap_servers,
        {t: mirror.target_topic(t) for t in topics}, partitions=topics, drain_timeout=10,
        warmup_topic="kafka-mirror-warmup",
    )


@pytest.mark.parametrize("fmt", ["headers", "body"])
def test_capture_sees_every_acknowledged_record_through_the_mirror(tmp_path, clusters, mirror, fmt):
    run = _run(tmp_path, clusters, mirror, {f"it-a-{fmt}": 3, f"it-b-{fmt}": 2})
    m = run.produce(rate=1000, count=900, format=fmt, message_size=150)
    status = run.finish(timeout=60)
    assert m.stats["acked"] == 1800 and m.stats["failed"] == 0
    assert status["reason"] == "satisfied"
    assert (status["ours"], status["foreign"], status["headerless"]) == (1800, 0, 0)
    table = pq.read_table(tmp_path / "run" / "capture")
    assert table.num_rows == 1800
    rows = table.to_pylist()
    assert {r["target_topic"] for r in rows} == {f"source.it-a-{fmt}", f"source.it-b-{fmt}"}
    assert {r["topic"] for r in rows} == {f"it-a-{fmt}", f"it-b-{fmt}"}
    assert all(r["kind"] == fmt and r["checksum_ok"] and r["size"] == 150 for r in rows)
    # the mirror keeps partitions: lane L of a topic with P partitions is in partition L % P
    assert all(r["partition"] == r["lane"] for r in rows)
    assert all(r["arrival_ts_us"] >= r["produce_ts_us"] for r in rows)
    manifest = json.loads((tmp_path / "run" / f"manifest-{m.producer_id}.json").read_text())
    assert sum(b - a + 1 for lane in manifest["lanes"] for a, b in lane["acked"]) == 1800


def test_transactional_producer_manifest_and_what_a_read_uncommitted_mirror_copies(tmp_path, clusters, mirror):
    """Every third transaction aborted: the manifest's lanes say exactly which sequences
    committed and which were aborted, and the reference mirror (reading read_uncommitted,
    like MM2 by default) copies both kinds."""
    run = _run(tmp_path, clusters, mirror, {"it-tx": 2})
    m = run.produce_transactions(transactions=7, records=10, abort_every=3, interval=0.0)
    assert m.stats["transactions"] == {"committed": 5, "aborted": 2, "failed": 0}
    assert (m.stats["sent"], m.stats["acked"], m.stats["aborted_records"]) == (140, 100, 40)
    for lane in m.lanes:
        assert (lane.sent, lane.acked, lane.aborted, lane.failed) == (
            70, [[0, 19], [30, 49], [60, 69]], [[20, 29], [50, 59]], [])
    status = run.finish(timeout=60)  # the last transaction committed: the capture waits for it, after the aborted
    assert status["ours"] == 140, status
    rows = pq.read_table(tmp_path / "run" / "capture").to_pylist()
    assert sorted((r["lane"], r["seq"]) for r in rows) == [(lane, q) for lane in (0, 1) for q in range(70)]


def test_foreign_records_on_the_target_are_counted_not_fatal(tmp_path, clusters, mirror):
    from confluent_kafka import Producer

    src, dst = clusters
    run = _run(tmp_path, clusters, mirror, {"it-foreign": 1})
    run.start_capture()
    p = Producer({"bootstrap.servers": dst.bootstrap_servers})
    for v in (b"hello", b"", b"1;2;3", b"\xff" * 10):
        p.produce("source.it-foreign", v, partition=0)
    p.produce("source.it-foreign", None, key=b"k", partition=0)  # tombstone
    p.flush(10)
    run.produce(rate=None, count=50, format="body", message_size=100)
    status = run.finish(timeout=60)
    assert status["reason"] == "satisfied"
    assert (status["ours"], status["foreign"]) == (50, 5)
    rows = pq.read_table(tmp_path / "run" / "capture").to_pylist()
    assert sorted(r["evidence"] for r in rows if r["kind"] == "foreign")[0].startswith("key=")


def test_a_stopped_mirror_ends_the_capture_by_drain_timeout(tmp_path, clusters, tmp_path_factory):
    src, dst = clusters
    rep = ReferenceReplicator(src.bootstrap_servers, dst.bootstrap_servers, tmp_path / "m", topics=r"^it-drain")
    with rep:
        src.create_topic("it-drain", 1)
        run = MirrorRun(tmp_path / "run", src.bootstrap_servers, dst.bootstrap_servers, {"it-drain": "it-drain"},
                        partitions={"it-drain": 1}, drain_timeout=1.0)
        run.start_capture()
        run.capture.wait_assigned({"it-drain": 1}, 30)
        rep.pause()
        try:
            run.produce(rate=None, count=100, format="headers", message_size=100, wait_for_target=False)  # paused: never ready
            status = run.finish(timeout=30)
        finally:
            rep.resume()
    assert status["reason"] == "drain-timeout"
    assert status["ours"] == 0


def test_the_capture_finds_a_target_topic_created_after_it_started(tmp_path, clusters):
    """The metadata thread keeps answering while the consume loop runs (a replicator creates
    the target topic after the capture started).  It once asked the capture's own consumer,
    which confluent-kafka 2.16 serves to one caller at a time: 1 answer in 40 s, and a
    capture that missed a topic MM2 created and filled."""
    from pytest_kafka_mirror.capture import Capture
    from pytest_kafka_mirror.processes.managed import wait_until

    _, dst = clusters
    capture = Capture(dst.bootstrap_servers, tmp_path / "run", {"it-late": "it-late-target"}).start()
    try:
        # The loop runs 2 s with the topic missing (the thread asks every 0.05 s meanwhile): the
        # loop's own progress (written every second) says so, whatever its start-up cost.
        wait_until(lambda: capture.progress().get("elapsed", 0.0) >= 2.0, 30,
                   "the capture's loop to run 2 s with the topic missing")
        dst.create_topic("it-late-target", 2)
        capture.wait_assigned({"it-late-target": 2}, 20)
    finally:
        capture.stop()
    status = capture.status()
    assert status["partitions"] == {"it-late-target": 2}
    assert status["metadata_answers"] >= 5, status  # ~40 in the first 2 s; 1 on the shared consumer


def test_unreachable_bootstrap_is_one_clear_error_in_bounded_time(tmp_path):
    import time

    c = make_cluster("source", "bootstrap:127.0.0.1:1", tmp_path)
    c.connect_timeout = 2.0  # type: ignore[attr-defined]
    t0 = time.monotonic()
    with pytest.raises(ClusterError, match=r"no answer from bootstrap servers 127\.0\.0\.1:1 within 2 s"):
        c.start()
    assert time.monotonic() - t0 < 10


def test_tansu_restart_loses_data_and_keeps_the_port(tmp_path):
    c = make_cluster("restart", "tansu", tmp_path)
    with c:  # type: ignore[attr-defined]
        c.create_topic("x", 2)
        before = c.bootstrap_servers
        c.restart()  # type: ignore[attr-defined]
        assert c.bootstrap_servers == before
        assert c.partitions("x") is None
