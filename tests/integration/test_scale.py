"""Scale-out of the load generator and the capture: several producer processes sharing one
schedule, several capture processes sharing the partitions (no Spark: the oracle verifies)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_kafka_mirror.clusters.base import Cluster
from pytest_kafka_mirror.replicators import Knobs
from pytest_kafka_mirror.replicators.reference import ReferenceReplicator
from pytest_kafka_mirror.run import MirrorRun
from pytest_kafka_mirror.rundir import CAPTURE_DIR, load_manifests
from pytest_kafka_mirror.verify.oracle import oracle_report
from tests.mirrored import WARMUP, mirrored_clusters

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def mirrored(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, Cluster, ReferenceReplicator]]:
    with mirrored_clusters(tmp_path_factory.mktemp("scale"), r"^sc-") as env:
        yield env


def _run(path: Path, mirrored: tuple[Cluster, Cluster, ReferenceReplicator], topics: dict[str, int],
         **kw: object) -> MirrorRun:
    src, dst, rep = mirrored
    for t, n in topics.items():
        src.create_topic(t, n)
    return MirrorRun(path, src.bootstrap_servers, dst.bootstrap_servers, {t: rep.target_topic(t) for t in topics},
                     partitions=topics, warmup_topic=WARMUP, **kw)  # type: ignore[arg-type]


# The counts are the point here; a loaded CI machine may let a process fall behind its share.
@pytest.mark.filterwarnings("ignore::pytest_kafka_mirror.PytestKafkaMirrorWarning")
def test_two_producer_processes_and_two_capture_processes_lose_nothing(tmp_path, mirrored):
    run = _run(tmp_path / "run", mirrored, {"sc-a": 3, "sc-b": 2}, capture_processes=2, drain_timeout=15)
    counts: dict[str, dict] = {}
    manifests = run.produce(rate=1500, duration=2, format="body", message_size=120, processes=2,
                            producer_id="pgrp", on_counts=lambda pid, c: counts.__setitem__(pid, c))
    status = run.finish(timeout=60)
    assert isinstance(manifests, list) and [m.producer_id for m in manifests] == ["pgrp-0", "pgrp-1"]
    # the rate is split: 1500 msg/s per topic for 2 s is 3000 records per topic, 1500 from each process
    assert [m.stats["sent"] for m in manifests] == [3000, 3000]
    assert {pid: {t: c["acked"] for t, c in topics.items()} for pid, topics in counts.items()} == {
        "pgrp-0": {"sc-a": 1500, "sc-b": 1500}, "pgrp-1": {"sc-a": 1500, "sc-b": 1500}}
    # one shared schedule: both start at the same instant, records carry due times
    assert manifests[0].started_us == manifests[1].started_us
    assert all(m.stats["timestamps"] == "due" and m.stats["schedule_slip_ms"]["records"] == 3000 for m in manifests)
    assert sorted(m.producer_id for m in load_manifests(tmp_path / "run")) == ["pgrp-0", "pgrp-1"]

    assert (status["reason"], status["ours"]) == ("satisfied", 6000), status
    assert [p["reason"] for p in status["processes"]] == ["satisfied", "satisfied"], status
    segments = sorted(p.name for p in (tmp_path / "run" / CAPTURE_DIR).glob("*.parquet"))
    assert {s.split("-")[1] for s in segments} == {"g0", "g1"}
    report = oracle_report(tmp_path / "run")
    assert (report.expected, report.received, report.lost, report.unseen, report.duplicated, report.reordered,
            report.phantom, report.corrupted) == (6000, 6000, 0, 0, 0, 0, 0, 0)
    # per second, what the processes sent is what arrived (the recovery figures rely on it)
    assert sum(e["sent"] for e in report.timeline) == 6000
    assert all(e["sent"] == e["received"] for e in report.timeline)


def test_records_moved_to_another_group_s_partition_are_still_captured(tmp_path, mirrored):
    # The mirror sends some records to the next partition: those of lane 0 land in a
    # partition of the other capture process.  The lane's own process never sees it whole,
    # so the run ends by the drain timeout, and every record is in the capture.
    rep = mirrored[2]
    run = _run(tmp_path / "run", mirrored, {"sc-split": 2}, capture_processes=2, drain_timeout=1.5)
    rep.set_faults("sc-split", Knobs(split_lanes=((0, 100),)))
    try:
        run.produce(rate=None, count=400, format="headers", message_size=120)
        status = run.finish(timeout=60)
    finally:
        rep.set_faults("sc-split", None)
    assert status["reason"] == "drain-timeout" and status["ours"] == 400
    report = oracle_report(tmp_path / "run")
    assert (report.expected, report.received, report.lost, report.unseen, report.lane_split) == (400, 400, 0, 0, 1)
    progress = json.loads((tmp_path / "run" / "capture-progress-g1.json").read_text())
    assert progress["ours"] == 200 + 100  # its own lane 1, and lane 0 from seq 100 on
