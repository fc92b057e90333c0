"""Connect status records read from a real (Tansu) broker, MM2's ``status()`` in start-up
errors, and ``stop()`` + ``start()`` of a real MirrorMaker 2 (tests/kafka.py's release)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from pytest_kafka_mirror.clusters import Cluster
from pytest_kafka_mirror.clusters.tansu import TansuCluster
from pytest_kafka_mirror.processes.managed import wait_until
from pytest_kafka_mirror.replicators import ReplicatorError, ReplicatorOptions, make_replicator
from pytest_kafka_mirror.replicators.connect_status import describe_status_topic, read_status_topic
from pytest_kafka_mirror.replicators.mm2 import MirrorMaker2, parse_properties
from tests.kafka import KAFKA_VERSION, fake_release

pytestmark = pytest.mark.integration

TRACE = "org.apache.kafka.connect.errors.ConnectException: no route\n\tat X.run(X.java:1)"


def _status(state: str, trace: str | None = None, *, wrapped: bool = False) -> bytes:
    payload = {"state": state, "trace": trace, "worker_id": "source->target", "generation": 1}
    doc = {"schema": {"type": "struct", "fields": []}, "payload": payload} if wrapped else payload
    return json.dumps(doc).encode()


def _write(cluster: Cluster, topic: str, records: list[tuple[str, bytes | None]]) -> None:
    """Status records as Connect's producer writes them: string keys, the default partitioner."""
    from confluent_kafka import Producer

    p = Producer({**cluster.client_config(), "linger.ms": 0})
    for key, value in records:
        p.produce(topic, key=key.encode(), value=value)
    assert p.flush(10) == 0


def test_describe_a_status_topic_on_tansu(tansu_pair: tuple[TansuCluster, TansuCluster]) -> None:
    _, dst = tansu_pair
    topic = dst.create_topic(f"mm2-status.source.{uuid.uuid4().hex[:8]}.internal", 5)  # Connect's default: 5
    config = dst.client_config()
    assert describe_status_topic(config, topic) == f"no status records in {topic}"
    _write(dst, topic, [
        ("status-connector-MirrorSourceConnector", _status("UNASSIGNED")),
        ("status-task-MirrorSourceConnector-0", _status("UNASSIGNED")),
        ("status-connector-MirrorCheckpointConnector", _status("RUNNING", wrapped=True)),
        ("status-connector-MirrorSourceConnector", _status("RUNNING")),
        ("status-task-MirrorSourceConnector-0", _status("FAILED", TRACE)),
        ("status-task-MirrorSourceConnector-1", _status("RUNNING")),
        ("status-task-MirrorSourceConnector-2", _status("RUNNING")),
        ("status-task-MirrorSourceConnector-2", None),
        ("status-topic-km-a:connector-MirrorSourceConnector", b'{"topic": {"name": "km-a"}}'),
    ])
    assert len(read_status_topic(config, topic) or []) == 9
    assert describe_status_topic(config, topic) == (
        "MirrorSourceConnector RUNNING, task 0 FAILED: org.apache.kafka.connect.errors.ConnectException: no route, "
        "task 1 RUNNING; MirrorCheckpointConnector RUNNING, no tasks"
    )


def test_a_missing_topic_or_broker_is_said_not_raised(tansu_pair: tuple[TansuCluster, TansuCluster]) -> None:
    _, dst = tansu_pair
    topic = f"mm2-status.source.{uuid.uuid4().hex[:8]}.internal"
    assert describe_status_topic(dst.client_config(), topic).startswith(f"no topic {topic} ")
    assert topic not in dst.topics()  # reading did not create it
    text = describe_status_topic({"bootstrap.servers": "127.0.0.1:1"}, topic, timeout=1)
    assert text.startswith(f"cannot read {topic} from 127.0.0.1:1: ")


def _mm2(tmp_path: Path, pair: tuple[Cluster, Cluster], version: str, **opts: object) -> MirrorMaker2:
    options = ReplicatorOptions(topic_prefix=f"cs{uuid.uuid4().hex[:4]}", **opts)  # type: ignore[arg-type]
    rep = make_replicator(f"mm2:{version}", pair[0], pair[1], tmp_path / "mm2", options)
    assert isinstance(rep, MirrorMaker2)
    return rep


def test_mm2_status_reads_its_own_status_topic(tmp_path: Path, tansu_pair: tuple[TansuCluster, TansuCluster]) -> None:
    rep = _mm2(tmp_path, tansu_pair, str(fake_release(tmp_path)))  # never started: no jars needed
    head = f"MirrorMaker 2's Connect status ({rep.status_topic}): "
    assert rep.status().startswith(head + f"no topic {rep.status_topic} ")  # never started: no Connect worker yet
    tansu_pair[1].create_topic(rep.status_topic, 5)
    _write(tansu_pair[1], rep.status_topic, [("status-connector-MirrorSourceConnector", _status("RUNNING")),
                                             ("status-task-MirrorSourceConnector-0", _status("RUNNING"))])
    assert rep.status() == head + "MirrorSourceConnector RUNNING, task 0 RUNNING"


def test_a_start_that_does_not_copy_quotes_the_connect_status(
    tmp_path: Path, tansu_pair: tuple[TansuCluster, TansuCluster], kafka_release: object
) -> None:
    # a topic filter that leaves the probe out: MM2 runs, and copies nothing
    rep = _mm2(tmp_path, tansu_pair, KAFKA_VERSION, properties=(("source->target.topics", "^elsewhere-.*"),),
               startup_timeout=45)
    with pytest.raises(ReplicatorError) as info:
        rep.start()
    assert f"MirrorMaker 2's Connect status ({rep.status_topic}): MirrorSourceConnector RUNNING" in str(info.value)
    assert not rep.running


def test_mm2_stop_then_start_resumes_the_same_instance(tmp_path: Path, kafka_pair: tuple[Cluster, Cluster]) -> None:
    """SIGTERM + start of a real MirrorMaker 2: the same Connect group and internal topics,
    copying again, its Connect status RUNNING, and a FAILED state of the first process
    is not this one's (its health only counts what was written since it started)."""
    rep = _mm2(tmp_path, kafka_pair, KAFKA_VERSION)  # type: ignore[arg-type]
    try:
        rep.start()
        first = rep.properties_path.read_text()
        assert "MirrorSourceConnector RUNNING" in rep.status()
        _write(kafka_pair[1], rep.status_topic, [("status-task-MirrorSourceConnector-9", _status("FAILED", TRACE))])
        assert "task 9 FAILED: org.apache.kafka.connect.errors.ConnectException: no route" in rep.health()
        rep.stop()  # SIGTERM, returns once the process has exited
        assert not rep.running
        rep.start()  # returns once a probe record crossed over again
        assert rep.properties_path.read_text() == first
        assert parse_properties(first)["target.group.id"] == f"source-mm2-{rep.instance}"
        # the copy resumed; the connector's own RUNNING may reach the status topic a moment
        # after its tasks' (CI saw it still UNASSIGNED from the stop): awaited, bounded
        wait_until(lambda: "MirrorSourceConnector RUNNING" in rep.status(), 30, "the connector's RUNNING state")
        assert rep.health() == ""
    finally:
        rep.stop()
    assert rep.starts == 2
