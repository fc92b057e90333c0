"""Every backend's lifecycle, run for real as far as this machine allows.

* Docker: a real engine and the locally built Tansu image (``container:``); skipped
  without an engine, failed instead when ``KAFKA_MIRROR_REQUIRE_DOCKER=1`` (CI).
* ``kafka-home:``, ``kafka:`` (one broker and three) and ``mm2:`` / ``mm1:`` run the real
  Apache Kafka release of tests/kafka.py, resolved from Maven Central into the plugin's
  cache (skipped without Maven, failed instead when ``KAFKA_MIRROR_REQUIRE_KAFKA=1``, CI).
* ``command:`` runs the reference mirror through a command template; ``external:`` is a
  reference mirror the test starts itself.
"""

from __future__ import annotations

import contextlib
import shlex
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_kafka_mirror.clusters import ClusterError, make_cluster
from pytest_kafka_mirror.clusters._probe import probe_capabilities
from pytest_kafka_mirror.clusters.tansu import TANSU_GAPS, TansuCluster
from pytest_kafka_mirror.processes.managed import live_processes, wait_until
from pytest_kafka_mirror.replicators import NamingPolicy, ReplicatorError, ReplicatorOptions, make_replicator
from pytest_kafka_mirror.replicators.mm2 import IDENTITY_POLICY, parse_properties
from pytest_kafka_mirror.replicators.reference import ReferenceReplicator
from tests.conftest import containers_labelled, require_docker
from tests.kafka import KAFKA_VERSION, MM1_VERSION, release_or_skip

pytestmark = pytest.mark.integration

@pytest.fixture
def run_id(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A run id of the test's own; whatever a failed test left under it is removed after it."""
    rid = f"test-{uuid.uuid4().hex[:10]}"
    monkeypatch.setenv("KAFKA_MIRROR_RUN_ID", rid)
    yield rid
    from pytest_kafka_mirror.processes.docker import DockerUnavailable, remove_containers

    try:
        remove_containers(rid)
    except DockerUnavailable:
        pass


def _no_process_left(name_part: str) -> None:
    assert [p for p in live_processes() if name_part in p.name] == []


# ----------------------------------------------------------------------------- Docker
def test_container_cluster_lifecycle(tansu_image: str, tmp_path: Path, run_id: str) -> None:
    c = make_cluster("source", f"container:{tansu_image}", tmp_path)
    try:
        c.start()
        assert containers_labelled(run_id) == [c.container.container_name]  # type: ignore[attr-defined]
        before = c.bootstrap_servers
        c.create_topic("lifecycle", 3)
        assert c.partitions("lifecycle") == 3
        c.pause()  # type: ignore[attr-defined]
        with pytest.raises(ClusterError, match="no answer from bootstrap servers"):
            c.ping(timeout=1.0)  # type: ignore[attr-defined]
        c.resume()  # type: ignore[attr-defined]
        assert c.ping(timeout=10) == 1  # type: ignore[attr-defined]
        c.restart()  # type: ignore[attr-defined]
        assert c.bootstrap_servers == before
        assert c.partitions("lifecycle") is None  # Tansu's memory storage: gone, as declared
        caps = c.capabilities()
        assert caps.restart_keeps_data is False and caps.lifecycle is True
        assert caps.add_partitions is False and "CreatePartitions" in caps.reason("add_partitions")
    finally:
        c.stop()
    assert containers_labelled(run_id) == []
    assert "listening on: tcp://" + before in (tmp_path / "source.log").read_text()


def test_orphaned_containers_are_reaped(tansu_image: str, tmp_path: Path, run_id: str) -> None:
    """A process SIGKILLed before its teardown leaves its container; the next start removes it."""
    from pytest_kafka_mirror.processes.docker import reap_orphans

    code = (
        "import sys, time\n"
        "from pytest_kafka_mirror.clusters import make_cluster\n"
        f"c = make_cluster('source', 'container:{tansu_image}', {str(tmp_path)!r}); c.start()\n"
        "print('started', flush=True); time.sleep(120)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "started"
        assert len(containers_labelled(run_id)) == 1
        assert reap_orphans() == []  # its owner is alive: left alone
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    assert len(containers_labelled(run_id)) == 1  # SIGKILL: no teardown ran
    assert len(reap_orphans()) == 1
    assert containers_labelled(run_id) == []


def _fresh_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_interrupted_run_leaves_no_container(
    tansu_image: str, pytester: pytest.Pytester, run_id: str, tagged_env: str, sig: signal.Signals
) -> None:
    """Ctrl-C runs the fixture teardown; SIGTERM (a CI timeout) the last-resort cleanup."""
    from tests.conftest import processes_tagged

    pytester.makepyfile(
        """
        import time

        def test_hangs(source_cluster, target_cluster):
            print("clusters up", flush=True)
            time.sleep(120)
        """
    )
    proc = subprocess.Popen(
        # -X faulthandler: a teardown that hangs is dumped (SIGABRT below) instead of guessed at
        [sys.executable, "-X", "faulthandler", "-m", "pytest", "-p", "no:cacheprovider", "-s",
         f"--kafka-mirror-source=container:{tansu_image}", f"--kafka-mirror-target=container:{tansu_image}"],
        cwd=pytester.path, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        # A pytest started from a terminal, whatever this xdist worker's SIGINT state: in CI the
        # child once ignored the SIGINT (it slept its full 120 s, then tore down), so it had
        # inherited an ignored or blocked SIGINT from the worker.
        preexec_fn=_fresh_sigint,
    )
    try:
        with contextlib.suppress(TimeoutError):
            wait_until(lambda: len(containers_labelled(run_id)) >= 2 or proc.poll() is not None, 120,
                       "the session's two containers", interval=0.2)
        assert len(containers_labelled(run_id)) == 2
        proc.send_signal(sig)
        # Teardown stops two containers (each: SIGTERM, up to 10 s, SIGKILL, log saved, removed)
        # through a Docker engine that a loaded CI machine slows down: once, 60 s was not enough.
        try:
            out, _ = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGABRT)  # every thread's stack, from faulthandler
            out, _ = proc.communicate(timeout=30)
            pytest.fail(f"pytest did not end within 120 s of {sig.name}; its output and stacks:\n{out[-6000:]}")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert containers_labelled(run_id) == [], out[-3000:]
    assert processes_tagged(tagged_env) == []


def test_removing_an_image_tag_keeps_the_other_tags(tansu_image: str) -> None:
    from pytest_kafka_mirror.processes.docker import docker_client, image_present, remove_image

    extra = f"kafka-mirror/tansu:test-{uuid.uuid4().hex[:8]}"
    client = docker_client()
    try:
        assert client.images.get(tansu_image).tag("kafka-mirror/tansu", extra.split(":")[1])
    finally:
        client.close()
    remove_image(extra)
    assert not image_present(extra)
    assert image_present(tansu_image)


def test_image_build_command_tags_the_image(tansu_image: str) -> None:
    from pytest_kafka_mirror.processes.docker import image_present, remove_image

    tag = f"kafka-mirror/tansu:cli-{uuid.uuid4().hex[:8]}"
    out = subprocess.run([sys.executable, "-m", "pytest_kafka_mirror.cli", "image", "build", "--tag", tag],
                         capture_output=True, text=True, timeout=300, check=False)
    try:
        assert out.returncode == 0, out.stderr
        assert f"built {tag}" in out.stdout and f"container:{tag}" in out.stdout
        assert image_present(tag)
    finally:
        remove_image(tag)
    assert image_present(tansu_image)


def test_a_missing_image_is_one_clear_error_without_pulling(tmp_path: Path, run_id: str) -> None:
    require_docker()
    c = make_cluster("target", "container:apache/kafka:0.0.0-kafka-mirror-absent", tmp_path)
    with pytest.raises(ClusterError, match=r"not present on the Docker engine.*KAFKA_MIRROR_DOCKER_PULL=0.*docker pull"):
        c.start()
    assert containers_labelled(run_id) == []


# ----------------------------------------------------------------------------- capability probes
def test_probes_find_exactly_the_measured_tansu_gaps(tansu_pair: tuple[TansuCluster, TansuCluster]) -> None:
    src, _ = tansu_pair
    caps = probe_capabilities(src)  # DeleteRecords is never probed by default (it panics Tansu)
    declared = src.capabilities()
    for name in ("add_partitions", "log_append_time", "transactions", "accurate_watermarks", "topic_config_defaults"):
        assert getattr(caps, name) is False, f"{name}: {caps.reason(name)}"
        assert getattr(declared, name) is False
    assert caps.delete_records is None and "not probed" in caps.reason("delete_records")
    assert "read_committed consumers see aborted records" in caps.reason("transactions")
    assert src.ping() == 1  # the probes left the broker alive
    with pytest.raises(pytest.skip.Exception, match=TANSU_GAPS["add_partitions"]):
        src.require("add_partitions")


# ----------------------------------------------------------------------------- kafka-home / kafka
@pytest.mark.parametrize("version,standalone", [(KAFKA_VERSION, True), ("3.8.1", False)])
def test_kafka_home_lifecycle(tmp_path: Path, version: str, standalone: bool) -> None:
    """A real release through ``kafka-home:PATH`` (the cache entry is a distribution's libs/):
    a dynamic quorum of one from 3.9 on, static voters before; a restart keeps ports and data."""
    home = release_or_skip(version).home
    c = make_cluster("source", f"kafka-home:{home}", tmp_path / "work")
    try:
        c.start()
        props = parse_properties((tmp_path / "work" / "source" / "server.properties").read_text())
        assert props["listeners"].startswith(f"PLAINTEXT://{c.bootstrap_servers},")
        assert ("controller.quorum.bootstrap.servers" in props) is standalone
        c.create_topic("kh", 2)
        port = c.bootstrap_servers
        c.restart()  # type: ignore[attr-defined]
        assert c.bootstrap_servers == port and c.partitions("kh") == 2  # the log dir survives
        c.pause()  # type: ignore[attr-defined]
        c.resume()  # type: ignore[attr-defined]
        assert c.ping() == 1  # type: ignore[attr-defined]
        caps = c.capabilities()
        assert caps.add_partitions and caps.transactions and caps.accurate_watermarks and caps.restart_keeps_data
        assert caps.topic_config_defaults, caps.reason("topic_config_defaults")
    finally:
        c.stop()
    assert "Kafka Server started" in (tmp_path / "work" / "source" / "kafka.log").read_text()  # its own log
    _no_process_left("kafka")


def test_kafka_start_failures_quote_the_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            kafka_release: object) -> None:
    """A configuration Kafka refuses fails the format step, naming it; a port taken since
    it was chosen fails the start, with the broker's own last lines."""
    import socket

    from pytest_kafka_mirror.clusters import kafka_home

    render = kafka_home.render_server_properties
    with monkeypatch.context() as m:
        m.setattr(kafka_home, "render_server_properties",
                      lambda **kw: render(**{**kw, "extra": {**(kw.get("extra") or {}), "num.partitions": "0"}}))
        c = make_cluster("target", f"kafka:{KAFKA_VERSION}", tmp_path / "bad-config")
        with pytest.raises(ClusterError, match=r"(?s)formatting the log dir of node 1 failed.*kafka.tools.StorageTool "
                                               r"format.*Invalid value 0 for configuration num.partitions"):
            c.start()
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    ports = iter([taken.getsockname()[1]])
    free = kafka_home.free_port
    monkeypatch.setattr(kafka_home, "free_port", lambda **kw: next(ports, None) or free(**kw))
    c = make_cluster("target", f"kafka:{KAFKA_VERSION}", tmp_path / "port-taken")
    t0 = time.monotonic()
    try:
        with pytest.raises(ClusterError, match=r"(?s)Kafka exited during start-up.*its first error: .*"
                                               r"Unable to start acceptor for PLAINTEXT"):
            c.start()
    finally:
        taken.close()
    assert time.monotonic() - t0 < 60
    _no_process_left("kafka")


def _partition_zero(cluster: Any, topic: str, ok: Callable[[Any], bool], what: str) -> Any:
    """Partition 0's metadata once ``ok`` holds for it. Each KRaft broker applies the metadata
    log on its own, so the broker that answers may not know yet what another one already
    showed (``create_topic`` waited for one answer); CI once got the topic without partitions."""
    last: list[Any] = [None]

    def holds() -> bool:
        t = last[0] = cluster.admin().list_topics(topic, timeout=10).topics.get(topic)
        p = None if t is None or t.error is not None else t.partitions.get(0)
        return p is not None and ok(p)

    wait_until(holds, 30, what, interval=0.1, on_timeout=lambda: f" (last metadata: {last[0] and last[0].error} "
                                                                 f"{last[0] and last[0].partitions})")
    return last[0].partitions[0]


def test_three_brokers_ride_out_a_killed_leader(tmp_path: Path, kafka_release: object) -> None:
    """``kafka:V,brokers=3``: topics are replicated three times, acks=all writes need two
    in-sync replicas, so killing the leader of a partition moves its leadership and no
    acknowledged write is lost; the killed broker rejoins on its ports and log dir."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    c = make_cluster("source", f"kafka:{KAFKA_VERSION},brokers=3", tmp_path)
    try:
        c.start()
        assert len(c.bootstrap_servers.split(",")) == 3 and c.ping() == 3  # type: ignore[attr-defined]
        c.create_topic("rf3", 1)
        md = _partition_zero(c, "rf3", lambda p: p.leader >= 0, "a leader of the new topic")
        assert len(md.replicas) == 3
        producer = Producer({"bootstrap.servers": c.bootstrap_servers, "acks": "all", "linger.ms": 0})
        for i in range(100):
            producer.produce("rf3", b"%d" % i)
        assert producer.flush(20) == 0
        leader = c.broker(md.leader)  # type: ignore[attr-defined]
        leader.kill()
        for i in range(100, 200):
            producer.produce("rf3", b"%d" % i)
        assert producer.flush(60) == 0  # two replicas left: min.insync.replicas=2 holds
        _partition_zero(c, "rf3", lambda p: p.leader not in (-1, md.leader), "leadership to move off the killed broker")
        leader.start()  # back on its ports and log dir
        assert c.ping() == 3  # type: ignore[attr-defined]
        consumer = Consumer({"bootstrap.servers": c.bootstrap_servers, "group.id": "rf3", "enable.auto.commit": False})
        consumer.assign([TopicPartition("rf3", 0, 0)])
        got: list[bytes] = []

        def all_read() -> bool:
            got.extend(m.value() for m in consumer.consume(200, 0.5) if m.error() is None)
            return len(got) >= 200

        with contextlib.suppress(TimeoutError):  # the assertion says what was read
            wait_until(all_read, 30, "the 200 records", interval=0)
        consumer.close()
        assert got == [b"%d" % i for i in range(200)]
    finally:
        c.stop()
    _no_process_left("kafka")


# ----------------------------------------------------------------------------- MirrorMaker 2, MirrorMaker 1
def test_mm2_lifecycle(tmp_path: Path, tansu_pair: tuple[TansuCluster, TansuCluster], kafka_release: object) -> None:
    src, dst = tansu_pair
    prefix = f"mm{uuid.uuid4().hex[:4]}"
    rep = make_replicator(f"mm2:{KAFKA_VERSION}", src, dst, tmp_path / "mm2",
                          ReplicatorOptions(topic_prefix=prefix, max_record_bytes=4 * 1024 * 1024))
    assert rep.naming == NamingPolicy("source.") and rep.spec == f"mm2:{KAFKA_VERSION}"
    try:
        rep.start()  # returns once a probe record crossed over
        text = (tmp_path / "mm2" / "mm2-config" / "mm2.properties").read_text()
        assert f"source->target.topics = ^{prefix}-.*" in text
        assert "source.consumer.fetch.max.wait.ms = 50" in text  # Tansu source
        assert f"target.producer.max.request.size = {4 * 1024 * 1024 + 64 * 1024}" in text
        assert "MirrorSourceConnector RUNNING" in rep.status()
        assert rep.health() == ""
        rep.pause()
        assert rep.health() == ""  # paused is not broken
        rep.resume()
        assert rep.running  # type: ignore[attr-defined]
        rep.kill()
        assert rep.health().startswith("it is not running: MirrorMaker 2")
    finally:
        rep.stop()
    assert not rep.running  # type: ignore[attr-defined]
    _no_process_left("MirrorMaker")


def test_mm2_naming_contradiction_is_one_clear_error(tmp_path: Path, tansu_pair: tuple[TansuCluster, TansuCluster],
                                                      kafka_release: object) -> None:
    src, dst = tansu_pair
    with pytest.raises(ReplicatorError, match="--kafka-mirror-naming identity contradicts MM2's DefaultReplicationPolicy"):
        make_replicator(f"mm2:{KAFKA_VERSION}", src, dst, tmp_path, ReplicatorOptions(naming=NamingPolicy()))


def test_mm2_that_exits_during_startup_is_reported_with_its_log(
    tmp_path: Path, tansu_pair: tuple[TansuCluster, TansuCluster], kafka_release: object
) -> None:
    src, dst = tansu_pair
    rep = make_replicator(f"mm2:{KAFKA_VERSION}", src, dst, tmp_path / "mm2",
                          ReplicatorOptions(properties=(("source.security.protocol", "BOGUS"),), startup_timeout=90))
    with pytest.raises(ReplicatorError, match=r"(?s)exited during start-up.*exited with code 2.*"
                                              r"Invalid value BOGUS for configuration security.protocol"):
        rep.start()
    _no_process_left("MirrorMaker")


def test_mm1_copies_with_its_own_semantics(tmp_path: Path, tansu_pair: tuple[TansuCluster, TansuCluster]) -> None:
    """``mm1:3.9.1``: the legacy MirrorMaker copies every record in order under the same
    topic name (the plugin creates the target topic, as operators do); it has no offset
    translation to fail over with."""
    from pytest_kafka_mirror.run import MirrorRun
    from pytest_kafka_mirror.verify.oracle import oracle_report

    release_or_skip(MM1_VERSION, need="mm1")
    src, dst = tansu_pair
    src.ensure_topic("kafka-mirror-warmup")
    prefix = f"m1{uuid.uuid4().hex[:4]}"
    rep = make_replicator(f"mm1:{MM1_VERSION}", src, dst, tmp_path / "mm1", ReplicatorOptions(topic_prefix=prefix))
    assert rep.naming == NamingPolicy() and rep.spec == f"mm1:{MM1_VERSION}"
    assert "translates no consumer-group offsets" in (rep.no_translation or "")
    topic = src.create_topic(f"{prefix}-t", 3)
    try:
        rep.start()
        run = MirrorRun(tmp_path / "run", src.bootstrap_servers, dst.bootstrap_servers, {topic: topic},
                        partitions={topic: 3}, drain_timeout=15, warmup_topic="kafka-mirror-warmup")
        run.produce(rate=300, duration=2)
        run.finish()
        report = oracle_report(run.run_dir)
        assert dst.partitions(topic) == 3
        rep.stop()  # SIGTERM: it commits where it stopped
    finally:
        rep.stop()
    assert report.expected == 600 and report.lost + report.unseen == 0 and report.reordered == 0, report.summary()
    assert report.headers_lost == 0  # measured: the legacy MirrorMaker of 3.9 copies headers
    _no_process_left("MirrorMaker 1")


def test_marker_gives_a_test_its_own_replicator(pytester: pytest.Pytester, tmp_path: Path, tagged_env: str,
                                                kafka_release: object) -> None:
    """``@pytest.mark.kafka_mirror(replicator_properties=...)``: a dedicated MM2 with those
    properties (IdentityReplicationPolicy) copies that test's topics; the session's MM2
    keeps the others."""
    from tests.conftest import processes_tagged

    pytester.makepyfile(
        f"""
        import pytest

        def _copied(mirror_topics, mirror_producer):
            topics = mirror_topics(1, partitions=2)
            run = mirror_producer(topics, rate=None, count=100)
            status = run.finish(timeout=60)
            assert (status["reason"], status["ours"]) == ("satisfied", 100), status
            return topics[0], run.topics[topics[0]]

        def test_shared(mirror_topics, mirror_producer):
            src, dst = _copied(mirror_topics, mirror_producer)
            assert src.startswith("km-") and dst == "source." + src

        @pytest.mark.kafka_mirror(replicator_properties={{"replication.policy.class": "{IDENTITY_POLICY}"}})
        def test_own(mirror_topics, mirror_producer, tmp_path):
            src, dst = _copied(mirror_topics, mirror_producer)
            assert src.startswith("km-d") and dst == src  # its own prefix, under the documented km-
            assert "IdentityReplicationPolicy" in (tmp_path / "replicator" / "mm2-config" / "mm2.properties").read_text()
        """
    )
    # on Apache Kafka: on Tansu, two MM2 workers' Connect groups took 100 s to settle
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--kafka-mirror-replicator=mm2:{KAFKA_VERSION}",
                                           f"--kafka-mirror-source=kafka:{KAFKA_VERSION}",
                                           f"--kafka-mirror-target=kafka:{KAFKA_VERSION}")
    result.assert_outcomes(passed=2)
    assert processes_tagged(tagged_env) == []


# ----------------------------------------------------------------------------- command / external
def _reference_template(prefix_flag: str = "") -> str:
    return (
        f"exec {shlex.quote(sys.executable)} -m pytest_kafka_mirror.replicators.reference "
        f"--source {{source}} --target {{target}} --topics {{topics}} {prefix_flag}"
    )


def test_command_replicator_runs_the_reference_mirror(tmp_path: Path, tansu_pair: tuple[TansuCluster, TansuCluster]) -> None:
    src, dst = tansu_pair
    rep = make_replicator(f"command:{_reference_template()}", src, dst, tmp_path,
                          ReplicatorOptions(topic_prefix="cmd", startup_timeout=60))
    try:
        rep.start()
        assert "reference-mirror: ready" in rep.logs()
        assert "--topics '^cmd-.*'" in (tmp_path / "command.sh").read_text()
        rep.pause()
        rep.resume()
        rep.stop()  # SIGTERM: the mirror flushes and exits 0
        assert rep.runner.returncode == 0  # type: ignore[attr-defined]
        rep.start()  # a second start works (a restart)
        rep.kill()
        assert rep.runner.returncode == -signal.SIGKILL  # type: ignore[attr-defined]
    finally:
        rep.stop()
    _no_process_left("command replicator")


def test_command_that_never_copies_times_out_with_its_output(
    tmp_path: Path, tansu_pair: tuple[TansuCluster, TansuCluster]
) -> None:
    src, dst = tansu_pair
    rep = make_replicator("command:echo replicator for {topics} starting; sleep 60", src, dst, tmp_path,
                          ReplicatorOptions(topic_prefix="never", startup_timeout=3))
    with pytest.raises(ReplicatorError, match=r"(?s)timed out after 3 s.*was never created.*replicator for \^never-\.\* starting"):
        rep.start()
    _no_process_left("command replicator")


def test_external_replicator_is_probed_and_refuses_lifecycle_verbs(
    tmp_path: Path, tansu_pair: tuple[TansuCluster, TansuCluster]
) -> None:
    src, dst = tansu_pair
    with ReferenceReplicator(src.bootstrap_servers, dst.bootstrap_servers, tmp_path / "ext", topics="^ext-",
                             naming=NamingPolicy("dc1.")):
        rep = make_replicator("external:prefix:dc1.", src, dst, tmp_path, ReplicatorOptions(topic_prefix="ext"))
        rep.start()  # the probe record crossed over under the named policy
        assert rep.target_topic("ext-a") == "dc1.ext-a"
        for verb in ("stop", "kill", "pause", "resume"):
            refused = rf"cannot {verb} the replicator: .*it is external \(external:prefix:dc1\.\).* {verb}=COMMAND"
            with pytest.raises(ReplicatorError, match=refused):
                getattr(rep, verb)()
        wrong = make_replicator("external:identity", src, dst, tmp_path,
                                ReplicatorOptions(topic_prefix="ext", startup_timeout=2))
        with pytest.raises(ReplicatorError, match=r"(?s)timed out after 2 s.*was never created.*but "
                                                  r"dc1\.ext-kafka-mirror-probe-\w+ did: .*give --kafka-mirror-replicator "
                                                  r"external:prefix:dc1\. \(now --kafka-mirror-replicator "
                                                  r"external:identity\)") as e:
            wrong.start()
        assert "--kafka-mirror-naming" not in str(e.value)  # the spec names an external replicator's policy
