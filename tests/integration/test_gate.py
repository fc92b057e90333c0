"""``kafka-mirror gate OLD NEW``: the baseline session stored, the candidate compared with
it and gated, on the embedded brokers with the reference mirror (its fault knobs stand in
for a release that loses records); nightly, two unpacked MirrorMaker 2 releases with a
user's own mm2.properties on Apache Kafka."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_kafka_mirror.clusters.kafka_dist import cache_dir
from tests.conftest import processes_tagged

pytestmark = pytest.mark.integration

SCENARIO = """
def test_steady(mirror_topics, mirror_producer, mirror_verifier):
    run = mirror_producer(mirror_topics(1, partitions=2), rate=None, count=400)
    mirror_verifier(run)  # figures only: the gate judges them
"""


def test_the_gate_stores_the_baseline_and_fails_a_candidate_that_loses_records(pytester: pytest.Pytester,
                                                                                tagged_env: str) -> None:
    pytester.makepyfile(test_x=SCENARIO)
    storage = pytester.path / "gate"
    out = subprocess.run(
        [sys.executable, "-m", "pytest_kafka_mirror.cli", "gate", "reference", "reference:drop=0.1,seed=3",
         "--storage", str(storage), "--", "test_x.py", "-p", "no:cacheprovider", "--kafka-mirror-drain-timeout=5"],
        cwd=pytester.path, capture_output=True, text=True, timeout=600, check=False)
    assert out.returncode == 1, out.stdout[-3000:] + out.stderr[-3000:]
    assert "kafka-mirror gate: 1/2: the baseline, reference:" in out.stderr
    assert "kafka-mirror gate: baseline stored: " in out.stderr and "(every test passed" in out.stderr
    assert ("gated by missing:0 failover_skipped:0 failover_beyond_end_max:0 failover_rewinds:0 copy_rate:20% "
            "max_sustainable_rate:20%") in out.stderr
    assert "test_x.py::test_steady: missing " in out.stdout and "more than missing:0 allows" in out.stdout
    assert "reference -> reference:drop=0.1,seed=3: FAILED: a test failed or a figure regressed" in out.stderr
    stored = sorted(p.name for p in storage.glob("*/*.json"))
    assert [name.split("_", 1)[1].rsplit("-", 1)[0] for name in stored] == ["gate-reference",
                                                                          "gate-reference-drop-0.1-seed-3"]
    assert processes_tagged(tagged_env) == []


#: a drain of 15,000 records: the producer writes them faster than either throttle lets the
#: mirror copy, and the slower copy lasts 6-10 s (the copy rate needs three seconds of backlog)
DRAIN = """
def test_drain(mirror_topics, mirror_producer, mirror_verifier):
    run = mirror_producer(mirror_topics(1, partitions=2), rate=None, count=15000)
    mirror_verifier(run).assert_ok()  # nothing lost, in order: only its capacity may differ
"""
#: the reference mirror's throttle (records/s across its topics): OLD, and NEW 40 % lower
OLD_RATE, NEW_RATE = 2500, 1500


def test_the_gate_fails_a_candidate_that_copies_40_percent_slower_on_capacity_alone(pytester: pytest.Pytester,
                                                                                    tagged_env: str) -> None:
    """OLD and NEW differ in ``max_rate`` only: every test passes on both, and the gate fails
    on the copy rate (its default capacity check), on no other figure."""
    pytester.makepyfile(test_x=DRAIN)
    storage = pytester.path / "gate"
    old, new = f"reference:max_rate={OLD_RATE}", f"reference:max_rate={NEW_RATE}"
    out = subprocess.run(
        [sys.executable, "-m", "pytest_kafka_mirror.cli", "gate", old, new,
         "--storage", str(storage), "--", "test_x.py", "-p", "no:cacheprovider", "--kafka-mirror-drain-timeout=10"],
        cwd=pytester.path, capture_output=True, text=True, timeout=600, check=False)
    text = out.stdout[-4000:] + out.stderr[-4000:]
    assert out.returncode == 1, text
    assert out.stdout.count("1 passed") == 2, f"a test failed on OLD or NEW (only capacity may differ):\n{text}"
    assert "test_x.py::test_drain: copy_rate " in out.stdout and "more than copy_rate:20% allows" in out.stdout, text
    failed = [line for line in out.stdout.splitlines() if "allows" in line and "more than" in line]
    assert len(failed) == 1, f"the gate failed on more than the copy rate: {failed}"
    assert f"reference:max_rate={OLD_RATE} -> reference:max_rate={NEW_RATE}: FAILED" in out.stderr, text
    assert processes_tagged(tagged_env) == []


#: your own MirrorMaker 2's file, as it runs in production: its aliases, its one flow, its
#: tuning, addresses and a replication factor the test clusters do not have
YOUR_MM2 = """\
clusters = primary, backup
primary.bootstrap.servers = kafka-primary-1.example.com:9092
backup.bootstrap.servers = kafka-backup-1.example.com:9092
primary->backup.enabled = true
primary->backup.topics = orders.*
backup->primary.enabled = false
tasks.max = 2
refresh.topics.interval.seconds = 3
backup.offset.flush.interval.ms = 4000
replication.factor = 3
"""
OWN_SCENARIO = """
import pytest


@pytest.mark.kafka_mirror_topics(n=1, partitions=2)
def test_steady(mirror_topics, mirror_producer, mirror_verifier):
    run = mirror_producer(mirror_topics(1, partitions=2), rate=None, count=400)
    mirror_verifier(run).assert_ok()
"""


#: this machine's release cache, read before pytester gives each test a HOME of its own
CACHE = cache_dir()


@pytest.fixture(scope="module")
def own_releases() -> tuple[Path, Path]:
    """Two unpacked MirrorMaker 2 releases, 4.2.0 and 4.3.1 (entries of this machine's cache,
    resolved before a test's pytester changes HOME), and the clusters' broker."""
    from tests.kafka import release_or_skip

    release_or_skip("4.3.1")
    old, new = (release_or_skip(v, need="mm2").home for v in ("4.2.0", "4.3.1"))
    return old, new


@pytest.mark.nightly
def test_the_gate_runs_your_own_releases_with_your_mm2_properties(pytester: pytest.Pytester, tagged_env: str,
                                                                   own_releases: tuple[Path, Path]) -> None:
    """``kafka-mirror gate mm2:HOME_OLD,properties=FILE mm2:HOME_NEW,properties=FILE``: two
    unpacked releases (the plugin's cached 4.2.0 and 4.3.1) with a user's file, on Apache
    Kafka 4.3.1 clusters.  Both sessions run, both are stored under readable names, and the
    user's settings are in effect (its tasks.max in the rendered file, its flush interval
    quoted from it), the plugin's changes named in the header."""
    from pytest_kafka_mirror.replicators.mm2 import parse_properties

    old_home, new_home = own_releases
    pytester.makepyfile(test_x=OWN_SCENARIO)
    (pytester.path / "mm2.properties").write_text(YOUR_MM2)
    storage, basetemp = pytester.path / "gate", pytester.path / "basetemp"
    old, new = f"mm2:{old_home},properties=mm2.properties", f"mm2:{new_home},properties=mm2.properties"
    t0 = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-m", "pytest_kafka_mirror.cli", "gate", old, new, "--compare-fail", "missing:0",
         "--storage", str(storage), "--", "test_x.py", "-p", "no:cacheprovider", f"--basetemp={basetemp}",
         "--kafka-mirror-source", "kafka:4.3.1", "--kafka-mirror-target", "kafka:4.3.1", f"--kafka-mirror-kafka-cache={CACHE}"],
        cwd=pytester.path, capture_output=True, text=True, timeout=900, check=False)
    text = out.stdout[-6000:] + out.stderr[-3000:]
    assert out.returncode == 0, text
    assert f"kafka-mirror gate: 1/2: the baseline, {old}: " in out.stderr, text
    assert f"kafka-mirror gate: {old} -> {new}: passed: no test failed and no figure regressed" in out.stderr, text
    assert out.stdout.count("1 passed") == 2, text
    stored = sorted(p.name.split("_", 1)[1].rsplit("-", 1)[0] for p in storage.glob("*/*.json"))
    assert stored == ["gate-mm2-4.2.0-mm2.properties", "gate-mm2-4.3.1-mm2.properties"], stored
    # the session header of each: the file, and what the plugin had to change in it
    yours = (pytester.path / "mm2.properties").resolve()
    assert out.stdout.count(f"kafka-mirror: replicator your mm2.properties {yours}: 5 of its 10 settings kept") == 2, text
    assert ("kafka-mirror: replicator changed by the plugin: line 10 replication.factor: shadowed by "
            "source->target.replication.factor (a topic on the session's target cluster, with the replication factor "
            "it allows)") in out.stdout, text
    # the candidate's MM2 ran the user's settings (its session's basetemp is the one left)
    (rendered,) = basetemp.rglob("mm2-config/mm2.properties")
    props = parse_properties(rendered.read_text())
    assert (props["tasks.max"], props["refresh.topics.interval.seconds"]) == ("2", "3")
    assert props["source.bootstrap.servers"] != "kafka-primary-1.example.com:9092"
    assert rendered.read_text().startswith(f"# MirrorMaker 2: your {yours}, changed by pytest-kafka-mirror where it must:")
    (report,) = [p for p in (pytester.path / ".kafka-mirror" / "reports").glob("*.json") if p.name != "session.json"]
    quoted = json.loads(report.read_text())["replicator"]
    assert quoted["spec"] == f"mm2:4.3.1,properties={yours}"  # a home of the plugin's cache is named by its version
    assert f"target.offset.flush.interval.ms=4000 (your mm2.properties ({yours}))" in quoted["settings"]["duplicates"]
    assert processes_tagged(tagged_env) == []
    print(f"the gate between two own releases: {time.monotonic() - t0:.0f} s")
