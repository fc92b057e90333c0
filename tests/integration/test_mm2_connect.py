"""``mm2-connect:``: MirrorMaker 2's connectors on a Kafka Connect cluster of three distributed
workers of the real release, between two real Apache Kafka clusters: the steady state, a
task a test breaks (a record too large for the workers' producer) quoted from the REST API
and restarted through it (KIP-745) before the next test, the workers still the same."""

from __future__ import annotations

import pytest

from tests.kafka import KAFKA_VERSION

pytestmark = pytest.mark.integration

SCENARIOS = """
import pytest

BIG = 300_000  # over the max.request.size this session gives the workers' producer


@pytest.mark.kafka_mirror_topics(1, partitions=2)
def test_steady(mirror_topics, mirror_producer, mirror_verifier):
    topics = mirror_topics(1, partitions=4)
    mirror_verifier(mirror_producer(topics, rate=500, duration=4)).assert_ok()


@pytest.mark.kafka_mirror_topics(1, partitions=2)
def test_a_record_connect_cannot_carry(mirror_topics, mirror_producer, mirror_verifier):
    topics = mirror_topics(1, partitions=2)
    report = mirror_verifier(mirror_producer(topics, rate=None, count=10, message_size=BIG))
    assert report.lost + report.unseen == 10
    said = report.replicator["health"]
    assert "FAILED" in said and "RecordTooLargeException" in said, report.replicator


@pytest.mark.kafka_mirror_topics(1, partitions=2)
def test_the_next_test(mirror_topics, mirror_producer, mirror_verifier):
    topics = mirror_topics(1, partitions=2)
    mirror_verifier(mirror_producer(topics, rate=None, count=200)).assert_ok()
"""


def test_three_workers_copy_and_a_failed_task_is_restarted_through_rest(pytester: pytest.Pytester, tagged_env: str,
                                                                       kafka_release: object) -> None:
    from tests.conftest import processes_tagged

    pytester.makepyfile(SCENARIOS)
    spec = f"mm2-connect:{KAFKA_VERSION},workers=3"
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-p", "no:randomly", f"--kafka-mirror-replicator={spec}",
        f"--kafka-mirror-source=kafka:{KAFKA_VERSION}", f"--kafka-mirror-target=kafka:{KAFKA_VERSION}",
        "--kafka-mirror-replicator-properties=target.producer.max.request.size=100000",
        "--kafka-mirror-drain-timeout=10", "--kafka-mirror-progress=off")
    out = result.stdout.str()
    result.assert_outcomes(passed=3, errors=1)
    result.stdout.fnmatch_lines([
        "*ERROR at teardown of test_a_record_connect_cannot_carry*",
        f"*kafka-mirror: this test left the shared replicator ({spec}) broken: MirrorMaker 2's connectors "
        "(http://127.0.0.1:*): *FAILED*RecordTooLargeException*restarted before the next test*",
    ])
    assert "was brought back: the failed tasks of MirrorSourceConnector restarted through the REST API" in out, \
        out[-4000:]
    assert "worker 0 started again" not in out  # the workers kept running: only the task was restarted
    assert processes_tagged(tagged_env) == []
