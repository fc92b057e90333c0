"""Every backend's lifecycle, run for real as far as this machine allows.

* Docker: a real engine and the locally built Tansu image (``container:``); skipped
  without an engine, failed instead when ``KAFKA_MIRROR_REQUIRE_DOCKER=1`` (CI).
* ``kafka-home:`` and ``mm2:`` against a FAKE distribution (tests/fake_kafka.py: shell
  scripts with Kafka's layout that start Tansu / the reference mirror): the plugin's
  render / format / start / readiness / signal / log code runs for real, Kafka does not.
  With ``KAFKA_MIRROR_KAFKA_HOME`` set, the same checks run against the real distribution.
* ``command:`` runs the reference mirror through a command template; ``external:`` is a
  reference mirror the test starts itself.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_kafka_mirror.clusters import ClusterError, make_cluster
from pytest_kafka_mirror.clusters._probe import probe_capabilities
from pytest_kafka_mirror.clusters.tansu import TANSU_GAPS, TansuCluster
from pytest_kafka_mirror.processes.managed import live_processes
from pytest_kafka_mirror.replicators import NamingPolicy, ReplicatorError, ReplicatorOptions, make_replicator
from pytest_kafka_mirror.replicators.mm2 import IDENTITY_POLICY
from pytest_kafka_mirror.replicators.reference import ReferenceReplicator
from tests.conftest import containers_labelled, require_docker
from tests.fake_kafka import calls, make_fake_kafka_home

pytestmark = pytest.mark.integration

KAFKA_HOME_ENV = "KAFKA_MIRROR_KAFKA_HOME"


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
        deadline = time.monotonic() + 120
        while len(containers_labelled(run_id)) < 2 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.2)
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
    for name in ("add_partitions", "log_append_time", "transactions", "accurate_watermarks"):
        assert getattr(caps, name) is False, f"{name}: {caps.reason(name)}"
        assert getattr(declared, name) is False
    assert caps.delete_records is None and "not probed" in caps.reason("delete_records")
    assert "read_committed consumers see aborted records" in caps.reason("transactions")
    assert src.ping() == 1  # the probes left the broker alive
    with pytest.raises(pytest.skip.Exception, match=TANSU_GAPS["add_partitions"]):
        src.require("add_partitions")


# ----------------------------------------------------------------------------- kafka-home (fake)
@pytest.mark.parametrize("version,standalone", [("3.9.0", True), ("3.7.2", False)])
def test_kafka_home_lifecycle_on_a_fake_distribution(tmp_path: Path, version: str, standalone: bool) -> None:
    home = make_fake_kafka_home(tmp_path, version=version)
    c = make_cluster("source", f"kafka-home:{home}", tmp_path / "work")
    try:
        c.start()
        props = (tmp_path / "work" / "source" / "server.properties").read_text()
        assert f"listeners=PLAINTEXT://{c.bootstrap_servers}," in props
        assert ("controller.quorum.bootstrap.servers=" in props) is standalone
        c.create_topic("kh", 2)
        port = c.bootstrap_servers
        c.restart()  # type: ignore[attr-defined]
        assert c.bootstrap_servers == port
        c.pause()  # type: ignore[attr-defined]
        c.resume()  # type: ignore[attr-defined]
        assert c.ping() == 1  # type: ignore[attr-defined]
    finally:
        c.stop()
    log = calls(home)
    formats = [line for line in log if line.startswith("kafka-storage.sh format")]
    assert len(formats) == 1, log  # a restart does not format again
    assert ("--standalone" in formats[0]) is standalone and formats[0].endswith("--ignore-formatted")
    starts = [line for line in log if line.startswith("kafka-server-start.sh")]
    assert len(starts) == 2 and "KAFKA_HEAP_OPTS=-Xmx512M" in starts[0]
    assert "LOG_DIR=" + str(tmp_path / "work" / "source" / "logs") in starts[0]
    _no_process_left("kafka")


def test_kafka_home_start_failure_quotes_the_log(tmp_path: Path) -> None:
    home = make_fake_kafka_home(tmp_path)
    (home / "fail-start").write_text("no space left on device")
    c = make_cluster("target", f"kafka-home:{home}", tmp_path / "work")
    t0 = time.monotonic()
    with pytest.raises(ClusterError, match=r"(?s)Kafka exited during start-up.*simulated start-up failure: no space left"):
        c.start()
    assert time.monotonic() - t0 < 30
    _no_process_left("kafka")


# ----------------------------------------------------------------------------- MirrorMaker 2 (fake)
@pytest.mark.parametrize("identity", [False, True])
def test_mm2_lifecycle_on_a_fake_distribution(
    tmp_path: Path, tansu_pair: tuple[TansuCluster, TansuCluster], identity: bool
) -> None:
    src, dst = tansu_pair
    home = make_fake_kafka_home(tmp_path)
    props = (("replication.policy.class", IDENTITY_POLICY),) if identity else ()
    prefix = f"mm{uuid.uuid4().hex[:4]}"
    rep = make_replicator(f"mm2:{home}", src, dst, tmp_path / "mm2",
                          ReplicatorOptions(topic_prefix=prefix, properties=props, startup_timeout=60))
    assert rep.naming == (NamingPolicy() if identity else NamingPolicy("source."))
    try:
        rep.start()  # returns once a probe record crossed over
        text = (tmp_path / "mm2" / "mm2-config" / "mm2.properties").read_text()
        assert f"source->target.topics = ^{prefix}-.*" in text
        assert "source.consumer.fetch.max.wait.ms = 50" in text  # Tansu source
        assert "fake mm2: " in rep.logs()
        rep.pause()
        rep.resume()
        assert rep.running  # type: ignore[attr-defined]
    finally:
        rep.stop()
    assert not rep.running  # type: ignore[attr-defined]
    assert calls(home) == [f"connect-mirror-maker.sh {tmp_path / 'mm2' / 'mm2-config' / 'mm2.properties'}"]
    _no_process_left("MirrorMaker")


def test_mm2_naming_contradiction_is_one_clear_error(tmp_path: Path, tansu_pair: tuple[TansuCluster, TansuCluster]) -> None:
    src, dst = tansu_pair
    home = make_fake_kafka_home(tmp_path)
    with pytest.raises(ReplicatorError, match="--kafka-mirror-naming identity contradicts MM2's DefaultReplicationPolicy"):
        make_replicator(f"mm2:{home}", src, dst, tmp_path, ReplicatorOptions(naming=NamingPolicy()))


def test_mm2_that_exits_during_startup_is_reported_with_its_log(
    tmp_path: Path, tansu_pair: tuple[TansuCluster, TansuCluster]
) -> None:
    src, dst = tansu_pair
    home = make_fake_kafka_home(tmp_path)
    rep = make_replicator(
        f"mm2:{home}", src, dst, tmp_path / "mm2",
        ReplicatorOptions(properties=(("replication.policy.class", "com.example.Custom"),), naming=NamingPolicy("x."),
                          startup_timeout=60),
    )
    with pytest.raises(ReplicatorError, match=r"(?s)exited during start-up.*exited with code 2.*unsupported policy com.example.Custom"):
        rep.start()
    _no_process_left("MirrorMaker")


def test_marker_gives_a_test_its_own_replicator(pytester: pytest.Pytester, tmp_path: Path, tagged_env: str) -> None:
    """``@pytest.mark.kafka_mirror(replicator_properties=...)``: a dedicated (fake) MM2 with
    those properties copies that test's topics; the session's MM2 keeps the others."""
    from tests.conftest import processes_tagged

    home = make_fake_kafka_home(tmp_path)
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
            assert not src.startswith("km-") and dst == src
            assert "IdentityReplicationPolicy" in (tmp_path / "replicator" / "mm2-config" / "mm2.properties").read_text()
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--kafka-mirror-replicator=mm2:{home}")
    result.assert_outcomes(passed=2)
    assert len([c for c in calls(home) if c.startswith("connect-mirror-maker.sh")]) == 2
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
            with pytest.raises(ReplicatorError, match=f"cannot {verb} the replicator: it is external"):
                getattr(rep, verb)()
        wrong = make_replicator("external:identity", src, dst, tmp_path,
                                ReplicatorOptions(topic_prefix="ext", startup_timeout=2))
        with pytest.raises(ReplicatorError, match="(?s)timed out after 2 s.*was never created.*--kafka-mirror-naming"):
            wrong.start()


# ----------------------------------------------------------------------------- a real distribution
@pytest.fixture
def real_kafka_home() -> str:
    home = os.environ.get(KAFKA_HOME_ENV)
    if not home:
        pytest.skip(f"{KAFKA_HOME_ENV} is not set: no Apache Kafka distribution to run (none can be installed here)")
    return home


def test_real_kafka_home_cluster(real_kafka_home: str, tmp_path: Path) -> None:
    c = make_cluster("source", f"kafka-home:{real_kafka_home}", tmp_path)
    try:
        c.start()
        c.create_topic("real", 2)
        caps = c.capabilities()
        assert caps.add_partitions and caps.transactions and caps.accurate_watermarks, caps.reasons
        c.restart()  # type: ignore[attr-defined]
        assert c.partitions("real") == 2  # the log dir survives a restart
    finally:
        c.stop()


def test_real_mm2_between_tansu_clusters(
    real_kafka_home: str, tmp_path: Path, tansu_pair: tuple[TansuCluster, TansuCluster]
) -> None:
    src, dst = tansu_pair
    rep = make_replicator(f"mm2:{real_kafka_home}", src, dst, tmp_path, ReplicatorOptions(topic_prefix="realmm2"))
    try:
        rep.start()
        assert rep.startup_seconds is not None  # type: ignore[attr-defined]
    finally:
        rep.stop()
