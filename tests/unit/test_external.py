"""A replicator you run (``external:``): its lifecycle through your commands, its Connect
states from a status topic or a REST URL, the skips of what it cannot do, and the lock that
lets a test that stops it run alone across xdist workers."""

from __future__ import annotations

import json
import multiprocessing
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest

from pytest_kafka_mirror.config import SettingsError, resolve_settings
from pytest_kafka_mirror.env import MirrorEnv, external_env, external_lock
from pytest_kafka_mirror.faults import kill, pause, restart, start, terminate
from pytest_kafka_mirror.faults.schedule import MirrorFaults
from pytest_kafka_mirror.processes.managed import wait_until
from pytest_kafka_mirror.replicators import NamingPolicy, ReplicatorError
from pytest_kafka_mirror.replicators import connect_status as cs
from pytest_kafka_mirror.replicators import external as ext
from pytest_kafka_mirror.replicators.external import ExternalReplicator
from tests.fakes import unstarted_cluster

TRACE = "org.apache.kafka.connect.errors.ConnectException: boom\n\tat X.run(X.java:1)\nCaused by: RecordTooLargeException: big"


def _rep(tmp_path: Path, verbs: tuple[str, ...] = ("stop", "start", "kill", "pause", "resume"),
         status: str | None = None) -> ExternalReplicator:
    """Commands that append their verb to a file, so a test sees which ran and in what order."""
    log = tmp_path / "ran.txt"
    commands = tuple((v, f"echo {v} >> {log}") for v in verbs)
    return ExternalReplicator(unstarted_cluster("127.0.0.1:1"), unstarted_cluster("127.0.0.1:2", name="target"),
                              naming=NamingPolicy("primary."), topic_prefix="km-master", startup_timeout=5,
                              commands=commands, status_source=status)


def _ran(tmp_path: Path) -> list[str]:
    path = tmp_path / "ran.txt"
    return path.read_text().split() if path.exists() else []


def test_the_verbs_run_your_commands_and_the_state_follows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rep = _rep(tmp_path)
    probes: list[str] = []
    monkeypatch.setattr(ext, "wait_replicating", lambda *a, **k: probes.append(a[2]) or 0.1)
    rep.start()  # running already (the session's start): the probe only
    assert _ran(tmp_path) == [] and probes == ["km-master-kafka-mirror-probe-" + rep.probe_topic.rsplit("-", 1)[1]]
    rep.pause()
    assert rep.paused and rep.running
    rep.resume()
    rep.stop()
    assert not rep.running and rep.health() == "it was stopped through its commands and is not running again"
    rep.start()  # the start command, then the probe
    rep.kill()
    rep.restart()  # stop (of a killed one: your command decides), start, probe
    assert _ran(tmp_path) == ["pause", "resume", "stop", "start", "kill", "stop", "start"]
    assert rep.running and not rep.paused and len(probes) == 3 and rep.startup_seconds is not None


def test_a_missing_command_is_named_and_a_failing_one_quoted(tmp_path: Path) -> None:
    rep = _rep(tmp_path, verbs=("stop",))
    assert rep.missing("stop") is None
    why = rep.missing("restart")
    assert why is not None and "--kafka-mirror-replicator-command start=COMMAND (e.g. start=systemctl start mm2)" in why
    assert "stop=COMMAND" not in why
    with pytest.raises(ReplicatorError, match=r"cannot pause the replicator: .*pause=COMMAND"):
        rep.pause()
    bad = ExternalReplicator(rep.source, rep.target, naming=NamingPolicy(), topic_prefix="km", startup_timeout=1,
                             commands=(("stop", "echo nope >&2; exit 3"),))
    with pytest.raises(ReplicatorError, match=r"stop='echo nope >&2; exit 3' exited with code 3: nope"):
        bad.stop()
    assert bad.running  # a stop that failed stopped nothing, as far as the plugin knows


def test_a_fault_needing_a_command_you_did_not_give_skips_before_anything_runs(tmp_path: Path) -> None:
    rep = _rep(tmp_path, verbs=("stop", "start"))
    assert terminate(rep).label.startswith("terminate replicator (external:prefix:primary.)")
    start(rep), restart(rep)  # the commands are there
    for verb in (kill, pause):
        with pytest.raises(pytest.skip.Exception, match=f"needs the replicator to {verb.__name__}, and it is external"):
            verb(rep)
    assert _ran(tmp_path) == []  # building the faults runs nothing


def test_an_external_environment_skips_what_it_cannot_give(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rep = _rep(tmp_path)
    monkeypatch.setattr(ext, "wait_replicating", lambda *a, **k: 0.1)
    env = external_env(rep.source, rep.target, rep, controls=True)
    faults = MirrorFaults(env)
    with pytest.raises(pytest.skip.Exception, match="a faultable link .* it connects to the clusters itself"):
        faults.source_link  # noqa: B018 - the property is the call
    with pytest.raises(pytest.skip.Exception, match="starts further clusters and replicators"):
        env.add_cluster("third")
    assert env.switch_replicator("previous") is rep  # a switch is a restart of the same one, through its commands
    assert _ran(tmp_path) == ["stop", "start"]
    with pytest.raises(pytest.skip.Exception, match=r"reconfigures the replicator \(tasks.max=4\)"):
        env.switch_replicator("current", {"tasks.max": "4"})
    rep.stop()
    env.close()  # a test that left it stopped: it runs again for the next one
    assert _ran(tmp_path) == ["stop", "start", "stop", "stop", "start"] and rep.running
    shared = external_env(rep.source, rep.target, rep, controls=False)
    assert isinstance(shared, MirrorEnv) and not shared.private and not shared.releases


def _hold(share: str, exclusive: bool, hold: float, events: Any) -> None:
    with external_lock(Path(share), exclusive=exclusive):
        events.put(("in", exclusive, time.monotonic()))
        time.sleep(hold)
        events.put(("out", exclusive, time.monotonic()))


def _gate_taken(share: Path) -> bool:
    import fcntl

    with open(share / "external-replicator.gate", "a+b") as gate:
        try:
            fcntl.flock(gate, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(gate, fcntl.LOCK_UN)
        return False


def test_a_test_that_controls_it_runs_alone_across_workers(tmp_path: Path) -> None:
    """Two readers share the lock; a writer waits for both, and a reader that comes while it
    waits waits for the writer (no writer starves)."""
    ctx = multiprocessing.get_context("spawn")
    events = ctx.Queue()
    share = str(tmp_path / "share")
    readers = [ctx.Process(target=_hold, args=(share, False, 3.0, events)) for _ in range(2)]
    for p in readers:
        p.start()
    ins = [events.get(timeout=30) for _ in range(2)]
    writer = ctx.Process(target=_hold, args=(share, True, 1.0, events))
    writer.start()
    wait_until(lambda: _gate_taken(Path(share)), 30, "the writer to take the gate")  # then it waits for the readers
    late = ctx.Process(target=_hold, args=(share, False, 0.1, events))
    late.start()
    seen = ins + [events.get(timeout=30) for _ in range(6)]
    for p in (*readers, writer, late):
        p.join(30)
    # in the order they happened: a Queue's put returns before its feeder thread writes, so a
    # reader's "out" can reach the queue after the writer's "in" (CLOCK_MONOTONIC is one clock
    # for every process; each stamp is taken while the lock is held)
    order = [(kind, excl) for kind, excl, _ in sorted(seen, key=lambda e: e[2])]
    assert order[:2] == [("in", False), ("in", False)]  # the readers together
    w_in = order.index(("in", True))
    assert order[2:w_in] == [("out", False), ("out", False)]  # the writer after both left
    assert order[w_in + 1] == ("out", True) and order[w_in + 2:] == [("in", False), ("out", False)]  # the late reader after


class _Connect(BaseHTTPRequestHandler):
    body = b""

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: object) -> None:
        pass


def test_the_connect_rest_states_are_read_and_a_failed_task_quoted(tmp_path: Path) -> None:
    _Connect.body = json.dumps({
        "MirrorSourceConnector": {"status": {"name": "MirrorSourceConnector", "connector": {"state": "RUNNING"},
                                             "tasks": [{"id": 0, "state": "FAILED", "trace": TRACE},
                                                       {"id": 1, "state": "RUNNING"}]}},
        "MirrorCheckpointConnector": {"status": {"connector": {"state": "RUNNING"}, "tasks": []}},
    }).encode()
    server = HTTPServer(("127.0.0.1", 0), _Connect)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_port}"
    try:
        rep = _rep(tmp_path, status=url)
        assert rep.health() == (f"its Connect status ({url}): MirrorSourceConnector (no connector status), task 0 "
                                "FAILED: org.apache.kafka.connect.errors.ConnectException: boom; caused by "
                                "RecordTooLargeException: big")
        assert rep.status().startswith(f"its Connect status ({url}): MirrorSourceConnector RUNNING, task 0 FAILED")
        assert "MirrorCheckpointConnector RUNNING, no tasks" in rep.status()
    finally:
        server.shutdown()
    assert cs.describe_source(None, url).startswith(f"cannot read {url}: ")  # gone: said, never raised


def test_a_status_topic_failure_before_the_start_is_not_this_one_s(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rep = _rep(tmp_path, status="mm2-status.primary.internal")
    old = [cs.ConnectStatus("MirrorSourceConnector", 0, "FAILED", TRACE, written_ms=rep._since_ms - 1)]
    monkeypatch.setattr(cs, "read_source", lambda cluster, source, **k: old)
    assert rep.health() == ""
    new = [cs.ConnectStatus("MirrorSourceConnector", 0, "FAILED", TRACE, written_ms=rep._since_ms + 1)]
    monkeypatch.setattr(cs, "read_source", lambda cluster, source, **k: new)
    assert rep.health().startswith("its Connect status (mm2-status.primary.internal): MirrorSourceConnector")


def test_commands_and_a_status_source_are_for_an_external_replicator_only() -> None:
    env = {"KAFKA_MIRROR_REPLICATOR": "external:prefix:primary.", "KAFKA_MIRROR_REPLICATOR_COMMAND":
           "stop=systemctl stop mm2\nstart=systemctl start mm2", "KAFKA_MIRROR_REPLICATOR_STATUS": "http://h:8083/"}
    s = resolve_settings({}, lambda key: None, env)
    assert s.replicator_commands == (("stop", "systemctl stop mm2"), ("start", "systemctl start mm2"))
    assert s.replicator_status == "http://h:8083"
    with pytest.raises(SettingsError, match="env KAFKA_MIRROR_REPLICATOR_STATUS: only an external: replicator takes it"):
        resolve_settings({}, lambda key: None, {"KAFKA_MIRROR_REPLICATOR_STATUS": "mm2-status.x.internal"})
    with pytest.raises(SettingsError, match=r"'halt=x' is not VERB=COMMAND with VERB one of stop \| start"):
        resolve_settings({}, lambda key: None, {**env, "KAFKA_MIRROR_REPLICATOR_COMMAND": "halt=x"})
    with pytest.raises(SettingsError, match="neither a topic name nor a Connect REST URL"):
        resolve_settings({}, lambda key: None, {**env, "KAFKA_MIRROR_REPLICATOR_STATUS": "not a topic"})
