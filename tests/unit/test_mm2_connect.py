"""``mm2-connect:``: MM2's connectors on a Connect cluster, configured as MirrorMakerConfig
configures dedicated MM2's ``source->target`` herder.

The golden file is the real thing: ``MirrorMakerConfig.workerConfig`` and
``connectorBaseConfig`` of Kafka 4.3.1 (its jars, a small Java program) run on an
mm2.properties the plugin rendered (``tests/golden/mm2_connect/rendered.properties``: SASL_SSL
source, SSL target, a Tansu source, an instance of its own, user overrides)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_kafka_mirror._clientconf import parse_properties
from pytest_kafka_mirror.replicators import parse_replicator_spec
from pytest_kafka_mirror.replicators.mm2_connect import (
    CONNECTORS,
    CONVERTERS,
    connect_worker_properties,
    connector_configs,
)

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "mm2_connect"


def _rendered() -> dict[str, str]:
    return dict(parse_properties((GOLDEN / "rendered.properties").read_text()))


def _java() -> dict[str, dict[str, str]]:
    return json.loads((GOLDEN / "rendered-4.3.1.json").read_text())


@pytest.mark.parametrize("name", CONNECTORS)
def test_each_connector_gets_what_mirrormakerconfig_gives_it_plus_the_converters(name: str) -> None:
    ours = connector_configs(_rendered(), "source", "target")[name]
    java = _java()[f"connectorBaseConfig source->target {name}"]
    assert {k: v for k, v in ours.items() if k not in CONVERTERS} == java
    assert {k: ours[k] for k in CONVERTERS} == CONVERTERS  # a shared cluster's converters would wrap the records


def test_the_worker_gets_what_mirrormakerconfig_gives_the_herder_plus_its_rest_listener() -> None:
    ours = connect_worker_properties(_rendered(), "source", "target", port=18083)
    java = _java()["workerConfig source->target"]
    rest = {"listeners": "http://127.0.0.1:18083", "rest.advertised.host.name": "127.0.0.1",
            "rest.advertised.port": "18083", "rest.advertised.listener": "http"}
    assert {k: v for k, v in ours.items() if k not in rest} == java
    assert {k: ours[k] for k in rest} == rest


def test_the_spec_takes_a_release_and_a_number_of_workers() -> None:
    spec = parse_replicator_spec("mm2-connect:4.3.1,workers=3")
    assert (spec.kind, spec.release_arg, str(spec)) == ("mm2-connect", "4.3.1", "mm2-connect:4.3.1,workers=3")
    assert parse_replicator_spec("mm2-connect:3.9.1").release_arg == "3.9.1"
    for bad, said in (("mm2-connect:", "mm2-connect needs a release"),
                      ("mm2-connect:4.3.1,workers=0", "workers=0: between 1 and 9"),
                      ("mm2-connect:4.3.1,workers=three", "give a whole number of Connect workers"),
                      ("mm2-connect:4.3.1,tasks=2", "unknown mm2-connect option 'tasks=2'"),
                      ("mm2-connect:container:apache/kafka", "not an image")):
        with pytest.raises(ValueError, match=said):
            parse_replicator_spec(bad)


def test_the_worker_group_acts_on_every_worker_and_names_the_one_that_exited(tmp_path: Path) -> None:
    import sys

    from pytest_kafka_mirror.processes.managed import ManagedProcess
    from pytest_kafka_mirror.replicators.mm2_connect import WorkerGroup

    workers = [ManagedProcess(f"worker {i}", [sys.executable, "-c", "import time; time.sleep(60)"],
                              tmp_path / f"w{i}.log").start() for i in range(3)]
    group = WorkerGroup(workers, [f"http://127.0.0.1:{i}" for i in range(3)])
    try:
        assert group.running and not group.dead()
        group.pause()
        assert group.paused and not group.dead()  # paused is not dead
        group.resume()
        workers[1].kill()
        assert group.running and [w.name for w in group.dead()] == ["worker 1"]
        assert "worker 1" in group.describe_exit()
        group.stop(timeout=5)
        assert not group.running and group.returncode is not None
    finally:
        group.kill()


def test_a_refused_connector_config_is_quoted_by_its_validation_errors() -> None:
    from pytest_kafka_mirror.replicators.mm2_connect import _rest_error

    answer = {"name": "MirrorSourceConnector", "error_count": 1, "configs": [
        {"value": {"name": "tasks.max", "errors": ["Invalid value x for configuration tasks.max"]}},
        {"value": {"name": "topics", "errors": []}}]}
    assert _rest_error(answer) == "tasks.max: Invalid value x for configuration tasks.max"
    assert _rest_error({"error_code": 409, "message": "Cannot complete request momentarily due to rebalance"}) == \
        "Cannot complete request momentarily due to rebalance"
