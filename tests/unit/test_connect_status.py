"""Connect's status records (``connect_status``) and MM2's per-instance Connect group and
internal topics (``mm2.worker_properties``), without a broker."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_kafka_mirror.clusters.bootstrap import BootstrapCluster
from pytest_kafka_mirror.clusters.kafka_dist import KafkaRelease
from pytest_kafka_mirror.replicators import connect_status as cs
from pytest_kafka_mirror.replicators.command import CommandReplicator
from pytest_kafka_mirror.replicators.connect_status import (
    ConnectStatus,
    describe,
    latest_statuses,
    parse_status_key,
    parse_status_value,
)
from pytest_kafka_mirror.replicators.mm2 import (
    MirrorMaker2,
    format_properties,
    herder_topic,
    parse_properties,
    render_mm2_properties,
    worker_properties,
)
from tests.fakes import unstarted_cluster

TRACE = "org.apache.kafka.connect.errors.ConnectException: boom\n\tat org.apache.kafka.X.run(X.java:1)\n"


def _value(state: str, trace: str | None = None, *, wrapped: bool = False, generation: int = 2) -> bytes:
    """A status value as Connect's worker writes it (schemas off), or schema-wrapped."""
    payload = {"state": state, "trace": trace, "worker_id": "source->target", "generation": generation}
    if wrapped:
        schema = {"type": "struct", "optional": False, "fields": [
            {"field": "state", "type": "string", "optional": False},
            {"field": "trace", "type": "string", "optional": True},
            {"field": "worker_id", "type": "string", "optional": False},
            {"field": "generation", "type": "int32", "optional": False},
        ]}
        return json.dumps({"schema": schema, "payload": payload}).encode()
    return json.dumps(payload).encode()


# ----------------------------------------------------------------------------- keys and values
@pytest.mark.parametrize(("key", "expected"), [
    ("status-connector-MirrorSourceConnector", ("MirrorSourceConnector", None)),
    ("status-task-MirrorSourceConnector-0", ("MirrorSourceConnector", 0)),
    ("status-task-my-conn-with-dashes-12", ("my-conn-with-dashes", 12)),
    ("status-topic-km-a:connector-MirrorSourceConnector", None),  # active topics: not a state
    ("status-task-MirrorSourceConnector-x", None),
    ("status-task--3", None),
    ("status-connector-", None),
    ("session-key", None),
])
def test_status_keys(key: str, expected: tuple[str, int | None] | None) -> None:
    assert parse_status_key(key) == expected


def test_status_values_plain_wrapped_and_tombstones() -> None:
    assert parse_status_value(_value("RUNNING"))["state"] == "RUNNING"  # type: ignore[index]
    assert parse_status_value(_value("FAILED", TRACE, wrapped=True))["trace"] == TRACE  # type: ignore[index]
    assert parse_status_value(_value("PAUSED").decode()) is not None
    assert parse_status_value(None) is None
    with pytest.raises(ValueError, match="not JSON"):
        parse_status_value(b"\x00garbage")
    with pytest.raises(ValueError, match="no 'state'"):
        parse_status_value(b'{"topic": {"name": "km-a"}}')


def test_status_fields_and_first_trace_line() -> None:
    [s] = latest_statuses([(b"status-task-C-1", _value("FAILED", TRACE, generation=7))])
    assert s == ConnectStatus("C", 1, "FAILED", TRACE, "source->target", 7)
    assert s.first_trace_line == "org.apache.kafka.connect.errors.ConnectException: boom"
    assert s.describe() == "FAILED: org.apache.kafka.connect.errors.ConnectException: boom"
    long = ConnectStatus("C", None, "FAILED", "x" * 1000)
    assert len(long.first_trace_line) == cs.TRACE_CHARS and long.first_trace_line.endswith("...")
    assert ConnectStatus("C", None, "RUNNING", trace="  ").describe() == "RUNNING"


# ----------------------------------------------------------------------------- latest state
def test_the_latest_record_of_a_key_wins_and_tombstones_delete() -> None:
    records = [
        ("status-connector-MirrorSourceConnector", _value("UNASSIGNED")),
        ("status-task-MirrorSourceConnector-1", _value("UNASSIGNED")),
        ("status-task-MirrorSourceConnector-0", _value("RUNNING")),
        ("status-connector-MirrorSourceConnector", _value("RUNNING", wrapped=True)),
        ("status-task-MirrorSourceConnector-1", _value("RUNNING")),
        ("status-task-MirrorSourceConnector-2", _value("RUNNING")),
        ("status-task-MirrorSourceConnector-2", None),  # the task is gone
        ("status-connector-Old", _value("RUNNING")),
        ("status-task-Old-0", _value("RUNNING")),
        ("status-connector-Old", None),  # a deleted connector takes its tasks with it
        ("status-topic-km-a:connector-MirrorSourceConnector", b'{"topic": {}}'),
        (None, _value("RUNNING")),
    ]
    got = [(s.connector, s.task, s.state) for s in latest_statuses(records)]
    assert got == [("MirrorSourceConnector", None, "RUNNING"), ("MirrorSourceConnector", 0, "RUNNING"),
                   ("MirrorSourceConnector", 1, "RUNNING")]


def test_an_unreadable_value_is_shown_not_dropped() -> None:
    [s] = latest_statuses([(b"status-connector-C", b"{not json")])
    assert s.state == "UNREADABLE" and "not JSON" in (s.trace or "")


# ----------------------------------------------------------------------------- describe
def test_describe_one_line() -> None:
    records = [
        ("status-connector-MirrorSourceConnector", _value("RUNNING")),
        *[(f"status-task-MirrorSourceConnector-{t}", _value("RUNNING")) for t in (0, 1, 3)],
        ("status-task-MirrorSourceConnector-2", _value("FAILED", TRACE)),
        ("status-connector-MirrorCheckpointConnector", _value("UNASSIGNED")),
        ("status-connector-MirrorHeartbeatConnector", _value("RUNNING")),
        ("status-task-Orphan-0", _value("PAUSED")),
    ]
    assert describe(latest_statuses(records)) == (
        "MirrorSourceConnector RUNNING, tasks 0-1 RUNNING, task 2 FAILED: "
        "org.apache.kafka.connect.errors.ConnectException: boom, task 3 RUNNING; "
        "MirrorCheckpointConnector UNASSIGNED; "
        "MirrorHeartbeatConnector RUNNING, no tasks; "
        "Orphan (no connector status), task 0 PAUSED"
    )


def test_describe_without_records_names_the_topic() -> None:
    assert describe([], "mm2-status.source.x.internal") == "no status records in mm2-status.source.x.internal"
    assert describe(latest_statuses([("status-connector-C", None)]), "T") == "no status records in T"


def test_describe_status_topic_never_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*a: object, **k: object) -> None:
        raise RuntimeError("no broker")

    monkeypatch.setattr(cs, "read_status_topic", boom)
    assert cs.describe_status_topic({"bootstrap.servers": "h:1"}, "T") == "cannot read T from h:1: no broker"
    monkeypatch.setattr(cs, "read_status_topic", lambda *a, **k: None)
    assert cs.describe_status_topic({}, "T").startswith("no topic T ")
    monkeypatch.setattr(cs, "read_status_topic", lambda *a, **k: [(b"status-connector-C", _value("RUNNING"))])
    assert cs.describe_status_topic({}, "T") == "C RUNNING, no tasks"


class _SlowConsumer:
    """Delivers each partition's records after ``gap`` seconds of silence: a loaded machine's fetches."""

    def __init__(self, batches: list[list[tuple[int, int, bytes]]], gap: float) -> None:
        self.batches, self.gap, self.due = list(batches), gap, 0.0

    def consume(self, n: int, timeout: float) -> list[object]:
        import time
        from types import SimpleNamespace

        now = time.monotonic()
        if not self.batches or now < self.due:
            time.sleep(timeout)
            return []
        self.due = now + self.gap
        return [SimpleNamespace(error=lambda: None, key=lambda k=key: k, value=lambda: _value("FAILED", TRACE),
                                timestamp=lambda: (1, 5), partition=lambda p=part: p, offset=lambda o=off: o)
                for part, off, key in self.batches.pop(0)]


def test_a_status_read_to_the_end_offsets_outlasts_a_pause_between_fetches() -> None:
    import time

    batches = [[(0, 0, b"status-task-C-0"), (0, 1, b"status-task-C-1")], [(3, 0, b"status-task-C-9")]]
    t0 = time.monotonic()
    got = cs._consume_status(_SlowConsumer(batches, 0.4), t0, 5.0, {0: 2, 1: 0, 3: 1}, quiet=0.1, settle=0.1)
    assert [k for k, _, _ in got] == [b"status-task-C-0", b"status-task-C-1", b"status-task-C-9"]
    assert time.monotonic() - t0 < 2.0  # it stopped at the end offsets, not at the timeout
    # read until quiet, the same pause cuts the read short: why the end offsets are used where they are right
    quiet = cs._consume_status(_SlowConsumer(batches, 0.4), time.monotonic(), 5.0, None, quiet=0.1, settle=0.1)
    assert [k for k, _, _ in quiet] == [b"status-task-C-0", b"status-task-C-1"]


# ----------------------------------------------------------------------------- MM2: one Connect cluster per instance
def _render(**kw: object) -> dict[str, str]:
    args: dict = {"source_bootstrap": "127.0.0.1:1", "target_bootstrap": "127.0.0.1:2", "topics": "^km-.*"}
    args.update(kw)
    return render_mm2_properties(**args)


def test_each_instance_has_its_own_group_and_internal_topics() -> None:
    p = _render(instance="km-a1")
    assert {k: v for k, v in p.items() if k in worker_properties("km-a1")} == {
        # the copying herder source->target: its worker settings are the target alias's
        "target.group.id": "source-mm2-km-a1",
        "target.offset.storage.topic": "mm2-offsets.source.km-a1.internal",
        "target.status.storage.topic": "mm2-status.source.km-a1.internal",
        "target.config.storage.topic": "mm2-configs.source.km-a1.internal",
        # the heartbeats-only herder target->source (MM2 starts it while heartbeats are on)
        "source.group.id": "target-mm2-km-a1",
        "source.offset.storage.topic": "mm2-offsets.target.km-a1.internal",
        "source.status.storage.topic": "mm2-status.target.km-a1.internal",
        "source.config.storage.topic": "mm2-configs.target.km-a1.internal",
    }
    other = _render(instance="km-b2")
    assert {p[k] for k in worker_properties("x")}.isdisjoint(other[k] for k in worker_properties("x"))
    # without an instance: MM2's own defaults (one group for every MM2 on these clusters)
    assert not any(k.endswith(("group.id", "storage.topic")) for k in _render())
    assert parse_properties(format_properties(p)) == p


def test_the_status_topic_is_resolved_as_mm2_does() -> None:
    assert herder_topic(_render(), "status") == "mm2-status.source.internal"
    assert herder_topic(_render(instance="i"), "status") == "mm2-status.source.i.internal"
    assert herder_topic(_render(instance="i"), "config") == "mm2-configs.source.i.internal"
    # user overrides win: the target alias's key replaces ours, a top-level key beats both (as in MM2)
    assert herder_topic(_render(instance="i", overrides=[("target.status.storage.topic", "mine")]), "status") == "mine"
    top = _render(instance="i", overrides=[("status.storage.topic", "top"), ("target.status.storage.topic", "mine")])
    assert herder_topic(top, "status") == "top"
    assert _render(instance="i", overrides=[("target.group.id", "g")])["target.group.id"] == "g"


def _cluster(port: int) -> BootstrapCluster:
    return unstarted_cluster(f"127.0.0.1:{port}", spec="tansu", flavour="tansu")


def _mm2(tmp_path: Path, **kw: object) -> MirrorMaker2:
    release = KafkaRelease(Path("/nowhere"), (4, 3, 1))  # never started: no jars needed
    return MirrorMaker2(_cluster(1), _cluster(2), tmp_path, topic_prefix="km-gw0", release=release, **kw)  # type: ignore[arg-type]


def test_an_instance_keeps_its_id_over_restarts_and_others_differ(tmp_path: Path) -> None:
    rep = _mm2(tmp_path / "a")
    assert rep.instance.startswith("km-gw0-") and len(rep.instance) == len("km-gw0-") + 8
    first = rep.render().read_text()
    assert rep.render().read_text() == first  # what the next start() writes: the same Connect group and topics
    assert f"target.group.id = source-mm2-{rep.instance}" in first
    assert rep.status_topic == f"mm2-status.source.{rep.instance}.internal"
    assert _mm2(tmp_path / "b").instance != rep.instance
    pinned = _mm2(tmp_path / "c", instance="fixed", overrides=(("target.status.storage.topic", "st"),))
    assert pinned.properties["target.group.id"] == "source-mm2-fixed" and pinned.status_topic == "st"


def test_mm2_status_reads_its_status_topic_and_never_raises(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rep = _mm2(tmp_path, instance="i")
    seen: list[tuple[dict, str]] = []

    def fake(config: dict, topic: str, **kw: object) -> str:
        seen.append((config, topic))
        return "MirrorSourceConnector RUNNING"

    monkeypatch.setattr(cs, "describe_status_topic", fake)
    assert rep.status() == "MirrorMaker 2's Connect status (mm2-status.source.i.internal): MirrorSourceConnector RUNNING"
    assert seen == [({"bootstrap.servers": "127.0.0.1:2"}, "mm2-status.source.i.internal")]

    def boom(*a: object, **k: object) -> str:
        raise RuntimeError("kaput")

    monkeypatch.setattr(cs, "describe_status_topic", boom)
    assert rep.status().endswith("cannot read it: RuntimeError: kaput")
    # a refused source connector is absent from Connect's status: say so
    monkeypatch.setattr(cs, "describe_status_topic", lambda *a, **k: "MirrorHeartbeatConnector RUNNING, task 0 RUNNING")
    assert rep.status().endswith("; no MirrorSourceConnector in it: MM2 has not started one (a refused configuration? its log "
                                 "says why, e.g. \"can't\")")


def test_a_command_has_no_status_of_its_own(tmp_path: Path) -> None:
    rep = CommandReplicator(_cluster(1), _cluster(2), tmp_path, template="run {source}",  # type: ignore[arg-type]
                            topic_prefix="km", naming=None, startup_timeout=1)  # type: ignore[arg-type]
    assert rep.status() == ""


def test_describe_names_connectors_in_a_fixed_order_whatever_the_read_order() -> None:
    """A status topic has several partitions: records of different keys come in any order."""
    records = [
        ("status-connector-Zeta", _value("RUNNING")),
        ("status-connector-MirrorHeartbeatConnector", _value("RUNNING")),
        ("status-connector-MirrorCheckpointConnector", _value("RUNNING")),
        ("status-task-MirrorSourceConnector-0", _value("RUNNING")),
        ("status-connector-Alpha", _value("PAUSED")),
        ("status-connector-MirrorSourceConnector", _value("RUNNING")),
    ]
    want = ("MirrorSourceConnector RUNNING, task 0 RUNNING; MirrorCheckpointConnector RUNNING, no tasks; "
            "MirrorHeartbeatConnector RUNNING, no tasks; Alpha PAUSED; Zeta RUNNING, no tasks")
    assert describe(latest_statuses(records)) == want
    assert describe(latest_statuses(records[::-1])) == want


def test_a_trace_is_quoted_with_its_root_cause() -> None:
    trace = ("org.apache.kafka.connect.errors.ConnectException: Unrecoverable exception from producer send callback\n"
             "\tat org.apache.kafka.connect.runtime.WorkerSourceTask.maybeThrowProducerSendException(X.java:1)\n"
             "Caused by: org.apache.kafka.common.errors.TimeoutException: wrapped\n\tat Y.run(Y.java:2)\n"
             "Caused by: org.apache.kafka.common.errors.RecordTooLargeException: The message is 300097 bytes\n")
    s = ConnectStatus("MirrorSourceConnector", 1, "FAILED", trace=trace)
    assert s.describe() == ("FAILED: org.apache.kafka.connect.errors.ConnectException: Unrecoverable exception from "
                            "producer send callback; caused by org.apache.kafka.common.errors.RecordTooLargeException: "
                            "The message is 300097 bytes")
    assert cs.failed([s, ConnectStatus("C", 2, "RUNNING")]) == [s]
    old = ConnectStatus("MirrorSourceConnector", 3, "FAILED", trace=trace, written_ms=1_000)
    assert cs.failed([old, s], since_ms=500) == [old] and cs.failed([old], since_ms=2_000) == []


def test_a_replacement_takes_over_the_state_of_the_one_it_replaces(tmp_path: Path) -> None:
    """An in-place upgrade (MirrorEnv.switch_replicator): the new release gets the old one's
    instance, so its properties name the same Connect group and internal topics."""
    from pytest_kafka_mirror.replicators import ReplicatorOptions, make_replicator
    from tests.kafka import fake_release

    old = _mm2(tmp_path / "old")
    opts = ReplicatorOptions(topic_prefix="km-gw0", instance=old.instance)
    home = fake_release(tmp_path / "release", version="4.2.0")  # another release, no Maven needed
    new = make_replicator(f"mm2:{home}", _cluster(1), _cluster(2), tmp_path / "new", opts)  # type: ignore[arg-type]
    assert new.instance == old.instance
    keys = ("target.group.id", "target.status.storage.topic", "target.offset.storage.topic",
            "target.config.storage.topic")
    assert {k: new.properties[k] for k in keys} == {k: old.properties[k] for k in keys}
    assert old.commit_interval_s == 5.0  # the target herder's offset.flush.interval.ms, rendered
    assert old.commit_interval_setting == "target.offset.flush.interval.ms=5000"
    faster = _mm2(tmp_path / "c", overrides=(("target.offset.flush.interval.ms", "2500"),))
    assert (faster.commit_interval_s, faster.commit_interval_setting) == (2.5, "target.offset.flush.interval.ms=2500")


def test_exactly_once_renders_the_internal_rest_server_it_needs() -> None:
    import re

    plain = _render()
    assert "dedicated.mode.enable.internal.rest" not in plain and "target.listeners" not in plain
    eos = _render(overrides=[("target.exactly.once.source.support", "enabled")])
    assert eos["dedicated.mode.enable.internal.rest"] == "true"
    ports = {alias: re.fullmatch(r"http://127\.0\.0\.1:(\d+)", eos[f"{alias}.listeners"]) for alias in ("source", "target")}
    assert all(ports.values()) and ports["source"][1] != ports["target"][1]  # a free port per herder
    mine = _render(overrides=[("exactly.once.source.support", "enabled"), ("target.listeners", "http://127.0.0.1:8083")])
    assert mine["target.listeners"] == "http://127.0.0.1:8083"  # the user's own wins
    assert _render(overrides=[("target.exactly.once.source.support", "disabled")]).get("target.listeners") is None


def test_offset_syncs_off_drops_the_offset_syncs_keys_mm2_refuses_with_it() -> None:
    """KIP-1031: MM2's source connector refuses emit.offset-syncs.enabled=false while any
    offset-syncs.topic.* key is set (measured with 4.3.1: only the heartbeat connector ran)."""
    syncs = {"source->target.offset-syncs.topic.replication.factor", "offset-syncs.topic.location"}
    assert syncs <= set(_render())
    for key in ("emit.offset-syncs.enabled", "source->target.emit.offset-syncs.enabled"):
        assert not syncs & set(_render(overrides=[(key, "false")])), key
    assert syncs <= set(_render(overrides=[("emit.offset-syncs.enabled", "true")]))
    mine = _render(overrides=[("emit.offset-syncs.enabled", "false"), ("offset-syncs.topic.location", "target")])
    assert mine["offset-syncs.topic.location"] == "target"  # the user's own is kept (and MM2 will say no)
