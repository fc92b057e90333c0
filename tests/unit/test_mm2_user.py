"""Your own mm2.properties as the base of an ``mm2:`` replicator (``mm2:...,properties=FILE``):
the spec, the mapping of your flow onto the session's, what the plugin keeps, changes and
why, the refusals, the names the gate stores the runs under.  No process starts: the
releases are :func:`tests.kafka.fake_release` directories."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from pytest_kafka_mirror.config import Settings, SettingsError, resolve_settings
from pytest_kafka_mirror.replicators import (
    NamingPolicy,
    ReplicatorOptions,
    ReplicatorSpec,
    make_replicator,
    parse_replicator_spec,
)
from pytest_kafka_mirror.replicators.mm2 import IDENTITY_POLICY, MirrorMaker2, parse_properties, render_mm2
from pytest_kafka_mirror.replicators.mm2_user import describe_based, read_user_properties
from tests.fakes import unstarted_cluster
from tests.kafka import fake_release

#: a production MM2's file: two clusters, one flow, tuned, secured, three brokers each
PRODUCTION = """\
# our MirrorMaker 2
clusters = primary, backup
primary.bootstrap.servers = kafka-primary-1:9092,kafka-primary-2:9092
backup.bootstrap.servers = kafka-backup-1:9092
primary->backup.enabled = true
primary->backup.topics = orders.*, payments.*
backup->primary.enabled = false
tasks.max = 2
refresh.topics.interval.seconds = 7
replication.factor = 3
offset.storage.replication.factor = 3
primary.security.protocol = SASL_SSL
primary.sasl.jaas.config = org.apache.kafka.common.security.scram.ScramLoginModule required username="mm2" password="s3cret";
primary.consumer.max.poll.records = 1000
backup.producer.linger.ms = 20
primary.consumer.bootstrap.servers = kafka-primary-3:9092
"""


def _file(tmp_path: Path, text: str = PRODUCTION, name: str = "mm2.properties") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _render(path: Path, **kw: object):  # type: ignore[no-untyped-def]
    args: dict[str, object] = {"source_bootstrap": "127.0.0.1:1", "target_bootstrap": "127.0.0.1:2",
                               "topics": "^km-.*", "instance": "km-1", "base": read_user_properties(path)}
    args.update(kw)
    return render_mm2(**args)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------- the spec
def test_spec_suffix_names_your_file_for_every_mm2_release_form(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = fake_release(tmp_path, "3.9.1")
    path = _file(tmp_path)
    monkeypatch.chdir(tmp_path)  # a relative file is read from where the session starts
    spec = parse_replicator_spec(f"mm2:{home},properties=mm2.properties")
    assert spec == ReplicatorSpec("mm2", f"{home.resolve()},properties={path.resolve()}")
    assert (spec.release_arg, spec.properties_file) == (str(home.resolve()), str(path.resolve()))
    cached = parse_replicator_spec("mm2:4.3.1,properties=mm2.properties")
    assert (cached.release_arg, cached.properties_file) == ("4.3.1", str(path.resolve()))
    image = parse_replicator_spec("mm2:container:apache/kafka:4.3.1,properties=mm2.properties")
    assert (image.release_arg, image.properties_file) == ("container:apache/kafka:4.3.1", str(path.resolve()))
    plain = parse_replicator_spec("mm2:4.3.1")
    assert (plain.release_arg, plain.properties_file) == ("4.3.1", None)
    assert str(parse_replicator_spec(str(spec))) == str(spec)  # the normalised spec parses to itself


def test_spec_refusals_are_one_line_naming_the_file_and_the_spec(tmp_path: Path) -> None:
    missing = tmp_path / "none.properties"
    cases = [
        (f"mm2:4.3.1,properties={missing}",
         f"'mm2:4.3.1,properties={missing}': your mm2.properties {missing}: no such file"),
        (f"mm2:4.3.1,properties={tmp_path}",
         f"'mm2:4.3.1,properties={tmp_path}': your mm2.properties {tmp_path} cannot be read: Is a directory"),
        ("mm2:4.3.1,properties=", "'mm2:4.3.1,properties=': ,properties= needs a file: your mm2.properties; accepted:"),
        ("mm2,properties=x", "'mm2,properties=x': give the release before ,properties=: mm2:VERSION,properties=FILE "
                             "or mm2:KAFKA_HOME,properties=FILE; accepted:"),
        ("mm2:,properties=x", "'mm2:,properties=x': give the release before ,properties=: "),
        ("mm1:3.9.1,properties=x", "'mm1:3.9.1,properties=x': ,properties=FILE is for mm2: specs (your mm2.properties); "
                                   "the legacy MirrorMaker's settings go to --kafka-mirror-replicator-properties"),
    ]
    for spec, message in cases:
        with pytest.raises(ValueError) as info:
            parse_replicator_spec(spec)
        assert str(info.value).startswith(message), (spec, str(info.value))
        assert "\n" not in str(info.value)
    with pytest.raises(ValueError) as info:
        parse_replicator_spec(f"mm2:4.3.1,properties={missing}")
    assert "accepted:" not in str(info.value)  # a file's problem, not the spec's form


def test_a_missing_file_names_the_setting_it_came_from(tmp_path: Path) -> None:
    missing = tmp_path / "none.properties"
    spec = f"mm2:4.3.1,properties={missing}"
    for env, ini, origin in (({"KAFKA_MIRROR_REPLICATOR": spec}, {}, "env KAFKA_MIRROR_REPLICATOR"),
                             ({}, {"kafka_mirror_replicator": spec}, "ini key kafka_mirror_replicator"),
                             ({"KAFKA_MIRROR_UPGRADE_FROM": spec}, {}, "env KAFKA_MIRROR_UPGRADE_FROM")):
        with pytest.raises(SettingsError) as info:
            resolve_settings({}, lambda k, ini=ini: ini.get(k), env, rootdir=tmp_path)  # type: ignore[misc]
        assert str(info.value) == f"{origin}: '{spec}': your mm2.properties {missing}: no such file"


# ------------------------------------------------------------------------------- the mapping
@pytest.mark.parametrize("text,message", [
    ("tasks.max = 2\n", "has no clusters line: the plugin runs your file's one flow between the session's source and "
                        "target and needs its two cluster aliases (e.g. clusters = primary, backup and "
                        "primary->backup.enabled = true)"),
    ("clusters = primary\nprimary->primary.enabled = true\n", "has clusters = primary: the plugin runs"),
    ("clusters = primary, backup\nprimary->backup.enabled = false\nprimary->backup.emit.heartbeats.enabled = true\n",
     "enables no flow of clusters = primary, backup (MM2's default is off): enable the one the session is to run"),
    ("clusters = primary, backup\nprimary->backup.enabled = true\nbackup->primary.enabled = TRUE\n",
     "enables 2 flows (primary->backup, backup->primary): the plugin runs one flow, the session's source -> target; "
     "give it a file that enables one"),
    ("clusters = primary, backup\nprimary->dr.enabled = true\n",
     "enables primary->dr, but dr is not in its clusters = primary, backup"),
])
def test_what_cannot_be_mapped_is_refused(tmp_path: Path, text: str, message: str) -> None:
    path = _file(tmp_path, text)
    with pytest.raises(ValueError) as info:
        read_user_properties(path)
    assert str(info.value).startswith(f"your mm2.properties {path} {message}"), str(info.value)


def test_the_one_enabled_flow_is_the_session_source_to_target(tmp_path: Path) -> None:
    user = read_user_properties(_file(tmp_path, "clusters = dc2, dc1, dr\ndc2->dc1.enabled = true\n"))
    assert (user.source_alias, user.target_alias, user.clusters) == ("dc2", "dc1", ("dc2", "dc1", "dr"))
    assert user.renamed("dc2->dc1.tasks.max", ("source", "target")) == "source->target.tasks.max"
    assert user.renamed("dc1->dc2.emit.heartbeats.enabled", ("source", "target")) == "target->source.emit.heartbeats.enabled"
    assert user.renamed("dc1.producer.linger.ms", ("source", "target")) == "target.producer.linger.ms"
    assert user.renamed("tasks.max", ("source", "target")) == "tasks.max"
    assert user.renamed("dr.bootstrap.servers", ("source", "target")) is None  # a cluster the flow does not have
    assert user.renamed("dc2->dr.enabled", ("source", "target")) is None
    # a topology's reverse flow: your source alias is the flow's source, whatever its role
    assert user.renamed("dc2.consumer.max.poll.records", ("target", "source")) == "target.consumer.max.poll.records"


# ----------------------------------------------------------------------------- the rendering
def test_your_lines_are_kept_and_what_the_session_needs_is_changed_with_its_reason(tmp_path: Path) -> None:
    path = _file(tmp_path)
    based = _render(path)
    p, origins = based.properties, based.origins
    yours = f"your mm2.properties ({path.resolve()})"
    # kept, your aliases renamed to the session's
    for key, value in (("tasks.max", "2"), ("refresh.topics.interval.seconds", "7"), ("replication.factor", "3"),
                       ("source.consumer.max.poll.records", "1000"), ("target.producer.linger.ms", "20"),
                       ("source->target.enabled", "true"), ("target->source.enabled", "false")):
        assert (p[key], origins[key]) == (value, yours), key
    assert not any(k.startswith(("primary", "backup")) for k in p)
    # replaced: the session's clusters, flow and topics
    assert p["clusters"] == "source, target"
    assert (p["source.bootstrap.servers"], p["target.bootstrap.servers"]) == ("127.0.0.1:1", "127.0.0.1:2")
    assert p["source->target.topics"] == p["source->target.groups"] == "^km-.*"
    assert origins["source->target.topics"] == "the plugin (the session's test topics)"
    assert origins["source.bootstrap.servers"] == "the plugin (the session's source cluster)"
    # removed: your clusters' security, a client pointed at your cluster, a top-level worker key
    for key in ("source.security.protocol", "source.sasl.jaas.config", "source.consumer.bootstrap.servers",
                "offset.storage.replication.factor"):
        assert key not in p, key
    assert p["target.offset.storage.replication.factor"] == p["source->target.replication.factor"] == "1"
    assert p["target.group.id"] == "source-mm2-km-1"  # this MM2's own Connect group
    # where your file is silent, the plugin's template
    assert p["emit.checkpoints.interval.seconds"] == "5" and "emit.checkpoints.interval.seconds" not in origins
    changes = {(c.line, c.written, c.action, c.key): c.reason for c in based.changes}
    assert changes == {
        (2, "clusters", "replaced", "clusters"): "the session's two clusters, source and target",
        (3, "primary.bootstrap.servers", "replaced", "source.bootstrap.servers"): "the session's source cluster",
        (4, "backup.bootstrap.servers", "replaced", "target.bootstrap.servers"): "the session's target cluster",
        (6, "primary->backup.topics", "replaced", "source->target.topics"): "the session's test topics",
        (10, "replication.factor", "shadowed", "replication.factor"):
            "a topic on the session's target cluster, with the replication factor it allows",
        (11, "offset.storage.replication.factor", "removed", "offset.storage.replication.factor"):
            "MM2 applies a top-level offset.storage.replication.factor over each herder's own: this MM2 keeps its own "
            "Connect topics on the session's clusters, with the replication factor they allow",
        (12, "primary.security.protocol", "removed", "source.security.protocol"):
            "your clusters' client security: the session's clusters have their own",
        (13, "primary.sasl.jaas.config", "removed", "source.sasl.jaas.config"):
            "your clusters' client security: the session's clusters have their own",
        (16, "primary.consumer.bootstrap.servers", "removed", "source.consumer.bootstrap.servers"):
            "it would point a client at a cluster that is not the session's",
    }


@pytest.mark.parametrize(("line", "on"), [("", "source"), ("offset-syncs.topic.location = target\n", "target"),
                                          ("primary->backup.offset-syncs.topic.location = target\n", "target"),
                                          ("offset-syncs.topic.location = target\n"
                                           "MirrorSourceConnector.offset-syncs.topic.location = source\n", "source")])
def test_the_offset_syncs_topic_gets_the_replication_factor_of_the_cluster_it_is_on(tmp_path: Path, line: str,
                                                                                    on: str) -> None:
    path = _file(tmp_path, "clusters = primary, backup\nprimary->backup.enabled = true\n"
                           "primary->backup.offset-syncs.topic.replication.factor = 3\n" + line)
    based = _render(path, source_replication=1, target_replication=2)
    assert based.properties["source->target.offset-syncs.topic.replication.factor"] == {"source": "1", "target": "2"}[on]
    said = {c.key: c.reason for c in based.changes}["source->target.offset-syncs.topic.replication.factor"]
    assert said == f"a topic on the session's {on} cluster, with the replication factor it allows"


def test_the_changes_are_described_line_by_line_secrets_masked(tmp_path: Path) -> None:
    path = _file(tmp_path)
    lines = describe_based(_render(path), read_user_properties(path))
    assert lines[0] == (f"your mm2.properties {path.resolve()}: 6 of its 15 settings kept; your flow primary->backup runs "
                        "as source->target, the session's (your primary.*, backup.* keys as source.*, target.*: "
                        "10 renamed)")
    assert ("changed by the plugin: line 3 primary.bootstrap.servers=kafka-primary-1:9092,kafka-primary-2:9092: "
            "replaced by source.bootstrap.servers=127.0.0.1:1 (the session's source cluster)") in lines
    assert ("changed by the plugin: line 10 replication.factor=3: shadowed by source->target.replication.factor=1 "
            "(a topic on the session's target cluster, with the replication factor it allows)") in lines
    jaas = next(line for line in lines if "sasl.jaas.config" in line)
    assert "s3cret" not in jaas and "primary.sasl.jaas.config=******: removed" in jaas
    added = lines[-1]
    assert added.startswith("added by the plugin where your file is silent and MM2's default differs")
    assert "emit.checkpoints.interval.seconds=5" in added and "target.offset.flush.interval.ms=5000" in added
    assert "tasks.max" not in added and "refresh.topics.interval.seconds" not in added  # yours
    assert "emit.checkpoints.enabled" not in added  # MM2's default: nothing changes
    keys_only = describe_based(_render(path), read_user_properties(path), values=False)
    assert "changed by the plugin: line 2 clusters: replaced (the session's two clusters, source and target)" in keys_only
    assert not any("127.0.0.1" in line or "kafka-primary" in line for line in keys_only)


def test_your_policy_names_the_target_topics(tmp_path: Path) -> None:
    from pytest_kafka_mirror.replicators.mm2 import naming_from_properties

    identity = _file(tmp_path, f"{PRODUCTION}replication.policy.class = {IDENTITY_POLICY}\n")
    assert naming_from_properties(_render(identity).properties) == NamingPolicy()
    underscore = _file(tmp_path, f"{PRODUCTION}replication.policy.separator = _\n", "sep.properties")
    assert naming_from_properties(_render(underscore).properties) == NamingPolicy("source_")


def test_secured_session_clusters_replace_your_security_and_a_fixed_rest_port_is_freed(tmp_path: Path) -> None:
    path = _file(tmp_path, PRODUCTION + "primary.listeners = http://0.0.0.0:8083\n")
    based = _render(path, source_client={"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                                         "sasl.username": "u", "sasl.password": "pw"})
    p = based.properties
    assert p["source.security.protocol"] == "SASL_PLAINTEXT"
    assert "PlainLoginModule" in p["source.sasl.jaas.config"]
    assert based.origins["source.security.protocol"] == "the plugin (the session's source cluster's client properties)"
    replaced = {c.written: c for c in based.changes if c.action == "replaced"}
    assert replaced["primary.security.protocol"].now == "SASL_PLAINTEXT"
    listener = p["source.listeners"]
    assert listener.startswith("http://127.0.0.1:") and listener != "http://127.0.0.1:8083"
    assert replaced["primary.listeners"].reason == "a port of its own: several MM2s may run on this machine at once"


def test_a_third_cluster_of_your_file_is_left_out(tmp_path: Path) -> None:
    path = _file(tmp_path, "clusters = primary, backup, dr\nprimary->backup.enabled = true\n"
                           "dr.bootstrap.servers = kafka-dr:9092\nprimary->dr.enabled = false\n")
    based = _render(path)
    assert not any("dr" in k.split(".", 1)[0] for k in based.properties)
    removed = [(c.written, c.reason) for c in based.changes if c.action == "removed"]
    why = "your cluster dr is not in the flow the session runs: nothing may reach it"
    assert removed == [("dr.bootstrap.servers", why), ("primary->dr.enabled", why)]
    assert based.properties["clusters"] == "source, target"


def test_without_your_file_nothing_changes(tmp_path: Path) -> None:
    based = render_mm2(source_bootstrap="127.0.0.1:1", target_bootstrap="127.0.0.1:2", topics="^km-.*", instance="km-1")
    assert based.origins == {} and based.changes == [] and based.added == []
    assert based.properties["tasks.max"] == "4" and based.properties["clusters"] == "source, target"


def test_offset_syncs_off_in_your_file_drops_only_the_plugin_keys(tmp_path: Path) -> None:
    path = _file(tmp_path, PRODUCTION + "emit.offset-syncs.enabled = false\n")
    p = _render(path).properties
    assert "source->target.offset-syncs.topic.replication.factor" not in p and "offset-syncs.topic.location" not in p


# ------------------------------------------------------------------------ the replicator built
def test_the_replicator_runs_your_file_and_quotes_it(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    home = fake_release(tmp_path, "3.9.1")
    path = _file(tmp_path)
    spec = parse_replicator_spec(f"mm2:{home},properties={path}")
    src, dst = unstarted_cluster("127.0.0.1:1"), unstarted_cluster("127.0.0.1:2", name="target")
    opts = ReplicatorOptions(topic_prefix="km-master", properties=(("tasks.max", "3"),),
                             origins=(("tasks.max", "the test's marker"),))
    with caplog.at_level(logging.INFO, logger="pytest_kafka_mirror.mm2"):
        rep = make_replicator(spec, src, dst, tmp_path / "mm2", opts)
    assert isinstance(rep, MirrorMaker2)
    assert rep.spec == f"mm2:{home.resolve()},properties={path.resolve()}" == str(spec)
    assert rep.label == f"MirrorMaker 2 (3.9.1 from {home.resolve()}, your mm2.properties {path.resolve()})"
    yours = f"your mm2.properties ({path.resolve()})"
    assert rep.settings.quote("refresh.topics.interval.seconds") == f"refresh.topics.interval.seconds=7 ({yours})"
    assert rep.settings.quote("tasks.max") == "tasks.max=3 (the test's marker)"  # the marker over your file
    assert rep.settings.quote("topics") == "source->target.topics=^km\\-master-.* (the plugin (the session's test topics))"
    assert rep.settings.quote("emit.checkpoints.interval.seconds") == (
        "emit.checkpoints.interval.seconds=5 (rendered by the plugin: your mm2.properties does not set it)")
    assert rep.naming == NamingPolicy("source.")
    logged = [r.getMessage() for r in caplog.records]
    assert any(m.startswith(f"{rep.label}: your mm2.properties {path.resolve()}: 6 of its 15 settings kept") for m in logged)
    assert any("line 6 primary->backup.topics=orders.*, payments.*: replaced by source->target.topics" in m for m in logged)
    written = rep.render().read_text()
    assert written.startswith(f"# MirrorMaker 2: your {path.resolve()}, changed by pytest-kafka-mirror where it must:\n")
    assert "# changed by the plugin: line 12 primary.security.protocol=SASL_SSL: removed" in written
    assert "s3cret" not in written
    assert parse_properties(written)["source.consumer.max.poll.records"] == "1000"
    node = rep.node(tmp_path / "node-1")
    assert node.base is rep.base and node.properties == rep.properties


def test_the_file_is_read_again_when_the_replicator_is_built(tmp_path: Path) -> None:
    path = _file(tmp_path)
    spec = parse_replicator_spec(f"mm2:{fake_release(tmp_path, '3.9.1')},properties={path}")
    path.unlink()
    from pytest_kafka_mirror.replicators import ReplicatorError

    with pytest.raises(ReplicatorError) as info:
        make_replicator(spec, unstarted_cluster("127.0.0.1:1"), unstarted_cluster("127.0.0.1:2", name="target"),
                        tmp_path / "mm2")
    assert str(info.value) == f"the spec {spec}: your mm2.properties {path.resolve()}: no such file"


def test_the_session_header_previews_the_changes(tmp_path: Path) -> None:
    from pytest_kafka_mirror.plugin import _user_properties_header

    path = _file(tmp_path, PRODUCTION + "primary->backup.use.defaults.from = target\n")
    spec = f"mm2:4.3.1,properties={path}"

    def settings(**env: str) -> Settings:
        return resolve_settings({}, lambda key: None, {"KAFKA_MIRROR_REPLICATOR": spec, **env}, rootdir=tmp_path)

    def header(**env: str) -> list[str]:
        return _user_properties_header(settings(**env))

    lines = header()  # on the embedded Tansu brokers, the defaults
    assert lines[0].startswith(f"your mm2.properties {path.resolve()}: 6 of its 16 settings kept")
    assert ("changed by the plugin: line 6 primary->backup.topics: replaced by source->target.topics (the session's "
            "test topics)") in lines
    tansu = ("changed by the plugin: line 17 primary->backup.use.defaults.from: replaced by "
             "source->target.use.defaults.from (Tansu reports every topic config as a default: the config sync would "
             "delete them)")
    assert tansu in lines
    kafka = header(KAFKA_MIRROR_SOURCE="kafka:4.3.1", KAFKA_MIRROR_TARGET="kafka:4.3.1")
    assert tansu not in kafka and kafka[0].startswith(f"your mm2.properties {path.resolve()}: 7 of its 16 settings kept")
    resolved = settings()
    path.unlink()  # after the session parsed its settings: the header never fails for it
    assert _user_properties_header(resolved) == [f"your mm2.properties {path.resolve()}: no such file"]


# ------------------------------------------------------------------------------ the gate's names
def test_the_gate_labels_specs_readably_and_never_alike(tmp_path: Path) -> None:
    from pytest_kafka_mirror.cli.gate import gate_labels, gate_sessions, spec_label

    old_home, new_home = fake_release(tmp_path / "a", "3.9.1"), fake_release(tmp_path / "b", "4.3.1")
    path = _file(tmp_path, name="prod mm2.properties")
    old, new = f"mm2:{old_home},properties={path}", f"mm2:{new_home},properties={path}"
    assert spec_label(old) == "mm2-3.9.1-prod-mm2.properties"
    assert spec_label("mm2:4.3.1") == "mm2-4.3.1" and spec_label("reference:drop=0.1,seed=3") == "reference-drop-0.1-seed-3"
    assert gate_labels(old, new) == ("mm2-3.9.1-prod-mm2.properties", "mm2-4.3.1-prod-mm2.properties")
    other = _file(tmp_path / "a", name="prod mm2.properties")
    assert gate_labels(old, f"mm2:{old_home},properties={other}") == ("mm2-3.9.1-prod-mm2.properties-old",
                                                                      "mm2-3.9.1-prod-mm2.properties-new")
    baseline, candidate = gate_sessions(old, new, ["scenarios"], checks=["missing:0"], storage=tmp_path, stamp="S")
    assert f"--kafka-mirror-replicator={old}" in baseline  # passed through as given
    assert "--kafka-mirror-save=gate-mm2-3.9.1-prod-mm2.properties-S" in baseline
    argv = candidate(tmp_path / "0001_x.json")
    assert f"--kafka-mirror-replicator={new}" in argv and "--kafka-mirror-save=gate-mm2-4.3.1-prod-mm2.properties-S" in argv
    for label in gate_labels(old, new):
        assert all(c.isalnum() or c in ".-" for c in label), label
