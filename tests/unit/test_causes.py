"""Every failure names its cause when the plugin can know it: the settings a replicator runs
with, resolved as MirrorMaker 2 resolves them and quoted with where each came from, and the
hints and messages built on them (no hint that the evidence rules out)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_kafka_mirror.clusters.bootstrap import BootstrapCluster
from pytest_kafka_mirror.clusters.kafka_dist import KafkaRelease
from pytest_kafka_mirror.replicators import ReplicatorOptions, make_replicator
from pytest_kafka_mirror.replicators.mm2 import MirrorMaker2
from pytest_kafka_mirror.replicators.settings import EffectiveSettings, explain, readiness_hint, settings_of
from pytest_kafka_mirror.verify import MirrorMismatchError
from tests.fakes import unstarted_cluster
from tests.stored import sample_report

USER = "--kafka-mirror-replicator-properties"


def _cluster(port: int) -> BootstrapCluster:
    return unstarted_cluster(f"127.0.0.1:{port}", replication_factor=1)


def _mm2(tmp_path: Path, props: dict[str, str], origins: dict[str, str]) -> MirrorMaker2:
    release = KafkaRelease(Path("/nowhere"), (4, 3, 1))  # never started: no jars needed
    return MirrorMaker2(_cluster(1), _cluster(2), tmp_path,
                        topic_prefix="km-gw0", release=release, overrides=tuple(props.items()), origins=origins)


def test_a_flow_key_wins_over_a_top_level_one_and_each_says_where_it_came_from() -> None:
    s = EffectiveSettings({"emit.checkpoints.enabled": "true", "source->target.emit.checkpoints.enabled": "false",
                           "refresh.topics.interval.seconds": "2"},
                          origins={"source->target.emit.checkpoints.enabled": USER})
    assert s.lookup("emit.checkpoints.enabled") == ("source->target.emit.checkpoints.enabled", "false", USER)
    assert s.quote("emit.checkpoints.enabled", "refresh.topics.interval.seconds", "exactly.once.source.support") == (
        f"source->target.emit.checkpoints.enabled=false ({USER}), refresh.topics.interval.seconds=2 (rendered by the "
        "plugin), exactly.once.source.support=disabled (MM2's default)")
    # the flow's clusters by alias: MM2's key for the target herder's offset commits
    assert s.quote("{target}.offset.flush.interval.ms") == "target.offset.flush.interval.ms=60000 (MM2's default)"
    assert s.quote("no.such.key") == "no.such.key not set"


def test_mm2s_settings_name_the_test_the_user_or_the_plugin(tmp_path: Path) -> None:
    rep = _mm2(tmp_path, {"sync.group.offsets.enabled": "true", "source->target.sync.group.offsets.enabled": "false",
                          "emit.heartbeats.enabled": "false"},
               {"sync.group.offsets.enabled": "the test's marker", "source->target.sync.group.offsets.enabled": USER,
                "emit.heartbeats.enabled": USER})
    assert settings_of(rep) is rep.effective_settings()
    assert rep.settings.quote("group sync").startswith(
        f"source->target.sync.group.offsets.enabled=false ({USER}), sync.group.offsets.interval.seconds=5 (rendered "
        "by the plugin), emit.checkpoints.enabled=true (rendered by the plugin)")
    # the failover checks' settings carry the same quotes, and who asked for the group sync
    cp = rep.checkpoints
    assert cp.no_group_sync() == (f"source->target.sync.group.offsets.enabled=false ({USER}): the replicator commits "
                                  "no group offsets on the target")
    assert cp.asked["sync_group_offsets"] == "sync.group.offsets.enabled=true (the test's marker)"
    assert cp.no_heartbeats() == f"emit.heartbeats.enabled=false ({USER}): the replicator emits no heartbeats"
    assert cp.no_checkpoints() is None


def test_the_reference_mirror_names_only_settings_it_has(tmp_path: Path) -> None:
    rep = make_replicator("reference", _cluster(1), _cluster(2), tmp_path,  # type: ignore[arg-type]
                          ReplicatorOptions(topic_prefix="km-gw0", properties=(("emit.checkpoints.enabled", "false"),),
                                            origins=(("emit.checkpoints.enabled", USER),)))
    s = settings_of(rep)
    assert s is not None
    assert s.quote("checkpoints").startswith(f"emit.checkpoints.enabled=false ({USER}), "
                                             "emit.checkpoints.interval.seconds=1 (the reference mirror's default)")
    assert s.quote("duplicates") == ("exactly.once.source.support (not a setting of the reference mirror), "
                                     "target.offset.flush.interval.ms=1000 (the reference mirror's default)")
    assert s.quote("topics") == ("source->target.topics=^km\\-gw0-.* (the reference mirror's topics and "
                                 "discovery_interval knobs)")
    assert rep.checkpoints.no_checkpoints() == (f"emit.checkpoints.enabled=false ({USER}): the replicator writes no "
                                                "checkpoints")


def test_mirrormaker_1_quotes_its_own_settings_and_names_what_it_does_not_have(tmp_path: Path) -> None:
    from pytest_kafka_mirror.replicators.mm1 import LegacyMirrorMaker

    release = KafkaRelease(Path("/nowhere"), (3, 9, 1))  # never started: no jars needed
    rep = LegacyMirrorMaker(_cluster(1), _cluster(2), tmp_path, release, topic_prefix="km-gw0",
                            overrides=(("producer.max.request.size", "100000"), ("offset.commit.interval.ms", "30000")),
                            origins={"producer.max.request.size": USER, "offset.commit.interval.ms": USER})
    s = settings_of(rep)
    assert s is not None
    assert s.quote("record size") == (f"producer.max.request.size=100000 ({USER}), "
                                      "consumer.max.partition.fetch.bytes=1048576 (rendered by the plugin)")
    assert s.quote("duplicates") == ("exactly.once.source.support (not a setting of MirrorMaker 1), "
                                     f"offset.commit.interval.ms=30000 ({USER})")
    assert s.quote("transactions") == "consumer.isolation.level=read_uncommitted (the client's or MirrorMaker's default)"
    assert s.quote("discovery") == ("--include=^km\\-gw0-.* (rendered by the plugin), topics.exclude (not a setting of "
                                    "MirrorMaker 1), consumer.metadata.max.age.ms=2000 (rendered by the plugin)")
    # never "not configured by the plugin": the plugin rendered every line of it
    assert explain(rep, "headers") == "mm1:/nowhere in effect: header.converter (not a setting of MirrorMaker 1)"


def test_a_replicator_the_plugin_does_not_configure_gets_what_to_check() -> None:
    rep = SimpleNamespace(spec="external:prefix:primary.", health=lambda: "")
    assert explain(rep, "group sync") == (
        "external:prefix:primary. is not configured by the plugin: check its own settings of group sync "
        "(sync.group.offsets.enabled, sync.group.offsets.interval.seconds, emit.checkpoints.enabled, "
        "emit.checkpoints.interval.seconds, emit.offset-syncs.enabled, groups, groups.exclude, "
        "refresh.groups.interval.seconds in MirrorMaker 2's names)")


def test_explain_adds_what_the_replicator_says_of_itself(tmp_path: Path) -> None:
    rep = _mm2(tmp_path, {"refresh.topics.interval.seconds": "300"}, {"refresh.topics.interval.seconds": USER})
    said = "MirrorMaker 2's Connect status (...): MirrorSourceConnector task 0 FAILED: boom"
    rep.health = lambda: said  # type: ignore[method-assign]
    text = explain(rep, "discovery")
    assert f"refresh.topics.interval.seconds=300 ({USER})" in text and text.endswith("task 0 FAILED: boom")


@pytest.mark.parametrize("props,found,hint", [
    # the filter does not take the topic: name the filter
    ({"source->target.topics.exclude": ".*"}, {}, "Hint: the replicator's topic filter does not take km-gw0-t: "
     "source->target.topics=^km\\-gw0-.* (rendered by the plugin), source->target.topics.exclude=.* (" + USER + ")."),
    # it does, the remote topic never appeared: name the discovery interval, not the filter
    ({"refresh.topics.interval.seconds": "300"}, {}, "Hint: its topic filter takes these topics "
     "(source->target.topics=^km\\-gw0-.* (rendered by the plugin)), yet source.km-gw0-t never appeared on the "
     "target: the replicator looks for new topics every refresh.topics.interval.seconds=300 (" + USER + ")"),
    # the remote topic exists and nothing crossed: the tasks, not the filter nor the discovery
    ({}, {"source.km-gw0-t": 2}, "Hint: the remote topics exist (the replicator discovered them: "
     "source->target.topics=^km\\-gw0-.* (rendered by the plugin)), yet no warm-up record crossed: the copying "
     "tasks are the suspect"),
])
def test_a_readiness_hint_points_only_where_the_evidence_does(tmp_path: Path, props: dict[str, str],
                                                              found: dict[str, int], hint: str) -> None:
    rep = _mm2(tmp_path, props, dict.fromkeys(props, USER))
    assert readiness_hint(rep, {"km-gw0-t": "source.km-gw0-t"}, found).startswith(hint)


class _Listed(SimpleNamespace):
    """A cluster whose topics are ``names`` (None: it cannot be listed)."""

    def topics(self) -> list[str]:
        if self.names is None:
            raise RuntimeError("no answer")
        return list(self.names)


def _external(spec: str, target_topics: list[str] | None) -> object:
    """An ``external:`` replicator as the session makes it (worker prefix km-gw0, session prefix km)."""
    rep = make_replicator(spec, _Listed(bootstrap_servers="127.0.0.1:1", names=[]),
                          _Listed(bootstrap_servers="127.0.0.1:2", names=target_topics), "/nowhere",
                          ReplicatorOptions(topic_prefix="km-gw0", session_prefix="km"))
    assert settings_of(rep) is None  # not configured by the plugin
    return rep


@pytest.mark.parametrize("spec,target_topics,says", [
    # a copy under MM2's DefaultReplicationPolicy: the spec to give, with its alias
    ("external:identity", ["primary.km-gw0-t", "other"],
     "Hint: km-gw0-t never appeared on the target, but primary.km-gw0-t did: the replicator names topics as "
     "external:prefix:primary. says; give --kafka-mirror-replicator external:prefix:primary. (now "
     "--kafka-mirror-replicator external:identity)."),
    # a copy under the source's name: identity
    ("external:prefix:primary.", ["km-gw0-t"], "give --kafka-mirror-replicator external:identity (now "
     "--kafka-mirror-replicator external:prefix:primary.)"),
    # no copy under any name: no other naming to suggest; the filter of the user's replicator
    ("external:prefix:primary.", ["other"], "Hint: primary.km-gw0-t never appeared on the target, under the naming "
     "of --kafka-mirror-replicator external:prefix:primary. or any other (no target topic ends with its source "
     "topic's name). Is the replicator running, and does its topic filter take ^km-.* (every topic of the session "
     "starts with km-: --kafka-mirror-topic-prefix)?"),
    # the target cannot be listed: the filter, and how the spec names MM2's policy
    ("external:identity", None, "Hint: km-gw0-t never appeared on the target under the naming of "
     "--kafka-mirror-replicator external:identity. Is the replicator running, and does its topic filter take ^km-.* "
     "(every topic of the session starts with km-: --kafka-mirror-topic-prefix)? If it renames topics, the spec says "
     "how: external:prefix:ALIAS. for MirrorMaker 2's DefaultReplicationPolicy (e.g. external:prefix:primary. for a "
     "source cluster aliased primary)"),
])
def test_an_external_replicator_s_readiness_hint_names_its_spec_and_filter_not_the_naming_option(
        spec: str, target_topics: list[str] | None, says: str) -> None:
    rep = _external(spec, target_topics)
    hint = readiness_hint(rep, {"km-gw0-t": rep.target_topic("km-gw0-t")}, {})
    assert hint.startswith(says) or says in hint, hint
    assert "--kafka-mirror-naming" not in hint  # the spec names an external replicator's policy


def test_an_external_replicator_whose_target_topic_exists_is_not_told_about_naming() -> None:
    rep = _external("external:prefix:primary.", ["primary.km-gw0-t"])
    hint = readiness_hint(rep, {"km-gw0-t": "primary.km-gw0-t"}, {"primary.km-gw0-t": 2})
    assert hint.startswith("Hint: the target topics exist (primary.km-gw0-t), yet no warm-up record crossed")
    assert "naming" not in hint and "external:" not in hint


def test_a_command_replicator_s_readiness_hint_names_the_naming_option_not_external() -> None:
    rep = make_replicator("command:run {source} {target} {topics}", _cluster(1), _cluster(2), "/nowhere",
                          ReplicatorOptions(topic_prefix="km-gw0"))
    hint = readiness_hint(rep, {"km-gw0-t": "km-gw0-t"}, {})
    assert "(--kafka-mirror-naming identity)" in hint and "external:" not in hint, hint


def test_a_verification_failure_quotes_the_settings_behind_it() -> None:
    report = sample_report(duplicated=0)
    report.duplicated = 920
    report.replicator = {"spec": "mm2:4.3.1", "settings": {
        "duplicates": "exactly.once.source.support=disabled (MM2's default), target.offset.flush.interval.ms=5000 "
                      "(rendered by the plugin)"}}
    with pytest.raises(MirrorMismatchError, match=r"duplicates: 920 extra copies arrived \(allowed 0\)\n(.*\n)*  the "
                                                  r"replicator's settings behind it \(mm2:4.3.1\): exactly.once.source."
                                                  r"support=disabled \(MM2's default\)"):
        report.assert_ok()
    report.replicator = {"spec": "external:identity"}
    with pytest.raises(MirrorMismatchError, match=r"the plugin does not configure external:identity: check whether it "
                                                  r"copies exactly once"):
        report.assert_ok()


def test_a_verification_that_saw_no_record_fails() -> None:
    report = sample_report(expected=0)
    for check in (report.assert_ok, report.assert_no_loss, report.assert_exactly_once, report.assert_in_order):
        with pytest.raises(MirrorMismatchError, match=r"nothing to verify: the source acknowledged no record of this "
                                                      r"run \(0 expected\)"):
            check()
