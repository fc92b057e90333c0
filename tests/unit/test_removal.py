"""Topics removed so that they stay removed (clusters/removal.py): delete, wait, check again,
delete what came back, name what stayed and why; and what the session's end and start say
about it on clusters the plugin does not run, with a replicator it does not stop."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from pytest_kafka_mirror.clusters import removal
from pytest_kafka_mirror.clusters.removal import TOPICS, Removal, auto_create_topics, remove, stayed_lines
from pytest_kafka_mirror.config import resolve_settings
from pytest_kafka_mirror.provisioning import auto_create_warning, delete_session_topics
from pytest_kafka_mirror.replicators.base import ReplicatorBase

FOREVER = 10**6


class _Future:
    def __init__(self, value: Any = None, error: KafkaError | None = None) -> None:
        self.value, self.error = value, error

    def result(self, timeout: float | None = None) -> Any:
        if self.error is not None:
            raise KafkaException(self.error)
        return self.value


class _Admin:
    """A cluster's admin client: ``topics`` exist; a name in ``returns`` comes back after each
    deletion that many times (a consumer still assigned to it, on a broker that auto-creates);
    ``auto_create``: the broker's auto.create.topics.enable (None: DescribeConfigs refused)."""

    def __init__(self, servers: str, topics: set[str], returns: dict[str, int] | None = None,
                 auto_create: str | None = "true", groups: set[str] | None = None) -> None:
        self.bootstrap_servers = servers
        self.topics, self.groups = set(topics), set(groups or ())
        self.returns = dict(returns or {})
        self.auto_create = auto_create
        self.deletions: list[list[str]] = []
        self.created_topics: list[str] | None = None

    def admin(self) -> _Admin:
        return self

    def delete_topics(self, names: list[str], operation_timeout: float) -> dict[str, _Future]:
        self.deletions.append(list(names))
        out = {}
        for n in names:
            if n not in self.topics:
                out[n] = _Future(error=KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART))
                continue
            if self.returns.get(n, 0) > 0:
                self.returns[n] -= 1  # recreated at once by the consumer's next metadata request
            else:
                self.topics.discard(n)
            out[n] = _Future()
        return out

    def delete_consumer_groups(self, names: list[str], request_timeout: float) -> dict[str, _Future]:
        self.deletions.append(list(names))
        out = {n: _Future() if n in self.groups else _Future(error=KafkaError(KafkaError.GROUP_ID_NOT_FOUND))
               for n in names}
        self.groups -= set(names)
        return out

    def list_topics(self, timeout: float) -> Any:
        return SimpleNamespace(topics={t: None for t in self.topics}, brokers={3: None, 1: None})

    def list_consumer_groups(self, request_timeout: float) -> _Future:
        return _Future(SimpleNamespace(valid=[SimpleNamespace(group_id=g) for g in sorted(self.groups)]))

    def describe_configs(self, resources: list[Any], request_timeout: float) -> dict[Any, _Future]:
        (resource,) = resources
        assert resource.name == "1"  # the first broker
        if self.auto_create is None:
            return {resource: _Future(error=KafkaError(KafkaError.CLUSTER_AUTHORIZATION_FAILED))}
        return {resource: _Future({"auto.create.topics.enable": SimpleNamespace(value=self.auto_create)})}


def _no_pause(seconds: float) -> None:
    pass


#: one look at the cluster's list per round, without sleeping (wait = the first interval)
QUICK: dict[str, Any] = {"wait": removal.INTERVAL, "pause": _no_pause}


def test_a_topic_back_once_is_deleted_again_one_that_keeps_coming_back_stays_with_the_reason() -> None:
    source = _Admin("a:1", {"km-once", "km-forever", "km-gone"}, returns={"km-once": 1, "km-forever": FOREVER})
    r = Removal(source, ["km-once", "km-forever", "km-gone", "km-absent"], TOPICS, "the source", "the source (a:1)",
                "test topic")
    remove([r], rounds=3, **QUICK)
    assert source.deletions == [["km-once", "km-forever", "km-gone", "km-absent"], ["km-forever", "km-once"],
                                ["km-forever"]]
    assert r.deleted == {"km-once", "km-forever", "km-gone"} and r.again == {"km-once", "km-forever"}
    assert r.stayed == ["km-forever"] and r.failed == {}
    assert source.topics == {"km-forever"}
    assert r.said() == "deleted 3 test topic(s) from the source (a:1) (2 of them again after they came back)"
    assert stayed_lines([r]) == [(
        "1 topic(s) came back after deletion: auto.create.topics.enable=true on the source (a consumer still "
        "assigned to them recreates them; stop the replicator's flow or set allow.auto.create.topics=false on its "
        "consumer): km-forever")]


def test_nothing_comes_back_one_round_and_one_look() -> None:
    source = _Admin("a:1", {"km-a", "km-b"})
    looks: list[float] = []
    r = Removal(source, ["km-a", "km-b"], TOPICS, "the source", "the source (a:1)", "test topic")
    remove([r], rounds=4, wait=removal.INTERVAL, pause=looks.append)
    assert source.deletions == [["km-a", "km-b"]] and looks == [removal.INTERVAL]
    assert r.stayed == [] and r.again == set() and not stayed_lines([r])


def test_once_deletes_and_checks_nothing() -> None:
    """A flow the plugin stopped first: one deletion, no wait (what came back is not looked for)."""
    source = _Admin("a:1", {"km-a"}, returns={"km-a": FOREVER})
    r = Removal(source, ["km-a"], TOPICS, "the source", "the source (a:1)", "test topic")
    remove([r], pause=lambda s: pytest.fail("no wait"))
    assert source.deletions == [["km-a"]] and r.stayed == [] and r.said() == "deleted 1 test topic(s) from the source (a:1)"


@pytest.mark.parametrize(("auto_create", "reason"), [
    ("false", ("auto.create.topics.enable=false on b:1, so a client creates them again (a replicator whose flow "
               "still runs, copying topics that came back on its source; stop that flow)")),
    (None, ("auto.create.topics.enable unknown (DescribeConfigs of the broker: Broker: Cluster authorization failed) "
            "on b:1; if it is true, a consumer still assigned to them recreates them (stop the replicator's flow or "
            "set allow.auto.create.topics=false on its consumer)")),
])
def test_the_reason_says_what_the_broker_setting_is(auto_create: str | None, reason: str) -> None:
    names = [f"km-{i:02}" for i in range(12)]
    target = _Admin("b:1", set(names), returns={n: FOREVER for n in names}, auto_create=auto_create)
    r = Removal(target, names, TOPICS, "b:1", "b:1")
    remove([r], rounds=2, **QUICK)
    assert len(target.deletions) == 2 and r.stayed == names
    assert stayed_lines([r]) == [f"12 topic(s) came back after deletion: {reason}: {', '.join(names[:10])} and 2 more"]


def test_auto_create_topics_reads_the_first_broker() -> None:
    assert auto_create_topics(_Admin("a:1", set(), auto_create="TRUE")) == (True, "auto.create.topics.enable=true")
    assert auto_create_topics(_Admin("a:1", set(), auto_create="false")) == (False, "auto.create.topics.enable=false")
    quiet = _Admin("a:1", set())
    quiet.describe_configs = lambda resources, request_timeout: {resources[0]: _Future({})}  # type: ignore[method-assign]
    assert auto_create_topics(quiet) == (None, "auto.create.topics.enable unknown (broker 1 does not report it)")


def test_a_refused_deletion_is_not_looked_for_again() -> None:
    source = _Admin("a:1", {"km-a"})
    source.delete_topics = lambda names, operation_timeout: {  # type: ignore[method-assign]
        n: _Future(error=KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED)) for n in names}
    r = Removal(source, ["km-a"], TOPICS, "the source", "the source (a:1)", "test topic")
    remove([r], rounds=3, **QUICK)
    assert r.stayed == [] and r.deleted == set()
    assert r.said() == ("deleted 0 test topic(s) from the source (a:1); could not delete 1: km-a (Broker: Topic "
                        "authorization failed)")


class _External(ReplicatorBase):
    """An ``external:prefix:primary.`` replicator: the plugin does not stop its flow."""

    controllable = False
    spec = "external:prefix:primary."
    probe_topic = "km-master-kafka-mirror-probe-1"

    def target_topic(self, topic: str) -> str:
        return f"primary.{topic}"


def test_the_session_end_with_an_external_replicator_deletes_again_on_both_clusters() -> None:
    """The measured case: MM2's consumer recreates source topics, MM2 copies them again."""
    source = _Admin("a:1", {"km-master-t-1", "km-master-t-2", "km-master-kafka-mirror-probe-1"},
                    returns={"km-master-t-1": FOREVER, "km-master-kafka-mirror-probe-1": 1},
                    groups={"km-master-t-x-end"})
    source.created_topics = ["km-master-t-1", "km-master-t-2"]
    target = _Admin("b:1", {"primary.km-master-t-1", "primary.km-master-kafka-mirror-probe-1"},
                    returns={"primary.km-master-t-1": 1}, auto_create="false")
    said = delete_session_topics(source, target, _External(), source_kind="bootstrap",  # type: ignore[arg-type]
                                 target_kind="bootstrap", groups=["km-master-t-x-end"], **QUICK)
    assert len(source.deletions) == 5  # the topics in rounds 1-4, the group once (it did not come back)
    assert target.topics == set() and source.topics == {"km-master-t-1"}
    assert said == (
        "deleted 3 test topic(s) from the source (a:1) (2 of them again after they came back); deleted 1 witness "
        "consumer group(s) from the source; deleted 2 test topic(s) from the target (b:1) (1 of them again after "
        "they came back); 1 topic(s) came back after deletion: auto.create.topics.enable=true on the source (a "
        "consumer still assigned to them recreates them; stop the replicator's flow or set "
        "allow.auto.create.topics=false on its consumer): km-master-t-1; the replicator copies them to the target "
        "again: primary.km-master-t-1; once nothing recreates them, kafka-mirror cleanup --bootstrap HOST:PORT --yes "
        "removes them")


def test_the_session_end_with_a_replicator_it_stopped_deletes_once() -> None:
    source = _Admin("a:1", {"km-master-t-1"}, returns={"km-master-t-1": FOREVER})
    source.created_topics = ["km-master-t-1"]
    rep = _External()
    rep.controllable = True
    said = delete_session_topics(source, _Admin("b:1", set()), rep, source_kind="bootstrap",  # type: ignore[arg-type]
                                 target_kind="tansu", pause=lambda s: pytest.fail("no wait"))
    assert source.deletions == [["km-master-t-1", "km-master-kafka-mirror-probe-1"]]
    assert said == "deleted 1 test topic(s) from the source (a:1)"


def test_the_closing_note_names_what_stayed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_kafka_mirror.plugin import _delete_session_topics
    from pytest_kafka_mirror.session import KafkaMirrorSession

    # one look per round, at once (the session's end passes no wait of its own)
    monkeypatch.setattr(removal, "WAIT", 1e-9)
    monkeypatch.setattr(removal, "INTERVAL", 0.0)
    ini = {"kafka_mirror_source": "bootstrap:a:1", "kafka_mirror_target": "bootstrap:b:1",
           "kafka_mirror_replicator": "external:prefix:primary."}
    session = KafkaMirrorSession(resolve_settings({}, lambda k: ini.get(k), {}, rootdir=tmp_path))
    source = _Admin("a:1", {"km-master-t-1"}, returns={"km-master-t-1": FOREVER})
    source.created_topics = ["km-master-t-1"]
    _delete_session_topics(session, source, _Admin("b:1", set()), _External())  # type: ignore[arg-type]
    (note,) = session.closing_notes
    assert note.startswith("deleted 1 test topic(s) from the source (a:1) (1 of them again after they came back); "
                           "deleted 0 test topic(s) from the target (b:1); 1 topic(s) came back after deletion: "
                           "auto.create.topics.enable=true on the source")
    assert note.endswith(": km-master-t-1; the replicator copies them to the target again: primary.km-master-t-1; "
                         "once nothing recreates them, kafka-mirror cleanup --bootstrap HOST:PORT --yes removes them "
                         "(keep them with --kafka-mirror-keep-topics)")


@pytest.mark.parametrize(("source_auto", "target_auto", "controllable", "where"), [
    ("true", "false", False, "the source"),
    ("true", "true", False, "the source and the target"),
    (None, "false", False, None),   # unknown: no warning
    ("true", "true", True, None),   # the plugin stops its replicator's flow before deleting
])
def test_the_session_start_warns_when_a_bootstrap_cluster_auto_creates(
        source_auto: str | None, target_auto: str, controllable: bool, where: str | None) -> None:
    rep = _External()
    rep.controllable = controllable
    text = auto_create_warning(_Admin("a:1", set(), auto_create=source_auto),  # type: ignore[arg-type]
                               _Admin("b:1", set(), auto_create=target_auto), rep,  # type: ignore[arg-type]
                               source_kind="bootstrap", target_kind="bootstrap")
    if where is None:
        assert text is None
        return
    assert text is not None and text.startswith(
        f"auto.create.topics.enable=true on {where}: a consumer still assigned to a topic this session deletes at "
        "its end (the replicator's, external:prefix:primary., which the plugin does not stop) recreates it")
    assert "kafka-mirror cleanup" in text and "allow.auto.create.topics=false" in text


def test_the_session_start_warning_is_a_pytest_kafka_mirror_warning(tmp_path: Path) -> None:
    from pytest_kafka_mirror import PytestKafkaMirrorWarning
    from pytest_kafka_mirror.plugin import _warn_auto_create
    from pytest_kafka_mirror.session import KafkaMirrorSession

    ini = {"kafka_mirror_source": "bootstrap:a:1", "kafka_mirror_replicator": "external:prefix:primary."}
    session = KafkaMirrorSession(resolve_settings({}, lambda k: ini.get(k), {}, rootdir=tmp_path))
    with pytest.warns(PytestKafkaMirrorWarning, match=r"^kafka-mirror: auto.create.topics.enable=true on the source:"):
        _warn_auto_create(session, _Admin("a:1", set()), _Admin("b:1", set()), _External())  # type: ignore[arg-type]
    kept = KafkaMirrorSession(resolve_settings({}, lambda k: {**ini, "kafka_mirror_keep_topics": "true"}.get(k), {},
                                               rootdir=tmp_path))
    _warn_auto_create(kept, _Admin("a:1", set()), _Admin("b:1", set()), _External())  # type: ignore[arg-type]
