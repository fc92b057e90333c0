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


def test_the_gate_switches_from_your_old_replicator_to_your_new_one_through_your_commands(
        pytester: pytest.Pytester, tagged_env: str, yours: tuple[list[str], YourReplicator]) -> None:
    """``kafka-mirror gate external:... external:... --old-command ... --new-command ...``: the
    baseline session runs against OLD (running when the gate starts), the gate stops OLD
    with its stop command and starts NEW with its start command (the upgrade), and the
    candidate session runs against NEW, each session with its own side's commands."""
    import subprocess

    options, old = yours
    source, target = options[0], options[1]
    new_state = pytester.path / "new-mirror"
    argv = (old.state / "argv").read_text().split("\n")
    argv[argv.index("--ready-file") + 1] = str(YourReplicator.ready_file(new_state))
    argv[argv.index("--offsets") + 1] = str(new_state / "offsets.json")
    new = YourReplicator(new_state, argv)
    try:
        pytester.makepyfile(test_yours=SCENARIOS)
        spec = "external:prefix:dc1."
        out = subprocess.run(
            [sys.executable, "-m", "pytest_kafka_mirror.cli", "gate", spec, spec, "--compare-fail", "missing:0",
             "--storage", str(pytester.path / "gate"),
             *(f"--old-command={v}={old.command(v)}" for v in ("stop", "start", "kill")),
             *(f"--new-command={v}={new.command(v)}" for v in ("stop", "start")),
             # topics kept: the reference mirror standing in for yours dies (SIGSEGV in librdkafka
             # 2.16.0's metadata cache, rd_kafka_metadata_cache_find) when Tansu deletes the topics
             # it has assigned, which the baseline's end would do under OLD
             "--", "test_yours.py::test_steady", "test_yours.py::test_restart", "-p", "no:cacheprovider",
             "--kafka-mirror-progress=off", "--kafka-mirror-keep-topics", source, target],
            cwd=pytester.path, capture_output=True, text=True, timeout=600, check=False)
        text = out.stdout[-5000:] + out.stderr[-3000:]
        assert out.returncode == 0, text
        assert out.stdout.count("2 passed") == 2, text  # test_restart used each side's own stop and start
        assert f"switching: OLD's stop command: {old.command('stop')}" in out.stderr, text
        assert f"switching: NEW's start command: {new.command('start')}" in out.stderr, text
        assert f"{spec} -> {spec}: passed" in out.stderr, text
        assert old.log.read_text().count("ready:") == 2  # the fixture's start, the baseline's test_restart
        assert new.log.read_text().count("ready:") == 2  # the gate's switch, the candidate's test_restart
        assert not _alive(old.pid_file), "OLD still runs after the gate stopped it"
        assert _alive(new.pid_file), "NEW is not left running"
    finally:
        new.discard()
    assert processes_tagged(tagged_env) == []


def _alive(pid_file: Path) -> bool:
    try:
        pid = int(pid_file.read_text())
        os.kill(pid, 0)
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except (ProcessLookupError, FileNotFoundError):
        return False
