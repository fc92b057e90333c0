"""Topologies of several clusters and flows: the pieces under scenarios/test_multi_cluster.py.

The reverse flow of an active-active pair as MirrorMaker 2 gets it (aliases swapped, a
filter that takes the remote topics), the reference mirror's model of MM2's cycle
detection, and the environment and run verbs (add_cluster, add_flow, also_capture).
"""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pytest_kafka_mirror._warnings import PytestKafkaMirrorWarning
from pytest_kafka_mirror.clusters.bootstrap import BootstrapCluster
from pytest_kafka_mirror.clusters.kafka_dist import KafkaRelease
from pytest_kafka_mirror.env import MirrorEnv
from pytest_kafka_mirror.replicators import NamingPolicy, ReplicatorError, ReplicatorOptions, make_replicator
from pytest_kafka_mirror.replicators.base import ReplicatorBase
from pytest_kafka_mirror.replicators.mm2 import IDENTITY_POLICY, MirrorMaker2, remote_aware_regex
from pytest_kafka_mirror.replicators.reference import ReferenceReplicator
from pytest_kafka_mirror.replicators.reference.discovery import Discovery
from pytest_kafka_mirror.replicators.reference.policy import AliasPolicy, policy_kind
from pytest_kafka_mirror.run import MirrorRun
from tests.fakes import unstarted_cluster

DEFAULT = "org.apache.kafka.connect.mirror.DefaultReplicationPolicy"


def _cluster(port: int) -> BootstrapCluster:
    return unstarted_cluster(f"127.0.0.1:{port}", replication_factor=1)


def _mm2(tmp_path: Path, aliases: tuple[str, str], src: int = 1, dst: int = 2, **kw: Any) -> MirrorMaker2:
    release = KafkaRelease(Path("/nowhere"), (4, 3, 1))  # never started: no jars needed
    return MirrorMaker2(_cluster(src), _cluster(dst), tmp_path, topic_prefix="km-gw0", release=release,  # type: ignore[arg-type]
                        aliases=aliases, topics=remote_aware_regex("km-gw0"), **kw)


# ----------------------------------------------------------------------------- the filter
@pytest.mark.parametrize(("topic", "matches"), [
    ("km-gw0-test-1a2b3c", True),
    ("source.km-gw0-test-1a2b3c", True),  # a remote copy: the cycle detection must decide, not the filter
    ("target.source.km-gw0-test-1a2b3c", True),
    ("third.km-gw0-kafka-mirror-probe-0badcafe", True),
    ("km-gw1-test-1a2b3c", False),  # another worker's
    ("source.km-gw1-test", False),
    ("xkm-gw0-test", False),
    ("heartbeats", False),
    ("source.heartbeats", False),
    ("mm2-offset-syncs.target.internal", False),
    ("source.checkpoints.internal", False),
])
def test_a_flow_of_a_topology_takes_the_remote_copies_of_the_test_topics(topic: str, matches: bool) -> None:
    regex = remote_aware_regex("km-gw0")
    assert regex == r"^(?:[A-Za-z0-9_-]+\.)*km\-gw0-.*"
    assert bool(re.fullmatch(regex, topic)) is matches  # MM2: a full match
    assert bool(re.search(regex, topic)) is matches  # the reference mirror: a search


# ----------------------------------------------------------------------------- MM2, the reverse flow
def test_the_reverse_flow_of_mm2_swaps_the_aliases(tmp_path: Path) -> None:
    """target -> source: cluster B is the alias 'target', so a topic of B is 'target.T' on A
    and MM2's isCycle skips 'source.T' on B (its source alias is the flow's target)."""
    rev = _mm2(tmp_path, ("target", "source"), src=2, dst=1)
    p = rev.properties
    assert p["clusters"] == "target, source"
    assert p["target.bootstrap.servers"] == "127.0.0.1:2" and p["source.bootstrap.servers"] == "127.0.0.1:1"
    assert p["target->source.enabled"] == "true" and p["source->target.enabled"] == "false"
    assert p["target->source.topics"] == p["target->source.groups"] == r"^(?:[A-Za-z0-9_-]+\.)*km\-gw0-.*"
    assert "source->target.topics" not in p
    assert p["replication.policy.class"] == DEFAULT
    # its own Connect group and internal topics, named after its herders' source aliases
    assert p["source.group.id"] == f"target-mm2-{rev.instance}"
    assert p["source.status.storage.topic"] == f"mm2-status.target.{rev.instance}.internal"
    assert p["target.group.id"] == f"source-mm2-{rev.instance}"  # its disabled (heartbeats) herder
    assert rev.status_topic == f"mm2-status.target.{rev.instance}.internal"  # on A, its target
    assert p["source.offset.flush.interval.ms"] == "5000" and rev.commit_interval_s == 5.0
    assert rev.target_topic("km-gw0-t") == "target.km-gw0-t"
    assert rev.checkpoints.names.checkpoints_topic == "target.checkpoints.internal"
    assert rev.checkpoints.names.offset_syncs_topic == "mm2-offset-syncs.source.internal"
    fwd = _mm2(tmp_path / "f", ("source", "target"))
    assert fwd.target_topic("km-gw0-t") == "source.km-gw0-t" and fwd.instance != rev.instance


def test_a_flow_to_a_third_cluster_and_identity_naming(tmp_path: Path) -> None:
    third = _mm2(tmp_path, ("source", "third"), dst=3)
    assert third.properties["clusters"] == "source, third"
    assert third.properties["source->third.enabled"] == "true" and third.properties["third->source.enabled"] == "false"
    assert third.properties["third.bootstrap.servers"] == "127.0.0.1:3"
    ident = _mm2(tmp_path / "i", ("third", "target"), src=3, overrides=(("replication.policy.class", IDENTITY_POLICY),))
    assert ident.target_topic("km-gw0-t") == "km-gw0-t"  # fan-in onto one topic


def test_make_replicator_takes_aliases_and_filter_for_mm2_and_reference(tmp_path: Path) -> None:
    opts = ReplicatorOptions(topic_prefix="km-gw0", aliases=("target", "source"), topics=remote_aware_regex("km-gw0"),
                             properties=(("replication.policy.class", DEFAULT),))
    from tests.kafka import fake_release

    home = fake_release(tmp_path / "release", version="4.3.1")
    mm2 = make_replicator(f"mm2:{home}", _cluster(2), _cluster(1), tmp_path / "m", opts)  # type: ignore[arg-type]
    ref = make_replicator("reference", _cluster(2), _cluster(1), tmp_path / "r", opts)  # type: ignore[arg-type]
    assert mm2.target_topic("km-gw0-t") == ref.target_topic("km-gw0-t") == "target.km-gw0-t"
    assert ref.topics == mm2.topics == opts.topics  # type: ignore[attr-defined]
    assert ref.policy == AliasPolicy("default", "target", "source")  # type: ignore[attr-defined]


# ----------------------------------------------------------------------------- the reference model
@pytest.mark.parametrize(("topic", "cycle"), [
    ("km-t", False),  # a local topic
    ("source.km-t", True),  # came from this flow's target
    ("target.km-t", False),  # came from this flow's source: copied as target.target.km-t? no: its source is 'target'
    ("third.source.km-t", True),  # source -> third -> target(=here): upstream came from the flow's target
    ("third.km-t", False),
    ("heartbeats", False),
    ("source.heartbeats", True),
    ("source.", False),  # Java's split drops the trailing empty part: no source alias
    (".km-t", False),  # source alias '' is nobody's
])
def test_reference_cycle_detection_is_mm2s_is_cycle(topic: str, cycle: bool) -> None:
    """The reverse flow target -> source (DefaultReplicationPolicy), as MirrorSourceConnector.isCycle decides."""
    assert AliasPolicy("default", "target", "source").is_cycle(topic) is cycle


def test_identity_and_legacy_naming_detect_no_cycle_but_heartbeats() -> None:
    ident = AliasPolicy("identity", "target", "source")
    assert [ident.is_cycle(t) for t in ("km-t", "source.km-t", "heartbeats", "source.heartbeats")] == [
        False, False, False, True]
    assert ident.upstream_topic("km-t") == "km-t" and ident.remote_prefix() == ""
    legacy = AliasPolicy("none", "target", "source")
    assert not any(legacy.is_cycle(t) for t in ("source.km-t", "source.heartbeats"))
    assert legacy.remote_prefix("dc1.") == "dc1." and AliasPolicy("default", "third").remote_prefix() == "third."
    assert AliasPolicy("default", separator="_").topic_source("source_x_y") == "source"
    assert policy_kind(None) == "none" and policy_kind(DEFAULT) == "default" and policy_kind(IDENTITY_POLICY) == "identity"
    with pytest.raises(ValueError, match="models DefaultReplicationPolicy and IdentityReplicationPolicy only"):
        policy_kind("com.example.MyPolicy")


def test_reference_naming_follows_the_policy_property(tmp_path: Path) -> None:
    def ref(props: tuple[tuple[str, str], ...] = (), naming: NamingPolicy | None = None,
            aliases: tuple[str, str] = ("source", "target")) -> ReferenceReplicator:
        return ReferenceReplicator("a:1", "b:2", tmp_path, topics="^km-", naming=naming, properties=props, aliases=aliases)

    assert ref().naming == NamingPolicy() and ref().policy.kind == "none"  # MM1 style, as before
    assert ref(naming=NamingPolicy("dc1.")).naming == NamingPolicy("dc1.")
    assert ref((("replication.policy.class", DEFAULT),)).naming == NamingPolicy("source.")
    assert ref((("replication.policy.class", DEFAULT),), aliases=("third", "target")).naming == NamingPolicy("third.")
    assert ref((("replication.policy.class", DEFAULT), ("replication.policy.separator", "_"))).naming == NamingPolicy(
        "source_")
    assert ref((("replication.policy.class", IDENTITY_POLICY),)).naming == NamingPolicy()
    with pytest.raises(ReplicatorError, match="contradicts replication.policy.class"):
        ref((("replication.policy.class", DEFAULT),), naming=NamingPolicy("dc1."))
    with pytest.raises(ReplicatorError, match="models DefaultReplicationPolicy"):
        ref((("replication.policy.class", "x.Mine"),))


def test_discovery_leaves_a_cycle_alone_and_says_so_once() -> None:
    said: list[str] = []
    policy = AliasPolicy("default", "target", "source")
    d = Discovery(consumer=None, gaps=None, src_admin=None, dst_admin=None, topics=remote_aware_regex("km"), prefix="target.",
                  internal=lambda t: t.endswith(".internal"), start_offset=lambda t, p: 0, on_partitions=lambda t, n: None,
                  behaviour=SimpleNamespace(), log=said.append, cycle=policy.is_cycle)  # type: ignore[arg-type]
    assert [d.mirrors(t) for t in ("km-t", "source.km-t", "source.km-t", "third.km-t", "source.checkpoints.internal")] == [
        True, False, False, True, False]
    assert said == ["not copying source.km-t: it came from this flow's target (a cycle)"]


# ----------------------------------------------------------------------------- the environment
class _Thing:
    spec = "thing"

    def __init__(self, name: str, log: list[str], fail: bool = False, cycles: bool = True) -> None:
        self.name, self.log, self.fail, self.detects_cycles = name, log, fail, cycles
        self.bootstrap_servers = f"{name}:9092"

    def start(self) -> None:
        self.log.append(f"start {self.name}")
        if self.fail:
            raise ReplicatorError(f"{self.name} did not start")

    def stop(self) -> None:
        self.log.append(f"stop {self.name}")

    def kill(self) -> None:
        self.log.append(f"kill {self.name}")


class _Replicator(_Thing, ReplicatorBase):
    """A flow's replicator: a thing with the default capabilities (ReplicatorBase) but its cycle detection."""

    detects_cycles = True  # each instance says its own (``cycles=``)


def _env(log: list[str], fail_flow: bool = False, cycles: bool = True) -> MirrorEnv:
    made: list[tuple[str, str]] = []

    def new_flow(src: Any, dst: Any, aliases: tuple[str, str]) -> Any:
        made.append(aliases)
        return _Replicator(f"{aliases[0]}->{aliases[1]}", log, fail=fail_flow, cycles=cycles)

    env = MirrorEnv(_Thing("A", log), _Thing("B", log), _Replicator("source->target", log), private=True,  # type: ignore[arg-type]
                    _new_cluster=lambda role: _Thing(role, log), _new_flow=new_flow)  # type: ignore[arg-type]
    env.made = made  # type: ignore[attr-defined]
    return env


def test_add_cluster_and_add_flow_are_owned_and_stopped_in_reverse() -> None:
    log: list[str] = []
    env = _env(log)
    third = env.add_cluster("third")
    back = env.add_flow("target", "source")
    out = env.add_flow("source", "third")
    assert env.made == [("target", "source"), ("source", "third")]  # type: ignore[attr-defined]
    assert (back.source_cluster, back.target_cluster) == (env.target, env.source)
    assert out.target_cluster is third and env.flow("source", "third") is out and str(out) == "source -> third"
    assert env.flow().replicator is env.replicator and list(env.clusters) == ["source", "target", "third"]
    env.close()
    # the flows' replicators are discarded (SIGKILL: nothing reads what a graceful stop saves), in reverse
    assert log == ["start third", "start target->source", "start source->third",
                   "kill source->third", "kill target->source", "stop third"]


def test_a_flow_that_fails_to_start_is_stopped_with_the_environment() -> None:
    log: list[str] = []
    env = _env(log, fail_flow=True)
    with pytest.raises(ReplicatorError, match="did not start"):
        env.add_flow("target", "source")
    assert ("target", "source") not in env.extra_flows
    env.close()
    assert log == ["start target->source", "kill target->source"]


def test_topology_verbs_refuse_what_they_cannot_do() -> None:
    env = _env([])
    for bad in (("source", "target"), ("source", "source"), ("source", "nowhere")):
        with pytest.raises(ValueError, match="give two different clusters"):
            env.add_flow(*bad)
    env.add_flow("target", "source")
    with pytest.raises(ValueError, match="give two different clusters"):
        env.add_flow("target", "source")
    with pytest.raises(ValueError, match="has a target cluster already"):
        env.add_cluster("target")
    with pytest.raises(ValueError, match="letters, digits"):
        env.add_cluster("a.b")  # a dot would break MM2's alias.topic names
    with pytest.raises(KeyError, match="no flow third -> source"):
        env.flow("third", "source")
    shared = MirrorEnv(_Thing("A", []), _Thing("B", []), _Thing("r", []))  # type: ignore[arg-type]
    with pytest.raises(ReplicatorError, match="only a private environment"):
        shared.add_cluster("third")


# ----------------------------------------------------------------------------- runs
class _Manifest:
    def __init__(self, pid: str) -> None:
        self.pid, self.stats, self.written = pid, {}, []  # type: ignore[var-annotated]

    def write(self, run_dir: Path) -> None:
        self.written.append(Path(run_dir).name)


def _run(tmp_path: Path) -> MirrorRun:
    return MirrorRun(tmp_path / "run-0", "a:1", "b:2", {"t": "source.t"}, partitions={"t": 2})


def test_a_sibling_capture_gets_the_manifests_and_markers_of_the_run(tmp_path: Path) -> None:
    run = _run(tmp_path)
    sibling = run.also_capture(tmp_path / "run-0-third", "c:3", {"t": "source.t", "other": "x"})
    assert sibling.topics == {"t": "source.t"} and sibling.target_bootstrap == "c:3" and sibling.parent is run
    assert sibling.partitions is run.partitions  # a topic grown mid-run grows in both
    with pytest.raises(ValueError, match=r"no target name for \['t'\]"):
        run.also_capture(tmp_path / "x", "c:3", {})
    m = _Manifest("p1")
    marker = SimpleNamespace(at_us=5, to_dict=lambda: {"label": "x"})
    run._record([m], [marker], None)  # type: ignore[list-item]
    assert m.written == ["run-0", "run-0-third"]
    assert run.manifests == sibling.manifests == [m] and sibling.markers == [marker]
    with pytest.raises(RuntimeError, match="before produce"):
        run.also_capture(tmp_path / "y", "c:3", {"t": "t"})


def test_a_producer_on_another_source_must_land_in_the_runs_topics(tmp_path: Path) -> None:
    run = _run(tmp_path)
    other = SimpleNamespace(target_topic=lambda t: "third." + t)
    with pytest.raises(ValueError, match="a run per source"):
        run._origin(["t"], "c:3", other, ())
    same = SimpleNamespace(target_topic=lambda t: "source." + t)
    assert run._origin(["t"], "c:3", same, ()) == ("c:3", same)
    assert run._origin(["t"], None, None, ()) == ("a:1", None)
    with pytest.raises(ValueError, match="takes no witnesses"):
        run._origin(["t"], "c:3", same, [object()])


def test_two_producers_of_one_run_start_one_capture(tmp_path: Path) -> None:
    """Both sources of a fan-in start producing at once: one capture process, not two
    (two wrote the same records into one run directory: 12 duplicates at the same offsets)."""
    run = _run(tmp_path)
    starts: list[int] = []

    def start() -> None:
        starts.append(1)
        time.sleep(0.05)

    run.capture.start = start  # type: ignore[method-assign]
    threads = [threading.Thread(target=run.start_capture) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert starts == [1]


def test_a_loop_of_flows_without_cycle_detection_warns() -> None:
    env = _env([], cycles=False)
    env.add_cluster("third")
    env.add_flow("source", "third")  # a fan-out: no loop, no warning (filterwarnings = error)
    env.add_flow("third", "target")  # source -> third -> target and source -> target: still no loop
    with pytest.warns(PytestKafkaMirrorWarning, match=r"add_flow\('target', 'source'\) closes a loop .* round for ever"):
        env.add_flow("target", "source")
    with pytest.warns(PytestKafkaMirrorWarning, match="closes a loop"):
        env.add_flow("third", "source")  # source -> third -> source


def test_which_replicators_detect_cycles(tmp_path: Path) -> None:
    assert _mm2(tmp_path / "d", ("source", "target")).detects_cycles
    assert not _mm2(tmp_path / "i", ("source", "target"),
                    overrides=(("replication.policy.class", IDENTITY_POLICY),)).detects_cycles
    ref = ReferenceReplicator("a:1", "b:2", tmp_path, topics="^km-", properties=(("replication.policy.class", DEFAULT),))
    assert ref.detects_cycles
    assert not ReferenceReplicator("a:1", "b:2", tmp_path, topics="^km-").detects_cycles  # MM1 style


def test_the_reverse_reference_mirror_names_its_internal_topics_by_its_aliases(tmp_path: Path) -> None:
    """As MM2's reverse flow: its checkpoints, offset syncs and remote heartbeats are the
    target -> source flow's, not copies of the forward flow's names."""
    from pytest_kafka_mirror.replicators.reference.process import _settings

    props = tmp_path / "mirror.properties"
    props.write_text("emit.checkpoints.interval.seconds = 1\ntarget->source.offset.lag.max = 7\n"
                     "source->target.offset.lag.max = 9\n")
    both = _settings(props, ("target", "source"))
    assert both is not None
    names = both[0].names
    assert (names.checkpoints_topic, names.offset_syncs_topic, names.remote_heartbeats_topic) == (
        "target.checkpoints.internal", "mm2-offset-syncs.source.internal", "target.heartbeats")
    assert both[0].offset_lag_max == 7 and both[0].checkpoints_interval == 1.0  # its flow's key, not the other's
    rev = ReferenceReplicator("b:2", "a:1", tmp_path, topics="^km-", aliases=("target", "source"),
                              properties=(("replication.policy.class", DEFAULT),))
    assert rev.checkpoints.names == names


def test_switch_replicator_restarts_the_release_with_the_properties_given_over_the_environments() -> None:
    """``switch_replicator("current", {KEY: VALUE})``: the old replicator stopped, a new one
    built by the environment's replacement with those properties (the release's spec the
    same), started, and the environment's replicator from then on."""
    events: list[Any] = []

    class Fake:
        def __init__(self, name: str) -> None:
            self.name, self.controllable = name, True

        def stop(self) -> None:
            events.append(("stop", self.name))

        def start(self) -> None:
            events.append(("start", self.name))

    def replacement(spec: Any, properties: tuple[tuple[str, str], ...]) -> Any:
        events.append(("build", spec, properties))
        return Fake("tuned")

    old = Fake("defaults")
    env = MirrorEnv(None, None, old, private=True, _replacement=replacement,  # type: ignore[arg-type]
                    releases={"current": "mm2:4.3.1", "previous": "mm2:4.2.0"})  # type: ignore[dict-item]
    new = env.switch_replicator("current", {"tasks.max": "1", "target.producer.batch.size": "524288"})
    assert env.replicator is new and new.name == "tuned"
    assert events == [("stop", "defaults"),
                      ("build", "mm2:4.3.1", (("tasks.max", "1"), ("target.producer.batch.size", "524288"))),
                      ("start", "tuned")]
    env.switch_replicator("previous")  # no properties: none over the environment's
    assert events[-2] == ("build", "mm2:4.2.0", ())
