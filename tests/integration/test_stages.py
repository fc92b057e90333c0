"""The pipeline's stages as separate commands (``kafka-mirror produce`` / ``capture`` /
``verify``, as separate producer and consumer hosts run them), against Tansu and the
reference mirror; the verification runs on a real Spark standalone cluster (master and
worker from pyspark's ``spark-class``) and must give the local-mode report exactly."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_kafka_mirror.clusters.base import Cluster
from pytest_kafka_mirror.replicators import Knobs
from pytest_kafka_mirror.replicators.reference import ReferenceReplicator
from pytest_kafka_mirror.verify import MirrorReport, verify_run
from tests.conftest import processes_tagged
from tests.mirrored import mirrored_clusters
from tests.spark_cluster import StandaloneSpark, spark_env

pytestmark = pytest.mark.integration

CLI = [sys.executable, "-m", "pytest_kafka_mirror.cli"]


@pytest.fixture(scope="module")
def mirrored(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, Cluster, ReferenceReplicator]]:
    with mirrored_clusters(tmp_path_factory.mktemp("stages"), r"^st-") as env:
        yield env


def test_produce_capture_verify_as_separate_commands_on_a_spark_cluster(tmp_path, mirrored, tagged_env, spark):
    src, dst, rep = mirrored
    run_dir = tmp_path / "run"
    # duplicates and reordering: every record arrives, so the capture ends on its own
    # (satisfied), whatever the machine's load
    rep.set_faults("st-a", Knobs(duplicate=0.02, seed=11))
    rep.set_faults("st-b", Knobs(reorder=8, reorder_flush_ms=50, seed=11))
    # the capture host starts first and waits for the producer host's manifests
    capture = subprocess.Popen(
        [*CLI, "capture", "--bootstrap", dst.bootstrap_servers, "--run-dir", str(run_dir), "--topics", "st-a,st-b",
         "--naming", "prefix:source.", "--processes", "2", "--drain-timeout", "2", "--timeout", "120"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        produce = subprocess.run(
            [*CLI, "produce", "--bootstrap", src.bootstrap_servers, "--run-dir", str(run_dir), "--topics", "st-a,st-b",
             "--partitions", "3", "--rate", "800", "--duration", "2", "--processes", "2", "--format", "body",
             "--message-size", "150", "--naming", "prefix:source.", "--producer-id", "host1"],
            capture_output=True, text=True, check=False, timeout=120,
        )
        assert produce.returncode == 0, produce.stdout + produce.stderr
        assert "producer host1-0: sent 1600, acked 1600" in produce.stdout
        out, _ = capture.communicate(timeout=120)
    finally:
        if capture.poll() is None:
            capture.kill()
            capture.wait()
    assert capture.returncode == 0, out
    assert "capture ended (satisfied)" in out, out
    status = json.loads((run_dir / "capture-status.json").read_text())
    assert [json.loads(p.read_text())["producers"] for p in run_dir.glob("produced-*.json")] == [["host1-0", "host1-1"]]
    duplicated = rep.ledger().count("st-a", "duplicate")
    assert duplicated and status["ours"] == 3200 + duplicated

    with StandaloneSpark(tmp_path / "spark") as cluster:
        env = {**spark_env(), "SPARK_CONF_DIR": str(_spark_conf(tmp_path))}
        verify = subprocess.run([*CLI, "verify", str(run_dir), "--spark-master", cluster.master_url,
                                 "--json", str(tmp_path / "cluster-report.json")],
                                capture_output=True, text=True, check=False, timeout=400, env=env)
    assert verify.returncode == 1, verify.stdout + verify.stderr[-3000:]  # duplicates and disorder fail it
    assert "duplicates:" in verify.stderr and "out of order:" in verify.stderr
    on_cluster = MirrorReport.load(tmp_path / "cluster-report.json")
    local = verify_run(run_dir, spark=spark, write_report=False)
    assert on_cluster.to_dict() == local.to_dict()
    assert (local.expected, local.lost + local.unseen, local.duplicated) == (3200, 0, duplicated)
    assert local.reordered > 0
    assert [p["producer_id"] for p in local.producers] == ["host1-0", "host1-1"]
    assert processes_tagged(tagged_env) == []  # capture, producer and Spark processes all gone


def _spark_conf(tmp_path: Path) -> Path:
    """A few shuffle partitions: Spark's default 200 makes a small job on a cluster slow."""
    conf = tmp_path / "spark-conf"
    conf.mkdir()
    (conf / "spark-defaults.conf").write_text("spark.sql.shuffle.partitions 4\nspark.default.parallelism 4\n")
    return conf
