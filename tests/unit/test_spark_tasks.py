"""The spark engine's parts that need no Spark: the clock measurement, a task's run of its
child (what it writes, how it refuses a retry), the driver's handle and the slot check."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_kafka_mirror.processes.spark_tasks import (
    ClockServer,
    EngineError,
    SparkTask,
    TaskStage,
    _run_task,
    measure_clock,
)


@pytest.fixture
def clock() -> ClockServer:
    server = ClockServer("127.0.0.1")
    yield server
    server.close()


def test_the_clock_offset_is_the_drivers_clock_minus_the_tasks(clock: ClockServer) -> None:
    offset, uncertainty = measure_clock(clock.address, lambda: time.time() + 1.5)
    assert -1550 < offset < -1450 and 0 <= uncertainty < 50
    same, _ = measure_clock(clock.address)
    assert abs(same) < 50


def _spec(tmp_path: Path, clock: ClockServer, argv: list[str]) -> dict:
    return {"dir": str(tmp_path), "clock": list(clock.address),
            "children": [{"name": "producer p1", "argv": argv, "log": str(tmp_path / "producer.log")}]}


def test_a_task_runs_its_child_and_says_where_and_how_it_ended(tmp_path: Path, clock: ClockServer) -> None:
    spec = _spec(tmp_path, clock, [sys.executable, "-c", "import sys; print('hello'); sys.exit(3)"])
    row = _run_task(spec, 0, attempt=0, executor="7")
    assert (row["rc"], row["executor"]) == (3, "7") and row["pid"] > 0
    assert "exited with code 3" in row["error"] or "code 3" in row["error"], row["error"]
    started = json.loads((tmp_path / "task-0.json").read_text())
    assert started["pid"] == row["pid"] and started["host"] == row["host"]
    assert json.loads((tmp_path / "done-0.json").read_text())["rc"] == 3
    assert "hello" in (tmp_path / "producer.log").read_text()
    handle = SparkTask(SimpleNamespace(dir=tmp_path, error=None, mirror=None), 0, "producer p1", tmp_path / "producer.log")
    assert (handle.running, handle.returncode) == (False, 3)
    assert handle.describe_exit().startswith(f"producer p1 on {row['host']} (executor 7) exited with code 3")


def test_with_a_run_store_done_reaches_the_store_after_every_file_the_child_wrote(
        tmp_path: Path, clock: ClockServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """The driver takes done-I.json as the sign that the child's files are in the store (its
    capture-status.json, its manifests): the task pushes it after them, whatever the order
    of the directory's listing, and the driver's handle pulls once more when it sees it."""
    from pytest_kafka_mirror.processes.store import DirMirror

    pushed: list[str] = []
    put = DirMirror._put
    monkeypatch.setattr(DirMirror, "_put", lambda self, rel, data: (pushed.append(rel), put(self, rel, data)))
    driver, store = tmp_path / "driver", tmp_path / "store"
    stage = driver / "tasks-0"
    stage.mkdir(parents=True)
    write = ("import pathlib, sys; d = pathlib.Path(sys.argv[1]); (d / 'zz').mkdir(); "
             "(d / 'zz' / 'manifest.json').write_text('{}'); (d / 'capture-status.json').write_text('{}')")
    spec = {**_spec(stage, clock, [sys.executable, "-c", write, str(driver)]),
            "store": {"root": str(driver), "uri": store.as_uri()}}
    spec["children"][0]["log"] = str(stage / "producer.log")
    row = _run_task(spec, 0, attempt=0)
    assert row["rc"] == 0, row["error"]
    assert pushed[-1] == "tasks-0/done-0.json"
    assert {"capture-status.json", "zz/manifest.json"} <= set(pushed[:-1])
    mirror = DirMirror(driver, store.as_uri())
    handle = SparkTask(SimpleNamespace(dir=stage, error=None, mirror=mirror), 0, "producer p1", stage / "producer.log")
    assert handle.running
    (stage / "done-0.json").write_text((store / "tasks-0" / "done-0.json").read_text())  # as a round pulls it
    assert not handle.running
    assert (driver / "capture-status.json").exists() and (driver / "zz" / "manifest.json").exists()


def test_a_task_spark_runs_again_refuses_and_names_where_the_first_ran(tmp_path: Path, clock: ClockServer) -> None:
    (tmp_path / "task-0.json").write_text(json.dumps({"host": "worker-3", "executor": "2", "pid": 1}))
    row = _run_task(_spec(tmp_path, clock, [sys.executable, "-c", "pass"]), 0, attempt=0)
    assert row["pid"] == -1 and row["rc"] == -1
    assert row["error"].startswith("its first attempt on worker-3 (executor 2) ended without a result")
    assert "not started twice" in row["error"]


def test_a_batch_needs_as_many_task_slots_as_it_has_children(tmp_path: Path, clock: ClockServer) -> None:
    spark = SimpleNamespace(sparkContext=SimpleNamespace(defaultParallelism=2))
    children = [(f"producer p{i}", [sys.executable, "-c", "pass"], tmp_path / f"p{i}.log") for i in range(3)]
    with pytest.raises(EngineError, match=r"runs producer p0, producer p1, producer p2 as one barrier stage of 3 "
                                          r"tasks, and the Spark application has 2 task slots"):
        TaskStage(spark, tmp_path / "tasks-0", children, clock).start()
    assert not (tmp_path / "tasks-0").exists()  # nothing started
    # the slots the run's capture tasks hold are not free: two producers do not fit beside them
    with pytest.raises(EngineError, match=r"has 2 task slots \(1 of them held by capture, still running\)"):
        TaskStage(spark, tmp_path / "tasks-1", children[:2], clock, held=["capture"]).start()


def _spark_run(offset_ms: float, uncertainty_ms: float = 0.2):
    from tests.stored import sample_report

    report = sample_report(p50=10.0, p99=20.0)
    report.engine = {"engine": "spark", "tasks": [], "clock": {"max_offset_ms": offset_ms,
                                                              "uncertainty_ms": uncertainty_ms,
                                                              "task": "producer p1", "host": "worker-2"}}
    return report


def test_a_latency_limit_under_ten_times_the_clock_offset_is_not_judged() -> None:
    from pytest_kafka_mirror.verify import MirrorMismatchError

    _spark_run(-4.7).assert_latency(p99_ms=50)  # 4.9 ms < 5 ms: judged, and met
    with pytest.raises(MirrorMismatchError) as failed:
        _spark_run(-4.9).assert_latency(p99_ms=50, p50_ms=100)  # 5.1 ms > a tenth of the smallest limit
    text = str(failed.value)
    assert ("latency not judged: the clock of producer p1 on worker-2 is -4.9 ms (± 0.2 ms) off the driver's, more "
            "than 10% of the limit 50") in text, text
    assert "(± 5.1 ms clock offset)" in text, text
    assert _spark_run(0.0).clock_note() == " (± 0.2 ms clock offset)"
    local = _spark_run(0.0)
    local.engine = {"engine": "local", "clock": {"max_offset_ms": 0.0, "uncertainty_ms": 0.0}}
    assert local.clock_note() == ""
