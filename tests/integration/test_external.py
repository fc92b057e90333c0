"""A replicator you run, controlled through your commands: two embedded brokers and a
reference mirror that the test starts outside the plugin, as your platform would, with a
control script (``ctl.py start|stop|kill|pause|resume``) standing in for ``systemctl``;
the session gets ``bootstrap:`` clusters, ``external:`` and ``--kafka-mirror-replicator-command``.

A restart and a pause scenario run against it, a pause that outlasts its run is named as a
stall, and the scenarios it cannot give skip saying why: a link in front of it, a
replicator of its own with other settings."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_kafka_mirror.clusters.tansu import TansuCluster
from tests.conftest import TAG_ENV, processes_tagged
from tests.yours import YourReplicator

pytestmark = pytest.mark.integration

SCENARIOS = '''
import pytest
from pytest_kafka_mirror.faults import at, pause, resume, start, terminate


@pytest.mark.kafka_mirror_topics(1, partitions=2)
def test_steady(mirror_topics, mirror_producer, mirror_verifier):
    mirror_verifier(mirror_producer(mirror_topics(1, partitions=2), rate=200, duration=2)).assert_ok()


def test_restart(mirror_topics, mirror_producer, mirror_verifier, mirror_faults):
    rep = mirror_faults.replicator
    run = mirror_producer(mirror_topics(1, partitions=2), rate=200, duration=4,
                          faults=[at(1, terminate(rep)), at(2, start(rep))])
    mirror_verifier(run).assert_ok()  # a graceful stop: nothing lost, nothing copied twice


def test_pause(mirror_topics, mirror_producer, mirror_verifier, mirror_faults):
    rep = mirror_faults.replicator
    run = mirror_producer(mirror_topics(1, partitions=2), rate=200, duration=3,
                          faults=[at(1, pause(rep)), at(2, resume(rep))])
    mirror_verifier(run).assert_ok()


def test_stalled(mirror_topics, mirror_producer, mirror_verifier, mirror_faults):
    """Paused 1 s into a 4 s run and not resumed before its end: the report names the stall."""
    rep = mirror_faults.replicator
    run = mirror_producer(mirror_topics(1, partitions=2), rate=200, duration=4, faults=[at(1, pause(rep))])
    mirror_verifier(run).assert_ok()


def test_link(mirror_topics, mirror_faults):
    mirror_faults.source_link


@pytest.mark.kafka_mirror(replicator_properties={"tasks.max": "4"})
def test_own_settings(mirror_topics):
    pass
'''


@pytest.fixture
def yours(tmp_path: Path) -> Iterator[tuple[list[str], YourReplicator]]:
    """Two brokers and the control script of a mirror that is not the plugin's (started
    here, stopped at the end, kept out of the test tag's leftover check: it is yours)."""
    tag = os.environ.pop(TAG_ENV, None)
    src, dst = TansuCluster("ext-source", tmp_path), TansuCluster("ext-target", tmp_path)
    state = tmp_path / "mirror"
    mirror = None
    try:
        src.start()
        dst.start()
        mirror = YourReplicator(state, [
            sys.executable, "-m", "pytest_kafka_mirror.replicators.reference", "--source", src.bootstrap_servers,
            "--target", dst.bootstrap_servers, "--topics", "^km-.*", "--prefix", "dc1.",
            "--ready-file", str(YourReplicator.ready_file(state)), "--offsets", str(state / "offsets.json")])
        mirror.start()
        yield [f"--kafka-mirror-source=bootstrap:{src.bootstrap_servers}",
               f"--kafka-mirror-target=bootstrap:{dst.bootstrap_servers}", "--kafka-mirror-replicator=external:prefix:dc1.",
               *mirror.options()], mirror
    finally:
        if mirror is not None:
            mirror.discard()
        dst.stop()
        src.stop()
        if tag is not None:
            os.environ[TAG_ENV] = tag


def test_your_replicator_is_restarted_and_paused_through_your_commands(pytester: pytest.Pytester, tagged_env: str,
                                                                      yours: tuple[list[str], YourReplicator]) -> None:
    options, mirror = yours
    pytester.makepyfile(test_yours=SCENARIOS)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rs", "--kafka-mirror-drain-timeout=10", *options)
    out = result.stdout.str()
    result.assert_outcomes(passed=3, skipped=2, failed=1)
    (stalled,) = [line for line in out.splitlines() if "arrivals stopped" in line]
    assert re.search(r"arrivals stopped \d+\.\d s into the run .*the source acknowledged [\d,]+ more records", stalled), \
        out[-5000:]
    result.stdout.fnmatch_lines([
        "SKIPPED * this scenario puts a faultable link (a proxy) between the replicator and a cluster, and "
        "external:prefix:dc1. is yours*",
        "SKIPPED *test_yours.py:*: this scenario needs a replicator of its own with tasks.max=4: external:prefix:dc1. is "
        "yours*",
    ])
    log = mirror.log.read_text()
    assert log.count("ready:") >= 2, log[-2000:]  # started by the test, then again by the start command
    assert processes_tagged(tagged_env) == []
