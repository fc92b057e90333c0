"""Ctrl-C in the middle of a scenario, as a user does it: SIGINT to pytest while brokers,
the reference mirror, the capture, the producer and the Spark JVM run.  The session
summarises what it verified and where the cut-short run is, and no child process
outlives pytest."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_kafka_mirror.processes.managed import wait_until
from tests.conftest import processes_tagged

pytestmark = pytest.mark.integration

SCENARIO = """
import os, pathlib, signal, threading, time
from pytest_kafka_mirror.faults import action, at
from pytest_kafka_mirror.plugin import SESSION_KEY

def test_a_verified(mirror_topics, mirror_producer, mirror_verifier):
    run = mirror_producer(mirror_topics(1, partitions=2), rate=400, count=200)
    mirror_verifier(run).assert_ok()

# the mark: a second into the producer's schedule, so records were acknowledged by then
MARK = [at(1, action("mark", lambda: pathlib.Path(os.environ["KM_MARK"]).write_text("producing")))]

def test_b_producing(mirror_topics, mirror_producer):
    mirror_producer(mirror_topics(1, partitions=2), rate=50, duration=120, faults=MARK)

def test_b_group(mirror_topics, mirror_producer):
    mirror_producer(mirror_topics(1, partitions=2), rate=50, duration=120, processes=2, faults=MARK)

def test_b_verifying(request, mirror_topics, mirror_producer, mirror_verifier):
    run = mirror_producer(mirror_topics(1, partitions=2), rate=1000, count=3000)
    sc = request.config.stash[SESSION_KEY].get_spark().sparkContext

    def interrupt_during_a_spark_job():
        while not sc.statusTracker().getActiveJobsIds():
            time.sleep(0.005)
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=interrupt_during_a_spark_job, daemon=True).start()
    mirror_verifier(run)
    time.sleep(60)  # only when the job ended before the signal was delivered
"""


@pytest.mark.parametrize("cut", ["test_b_producing", "test_b_group", "test_b_verifying"])
def test_ctrl_c_mid_scenario_reports_and_leaves_nothing_behind(pytester: pytest.Pytester, tagged_env: str,
                                                               cut: str) -> None:
    mark = pytester.path / "mark"
    pytester.makepyfile(test_cut=SCENARIO)
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "test_cut.py::test_a_verified",
         f"test_cut.py::{cut}"],
        cwd=pytester.path, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "KM_MARK": str(mark)},
    )
    try:
        if cut != "test_b_verifying":
            with contextlib.suppress(TimeoutError):
                wait_until(lambda: mark.exists() or proc.poll() is not None, 180, "the scenario's producer",
                           interval=0.1)
            assert mark.exists(), "the scenario's producer never ran its schedule for a second"
            assert len(processes_tagged(tagged_env)) >= 5  # brokers, mirror, capture, JVM, pytest: all busy
            proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=10)
    # Every child ended with pytest (each was stopped in teardown), none seconds later.
    assert processes_tagged(tagged_env) == [], out[-4000:]
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, out[-4000:]
    lines = out.splitlines()
    assert any("kafka-mirror: interrupted after 1 verified run" in line for line in lines), out[-4000:]
    assert any(line.startswith("    test_cut.py::test_a_verified ") for line in lines), out[-4000:]
    assert any(line.startswith("reports: ") and "index.html" in line for line in lines), out[-4000:]
    assert f"interrupted: test_cut.py::{cut}" in lines, out[-4000:]
    run_dirs = [line.split(": ", 1)[1] for line in lines if line.startswith("  run directory (not verified): ")]
    assert len(run_dirs) == 1 and Path(run_dirs[0]).name == "run-0", out[-4000:]
    assert Path(run_dirs[0], "capture").is_dir()  # what kafka-mirror verify reads
    assert f"next: kafka-mirror verify {run_dirs[0]}" in lines
    # The hint, word for word: a verdict on what the source acknowledged until the interrupt.
    done = subprocess.run([sys.executable, "-m", "pytest_kafka_mirror.cli", "verify", run_dirs[0]],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode in (0, 1), done.stdout + done.stderr  # not 2: "not a run directory"
    assert done.stdout.startswith("expected ") and Path(run_dirs[0], "report.json").is_file(), done.stdout + done.stderr
    if cut != "test_b_verifying":  # one manifest per producer process, each cut short
        manifests = [json.loads(p.read_text()) for p in Path(run_dirs[0]).glob("manifest-*.json")]
        assert len(manifests) == (2 if cut == "test_b_group" else 1), out[-4000:]
        assert all(m["stats"]["interrupted"] is True and m["stats"]["acked"] > 0 for m in manifests)
