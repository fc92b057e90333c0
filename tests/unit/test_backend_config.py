"""The configuration every backend generates, pinned: container commands / environments,
server.properties, storage format arguments, mm2.properties, command templates, specs."""

from __future__ import annotations

import itertools
import shlex
import time
from pathlib import Path

import pytest

from pytest_kafka_mirror.clusters import ClusterSpec, parse_cluster_spec
from pytest_kafka_mirror.clusters.base import Capabilities
from pytest_kafka_mirror.clusters.container import image_flavour, launch_config
from pytest_kafka_mirror.clusters.kafka_home import kafka_version, render_server_properties, storage_format_argv
from pytest_kafka_mirror.config import SettingsError, resolve_settings
from pytest_kafka_mirror.replicators import NamingPolicy, ReplicatorSpec, parse_replicator_spec
from pytest_kafka_mirror.replicators.command import render_command
from pytest_kafka_mirror.replicators.mm2 import (
    DEFAULT_POLICY,
    IDENTITY_POLICY,
    format_properties,
    mm2_container_script,
    naming_from_properties,
    parse_properties,
    render_mm2_properties,
    topics_regex,
)
from tests.fakes import unstarted_cluster
from tests.kafka import fake_release


# ----------------------------------------------------------------------------- cluster ids
def test_cluster_id_never_starts_with_a_dash(monkeypatch: pytest.MonkeyPatch) -> None:
    # 0xf8 encodes to "-" in base64url: such an id is read as an option by
    # `tansu broker --cluster-id` and `kafka-storage.sh format -t` (one CI run failed so).
    import uuid

    from pytest_kafka_mirror.clusters import base

    drawn = iter([uuid.UUID(bytes=b"\xf8" + bytes(15)), uuid.UUID(bytes=b"\x01" * 16)])
    monkeypatch.setattr(base.uuid, "uuid4", lambda: next(drawn))
    assert base.kraft_cluster_id() == "AQEBAQEBAQEBAQEBAQEBAQ"
    monkeypatch.undo()
    for _ in range(2000):
        cluster_id = base.kraft_cluster_id()
        assert len(cluster_id) == 22 and not cluster_id.startswith("-")


# ----------------------------------------------------------------------------- containers
@pytest.mark.parametrize(
    "image,flavour",
    [
        ("kafka-mirror/tansu:local", "tansu"),
        ("ghcr.io/tansu-io/tansu:0.6.0", "tansu"),
        ("apache/kafka:3.9.1", "apache"),
        ("apache/kafka-native:4.0.0", "apache"),
        ("registry.example.com:5000/mirror/kafka:3.8.0", "apache"),
        ("confluentinc/cp-kafka:7.7.1", "confluent"),
        ("confluentinc/cp-server:7.7.1", "confluent"),
        ("redpandadata/redpanda:v24.2.4", "redpanda"),
        ("docker.redpanda.com/redpandadata/redpanda:latest", "redpanda"),
        ("vectorized/redpanda", "redpanda"),
    ],
)
def test_image_flavour_from_the_name(image: str, flavour: str) -> None:
    assert image_flavour(image) == flavour


@pytest.mark.parametrize("image", ["nginx:latest", "bitnami/zookeeper", ""])
def test_unknown_image_names_the_known_families(image: str) -> None:
    with pytest.raises(ValueError, match="apache/kafka"):
        image_flavour(image)


def test_tansu_container_listens_on_its_loopback_port() -> None:
    launch = launch_config("tansu", ports={"kafka": 40001}, cluster_id="c1")
    assert launch.command == [
        "broker", "--cluster-id", "c1",
        "--listener-url", "tcp://127.0.0.1:40001", "--advertised-listener-url", "tcp://127.0.0.1:40001",
        "--storage-engine", "memory://tansu/",
    ]
    assert launch.env == {}


@pytest.mark.parametrize("flavour", ["apache", "confluent"])
def test_kafka_container_is_single_node_kraft_on_loopback(flavour: str) -> None:
    launch = launch_config(flavour, ports={"kafka": 40001, "controller": 40002}, cluster_id="AAAAAAAAAAAAAAAAAAAAAA")
    env = launch.env
    assert launch.command is None  # the image's own start script, configured by environment
    assert env["KAFKA_PROCESS_ROLES"] == "broker,controller"
    assert env["KAFKA_LISTENERS"] == "PLAINTEXT://127.0.0.1:40001,CONTROLLER://127.0.0.1:40002"
    assert env["KAFKA_ADVERTISED_LISTENERS"] == "PLAINTEXT://127.0.0.1:40001"
    assert env["KAFKA_CONTROLLER_QUORUM_VOTERS"] == "1@127.0.0.1:40002"
    assert env["KAFKA_CONTROLLER_LISTENER_NAMES"] == "CONTROLLER"
    assert env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"] == "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT"
    assert env["CLUSTER_ID"] == "AAAAAAAAAAAAAAAAAAAAAA"
    for key in ("KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR", "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR",
                "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR"):
        assert env[key] == "1"
    assert "0.0.0.0" not in " ".join(env.values())  # host network: loopback only


def test_redpanda_container_gets_every_listener_its_own_port() -> None:
    ports = {"kafka": 40001, "rpc": 40002, "admin": 40003, "proxy": 40004, "schema_registry": 40005}
    cmd = launch_config("redpanda", ports=ports, cluster_id="x").command
    assert cmd is not None
    args = dict(itertools.pairwise(cmd))  # each flag -> the word after it
    assert args["--kafka-addr"] == args["--advertise-kafka-addr"] == "PLAINTEXT://127.0.0.1:40001"
    assert args["--rpc-addr"] == args["--advertise-rpc-addr"] == "127.0.0.1:40002"
    assert args["--pandaproxy-addr"] == "127.0.0.1:40004"
    assert args["--schema-registry-addr"] == "127.0.0.1:40005"
    assert "redpanda.admin=[{address: 127.0.0.1, port: 40003}]" in cmd
    assert cmd[:2] == ["redpanda", "start"] and "--overprovisioned" in cmd and "--smp" in cmd


# ----------------------------------------------------------------------------- kafka-home
def test_server_properties_dynamic_quorum_since_3_9(tmp_path: Path) -> None:
    text = render_server_properties(node_id=1, port=41001, controller_port=41002, log_dir=tmp_path / "d", version=(3, 9, 0))
    props = parse_properties(text)
    assert props["process.roles"] == "broker,controller"
    assert props["node.id"] == "1"
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:41001,CONTROLLER://127.0.0.1:41002"
    assert props["advertised.listeners"] == "PLAINTEXT://127.0.0.1:41001"
    assert props["controller.quorum.bootstrap.servers"] == "127.0.0.1:41002"
    assert "controller.quorum.voters" not in props
    assert props["log.dirs"] == str(tmp_path / "d")
    assert props["offsets.topic.replication.factor"] == props["transaction.state.log.replication.factor"] == "1"
    assert props["transaction.state.log.min.isr"] == "1"


def test_server_properties_static_voters_before_3_9(tmp_path: Path) -> None:
    text = render_server_properties(node_id=1, port=41001, controller_port=41002, log_dir=tmp_path, version=(3, 7, 1))
    assert "controller.quorum.voters = 1@127.0.0.1:41002" in text.splitlines()
    assert "controller.quorum.bootstrap.servers" not in text


def test_server_properties_of_a_node_of_three(tmp_path: Path) -> None:
    voters = {1: 41002, 2: 41012, 3: 41022}
    text = render_server_properties(node_id=2, port=41011, controller_port=41012, log_dir=tmp_path, version=(4, 3, 1),
                                    voters=voters)
    props = parse_properties(text)
    assert props["controller.quorum.voters"] == "1@127.0.0.1:41002,2@127.0.0.1:41012,3@127.0.0.1:41022"
    assert "controller.quorum.bootstrap.servers" not in props  # a static quorum, whatever the version
    assert props["default.replication.factor"] == props["offsets.topic.replication.factor"] == "3"
    assert props["min.insync.replicas"] == props["transaction.state.log.min.isr"] == "2"


def test_server_properties_link_listener(tmp_path: Path) -> None:
    text = render_server_properties(node_id=1, port=41001, controller_port=41002, log_dir=tmp_path, version=(4, 3, 1),
                                    link=(41005, 41006))
    props = parse_properties(text)
    assert props["listeners"].endswith(",LINK://127.0.0.1:41006")  # the broker listens for the link here
    assert props["advertised.listeners"] == "PLAINTEXT://127.0.0.1:41001,LINK://127.0.0.1:41005"  # and names the link
    assert props["listener.security.protocol.map"].endswith(",LINK:PLAINTEXT")


def test_storage_format_arguments_follow_the_version(tmp_path: Path) -> None:
    new = storage_format_argv("ID", tmp_path / "s.properties", (4, 0, 0))
    assert new == ["format", "-t", "ID", "-c", str(tmp_path / "s.properties"), "--standalone", "--ignore-formatted"]
    old = storage_format_argv("ID", "p", (3, 6, 2))
    assert "--standalone" not in old and old[-1] == "--ignore-formatted"
    assert "--standalone" not in storage_format_argv("ID", "p", (4, 0, 0), nodes=3)  # static voters


def test_kafka_version_from_the_jar_names(tmp_path: Path) -> None:
    assert kafka_version(fake_release(tmp_path, version="3.7.2")) == (3, 7, 2)
    libs = tmp_path / "other" / "libs"
    libs.mkdir(parents=True)
    (libs / "kafka_2.13-4.0.0.jar").write_bytes(b"")
    assert kafka_version(tmp_path / "other") == (4, 0, 0)
    assert kafka_version(tmp_path / "nowhere") is None


def test_java_command_line_of_a_release(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_kafka_mirror.clusters.kafka_dist import release_at

    monkeypatch.delenv("KAFKA_HEAP_OPTS", raising=False)
    monkeypatch.setenv("KAFKA_OPTS", "-Dx=1")
    rel = release_at(fake_release(tmp_path, version="3.9.1"))
    config = rel.write_log_config(tmp_path / "w", ("kafka.request.logger",))
    assert config.name == "log4j.properties" and "log4j.logger.kafka.request.logger=WARN" in config.read_text()
    argv = rel.java_argv("kafka.Kafka", ["s.properties"], heap="-Xmx512M", log_config=config)
    assert argv[1] == "-Xmx512M" and f"-Dlog4j.configuration=file:{config}" in argv
    assert argv[argv.index("-cp") + 1] == f"{rel.libs}/*" and argv[-3:] == ["-Dx=1", "kafka.Kafka", "s.properties"]
    monkeypatch.setenv("KAFKA_HEAP_OPTS", "-Xmx1G")
    assert rel.java_argv("M", [], heap="-Xmx512M", log_config=config)[1] == "-Xmx1G"  # as the scripts do
    (rel.libs / "log4j-core-2.25.4.jar").write_bytes(b"")  # Kafka 4: log4j2
    assert rel.write_log_config(tmp_path / "w2").name == "log4j2.properties"


# ----------------------------------------------------------------------------- MirrorMaker 2
def _mm2(**kw: object) -> dict[str, str]:
    args: dict = {"source_bootstrap": "127.0.0.1:1", "target_bootstrap": "127.0.0.1:2", "topics": topics_regex("km")}
    args.update(kw)
    return render_mm2_properties(**args)


def test_mm2_properties_for_single_node_clusters() -> None:
    p = _mm2()
    assert p["clusters"] == "source, target"
    assert p["source.bootstrap.servers"] == "127.0.0.1:1" and p["target.bootstrap.servers"] == "127.0.0.1:2"
    assert p["source->target.enabled"] == "true" and p["target->source.enabled"] == "false"
    assert p["source->target.topics"] == "^km-.*"
    assert p["replication.policy.class"] == DEFAULT_POLICY
    assert p["sync.topic.acls.enabled"] == "false"
    for key in ("source->target.replication.factor", "source->target.checkpoints.topic.replication.factor",
                "source->target.heartbeats.topic.replication.factor", "target->source.heartbeats.topic.replication.factor",
                "source->target.offset-syncs.topic.replication.factor", "target.offset.storage.replication.factor",
                "target.status.storage.replication.factor", "source.config.storage.replication.factor"):
        assert p[key] == "1", key
    for key in ("replication.factor", "offset.storage.replication.factor", "status.storage.replication.factor"):
        assert key not in p  # top-level keys would win over the per-cluster ones for both herders
    assert p["emit.checkpoints.enabled"] == p["emit.heartbeats.enabled"] == "true"
    for where in ("", "source.", "target."):  # MM2's config and both herders: no classpath scan
        assert p[f"{where}plugin.discovery"] == "service_load"
    assert int(p["refresh.topics.interval.seconds"]) <= 5  # test topics are found in seconds
    assert "source.consumer.fetch.max.wait.ms" not in p and "source->target.use.defaults.from" not in p


def test_mm2_properties_per_cluster_replication_and_record_size() -> None:
    p = _mm2(source_replication=1, target_replication=3, max_record_bytes=4 * 1024 * 1024)
    assert p["source->target.replication.factor"] == p["target.offset.storage.replication.factor"] == "3"
    assert p["source->target.checkpoints.topic.replication.factor"] == "3"
    assert p["source->target.offset-syncs.topic.replication.factor"] == "1"  # on the source
    assert p["source.status.storage.replication.factor"] == "1"  # the reverse herder's, on the source
    fits = str(4 * 1024 * 1024 + 64 * 1024)
    assert p["target.producer.max.request.size"] == p["source.consumer.max.partition.fetch.bytes"] == fits
    assert _mm2(max_record_bytes=200)["target.producer.max.request.size"] == str(1024 * 1024)  # never below the default


def test_mm2_properties_on_tansu() -> None:
    p = _mm2(source_is_tansu=True)
    assert p["source.consumer.fetch.max.wait.ms"] == "50"
    assert p["source->target.use.defaults.from"] == "source"
    assert _mm2(target_is_tansu=True)["source->target.use.defaults.from"] == "source"


def test_mm2_overrides_win_and_set_the_naming() -> None:
    p = _mm2(overrides=[("replication.policy.class", IDENTITY_POLICY), ("tasks.max", "1")])
    assert p["tasks.max"] == "1"
    assert naming_from_properties(p) == NamingPolicy()
    assert naming_from_properties(_mm2()) == NamingPolicy("source.")
    assert naming_from_properties(_mm2(overrides=[("replication.policy.separator", "_")])) == NamingPolicy("source_")
    with pytest.raises(ValueError, match="set --kafka-mirror-naming"):
        naming_from_properties(_mm2(overrides=[("replication.policy.class", "com.example.MyPolicy")]))


def test_properties_file_keeps_regex_backslashes() -> None:
    props = {"source->target.topics": r"^a\.b\-.*", "x": " leading blank", "y": "#not a comment"}
    text = format_properties(props)
    assert r"source->target.topics = ^a\\.b\\-.*" in text.splitlines()
    assert parse_properties(text) == props  # and Java reads it alike: tests/unit/test_properties.py


def test_mm2_container_script_per_image() -> None:
    assert mm2_container_script("apache/kafka:3.9.1") == ["/opt/kafka/bin/connect-mirror-maker.sh"]
    assert mm2_container_script("confluentinc/cp-kafka:7.7.1") == ["connect-mirror-maker"]
    for image in ("apache/kafka-native:4.0.0", "redpandadata/redpanda:v24.2.4", "kafka-mirror/tansu:local"):
        with pytest.raises(ValueError, match="has no MirrorMaker 2"):
            mm2_container_script(image)


# ----------------------------------------------------------------------------- command
def test_command_placeholders_are_shell_quoted() -> None:
    values = {"source": "127.0.0.1:1", "target": "127.0.0.1:2", "topics": r"^km\-.*", "workdir": "/tmp/a dir/it's"}
    cmd = render_command("run --from {source} --to {target} --whitelist {topics} --dir {workdir} {{literal}}", values)
    assert shlex.split(cmd) == ["run", "--from", "127.0.0.1:1", "--to", "127.0.0.1:2", "--whitelist", r"^km\-.*",
                                "--dir", "/tmp/a dir/it's", "{literal}"]


@pytest.mark.parametrize(
    "template,message",
    [
        ("run {sources}", r"unknown placeholder \{sources\}.*accepted: \{source\}, \{target\}, \{topics\}, \{workdir\}"),
        ("run {source", "literal braces"),
        ("  ", "empty"),
    ],
)
def test_bad_command_templates(template: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_replicator_spec(f"command:{template}")


# ----------------------------------------------------------------------------- specs and settings
def test_cluster_specs_for_the_new_backends(tmp_path: Path) -> None:
    home = fake_release(tmp_path)
    assert parse_cluster_spec("container:apache/kafka:3.9.1") == ClusterSpec("container", "apache/kafka:3.9.1")
    assert parse_cluster_spec(f"kafka-home:{home}") == ClusterSpec("kafka-home", str(home))
    assert parse_cluster_spec("kafka-home") == ClusterSpec("kafka-home")
    assert parse_cluster_spec("kafka:4.3.1") == ClusterSpec("kafka", "4.3.1")
    assert parse_cluster_spec("kafka:4.3.1,brokers=3") == ClusterSpec("kafka", "4.3.1,brokers=3")
    assert parse_cluster_spec("kafka:4.3.1,brokers=1") == ClusterSpec("kafka", "4.3.1")
    assert parse_cluster_spec("kafka:4.3.1,security=sasl_ssl,brokers=3") == ClusterSpec("kafka", "4.3.1,brokers=3,security=sasl_ssl")
    assert parse_cluster_spec("kafka:4.3.1,security=plaintext") == ClusterSpec("kafka", "4.3.1")
    for bad, message in [
        ("container:nginx", r"container:nginx.*cannot tell how to configure"),
        (f"kafka-home:{tmp_path / 'missing'}", "not a directory"),
        (f"kafka-home:{tmp_path}", "has no libs/"),
        ("kafka", "kafka needs a release version, e.g. kafka:4.3.1"),
        ("kafka:4.3", r"'4.3' is not an Apache Kafka release version \(MAJOR.MINOR.PATCH"),
        ("kafka:2.8.1", "KRaft brokers, Apache Kafka 3.3 or later"),
        ("kafka:4.3.1,brokers=9", r"'brokers=9' is not brokers=N \(N from 1 to 5\)"),
        ("kafka:4.3.1,nodes=3", "is not brokers=N"),
        ("kafka:4.3.1,security=ssl", r"'security=ssl' is not brokers=N .* or security=plaintext\|sasl_ssl"),
    ]:
        with pytest.raises(ValueError, match=f"{message}.*accepted: tansu \\| container:IMAGE"):
            parse_cluster_spec(bad)


def test_replicator_specs(tmp_path: Path) -> None:
    home = fake_release(tmp_path)
    assert parse_replicator_spec(f"mm2:{home}") == ReplicatorSpec("mm2", str(home))
    assert parse_replicator_spec("mm2:4.3.1") == ReplicatorSpec("mm2", "4.3.1")
    assert parse_replicator_spec("mm1:3.9.1") == ReplicatorSpec("mm1", "3.9.1")
    assert parse_replicator_spec("mm2") == ReplicatorSpec("mm2")
    assert parse_replicator_spec("mm2:container:apache/kafka:3.9.1") == ReplicatorSpec("mm2", "container:apache/kafka:3.9.1")
    assert parse_replicator_spec("external:prefix:dc1.") == ReplicatorSpec("external", "prefix:dc1.")
    assert parse_replicator_spec("command:ureplicator --whitelist {topics}").kind == "command"
    no_mm2 = fake_release(tmp_path / "broker-only", mm2=False)
    for bad, message in [
        ("mm2:/nonexistent", "not a directory"),
        (f"mm2:{tmp_path}", "has no libs/"),
        (f"mm2:{no_mm2}", r"has no MirrorMaker 2 \(connect-mirror, connect-runtime\) jars"),
        ("mm2:4.3", "not an Apache Kafka release version"),
        ("mm1:4.3.1", "the legacy MirrorMaker .* ended with Kafka 3.9, 4.3.1 has none: use mm2:4.3.1"),
        ("mm1", "mm1 needs a release: mm1:VERSION"),
        ("mm2:container:redpandadata/redpanda", "has no MirrorMaker 2"),
        ("external:suffix:x", "unknown topic naming policy"),
        ("brooklin", "unknown replicator spec"),
    ]:
        with pytest.raises(ValueError, match=f"{message}.*accepted: reference \\| mm2"):
            parse_replicator_spec(bad)


def test_replicator_properties_from_every_source(tmp_path: Path) -> None:
    def resolve(cli=None, ini=None, env=None):  # type: ignore[no-untyped-def]
        return resolve_settings(cli or {}, lambda k: (ini or {}).get(k), env or {}, rootdir=tmp_path)

    assert resolve().replicator_properties == ()
    ini = {"kafka_mirror_replicator_properties": ["tasks.max=2", "# a comment", "", "a.b = c=d"]}
    assert resolve(ini=ini).replicator_properties == (("tasks.max", "2"), ("a.b", "c=d"))
    env = {"KAFKA_MIRROR_REPLICATOR_PROPERTIES": "x=1\ny=2"}
    assert resolve(env=env).replicator_properties == (("x", "1"), ("y", "2"))
    cli = {"kafka_mirror_replicator_properties": [("k", "v"), ("k2", "v2")]}  # a repeated flag, one pair each
    assert resolve(cli=cli, env=env).replicator_properties == (("k", "v"), ("k2", "v2"))
    with pytest.raises(SettingsError, match="ini key kafka_mirror_replicator_properties: 'novalue' is not KEY=VALUE"):
        resolve(ini={"kafka_mirror_replicator_properties": ["novalue"]})
    home = fake_release(tmp_path)
    assert resolve(env={"KAFKA_MIRROR_KAFKA_HOME": str(home)}).kafka_home == str(home)
    with pytest.raises(SettingsError, match="env KAFKA_MIRROR_KAFKA_HOME: .* is not a directory"):
        resolve(env={"KAFKA_MIRROR_KAFKA_HOME": str(tmp_path / "none")})


# ----------------------------------------------------------------------------- capabilities
def test_capabilities_require_skips_with_the_reason() -> None:
    caps = Capabilities(add_partitions=False, transactions=True, reasons={"add_partitions": "no CreatePartitions"})
    caps.require("transactions")  # supported: no skip
    with pytest.raises(pytest.skip.Exception, match="cluster lacks add_partitions: no CreatePartitions; "
                                                     "delete_records: not probed"):
        caps.require("add_partitions", "delete_records", "transactions")
    with pytest.raises(ValueError, match="unknown capability 'partitions'; known: add_partitions"):
        caps.require("partitions")


def test_readme_command_recipes_are_valid_templates() -> None:
    import re

    from tests.docs import doc_text

    recipes = re.findall(r"--kafka-mirror-replicator='(command:[^']*)'", doc_text("backends"))
    assert recipes, "docs/backends.md lost its command recipes"
    values = {"source": "127.0.0.1:1", "target": "127.0.0.1:2", "topics": "^km-.*", "workdir": "/w"}
    for recipe in recipes:
        cmd = render_command(parse_replicator_spec(recipe).arg, values)
        words = shlex.split(cmd)
        assert "'^km-.*'" in cmd and "/w/c.properties" in words


def test_upgrade_from_names_the_release_the_upgrade_scenarios_start_on(tmp_path: Path) -> None:
    def resolve(cli=None, ini=None, env=None):  # type: ignore[no-untyped-def]
        return resolve_settings(cli or {}, lambda k: (ini or {}).get(k), env or {}, rootdir=tmp_path)

    assert resolve().upgrade_from is None  # the replicator itself
    assert resolve(env={"KAFKA_MIRROR_UPGRADE_FROM": "mm2:4.2.0"}).upgrade_from == ReplicatorSpec("mm2", "4.2.0")
    assert resolve(ini={"kafka_mirror_upgrade_from": "mm1:3.9.1"}).upgrade_from == ReplicatorSpec("mm1", "3.9.1")
    with pytest.raises(SettingsError, match=r"env KAFKA_MIRROR_UPGRADE_FROM: .*'4.2' is not an Apache Kafka release"):
        resolve(env={"KAFKA_MIRROR_UPGRADE_FROM": "mm2:4.2"})


def test_free_ports_are_never_ones_the_kernel_hands_out_itself() -> None:
    """A port chosen ahead of its bind (a broker's advertised port, a link's) lies below
    the ephemeral range, where no outgoing connection's source port can take it first."""
    import socket

    from pytest_kafka_mirror.clusters.base import _ephemeral_floor, free_port

    floor = _ephemeral_floor()
    ports = {free_port() for _ in range(20)}
    assert all(20000 <= p < floor for p in ports), (sorted(ports), floor)
    assert len(ports) > 1  # at random, not one port over and over
    for p in ports:
        with socket.socket() as s:
            s.bind(("127.0.0.1", p))  # still free


def test_a_held_port_is_refused_to_other_choices_but_not_to_the_server_meant_for_it() -> None:
    """``free_port(hold=True)``: the link port a broker advertises from its start stays this
    process's until the link proxy (another process, ``SO_REUSEADDR``) listens on it."""
    import socket
    import subprocess
    import sys

    from pytest_kafka_mirror.clusters.base import free_port

    port = free_port(hold=True)
    with socket.socket() as s, pytest.raises(OSError):
        s.bind(("127.0.0.1", port))  # what every other free_port() check does
    server = ("import socket, sys; s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); "
              f"s.bind(('127.0.0.1', {port})); s.listen(); c, _ = s.accept(); c.sendall(b'ok'); c.close()")
    proc = subprocess.Popen([sys.executable, "-c", server])
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1) as c:
                    assert c.recv(2) == b"ok"
                break
            except ConnectionRefusedError:
                assert time.monotonic() < deadline and proc.poll() is None, "the server could not listen"
                time.sleep(0.05)
    finally:
        proc.kill()
        proc.wait()


def test_bare_kafka_home_and_mm2_specs_take_the_kafka_home_option(tmp_path: Path) -> None:
    """``--kafka-mirror-kafka-home`` behind bare ``kafka-home`` and ``mm2`` specs, through the
    session as a test builds them (the whole session on a real release is the nightly
    case of tests/integration/test_backend_matrix.py)."""
    from pytest_kafka_mirror.clusters.kafka_home import KafkaCluster
    from pytest_kafka_mirror.replicators.mm2 import MirrorMaker2
    from pytest_kafka_mirror.session import KafkaMirrorSession

    home = fake_release(tmp_path, "4.3.1")
    settings = resolve_settings({}, lambda key: None, {"KAFKA_MIRROR_KAFKA_HOME": str(home),
                                                       "KAFKA_MIRROR_SOURCE": "kafka-home",
                                                       "KAFKA_MIRROR_TARGET": "kafka-home", "KAFKA_MIRROR_REPLICATOR": "mm2"},
                                rootdir=tmp_path)
    session = KafkaMirrorSession(settings)
    source, target = (session.make_cluster(role, tmp_path / role) for role in ("source", "target"))
    assert isinstance(source, KafkaCluster) and isinstance(target, KafkaCluster)
    assert source.release.home == target.release.home == home.resolve()
    src, dst = unstarted_cluster("127.0.0.1:1"), unstarted_cluster("127.0.0.1:2", name="target")
    rep = session.make_replicator(src, dst, tmp_path / "mm2")
    assert isinstance(rep, MirrorMaker2) and rep.release is not None and rep.release.home == home.resolve()
