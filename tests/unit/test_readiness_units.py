"""Readiness and provisioning without a broker: warm-up records, the reference mirror's
replicator behaviour knobs, topic declarations and the pool's bookkeeping."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pytest_kafka_mirror.capture.target import merge_progress
from pytest_kafka_mirror.produce.records import Kind, decode, parse_warmup, warmup_value
from pytest_kafka_mirror.provisioning import TopicDeclaration, TopicPool, declarations, resolve_mode
from pytest_kafka_mirror.replicators import Behaviour, parse_replicator_spec
from pytest_kafka_mirror.replicators._readiness import TopicReadiness
from pytest_kafka_mirror.replicators.base import ReplicatorBase
from pytest_kafka_mirror.replicators.reference import ReferenceReplicator
from pytest_kafka_mirror.replicators.reference.behaviour import PRESETS, split_behaviour
from pytest_kafka_mirror.rundir import load_discovery, write_readiness
from tests.fakes import unstarted_cluster


def test_a_warm_up_record_is_never_a_record_of_the_run() -> None:
    value = warmup_value(3, "abc123", 1_700_000_000_000_000)
    assert parse_warmup(value) == (3, 1_700_000_000_000_000, "abc123")
    assert decode(None, value, None).kind == Kind.WARMUP
    # it looks like the in-body format to nothing: no producer, no sequence
    assert decode(None, value, [("km.producer", b"p")]).kind == Kind.WARMUP
    assert parse_warmup(b"p1;0;1;payload") is None and parse_warmup(None) is None


def test_capture_progress_counts_warm_ups_apart() -> None:
    merged = merge_progress([{"ours": 5, "warmup": 2, "foreign": 1}, {"ours": 3, "warmup": 4}])
    assert merged["warmup"] == 6 and merged["ours"] == 8


def test_behaviour_knobs_parse_with_presets_and_leave_fault_knobs() -> None:
    b, rest = split_behaviour("like=mm2,rebalance_pause=3,drop=0.01")
    assert b == Behaviour(discovery_interval=2, discovery_delay=5, rebalance_pause=3, restart_delay=15)
    assert rest == "drop=0.01" and b.rebalances_on_new_topics
    assert not Behaviour().rebalances_on_new_topics and str(Behaviour()) == "immediate"
    assert Behaviour(discovery_delay=2).argv()[:4] == ["--discovery-interval", "0.25", "--discovery-delay", "2"]
    spec = parse_replicator_spec("reference:like=mm2,seed=3,drop=0.5")
    assert spec.behaviour == PRESETS["mm2"] and spec.faults.drop == 0.5 and spec.faults.seed == 3
    assert parse_replicator_spec("mm2").behaviour == Behaviour()
    throttled = parse_replicator_spec("reference:max_rate=5000,drop=0.5")
    assert throttled.behaviour == Behaviour(max_rate=5000) and throttled.faults.drop == 0.5
    assert str(throttled.behaviour) == "max_rate=5000" and throttled.behaviour.argv()[-2:] == ["--max-rate", "5000.0"]


def test_throttle_lets_through_its_rate_and_no_burst_after_idling() -> None:
    from pytest_kafka_mirror.replicators.reference.loop import Throttle

    throttle, copied, now = Throttle(2000.0, now=0.0), 0, 0.0
    while now < 10.0:  # a consumer that always has records: batches as large as allowed
        n = min(500, throttle.allowed(now))
        throttle.spend(n)
        copied += n
        now += 0.003 if n else max(throttle.wait_s(), 0.0005)
    assert abs(copied - 20_000) <= throttle.cap + 1
    throttle.allowed(100.0)  # 90 s idle: the bucket holds a tenth of a second, not 90 s
    assert throttle.allowed(100.0) == 200


@pytest.mark.parametrize("text, message", [
    ("reference:like=ureplicator", r"like='ureplicator': unknown preset; known: mm2"),
    ("reference:rebalance_pause=-1", r"rebalance_pause=-1.0: must be a number of seconds >= 0"),
    ("reference:discovery_delay=soon", r"'discovery_delay=soon': 'soon' is not a number of seconds"),
    ("reference:discovery_interval=0", r"discovery_interval=0.0: must be > 0"),
    ("reference:max_rate=-5", r"max_rate=-5.0: must be a number of records/s \(0: unthrottled\) >= 0"),
    ("reference:max_rate=fast", r"'max_rate=fast': 'fast' is not a number of records/s"),
])
def test_bad_behaviour_knobs_are_one_clear_error(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_replicator_spec(text)


class Immediate(ReplicatorBase):
    """A replicator that copies a new topic at once, without a rebalance."""

    rebalances_on_new_topics = False


def test_the_reference_mirror_gets_its_behaviour_from_the_spec(tmp_path: Path) -> None:
    from pytest_kafka_mirror.config import resolve_settings
    from pytest_kafka_mirror.session import KafkaMirrorSession

    settings = resolve_settings({}, lambda key: None, {"KAFKA_MIRROR_REPLICATOR": "reference:like=mm2,drop=0.25"},
                                rootdir=tmp_path)
    cluster = unstarted_cluster("127.0.0.1:1")
    rep = KafkaMirrorSession(settings).make_replicator(cluster, cluster, tmp_path)  # type: ignore[arg-type]
    assert isinstance(rep, ReferenceReplicator)
    assert rep.behaviour == PRESETS["mm2"] and rep.default_faults.drop == 0.25
    assert rep.rebalances_on_new_topics and "behaves discovery_interval=2" in rep.describe()
    assert resolve_mode("auto", rep) == "session"
    assert resolve_mode("auto", ReplicatorBase()) == "session"  # a replicator that does not say: assumed to rebalance
    assert resolve_mode("auto", Immediate()) == "test"
    assert resolve_mode("test", rep) == "test"


def test_topic_provisioning_option_is_validated(tmp_path: Path) -> None:
    from pytest_kafka_mirror.config import SettingsError, resolve_settings

    ok = resolve_settings({}, lambda key: None, {"KAFKA_MIRROR_TOPIC_PROVISIONING": "session"}, rootdir=tmp_path)
    assert ok.topic_provisioning == "session"
    with pytest.raises(SettingsError, match=r"'pool' is not a topic provisioning mode; accepted: auto \| session \| test"):
        resolve_settings({}, lambda key: None, {"KAFKA_MIRROR_TOPIC_PROVISIONING": "pool"}, rootdir=tmp_path)


def _item(*marks: tuple[tuple[Any, ...], dict[str, Any]]) -> Any:
    objs = [SimpleNamespace(args=a, kwargs=k) for a, k in marks]
    return SimpleNamespace(nodeid="t.py::test_x", iter_markers=lambda name: iter(objs))


def test_declarations_are_validated_and_name_the_marker() -> None:
    item = _item(((2,), {"partitions": 4}), ((), {"config": {"b": 1, "a": "x"}}))
    assert declarations(item) == [TopicDeclaration(2, 4), TopicDeclaration(1, 3, (("a", "x"), ("b", "1")))]
    with pytest.raises(ValueError, match=r"kafka_mirror_topics\(0\) on t.py::test_x: n must be an integer >= 1, got 0"):
        declarations(_item(((0,), {})))
    with pytest.raises(ValueError, match=r"partitions='3'.*partitions must be an integer >= 1, got '3'"):
        declarations(_item(((), {"partitions": "3"})))
    with pytest.raises(ValueError, match=r"unexpected keyword argument 'parts'"):
        declarations(_item(((), {"parts": 3})))


class _Source:
    bootstrap_servers = "127.0.0.1:1"

    def __init__(self) -> None:
        self.created: list[tuple[str, int, Any]] = []

    def create_topic(self, name: str, partitions: int, *, config: Any = None) -> str:
        self.created.append((name, partitions, config))
        return name


def test_the_pool_hands_each_declared_group_out_once() -> None:
    src = _Source()
    counter = iter(range(100))
    pool = TopicPool(src, lambda test, n, name: [f"km-{name or test}-{next(counter)}" for _ in range(n)])  # type: ignore[arg-type]
    decl = TopicDeclaration.of(2, partitions=4)
    big = TopicDeclaration.of(1, partitions=2, config={"max.message.bytes": "4194304"})
    assert pool.provision([("a::t", "t", [decl, decl]), ("b::u", "u", [big])]) == 5
    assert src.created[-1] == ("km-u-4", 2, {"max.message.bytes": "4194304"})
    assert pool.take("a::t", decl) == ["km-t-0", "km-t-1"]
    assert pool.take("a::t", decl) == ["km-t-2", "km-t-3"]
    assert pool.take("a::t", decl) is None  # never reused
    assert pool.take("b::u", TopicDeclaration.of(1, partitions=2)) is None  # other config: not this group
    assert pool.take("b::u", big) == ["km-u-4"]
    assert pool.partitions == {"km-t-0": 4, "km-t-1": 4, "km-t-2": 4, "km-t-3": 4, "km-u-4": 2}


def test_discovery_comes_from_the_first_round_and_cost_from_the_run_s_own(tmp_path: Path) -> None:
    session = TopicReadiness("t", "t", 2, started_us=5_000_000, created_us=1_000_000,
                             arrived_us={0: 7_000_000, 1: 9_500_000}, sent=2, provisioned="session")
    own = TopicReadiness("t", "t", 2, started_us=60_000_000, arrived_us={0: 60_200_000, 1: 60_300_000}, sent=3)
    write_readiness(tmp_path, [own, session])
    d = load_discovery(tmp_path)["t"]
    assert d["discovery_s"] == 8.5 and d["provisioned"] == "session" and d["warmup_s"] == 0.3
    assert (d["rounds"], d["sent"]) == (1, 3)
    assert json.loads((tmp_path / "readiness.json").read_text())[1]["provisioned"] == "session"
    assert TopicReadiness.from_dict(own.to_dict()).warmup_s == own.warmup_s
    assert own.discovery_s is None  # creation unknown
