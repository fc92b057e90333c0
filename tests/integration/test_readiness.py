"""Readiness through a replicator that behaves like MirrorMaker 2 (the reference mirror's
behaviour knobs): latency measures replication, ``discovery_s`` measures the discovery,
and a topic that never crosses over is one clear error naming its partitions."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_kafka_mirror.clusters.tansu import TansuCluster
from pytest_kafka_mirror.replicators import Behaviour
from pytest_kafka_mirror.replicators._probe import warm_up
from pytest_kafka_mirror.replicators._readiness import ReadinessError, await_ready
from pytest_kafka_mirror.replicators.reference import ReferenceReplicator
from pytest_kafka_mirror.run import MirrorRun
from pytest_kafka_mirror.verify.oracle import oracle_report

pytestmark = pytest.mark.integration

DELAY = 3.0
PAUSE = 2.0
RESTART = 2.0


@pytest.fixture(scope="module")
def slow_mirror(tansu_pair: tuple[TansuCluster, TansuCluster],
                tmp_path_factory: pytest.TempPathFactory) -> Iterator[ReferenceReplicator]:
    src, dst = tansu_pair
    rep = ReferenceReplicator(
        src.bootstrap_servers, dst.bootstrap_servers, tmp_path_factory.mktemp("slow-mirror"), topics=r"^rd-",
        behaviour=Behaviour(discovery_interval=0.5, discovery_delay=DELAY, rebalance_pause=PAUSE,
                            restart_delay=RESTART),
    )
    with rep:
        yield rep


def _run(tmp_path: Path, pair: tuple[TansuCluster, TansuCluster], rep: ReferenceReplicator,
         topics: dict[str, int]) -> MirrorRun:
    src, dst = pair
    for t, n in topics.items():
        src.create_topic(t, n)
    return MirrorRun(tmp_path / "run", src.bootstrap_servers, dst.bootstrap_servers,
                     {t: rep.target_topic(t) for t in topics}, partitions=topics, drain_timeout=10,
                     topic_timeout=60, replicator=rep)


def test_latency_is_replication_and_discovery_is_its_own_figure(tmp_path, tansu_pair, slow_mirror):
    run = _run(tmp_path, tansu_pair, slow_mirror, {"rd-steady": 3})
    run.produce(rate=300, duration=2, format="headers", message_size=120)
    run.finish(timeout=60)
    report = oracle_report(tmp_path / "run")
    assert (report.expected, report.received, report.lost, report.phantom, report.foreign) == (600, 600, 0, 0, 0)
    # every partition's warm-up crossed a discovery delay; none of it is record latency
    assert report.discovery_s is not None and report.discovery_s >= DELAY, report.discovery
    assert report.latency.max_ms is not None and report.latency.max_ms < DELAY * 1000 / 2, report.latency
    d = report.discovery["rd-steady"]
    assert d["partitions"] == 3 and d["rounds"] == 1 and d["sent"] >= 3 and d["provisioned"] == "test"


def test_a_new_topic_pauses_every_topic_and_the_report_shows_it(tmp_path, tansu_pair, slow_mirror):
    """The rebalance knob: another topic's discovery stops this topic's copy for PAUSE s."""
    src = tansu_pair[0]
    run = _run(tmp_path, tansu_pair, slow_mirror, {"rd-busy": 2})
    created = []

    def new_topic() -> None:
        src.create_topic("rd-newcomer", 1)
        created.append(time.monotonic())

    from pytest_kafka_mirror.faults import action, at

    run.produce(rate=200, duration=5, format="headers", message_size=120,
                faults=[at(1, action("create rd-newcomer", new_topic, kind="topology"))])
    run.finish(timeout=60)
    report = oracle_report(tmp_path / "run")
    assert (report.expected, report.received, report.lost) == (1000, 1000, 0)
    assert created, "the topic was never created"
    # records produced during the pause waited for its end: the pause, not the discovery delay
    assert PAUSE * 1000 * 0.7 <= report.latency.max_ms < (PAUSE + DELAY) * 1000, report.latency


def test_a_restart_takes_its_delay_then_copies(tansu_pair, slow_mirror):
    slow_mirror.stop()
    t0 = time.monotonic()
    slow_mirror.start()
    assert time.monotonic() - t0 >= RESTART
    assert "ready:" in slow_mirror.status() or "read " in slow_mirror.status()


def test_the_warm_up_burst_crosses_over_and_a_topic_no_one_copies_is_only_less_warm(tansu_pair, slow_mirror):
    """``_probe.warm_up`` (a process replicator's first start): every record of the burst
    counted on the target; through no replicator at all it returns what arrived (0) at its
    limit instead of failing."""
    src, dst = tansu_pair
    src.create_topic("rd-warm-up", 1)
    await_ready(src.bootstrap_servers, dst.bootstrap_servers, {"rd-warm-up": ("rd-warm-up", 1)}, timeout=30)
    assert warm_up(src.bootstrap_servers, dst.bootstrap_servers, "rd-warm-up", "rd-warm-up", count=3000,
                   timeout=30)[0] == 3000
    src.create_topic("nobody-copies-it", 1)
    arrived, took = warm_up(src.bootstrap_servers, dst.bootstrap_servers, "nobody-copies-it", "nobody-copies-it",
                            count=50, timeout=2)
    assert arrived == 0 and 2 <= took < 10


def test_a_topic_the_replicator_ignores_is_named_with_its_partitions(tansu_pair, slow_mirror):
    src, dst = tansu_pair
    src.create_topic("ignored-by-the-filter", 2)
    with pytest.raises(ReadinessError) as info:
        await_ready(src.bootstrap_servers, dst.bootstrap_servers, {"ignored-by-the-filter": ("ignored-by-the-filter", 2)},
                    timeout=2.5, what="the slow mirror", logs=lambda: "LOG LINE", status=lambda: "STATUS LINE")
    text = str(info.value)
    assert "timed out after 2.5 s waiting for the slow mirror" in text
    assert "ignored-by-the-filter" in text and "was never created" in text
    assert "STATUS LINE" in text and "LOG LINE" in text


POOLED = '''
import contextlib, json, os, time
from pathlib import Path

import pytest
from pytest_kafka_mirror.faults import action, at
from pytest_kafka_mirror.processes.managed import wait_until

FLAG = Path(os.environ["RD_DIR"]) / "a-producing"


def log(**row):
    row["worker"] = os.environ["PYTEST_XDIST_WORKER"]
    with open(Path(os.environ["RD_DIR"]) / "rows.jsonl", "a") as f:
        f.write(json.dumps(row) + "\\n")


@pytest.mark.kafka_mirror_topics(1, partitions=2)
def test_a_steady(mirror_topics, mirror_producer, mirror_verifier):
    topics = mirror_topics(1, partitions=2)
    window = []
    run = mirror_producer(topics, rate=200, duration=6, faults=[
        at(0, action("flag", lambda: (window.append(time.time()), FLAG.write_text("1")))),
        at(5.9, action("end", lambda: window.append(time.time())))])
    report = mirror_verifier(run)
    report.assert_ok()
    log(test="a", window=window, max_ms=report.latency.max_ms, discovery=report.discovery[topics[0]])


@pytest.mark.kafka_mirror_topics(1, partitions=1)
def test_b_creates_topics_meanwhile(mirror_topics):
    mirror_topics(1, partitions=1)  # declared: from the pool
    with contextlib.suppress(TimeoutError):  # a best effort: the topics below are created either way
        wait_until(FLAG.exists, 30, "test a to produce", interval=0.1)
    created = []
    for _ in range(4):  # undeclared: each one makes this worker's replicator pause every topic
        with pytest.warns(Warning, match="was not declared"):
            mirror_topics(1, partitions=1)
        created.append(time.time())
        time.sleep(1.0)
    log(test="b", created=created)
'''


def test_under_xdist_one_worker_s_new_topics_never_stall_the_other_s(pytester, tagged_env, monkeypatch):
    """Session provisioning, two workers, a replicator that pauses every topic for PAUSE s
    whenever it finds one: worker B creating topics never stalls worker A's records."""
    from tests.conftest import processes_tagged

    monkeypatch.setenv("RD_DIR", str(pytester.path))
    pytester.makepyfile(POOLED)
    result = pytester.runpytest_subprocess(
        "-n", "2", "-p", "no:cacheprovider", "--kafka-mirror-topic-provisioning", "session",
        f"--kafka-mirror-replicator=reference:discovery_interval=0.5,discovery_delay={DELAY},"
        f"rebalance_pause={PAUSE},restart_delay=0.5", "--junitxml=junit.xml")
    result.assert_outcomes(passed=2)
    rows = {r["test"]: r for r in (__import__("json").loads(x) for x in (pytester.path / "rows.jsonl").read_text().splitlines())}
    a, b = rows["a"], rows["b"]
    assert a["worker"] != b["worker"], rows  # xdist's load scheduling: one item per worker
    start, end = a["window"]
    assert any(start <= t <= end for t in b["created"]), rows  # B created topics while A produced
    assert a["max_ms"] < PAUSE * 1000 / 2, rows  # ... and A never paused
    assert a["discovery"]["provisioned"] == "session" and a["discovery"]["discovery_s"] is not None
    assert processes_tagged(tagged_env) == []
    junit = (pytester.path / "junit.xml").read_text()  # discovery per topic, as a JUnit property
    assert 'name="kafka_mirror.discovery_s.km-' in junit and 'name="kafka_mirror.discovery_s"' in junit, junit
