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
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_kafka_mirror.clusters import make_cluster
from pytest_kafka_mirror.clusters.base import Cluster
from pytest_kafka_mirror.processes.managed import ManagedProcess, wait_until
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


@pytest.fixture(scope="module")
def your_clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, Cluster]]:
    release_or_skip(KAFKA_VERSION, need="mm2")
    clusters = [make_cluster(name, f"kafka:{KAFKA_VERSION}", tmp_path_factory.mktemp(name))
                for name in ("primary", "backup")]
    try:
        for c in clusters:
            c.start()
        yield clusters[0], clusters[1]
    finally:
        for c in clusters:
            c.stop()


@pytest.fixture
def your_mm2(your_clusters: tuple[Cluster, Cluster], tmp_path: Path) -> Iterator[ManagedProcess]:
    primary, backup = your_clusters
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


def test_the_recipe_runs_as_written(pytester: pytest.Pytester, your_clusters: tuple[Cluster, Cluster],
                                   your_mm2: ManagedProcess, monkeypatch: pytest.MonkeyPatch) -> None:
    primary, backup = your_clusters
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)
    addresses = iter([primary.bootstrap_servers, backup.bootstrap_servers])
    ini = re.sub(r"bootstrap:\S+", lambda _: f"bootstrap:{next(addresses)}", marked_block("docs/your-clusters", "recipe-ini"))
    pytester.makefile(".ini", pytest=ini)
    pytester.makepyfile(test_my_mm2=marked_block("docs/your-clusters", "recipe-scenario"), test_witness=WITNESS)
    t0 = time.monotonic()
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    print(f"the recipe's session took {time.monotonic() - t0:.1f} s")
    result.assert_outcomes(passed=2)
    # the source: 2 + 1 test topics, the probe and the producer's warm-up topic; the target:
    # the copies of the first four (the warm-up topic is not ^km-: never copied); the witness
    # group on the source (this MM2 syncs no group offsets: none on the target)
    result.stdout.fnmatch_lines([
        f"kafka-mirror: deleted 5 test topic(s) from the source ({primary.bootstrap_servers}); deleted 1 witness "
        f"consumer group(s) from the source; deleted 4 test topic(s) from the target ({backup.bootstrap_servers}) "
        f"(keep them with --kafka-mirror-keep-topics)",
    ])
    assert _km_topics(primary) == [] and _km_groups(primary) == [] and _km_groups(backup) == []
    with contextlib.suppress(TimeoutError):  # MM2 may have been creating a copy as the source topic went
        wait_until(lambda: not _km_topics(backup), 20, "the copies to go", interval=1)
    assert _km_topics(backup) == []
    assert your_mm2.returncode is None, "the session must leave your replicator running"
