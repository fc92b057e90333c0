"""Apache Kafka releases from Maven Central (``kafka-mirror kafka install``), and a real
MirrorMaker 2 left broken by one test that must not fail the next one."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.kafka import KAFKA_VERSION, release_or_skip

pytestmark = pytest.mark.integration


def _kafka_mirror(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "pytest_kafka_mirror.cli", "kafka", *args], text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)


def _maven_or_skip() -> None:
    if shutil.which("mvn") is None:
        if os.environ.get("KAFKA_MIRROR_REQUIRE_KAFKA") == "1":
            pytest.fail("KAFKA_MIRROR_REQUIRE_KAFKA=1 but mvn is not installed", pytrace=False)
        pytest.skip("mvn is not installed")


def test_two_installs_at_once_install_once_and_the_cache_works_offline(tmp_path: Path) -> None:
    _maven_or_skip()
    release_or_skip()  # the jars are in ~/.m2 already: this measures the cache, not the network
    cache = tmp_path / "cache"
    procs = [_kafka_mirror("install", KAFKA_VERSION, "--cache", str(cache)) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    resolved = [err for _, err in outs if "resolving Apache Kafka" in err]
    assert len(resolved) == 1, outs  # the second waited on the lock and found it installed
    assert all(f"Apache Kafka {KAFKA_VERSION} in {cache / KAFKA_VERSION} (broker, MirrorMaker 2)" in out for out, _ in outs)
    manifest = json.loads((cache / KAFKA_VERSION / "kafka-mirror.json").read_text())
    assert manifest["components"] == {"broker": True, "mm2": True, "mm1": manifest["components"]["mm1"]}
    assert not [p for p in cache.iterdir() if ".partial-" in p.name]  # nothing half-done left
    listing = _kafka_mirror("list", "--cache", str(cache)).communicate(timeout=60)[0]
    assert f"  {KAFKA_VERSION} " in listing and "broker, mm2" in listing
    # offline: no mvn on PATH, the cache is enough
    env = {**os.environ, "PATH": str(Path(sys.executable).parent)}
    again = _kafka_mirror("install", KAFKA_VERSION, "--cache", str(cache), env=env)
    out, err = again.communicate(timeout=60)
    assert again.returncode == 0 and "resolving" not in err, (out, err)


def _unreachable_maven_central(tmp_path: Path) -> str:
    """MAVEN_OPTS for a Maven whose only repository is a closed loopback port (and an empty
    local repository): what a machine without the registry sees."""
    home = tmp_path / "home"
    (home / ".m2").mkdir(parents=True)
    (home / ".m2" / "settings.xml").write_text(
        "<settings><localRepository>" + str(home / "repository") + "</localRepository><mirrors><mirror><id>dead</id>"
        "<mirrorOf>*</mirrorOf><url>http://127.0.0.1:9/</url></mirror></mirrors></settings>")
    return f"-Duser.home={home}"


def test_an_unreachable_maven_central_is_one_line_naming_the_alternative(tmp_path: Path) -> None:
    _maven_or_skip()
    env = {**os.environ, "MAVEN_OPTS": _unreachable_maven_central(tmp_path)}
    p = _kafka_mirror("install", "4.2.0", "--cache", str(tmp_path / "cache"), env=env)
    out, err = p.communicate(timeout=300)
    assert p.returncode == 2, (out, err)
    errors = [line for line in err.splitlines() if not line.startswith("kafka-mirror: resolving")]
    assert len(errors) == 1, err
    assert errors[0].startswith("kafka-mirror kafka install: Maven Central is unreachable from here, so Apache Kafka "
                                "4.2.0 cannot be installed (")
    assert "give an unpacked Apache Kafka distribution instead: kafka-home:PATH (and mm2:PATH)" in errors[0]
    assert not (tmp_path / "cache" / "4.2.0").exists()


def test_pytest_installs_before_anything_starts_and_says_so_in_one_line(pytester: pytest.Pytester,
                                                                         tmp_path: Path) -> None:
    _maven_or_skip()
    pytester.makepyfile("def test_x(mirror_topics):\n    pass\n")
    pytester._monkeypatch.setenv("MAVEN_OPTS", _unreachable_maven_central(tmp_path))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--kafka-mirror-source=kafka:4.2.0",
                                           f"--kafka-mirror-kafka-cache={tmp_path / 'cache'}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: pytest-kafka-mirror: --kafka-mirror-source kafka:4.2.0: Maven Central is "
                                 "unreachable from here, so Apache Kafka 4.2.0 cannot be installed (*"])
    assert "Traceback" not in result.stderr.str() and "test_x" not in result.stdout.str()


SCENARIOS = """
import pytest

BIG = 300_000  # over the max.request.size this session gives MirrorMaker 2's producer


@pytest.mark.kafka_mirror_topics(1, partitions=2)
def test_a_record_mm2_cannot_carry(mirror_topics, mirror_producer, mirror_verifier):
    topics = mirror_topics(1, partitions=2)
    report = mirror_verifier(mirror_producer(topics, rate=None, count=10, message_size=BIG))
    assert report.lost + report.unseen == 10
    said = report.replicator["health"]
    assert "FAILED" in said and "RecordTooLargeException" in said, report.replicator
    with pytest.raises(AssertionError, match="the replicator .mm2:{version}. says: MirrorMaker 2's Connect status"):
        report.assert_no_loss()


@pytest.mark.kafka_mirror_topics(1, partitions=2)
def test_the_next_test(mirror_topics, mirror_producer, mirror_verifier):
    topics = mirror_topics(1, partitions=2)
    mirror_verifier(mirror_producer(topics, rate=None, count=200)).assert_ok()
"""


def test_a_broken_replicator_is_blamed_on_its_test_and_restarted(pytester: pytest.Pytester, tagged_env: str,
                                                                  kafka_release: object) -> None:
    """A real MirrorMaker 2 whose producer cannot carry a test's records: Connect fails the
    task for good.  The verification quotes the FAILED task, the test's teardown errors
    naming it, and the next test passes on the restarted replicator."""
    from tests.conftest import processes_tagged

    pytester.makepyfile(SCENARIOS.replace("{version}", KAFKA_VERSION))
    # on Apache Kafka clusters: the restart rejoins MM2's Connect group, which a Tansu
    # coordinator can keep rebalancing for minutes under load (tests/integration/conftest.py)
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", f"--kafka-mirror-replicator=mm2:{KAFKA_VERSION}",
        f"--kafka-mirror-source=kafka:{KAFKA_VERSION}", f"--kafka-mirror-target=kafka:{KAFKA_VERSION}",
        "--kafka-mirror-replicator-properties=target.producer.max.request.size=100000",
        "--kafka-mirror-drain-timeout=10")
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines([
        "*ERROR at teardown of test_a_record_mm2_cannot_carry*",
        f"*kafka-mirror: this test left the shared replicator (mm2:{KAFKA_VERSION}) broken: MirrorMaker 2's Connect "
        "status*FAILED*RecordTooLargeException*its topics are deleted from the source*restarted before the next test*",
    ])
    assert processes_tagged(tagged_env) == []
