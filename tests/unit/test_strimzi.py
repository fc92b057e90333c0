"""``mm2-connect:VERSION,strimzi=FILE``: a Strimzi ``KafkaMirrorMaker2`` resource read as
the flow the plugin runs: its connectors and their settings, each quoted from its YAML
line, what the plugin changes said with the reason, what it cannot honour refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_kafka_mirror.clusters.kafka_dist import KafkaRelease
from pytest_kafka_mirror.replicators import ReplicatorError, parse_replicator_spec
from pytest_kafka_mirror.replicators.mm2_connect import MirrorMaker2Connect
from pytest_kafka_mirror.replicators.mm2_user import describe_based
from pytest_kafka_mirror.replicators.strimzi import read_strimzi
from tests.fakes import unstarted_cluster

#: shaped like Strimzi's examples/mirror-maker/kafka-mirror-maker-2-tls.yaml (kafka.strimzi.io/v1)
TLS_V1 = """\
apiVersion: kafka.strimzi.io/v1
kind: KafkaMirrorMaker2
metadata:
  name: dc-mirror
spec:
  version: 4.3.1
  replicas: 3
  target:
    alias: dc-b
    bootstrapServers: dc-b-kafka-bootstrap:9093
    groupId: dc-mirror-group
    configStorageTopic: dc-mirror-config
    offsetStorageTopic: dc-mirror-offset
    statusStorageTopic: dc-mirror-status
    tls:
      trustedCertificates:
        - secretName: dc-b-cluster-ca-cert
          pattern: "*.crt"
    authentication:
      type: scram-sha-512
      username: mirror
      passwordSecret:
        secretName: mirror-user
        password: password
    config:
      config.storage.replication.factor: -1
      offset.storage.replication.factor: -1
      status.storage.replication.factor: -1
      ssl.endpoint.identification.algorithm: ""
      group.id: not-this-one
  resources:
    requests:
      memory: 2Gi
  mirrors:
  - source:
      alias: dc-a
      bootstrapServers: dc-a-kafka-bootstrap:9093
      tls:
        trustedCertificates:
          - secretName: dc-a-cluster-ca-cert
            pattern: "*.crt"
    sourceConnector:
      tasksMax: 2
      config:
        replication.factor: 3
        offset-syncs.topic.replication.factor: -1
        sync.topic.acls.enabled: false
        offset-syncs.topic.location: target
    checkpointConnector:
      tasksMax: 1
      autoRestart:
        enabled: true
      config:
        checkpoints.topic.replication.factor: -1
        emit.checkpoints.interval.seconds: 7
        sync.group.offsets.enabled: false
        offset-syncs.topic.location: target
    topicsPattern: "orders.*"
    groupsPattern: ".*"
"""

#: shaped like the v1beta2 examples: clusters[], connectCluster, a heartbeat connector
V1BETA2 = """\
apiVersion: kafka.strimzi.io/v1beta2
kind: KafkaMirrorMaker2
metadata:
  name: old-style
spec:
  version: 3.9.1
  connectCluster: "cluster-b"
  clusters:
  - alias: "cluster-a"
    bootstrapServers: cluster-a-kafka-bootstrap:9092
  - alias: "cluster-b"
    bootstrapServers: cluster-b-kafka-bootstrap:9092
    config:
      config.storage.replication.factor: -1
  mirrors:
  - sourceCluster: "cluster-a"
    targetCluster: "cluster-b"
    sourceConnector:
      config:
        replication.factor: 1
    heartbeatConnector:
      config:
        heartbeats.topic.replication.factor: 1
        emit.heartbeats.interval.seconds: 3
    topicsPattern: ".*"
"""


def _write(tmp_path: Path, text: str, name: str = "mm2.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _connect(tmp_path: Path, path: Path, **kw: object) -> MirrorMaker2Connect:
    release = KafkaRelease(Path("/nowhere"), (4, 3, 1))  # never started: no jars needed
    return MirrorMaker2Connect(unstarted_cluster("127.0.0.1:1", replication_factor=1),
                               unstarted_cluster("127.0.0.1:2", replication_factor=1, name="target"), tmp_path / "w",
                               topic_prefix="km-gw0", release=release, workers=3, strimzi=read_strimzi(path), **kw)


def test_a_v1_resource_is_its_flow_each_setting_with_its_yaml_line(tmp_path: Path) -> None:
    res = read_strimzi(_write(tmp_path, TLS_V1))
    assert (res.name, res.api, res.replicas, res.version) == ("dc-mirror", "v1", 3, "4.3.1")
    assert res.connectors == ("MirrorSourceConnector", "MirrorCheckpointConnector")  # v1 has no heartbeat connector
    lines = {key: (line, value) for line, key, value in res.user.lines}
    assert lines["clusters"][1] == "dc-a, dc-b" and lines["dc-a->dc-b.enabled"][1] == "true"
    assert lines["dc-b.security.protocol"] == (19, "SASL_SSL") and lines["dc-b.sasl.mechanism"][1] == "SCRAM-SHA-512"
    assert lines["dc-a.security.protocol"][1] == "SSL"
    assert lines["MirrorSourceConnector.tasks.max"] == (43, "2")
    assert lines["MirrorSourceConnector.sync.topic.acls.enabled"][1] == "false"  # YAML's false as Java's
    assert lines["MirrorCheckpointConnector.emit.checkpoints.interval.seconds"] == (55, "7")
    assert lines["dc-a->dc-b.topics"][1] == "orders.*" and lines["dc-b.group.id"][1] == "dc-mirror-group"
    assert lines["dc-b.ssl.endpoint.identification.algorithm"][1] == ""  # an exception to the forbidden ssl.
    notes = "\n".join(res.notes)
    assert "line 30 spec.target.config.group.id: ignored, as Strimzi's operator ignores it" in notes
    assert "line 31 spec.resources: not applied" in notes and "checkpointConnector.autoRestart: not applied" in notes
    assert "line 6 spec.version 4.3.1: not applied (the release that runs is the replicator spec's" in notes


def test_the_connectors_are_strimzis_each_with_its_own_config_and_the_sessions_clusters(tmp_path: Path) -> None:
    rep = _connect(tmp_path, _write(tmp_path, TLS_V1))
    assert rep.spec == f"mm2-connect:/nowhere,workers=3,strimzi={tmp_path / 'mm2.yaml'}"  # a release not from the cache
    assert list(rep.connectors) == ["source->target.MirrorSourceConnector", "source->target.MirrorCheckpointConnector"]
    src, chk = rep.connectors.values()
    assert (src["tasks.max"], chk["tasks.max"]) == ("2", "1")
    assert src["connector.class"] == "org.apache.kafka.connect.mirror.MirrorSourceConnector"
    assert (src["emit.checkpoints.interval.seconds"], chk["emit.checkpoints.interval.seconds"]) == ("5", "7")
    assert src["source.cluster.bootstrap.servers"] == "127.0.0.1:1"  # the session's, not dc-a's
    assert src["replication.factor"] == "1"  # the resource's 3 does not fit a one-broker test cluster
    assert src["topics"] == rep.topics and src["offset-syncs.topic.location"] == "target"
    assert "security.protocol" not in {k.split(".", 2)[-1] for k in src if k.startswith("source.cluster.")}
    said = "\n".join(describe_based(rep.based, rep.strimzi.user))
    assert said.startswith(f"your KafkaMirrorMaker2 resource {tmp_path / 'mm2.yaml'}: ")
    assert "line 19 dc-b.security.protocol=SASL_SSL: removed (your clusters' client security" in said
    assert "line 11 dc-b.group.id=dc-mirror-group: replaced by target.group.id=" in said  # its own group: xdist workers share the target
    assert "line 45 MirrorSourceConnector.replication.factor=3: replaced by MirrorSourceConnector.replication.factor=1" \
        in said
    # what the failover checks expect is what the checkpoint connector is given
    assert rep.checkpoints.checkpoints_interval == 7.0 and rep.checkpoints.syncs_location == "target"
    assert rep.checkpoints.emit_heartbeats is False  # no heartbeat connector
    assert "declares no MirrorHeartbeatConnector" in rep.checkpoints.written["emit_heartbeats"]
    assert "MirrorCheckpointConnector.emit.checkpoints.interval.seconds=7 (your KafkaMirrorMaker2 resource" in \
        rep.checkpoints.written["checkpoints_interval"]


def test_a_checkpoint_setting_of_the_source_connector_does_not_reach_the_checkpoints(tmp_path: Path) -> None:
    text = TLS_V1.replace("        offset-syncs.topic.location: target\n    checkpointConnector:",
                          "        emit.checkpoints.enabled: false\n    checkpointConnector:")
    rep = _connect(tmp_path, _write(tmp_path, text))
    assert rep.checkpoints.emit_checkpoints is True  # the source connector does not emit checkpoints
    broken = _connect(tmp_path, _write(tmp_path, TLS_V1.replace("emit.checkpoints.interval.seconds: 7",
                                                                "emit.checkpoints.enabled: false"), "broken.yaml"))
    assert broken.checkpoints.emit_checkpoints is False
    assert broken.checkpoints.written["emit_checkpoints"].startswith(
        "MirrorCheckpointConnector.emit.checkpoints.enabled=false (your KafkaMirrorMaker2 resource")


def test_what_the_plugin_adds_is_not_said_of_a_connector_that_sets_its_own(tmp_path: Path) -> None:
    def added(text: str, name: str) -> str:
        rep = _connect(tmp_path, _write(tmp_path, text, name))
        return next(line for line in describe_based(rep.based, rep.strimzi.user) if line.startswith("added by"))
    both = added(TLS_V1, "both.yaml")  # each connector has its tasksMax: the template's tasks.max runs nowhere
    assert "tasks.max" not in both and "refresh.topics.interval.seconds=2" in both
    assert "emit.checkpoints.interval.seconds=5 (not for MirrorCheckpointConnector: its own " in both
    one = added(TLS_V1.replace("      tasksMax: 1\n", ""), "one.yaml")  # the checkpoint connector runs with it
    assert "tasks.max=4 (not for MirrorSourceConnector: its own tasks.max wins)" in one


def test_offset_syncs_written_where_the_checkpoint_connector_does_not_read_them_is_named(tmp_path: Path) -> None:
    # the source connector writes them on the target, the checkpoint connector reads the source's
    text = TLS_V1.replace("        sync.group.offsets.enabled: false\n        offset-syncs.topic.location: target\n",
                          "        sync.group.offsets.enabled: false\n")
    rep = _connect(tmp_path, _write(tmp_path, text))
    assert (rep.checkpoints.syncs_location, rep.checkpoints.syncs_written_location) == ("source", "target")
    why = rep.checkpoints.no_checkpoints()
    assert why is not None and why.startswith(
        "MirrorSourceConnector.offset-syncs.topic.location=target (your KafkaMirrorMaker2 resource")
    assert "but offset-syncs.topic.location=source (" in why and "no group offset is translated" in why
    same = _connect(tmp_path, _write(tmp_path, TLS_V1, "same.yaml"))  # both on the target: nothing to say
    assert same.checkpoints.syncs_written_location is None and same.checkpoints.no_checkpoints() is None


def test_a_v1beta2_resource_with_a_heartbeat_connector(tmp_path: Path) -> None:
    res = read_strimzi(_write(tmp_path, V1BETA2))
    assert (res.api, res.replicas) == ("v1beta2", None)
    assert res.connectors == ("MirrorSourceConnector", "MirrorHeartbeatConnector")
    rep = _connect(tmp_path, _write(tmp_path, V1BETA2))
    assert list(rep.connectors) == ["source->target.MirrorSourceConnector", "source->target.MirrorHeartbeatConnector"]
    assert rep.checkpoints.emit_checkpoints is False and rep.checkpoints.heartbeats_interval == 3.0


@pytest.mark.parametrize(("change", "said"), [
    (lambda t: t.replace("kind: KafkaMirrorMaker2", "kind: KafkaConnect"), "no KafkaMirrorMaker2 in it"),
    (lambda t: t + "  - source:\n      alias: dc-c\n      bootstrapServers: c:9092\n    sourceConnector: {}\n",
     r"line 60 spec.mirrors\[1\]: a mirror from dc-c, a third cluster"),
    (lambda t: t.replace("    sourceConnector:\n      tasksMax: 2\n", "    sourceConnector:\n      state: paused\n"),
     "sourceConnector is paused"),
    (lambda t: t.replace("    checkpointConnector:", "    heartbeatConnector: {}\n    checkpointConnector:"),
     "heartbeatConnector is not in Strimzi's v1 API"),
    (lambda t: t.replace("emit.checkpoints.interval.seconds: 7", "emit.checkpoints.interval.seconds: [7]"),
     "line 55 checkpointConnector.config.emit.checkpoints.interval.seconds: a list"),
    (lambda t: t.replace("  replicas: 3", "  replicas: three"), "spec.replicas: 'three'"),
    (lambda t: t.replace("    topicsPattern", "  - oops: [\n    topicsPattern"), "not YAML at line"),
])
def test_what_cannot_be_honoured_is_refused_naming_the_line(tmp_path: Path, change, said: str) -> None:
    with pytest.raises(ValueError, match=said):
        read_strimzi(_write(tmp_path, change(TLS_V1)))


def test_a_value_of_strimzis_config_providers_is_refused_where_it_is_kept(tmp_path: Path) -> None:
    secret = TLS_V1.replace("sync.group.offsets.enabled: false",
                            "sync.group.offsets.enabled: ${strimzienv:SYNC}")
    with pytest.raises(ReplicatorError, match=r"line 56 MirrorCheckpointConnector.sync.group.offsets.enabled: "
                                              r"'\$\{strimzienv:SYNC\}' needs a config provider of Strimzi's pods"):
        _connect(tmp_path, _write(tmp_path, secret))


def test_the_spec_reads_the_resource_before_anything_starts(tmp_path: Path) -> None:
    path = _write(tmp_path, TLS_V1)
    spec = parse_replicator_spec(f"mm2-connect:4.3.1,strimzi={path}")
    assert str(spec) == f"mm2-connect:4.3.1,strimzi={path}" and spec.release_arg == "4.3.1"
    assert str(parse_replicator_spec(f"mm2-connect:4.3.1,workers=2,strimzi={path}")).endswith(f"workers=2,strimzi={path}")
    with pytest.raises(ValueError, match=r"your KafkaMirrorMaker2 resource .*nope.yaml: no such file"):
        parse_replicator_spec(f"mm2-connect:4.3.1,strimzi={tmp_path / 'nope.yaml'}")
    with pytest.raises(ValueError, match="strimzi=: give the file"):
        parse_replicator_spec("mm2-connect:4.3.1,strimzi=")


def test_a_connector_key_is_refused_by_dedicated_mm2(tmp_path: Path) -> None:
    from pytest_kafka_mirror.replicators.mm2 import MirrorMaker2

    with pytest.raises(ReplicatorError, match="MirrorCheckpointConnector.emit.checkpoints.enabled: a setting of one "
                                              "connector"):
        MirrorMaker2(unstarted_cluster("127.0.0.1:1"), unstarted_cluster("127.0.0.1:2"), tmp_path,
                     topic_prefix="km-gw0", release=KafkaRelease(Path("/nowhere"), (4, 3, 1)),
                     overrides=(("MirrorCheckpointConnector.emit.checkpoints.enabled", "false"),))


def test_a_tests_override_reaches_the_connector_over_the_resources_own_key(tmp_path: Path) -> None:
    marker = "the test's marker"
    rep = _connect(tmp_path, _write(tmp_path, TLS_V1), overrides=(("sync.group.offsets.enabled", "true"),),
                   origins={"sync.group.offsets.enabled": marker})
    chk = rep.connectors["source->target.MirrorCheckpointConnector"]
    assert chk["sync.group.offsets.enabled"] == "true"
    assert rep.checkpoints.sync_group_offsets is True
    assert rep.checkpoints.written["sync_group_offsets"] == \
        f"MirrorCheckpointConnector.sync.group.offsets.enabled=true ({marker})"
    said = "\n".join(describe_based(rep.based, rep.strimzi.user))
    assert "line 56 MirrorCheckpointConnector.sync.group.offsets.enabled=false: replaced by " \
           "MirrorCheckpointConnector.sync.group.offsets.enabled=true (sync.group.offsets.enabled given for this run)" \
           in said
    assert "heartbeats" in rep.failover_leaves_out
