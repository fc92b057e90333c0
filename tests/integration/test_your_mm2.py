"""The scenario library against clusters and a MirrorMaker 2 you operate (nightly: 15-25 min).

Two ``kafka:4.3.1,security=sasl_ssl`` clusters (SCRAM-SHA-512 over TLS, auto-creating topics
as Kafka does by default) and a MirrorMaker 2 in dedicated mode with its own
``mm2.properties``, all started here as separate processes the plugin does not own; MM2 is
controlled by a script standing in for ``systemctl`` (``ctl.py start|stop|kill|pause|resume``).
The session gets what a user gives: ``bootstrap:`` clusters with their client properties,
``external:prefix:primary.``, the lifecycle commands and MM2's status topic.  Every
non-nightly scenario passes or skips with a reason, none errors, and afterwards no ``km``
topic is left on either cluster.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_kafka_mirror._clientconf import format_properties
from pytest_kafka_mirror.clusters import make_cluster
from pytest_kafka_mirror.clusters.base import Cluster
from pytest_kafka_mirror.replicators._java_client import java_client_properties
from tests.kafka import KAFKA_VERSION, release_or_skip
from tests.yours import YourReplicator

pytestmark = [pytest.mark.integration, pytest.mark.nightly]

ROOT = Path(__file__).resolve().parents[2]
SECURED = f"kafka:{KAFKA_VERSION},security=sasl_ssl"
REFRESH_S = 5  # MM2's topic refresh, as docs/your-clusters.md's recipe sets it

def _mm2_properties(primary: Cluster, backup: Cluster) -> str:
    lines = {
        "clusters": "primary, backup",
        "primary.bootstrap.servers": primary.bootstrap_servers,
        "backup.bootstrap.servers": backup.bootstrap_servers,
        "primary->backup.enabled": "true",
        "primary->backup.topics": "km-.*",
        "refresh.topics.interval.seconds": str(REFRESH_S),
        "refresh.groups.interval.seconds": "5",
        # its source consumer, still assigned to a topic the session deletes, would recreate it
        # (auto.create.topics.enable=true, Kafka's default): docs/your-clusters.md
        "primary.consumer.allow.auto.create.topics": "false",
        "sync.group.offsets.enabled": "true",
        "emit.checkpoints.interval.seconds": "1",
        "sync.group.offsets.interval.seconds": "1",
        "emit.heartbeats.interval.seconds": "1",
        "offset.flush.interval.ms": "5000",
        # the 1 MiB records of test_large_messages_1mb (the Java clients' default is 1 MiB per request)
        "backup.producer.max.request.size": "2097152",
        "primary.consumer.max.partition.fetch.bytes": "2097152",
        "replication.factor": "1", "checkpoints.topic.replication.factor": "1",
        "heartbeats.topic.replication.factor": "1", "offset-syncs.topic.replication.factor": "1",
        "offset.storage.replication.factor": "1", "status.storage.replication.factor": "1",
        "config.storage.replication.factor": "1",
    }
    for alias, cluster in (("primary", primary), ("backup", backup)):
        java, _ = java_client_properties(cluster.client_properties)
        lines.update({f"{alias}.{k}": v for k, v in java.items()})
    return format_properties(lines, "your MirrorMaker 2")


def _km_topics(cluster: Cluster) -> list[str]:
    names = cluster.admin().list_topics(timeout=10).topics  # type: ignore[attr-defined]
    return sorted(t for t in names if re.match(r"(primary\.)?km-", t))


@pytest.fixture(scope="module")
def yours(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[list[str], YourReplicator, Cluster, Cluster]]:
    release = release_or_skip(KAFKA_VERSION, need="mm2")
    work = tmp_path_factory.mktemp("yours")
    primary, backup = (make_cluster(name, SECURED, work / name) for name in ("primary", "backup"))
    state = work / "mm2"
    state.mkdir()
    mm2 = None
    try:
        primary.start()
        backup.start()
        (state / "mm2.properties").write_text(_mm2_properties(primary, backup))
        argv = release.java_argv("org.apache.kafka.connect.mirror.MirrorMaker", [str(state / "mm2.properties")],
                                 heap="-Xms64m -Xmx512m", log_config=release.write_log_config(state))
        mm2 = YourReplicator(state, argv)
        mm2.start()
        configs = []
        for role, cluster in (("source", primary), ("target", backup)):
            path = work / f"{role}-client.properties"
            path.write_text(format_properties(dict(cluster.client_properties), f"the {role}'s clients"))
            configs.append(f"--kafka-mirror-{role}-config={path}")
        options = [f"--kafka-mirror-source=bootstrap:{primary.bootstrap_servers}",
                   f"--kafka-mirror-target=bootstrap:{backup.bootstrap_servers}", *configs,
                   "--kafka-mirror-replicator=external:prefix:primary.",
                   "--kafka-mirror-replicator-status=mm2-status.primary.internal", *mm2.options()]
        yield options, mm2, primary, backup
    finally:
        if mm2 is not None:
            mm2.discard()
        for cluster in (backup, primary):
            cluster.stop()


def test_the_scenario_library_runs_or_skips_saying_why_and_leaves_no_topic(
        yours: tuple[list[str], YourReplicator, Cluster, Cluster], tmp_path: Path) -> None:
    options, mm2, primary, backup = yours
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    t0 = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "scenarios", "-n", "2", "-p", "no:cacheprovider", "-m", "not nightly", "-rfEs",
         "--kafka-mirror-report-dir", str(tmp_path / "reports"), *options],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=3600, check=False)
    took = time.monotonic() - t0
    out = done.stdout
    (tmp_path / "session.out").write_text(out + "\n" + done.stderr)
    failures = "\n".join(line for line in out.splitlines() if line.startswith(("FAILED", "ERROR")))
    summary = out.strip().splitlines()[-1]
    assert done.returncode == 0, f"{summary} after {took:.0f} s\n{failures}\n{out[-12000:]}\n{done.stderr[-3000:]}"
    assert " error" not in summary and "passed" in summary, summary
    skips = [line for line in out.splitlines() if line.startswith("SKIPPED")]
    assert all(re.search(r": \S.{20,}", line) for line in skips), "a skip without a reason:\n" + "\n".join(skips)
    print(f"{summary} in {took:.0f} s; skips:\n" + "\n".join(skips))
    # what the session deleted stays deleted: nothing recreated by MM2's consumer (auto-create is on); an
    # absence has no event to wait for, so it is watched over two of MM2's topic refreshes
    time.sleep(2 * REFRESH_S)
    assert _km_topics(primary) == [] and _km_topics(backup) == [], (_km_topics(primary), _km_topics(backup))
    assert mm2.pid_file.exists()
