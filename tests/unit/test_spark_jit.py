"""The Spark driver's compilers: a local session's driver starts with C1 alone (the quick
start of small verifications), a large capture's verification gets one with C2 (a C1 driver
of ours is restarted for it, once), the shared Connect server keeps C2, and options of the
user's that choose the compilers are theirs (verify/connect.py, ``QUICK_JIT``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pytest_kafka_mirror.rundir import CAPTURE_STATUS
from pytest_kafka_mirror.verify import connect
from pytest_kafka_mirror.verify.job import large_capture


def test_a_local_driver_starts_with_c1_alone_a_large_capture_s_with_c2(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(connect.JAVA_OPTS_ENV, raising=False)
    assert connect.QUICK_JIT in connect.driver_java_options(quick=True).split()
    assert connect.QUICK_JIT not in connect.driver_java_options().split()  # the Connect server's, large ones'
    assert not connect.user_chose_jit()


@pytest.mark.parametrize("theirs", ["-XX:TieredStopAtLevel=4", "-XX:-TieredCompilation", "-XX:TieredStopAtLevel=1"])
def test_options_of_the_user_s_that_choose_the_compilers_are_kept_alone(theirs: str,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(connect.JAVA_OPTS_ENV, f"-Xss4m {theirs}")
    assert connect.user_chose_jit()
    options = connect.driver_java_options(quick=True).split()
    assert connect.QUICK_JIT not in options[:-2] and options[-2:] == ["-Xss4m", theirs]


@pytest.mark.parametrize(("status", "large"), [
    (None, False), ({"records": connect.LARGE_CAPTURE_RECORDS - 1}, False),
    ({"records": connect.LARGE_CAPTURE_RECORDS}, True), ({"records": "many"}, False), ("not json", False),
])
def test_a_large_capture_is_told_by_the_records_its_status_counts(tmp_path: Path, status: object,
                                                                   large: bool) -> None:
    if status is not None:
        (tmp_path / CAPTURE_STATUS).write_text(status if isinstance(status, str) else json.dumps(status))
    assert large_capture(tmp_path) is large


def test_without_a_count_in_its_status_a_capture_s_segments_are_counted(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_kafka_mirror.verify.prepare import RECORDS, LANES, write_run

    run = write_run(tmp_path / "run")
    (run / CAPTURE_STATUS).write_text(json.dumps({"reason": "satisfied"}))
    monkeypatch.setattr(connect, "LARGE_CAPTURE_RECORDS", LANES * RECORDS)
    assert large_capture(run)
    monkeypatch.setattr(connect, "LARGE_CAPTURE_RECORDS", LANES * RECORDS + 1)
    assert not large_capture(run)


RESTART = textwrap.dedent("""
    import json, os, sys
    from pytest_kafka_mirror.verify import spark as sessions
    from pytest_kafka_mirror.verify.spark import ProcessSpark

    def driver(session):
        flags = session.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments()
        return {"c1": "-XX:TieredStopAtLevel=1" in list(flags), "pid": sessions._jvm.pid,
                "quick": sessions.quick_jit(), "answers": session.range(10).count()}

    spark = ProcessSpark("local[1]")
    first = spark.get(None)
    seen = [driver(first)]
    same = spark.get(None) is first and spark.get(None, large=False) is first
    large = spark.get(None, large=True)
    seen.append(driver(large))
    again = spark.get(None, large=True) is large
    spark.stop()
    print(json.dumps({"seen": seen, "same": same, "again": again, "restarted": large is not first}))
""")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").is_dir() and "Z" not in Path(f"/proc/{pid}/stat").read_text().split()[2]


def test_a_large_capture_restarts_a_c1_driver_with_c2_once(tmp_path: Path) -> None:
    pytest.importorskip("pyspark")
    env = {k: v for k, v in os.environ.items() if k != connect.JAVA_OPTS_ENV}
    done = subprocess.run([sys.executable, "-c", RESTART], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    before, after = out["seen"]
    assert (before["c1"], before["quick"]) == (True, True)
    assert out["same"] and out["restarted"] and out["again"]
    assert (after["c1"], after["quick"]) == (False, False)
    assert before["answers"] == after["answers"] == 10
    assert before["pid"] != after["pid"]
    assert not _alive(before["pid"]) and not _alive(after["pid"])  # both JVMs stopped: no orphan
