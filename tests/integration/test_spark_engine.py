"""The ``spark`` engine: producers and captures as tasks of the session's Spark application.

On a real Spark standalone cluster (a master and two workers from pyspark's own
``spark-class``, on loopback), ``scenarios/test_steady_state.py`` runs end to end with
``--kafka-mirror-engine spark``: every producer and capture is a task on a worker's
executor (proven from the executor ids the tasks recorded: never the driver), and every
count matches the same scenario run with the local engine.  In local mode, a task whose
clock is off (an injected offset) makes a latency limit fail with that reason instead of a
wrong latency, and a batch larger than the application's task slots fails at once.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import processes_tagged
from tests.spark_cluster import StandaloneSpark, spark_env

pytestmark = pytest.mark.integration

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"


def _reports(root: Path) -> dict[str, dict[str, Any]]:
    """nodeid -> report of every test report under ``root``'s report directory."""
    out = {}
    for path in (root / ".kafka-mirror" / "reports").glob("*.json"):
        data = json.loads(path.read_text())
        if "engine" in data:
            out[path.stem] = data
    return out


def _counts(report: dict[str, Any]) -> dict[str, Any]:
    """Every count of the report (its totals)."""
    from pytest_kafka_mirror.verify.report import TOTAL_FIELDS

    return {k: report[k] for k in TOTAL_FIELDS}


def _run(pytester: pytest.Pytester, *args: str, env: dict[str, str] | None = None) -> pytest.RunResult:
    pytester.makeconftest((SCENARIOS / "conftest.py").read_text())
    pytester.makepyfile(test_steady_state=(SCENARIOS / "test_steady_state.py").read_text())
    old = dict(os.environ)
    os.environ.update(env or {})
    try:
        return pytester.runpytest_subprocess("-p", "no:cacheprovider", "--kafka-mirror-progress=off", *args)
    finally:
        os.environ.clear()
        os.environ.update(old)


def test_steady_state_on_a_standalone_cluster_runs_producers_and_captures_on_its_executors(
        pytester: pytest.Pytester, tagged_env: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    local = _run(pytester)
    local.assert_outcomes(passed=2)
    local_counts = {name: _counts(r) for name, r in _reports(pytester.path).items()}
    assert {r["engine"]["engine"] for r in _reports(pytester.path).values()} == {"local"}
    for path in (pytester.path / ".kafka-mirror" / "reports").glob("*.json"):
        path.unlink()

    with StandaloneSpark(tmp_path_factory.mktemp("spark"), workers=2, cores=2) as cluster:
        conf = tmp_path_factory.mktemp("spark-conf")
        (conf / "spark-defaults.conf").write_text("spark.sql.shuffle.partitions 4\nspark.default.parallelism 4\n"
                                                  "spark.executor.memory 512m\n")
        result = _run(pytester, "--kafka-mirror-engine=spark", f"--kafka-mirror-spark-master={cluster.master_url}",
                      env={**spark_env(), "SPARK_CONF_DIR": str(conf)})
    out = result.stdout.str()
    result.assert_outcomes(passed=2)
    reports = _reports(pytester.path)
    assert {name: _counts(r) for name, r in reports.items()} == local_counts, out[-3000:]
    executors = set()
    for report in reports.values():
        engine = report["engine"]
        assert engine["engine"] == "spark"
        names = sorted(t["name"].split(" ")[0] for t in engine["tasks"])
        assert names == ["capture", "producer"], engine["tasks"]
        for task in engine["tasks"]:
            assert task["rc"] == 0 and task["executor"] not in ("", "driver"), task
            executors.add(task["executor"])
        assert abs(engine["clock"]["max_offset_ms"]) < 50, engine["clock"]  # one host: the same clock
        # the producers' manifests say where they ran
        run_dir = Path(report["run_dir"])
        manifests = [json.loads(p.read_text()) for p in run_dir.rglob("manifest-*.json")]
        assert manifests and all(m["stats"]["task"]["executor"] not in ("", "driver") for m in manifests), manifests
    assert executors <= {"0", "1"} and executors, executors  # the two workers' executors
    assert processes_tagged(tagged_env) == []


def test_steady_state_with_the_run_directory_in_an_s3_bucket_read_through_s3a(
        pytester: pytest.Pytester, tagged_env: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    """The same scenario on the standalone cluster with ``--kafka-mirror-run-store s3a://…``
    (moto's server on loopback, hadoop-aws from Maven Central): every task works in a copy of
    its own kept in step with the bucket, the capture segments are only in the bucket (Spark
    reads them through s3a), and every count matches the local engine's."""
    from tests.s3_store import MotoS3

    local = _run(pytester)
    local.assert_outcomes(passed=2)
    local_counts = {name: _counts(r) for name, r in _reports(pytester.path).items()}
    for path in (pytester.path / ".kafka-mirror" / "reports").glob("*.json"):
        path.unlink()
    with MotoS3(tmp_path_factory.mktemp("s3")) as s3, \
            StandaloneSpark(tmp_path_factory.mktemp("spark"), workers=2, cores=2) as cluster:
        conf = tmp_path_factory.mktemp("spark-conf")
        (conf / "spark-defaults.conf").write_text("spark.sql.shuffle.partitions 4\nspark.default.parallelism 4\n"
                                                  "spark.executor.memory 512m\n" + s3.spark_conf())
        result = _run(pytester, "--kafka-mirror-engine=spark", f"--kafka-mirror-spark-master={cluster.master_url}",
                      f"--kafka-mirror-run-store=s3a://{s3.bucket}/runs",
                      env={**spark_env(), **s3.env(), "SPARK_CONF_DIR": str(conf)})
        keys = s3.objects("runs/")
    out = result.stdout.str()
    result.assert_outcomes(passed=2)
    reports = _reports(pytester.path)
    assert {name: _counts(r) for name, r in reports.items()} == local_counts, out[-3000:]
    for report in reports.values():
        run_dir = Path(report["run_dir"])
        uri = json.loads((run_dir / "store.json").read_text())["uri"]
        prefix = uri[len(f"s3a://{s3.bucket}/"):]
        assert not list(run_dir.rglob("*.parquet")), "the segments are read in the bucket, not copied here"
        assert any(k.startswith(f"{prefix}/capture/part-") and k.endswith(".parquet") for k in keys), keys
        assert any(k.startswith(f"{prefix}/manifest-") for k in keys) and f"{prefix}/report.json" in keys, keys
        for task in report["engine"]["tasks"]:
            assert task["rc"] == 0 and task["executor"] not in ("", "driver"), task
            assert task["copy"] and not task["copy"].startswith(str(run_dir)), task  # a copy of its own
    assert processes_tagged(tagged_env) == []


CLOCK_TEST = '''
def test_clock(mirror_topics, mirror_producer, mirror_verifier):
    run = mirror_producer(mirror_topics(1, partitions=2), rate=200, duration=2)
    mirror_verifier(run).assert_ok(p99_ms=5000)
'''


def test_a_task_clock_off_by_more_than_a_tenth_of_the_limit_fails_the_latency_with_that_reason(
        pytester: pytest.Pytester, tagged_env: str) -> None:
    pytester.makepyfile(test_clock=CLOCK_TEST)
    old = dict(os.environ)
    os.environ["KAFKA_MIRROR_ENGINE_FAKE_CLOCK"] = "producer:0.8"  # 800 ms > 10 % of 5000 ms
    try:
        result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--kafka-mirror-progress=off",
                                               "--kafka-mirror-engine=spark", "--kafka-mirror-spark-master=local[3]")
    finally:
        os.environ.clear()
        os.environ.update(old)
    out = result.stdout.str()
    result.assert_outcomes(failed=1)
    assert "latency not judged: the clock of producer " in out, out[-4000:]
    assert "is -800." in out and "more than 10% of the limit 5000" in out, out[-4000:]
    assert processes_tagged(tagged_env) == []


def test_a_batch_larger_than_the_task_slots_fails_at_once_saying_so(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_slots='''
def test_slots(mirror_topics, mirror_producer):
    mirror_producer(mirror_topics(1, partitions=2), rate=100, duration=1, processes=3)
''')
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--kafka-mirror-progress=off",
                                           "--kafka-mirror-engine=spark", "--kafka-mirror-spark-master=local[2]")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*cannot start the producers: the spark engine runs producer *, producer *, producer * "
                                 "as one barrier stage of 3 tasks, and the Spark application has 2 task slots*"])


KILLED_TEST = '''
def test_killed(mirror_topics, mirror_producer, mirror_verifier):
    run = mirror_producer(mirror_topics(1, partitions=2), rate=200, duration=40)
    mirror_verifier(run).assert_ok()
'''


def test_a_worker_killed_mid_run_fails_it_naming_the_task_and_the_host(
        pytester: pytest.Pytester, tagged_env: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    """The worker whose executor runs the producer is SIGKILLed (its whole process group:
    the executor JVM and its Python workers) 5 s into a 40 s run: the run fails at once,
    naming the task that died (the producer's, or the capture's when Spark placed both on that
    worker), its host and executor, and nothing of it is left running."""
    import threading

    import psutil

    pytester.makepyfile(test_killed=KILLED_TEST)
    killed: list[str] = []

    def kill_the_producers_worker(cluster: StandaloneSpark) -> None:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and not killed:
            for spec in pytester.path.rglob("tasks-*/spec.json"):
                try:
                    children = json.loads(spec.read_text())["children"]
                except (OSError, ValueError, KeyError):
                    continue
                # the producers' stage (the capture's argv says --producers too: CI killed its
                # worker before the producers had started)
                if not all(c["name"].startswith("producer") for c in children):
                    continue
                started = spec.parent / "task-0.json"
                if started.exists() and time.time() - json.loads(started.read_text())["started"] > 5:
                    executor = json.loads(started.read_text())["executor"]
                    for proc in psutil.process_iter(["cmdline"]):
                        cmd = proc.info["cmdline"] or []
                        if "--executor-id" in cmd and cmd[cmd.index("--executor-id") + 1] == executor:
                            worker = next(w for w in cluster.workers if w.pid == proc.ppid())
                            killed.append(f"{worker.name} (executor {executor})")
                            worker.stop(timeout=0, sig=9)
                            return
            time.sleep(0.2)

    with StandaloneSpark(tmp_path_factory.mktemp("spark"), workers=2, cores=2) as cluster:
        conf = tmp_path_factory.mktemp("spark-conf")
        (conf / "spark-defaults.conf").write_text("spark.executor.memory 512m\n")
        killer = threading.Thread(target=kill_the_producers_worker, args=(cluster,), daemon=True)
        killer.start()
        t0 = time.monotonic()
        result = _run(pytester, "test_killed.py", "--kafka-mirror-engine=spark",
                      f"--kafka-mirror-spark-master={cluster.master_url}", env={**spark_env(), "SPARK_CONF_DIR": str(conf)})
        took = time.monotonic() - t0
        killer.join(5)
    out = result.stdout.str()
    assert killed, out[-3000:]
    result.assert_outcomes(failed=1)
    # the producer's task is named; or the capture's, when Spark had placed it on the same worker
    # and its stage failed first
    executor = killed[0].rsplit("executor ", 1)[1].rstrip(")")
    assert re.search(r"(producer process 0 \(\w+\) failed: the Spark task of producer \w+|the capture ended without "
                     rf"writing capture-status.json: the Spark task of capture) on \S+ \(executor {executor}\) failed: "
                     r".*(ExecutorLostFailure|failed barrier ResultStage)", out), out[-5000:]
    assert took < 120, f"the run went on for {took:.0f} s after its producer's worker died"
    assert processes_tagged(tagged_env) == []


def test_an_executor_without_confluent_kafka_fails_the_run_in_one_line_naming_its_host(
        pytester: pytest.Pytester, tagged_env: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    """The executors' Python workers import a ``confluent_kafka`` that fails (put first on their
    path by ``spark.executorEnv.PYTHONPATH``, as an executor without the package would): the
    first task says which host lacks what and how to ship the environment."""
    shadow = tmp_path_factory.mktemp("shadow")
    (shadow / "confluent_kafka.py").write_text(
        'raise ImportError("No module named confluent_kafka (this executor)", name="confluent_kafka")\n')
    conf = tmp_path_factory.mktemp("spark-conf")
    (conf / "spark-defaults.conf").write_text(f"spark.executorEnv.PYTHONPATH {shadow}\n")
    pytester.makepyfile(test_deps=CLOCK_TEST)
    result = _run(pytester, "test_deps.py", "--kafka-mirror-engine=spark", "--kafka-mirror-spark-master=local[3]",
                  env={"SPARK_CONF_DIR": str(conf)})
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert re.search(r"capture on \S+ did not start: the executor on \S+ lacks confluent_kafka: \(No module named "
                     r"confluent_kafka \(this executor\)\); ship the plugin's Python environment with the application "
                     r"\(spark.archives, docs/running.md\)", out), out[-3000:]
    assert processes_tagged(tagged_env) == []
