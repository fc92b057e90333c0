"""docs/your-clusters.md, run exactly as written: clusters and a MirrorMaker 2 the plugin
did not start.

Two Apache Kafka clusters stand in for the user's (started here with the plugin's
``kafka:`` backend code, outside any pytest session of the plugin), and a MirrorMaker 2
is started here by hand from the recipe's ``mm2.properties`` lines plus the clusters'
addresses. Then the recipe's ``pytest.ini`` (addresses replaced) and scenario run in a
pytest session of their own, with ``external:`` as the replicator, and the test checks
that the session deleted exactly its topics, on both clusters.
"""

from __future__ import annotations

import contextlib
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_kafka_mirror.clusters.base import Cluster
from pytest_kafka_mirror.processes.managed import ManagedProcess, child_env, wait_until
from tests.docs import marked_block
from tests.kafka import KAFKA_VERSION, release_or_skip

pytestmark = pytest.mark.integration

#: what a production MM2's properties also say, sized for one broker per cluster
SINGLE_BROKER = {
    "replication.factor": "1", "checkpoints.topic.replication.factor": "1",
    "heartbeats.topic.replication.factor": "1", "offset-syncs.topic.replication.factor": "1",
    "offset.storage.replication.factor": "1", "status.storage.replication.factor": "1",
    "config.storage.replication.factor": "1",
}


@contextlib.contextmanager
def _clusters(tmp_path_factory: pytest.TempPathFactory, **server_properties: str) -> Iterator[tuple[Cluster, Cluster]]:
    """Two single-broker Apache Kafka clusters, ``primary`` and ``backup``, stopped afterwards."""
    from pytest_kafka_mirror.clusters.kafka_home import KafkaCluster

    release = release_or_skip(KAFKA_VERSION, need="mm2")
    clusters = [KafkaCluster(name, release, tmp_path_factory.mktemp(name), spec=f"kafka:{KAFKA_VERSION}",
                             server_properties=server_properties) for name in ("primary", "backup")]
    try:
        for c in clusters:
            c.start()
        yield clusters[0], clusters[1]
    finally:
        for c in clusters:
            c.stop()


@pytest.fixture(scope="module")
def your_clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, Cluster]]:
    with _clusters(tmp_path_factory) as pair:
        yield pair


@contextlib.contextmanager
def _mm2(primary: Cluster, backup: Cluster, tmp_path: Path) -> Iterator[ManagedProcess]:
    """The recipe's MirrorMaker 2, started by hand between ``primary`` and ``backup``."""
    release = release_or_skip(KAFKA_VERSION, need="mm2")
    lines = [marked_block("docs/your-clusters", "recipe-mm2"),
             f"primary.bootstrap.servers = {primary.bootstrap_servers}",
             f"backup.bootstrap.servers = {backup.bootstrap_servers}",
             *(f"{k} = {v}" for k, v in SINGLE_BROKER.items())]
    props = tmp_path / "mm2.properties"
    props.write_text("\n".join(lines) + "\n")
    argv = release.java_argv("org.apache.kafka.connect.mirror.MirrorMaker", [str(props)], heap="-Xms64m -Xmx384m",
                             log_config=release.write_log_config(tmp_path))
    proc = ManagedProcess("your-mm2", argv, tmp_path / "mm2.log", cwd=tmp_path).start()
    try:
        yield proc
    finally:
        proc.stop(timeout=30)


@pytest.fixture
def your_mm2(your_clusters: tuple[Cluster, Cluster], tmp_path: Path) -> Iterator[ManagedProcess]:
    with _mm2(*your_clusters, tmp_path) as proc:
        yield proc


#: beside the recipe's scenario: a failover witness, whose consumer group the session deletes too
WITNESS = """
import pytest
from pytest_kafka_mirror import witness


@pytest.mark.kafka_mirror_topics(n=1, partitions=1)
def test_a_witness_commits(mirror_topics, mirror_producer, mirror_verifier):
    (topic,) = mirror_topics(1, partitions=1)
    run = mirror_producer(topic, rate=50, duration=2, witnesses=[witness("end")])
    mirror_verifier(run).assert_ok(p99_ms=5000)
"""


def _km_groups(cluster: Cluster) -> list[str]:
    listed = cluster.admin().list_consumer_groups(request_timeout=10).result(timeout=15)  # type: ignore[attr-defined]
    return sorted(g.group_id for g in listed.valid if g.group_id.startswith("km-"))


def _km_topics(cluster: Cluster) -> list[str]:
    names = cluster.admin().list_topics(timeout=10).topics  # type: ignore[attr-defined]
    return sorted(t for t in names if re.match(r"(primary\.)?(km-|kafka-mirror-warmup)", t))


def _run_recipe(pytester: pytest.Pytester, primary: Cluster, backup: Cluster,
                monkeypatch: pytest.MonkeyPatch) -> pytest.RunResult:
    """The recipe's pytest.ini (the clusters' addresses put in) and scenario, plus a witness,
    in a pytest session of their own that imports the plugin from this checkout."""
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)
    env = child_env(None)  # a session of this checkout, not of a copy installed from another one
    if env is not None:
        monkeypatch.setenv("PYTHONPATH", env["PYTHONPATH"])
    addresses = iter([primary.bootstrap_servers, backup.bootstrap_servers])
    ini = re.sub(r"bootstrap:\S+", lambda _: f"bootstrap:{next(addresses)}", marked_block("docs/your-clusters", "recipe-ini"))
    pytester.makefile(".ini", pytest=ini)
    pytester.makepyfile(test_my_mm2=marked_block("docs/your-clusters", "recipe-scenario"), test_witness=WITNESS)
    t0 = time.monotonic()
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    print(f"the recipe's session took {time.monotonic() - t0:.1f} s")
    result.assert_outcomes(passed=2)
    return result


def test_the_recipe_runs_as_written(pytester: pytest.Pytester, your_clusters: tuple[Cluster, Cluster],
                                   your_mm2: ManagedProcess, monkeypatch: pytest.MonkeyPatch) -> None:
    primary, backup = your_clusters
    result = _run_recipe(pytester, primary, backup, monkeypatch)
    # the source: 2 + 1 test topics, the probe and the producer's warm-up topic; the target:
    # the copies of the first four (the warm-up topic is not ^km-: never copied); the witness
    # group on the source (this MM2 syncs no group offsets: none on the target). These brokers
    # do not auto-create topics, so nothing comes back on the source; a copy MM2 was creating
    # as its source topic went is deleted again ("... again after they came back")
    result.stdout.re_match_lines([re.escape(
        f"kafka-mirror: deleted 5 test topic(s) from the source ({primary.bootstrap_servers}); deleted 1 witness "
        f"consumer group(s) from the source; deleted 4 test topic(s) from the target ({backup.bootstrap_servers})")
        + r"( \(\d of them again after they came back\))? " + re.escape("(keep them with --kafka-mirror-keep-topics)"),
    ])
    assert _km_topics(primary) == [] and _km_groups(primary) == [] and _km_groups(backup) == []
    with contextlib.suppress(TimeoutError):  # MM2 may have been creating a copy as the source topic went
        wait_until(lambda: not _km_topics(backup), 20, "the copies to go", interval=1)
    assert _km_topics(backup) == []
    assert your_mm2.returncode is None, "the session must leave your replicator running"


#: a record larger than MM2's producer takes (max.request.size, 1 MB by default), then a test after it
TOO_LARGE = """
import pytest


BIG = {"max.message.bytes": str(4 << 20)}  # the source takes it: only the replicator cannot


@pytest.mark.kafka_mirror_topics(n=1, partitions=1, config=BIG)
def test_a_record_too_large_for_it(mirror_topics, mirror_producer, mirror_verifier):
    run = mirror_producer(mirror_topics(1, partitions=1, config=BIG), rate=2, duration=2, message_size=1_500_000)
    mirror_verifier(run).assert_ok()


@pytest.mark.kafka_mirror_topics(n=1, partitions=1)
def test_the_next_one(mirror_topics, mirror_producer, mirror_verifier):
    mirror_verifier(mirror_producer(mirror_topics(1, partitions=1), rate=50, duration=2)).assert_ok()
"""


@pytest.mark.nightly  # 2-3 minutes: a session against MM2 on Kafka that breaks it
def test_a_failed_task_of_your_mm2_is_quoted_and_the_tests_after_it_fail_at_once(
        pytester: pytest.Pytester, your_clusters: tuple[Cluster, Cluster], your_mm2: ManagedProcess,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """MM2's status topic given (``--kafka-mirror-replicator-status``): the record too large
    for its producer fails its copying task ("will not recover until manually restarted"),
    the test that sent it says so with the task's trace, and the next test fails at once
    with that reason (no restart command: nothing can bring it back) instead of a timeout."""
    from pytest_kafka_mirror.replicators.mm2 import herder_topic

    primary, backup = your_clusters
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)
    status = herder_topic({}, "status", "primary", "backup")
    pytester.makepyfile(test_broken=TOO_LARGE)
    t0 = time.monotonic()
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-rA", f"--kafka-mirror-source=bootstrap:{primary.bootstrap_servers}",
        f"--kafka-mirror-target=bootstrap:{backup.bootstrap_servers}", "--kafka-mirror-replicator=external:prefix:primary.",
        f"--kafka-mirror-replicator-status={status}", "--kafka-mirror-drain-timeout=20")
    took = time.monotonic() - t0
    out = result.stdout.str()
    # the first fails and its teardown names the breakage; the next errors at setup, at once
    result.assert_outcomes(failed=1, errors=2)
    assert f"this test left the shared replicator (external:prefix:primary.) broken: its Connect status ({status}):" \
        in out and "RecordTooLargeException" in out, out[-6000:]
    assert "could not be restarted after test_broken.py::test_a_record_too_large_for_it left it broken" in out
    assert "give --kafka-mirror-replicator-command stop=COMMAND" in out, out[-6000:]
    assert took < 240, f"the session took {took:.0f} s: the next test waited instead of failing at once"


@pytest.mark.nightly  # two more brokers, an MM2 and a session: about 3.5 min on a loaded 2-core machine
def test_on_clusters_that_auto_create_topics_what_comes_back_is_deleted_again_or_named(
        pytester: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The measured case: with auto.create.topics.enable=true (Kafka's default), MM2's consumer,
    still assigned, recreates the deleted topics within 50 ms (seen in the broker's log) and
    MM2 copies them again.  The session warns at its start and deletes again; whether MM2
    lets go of them within the rounds varies (both seen here), so: every topic either
    cluster holds afterwards was named in the closing note, and with MM2 stopped
    kafka-mirror cleanup --yes removes what is left."""
    with _clusters(tmp_path_factory, **{"auto.create.topics.enable": "true"}) as (primary, backup), \
            _mm2(primary, backup, tmp_path) as mm2:
        result = _run_recipe(pytester, primary, backup, monkeypatch)
        text = " ".join(result.stdout.str().split())
        assert ("PytestKafkaMirrorWarning: kafka-mirror: auto.create.topics.enable=true on the source and the "
                "target: a consumer still assigned to a topic this session deletes at its end") in text
        (note,) = [line for line in result.stdout.lines if line.startswith("kafka-mirror: deleted ")]
        assert re.match(r"kafka-mirror: deleted 5 test topic\(s\) from the source \(\S+\) \([1-4] of them again after "
                        r"they came back\)", note), note
        time.sleep(10)  # MM2 finds a topic that came back at its next refresh (5 s), and copies it
        left = {"source": _km_topics(primary), "target": _km_topics(backup)}
        print(f"left after the session: {left}")
        assert [t for ts in left.values() for t in ts if t not in note] == [], (left, note)
        if left["source"]:
            assert ("came back after deletion: auto.create.topics.enable=true on the source (a consumer still "
                    "assigned to them recreates them") in note
        mm2.stop(timeout=30)
        done = subprocess.run(
            [sys.executable, "-m", "pytest_kafka_mirror.cli", "cleanup", "--bootstrap", primary.bootstrap_servers,
             "--bootstrap", backup.bootstrap_servers, "--yes"],
            capture_output=True, text=True, timeout=120, env=child_env(None), check=False)
        assert (done.returncode, done.stderr) == (0, ""), done.stdout
        assert _km_topics(primary) == [] and _km_topics(backup) == []
