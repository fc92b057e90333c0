"""Ctrl-C: the session still says what it verified, where the reports and the cut-short
run directories are, and leaves no process behind, whatever the interrupt hit (pytester
subprocesses that send themselves SIGINT at a chosen moment; the Spark cases start a JVM,
no broker)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import processes_tagged
from tests.stored import sample_report
from tests.synthetic import SyntheticRun

# test_done passes; test_cut verifies once, opens two more runs and is interrupted before
# verifying them: KM_RUN stands in for a run whose producer was cut short (a manifest of
# what the source acknowledged until then, and the capture), run-2 for one cut short in
# its readiness round (nothing produced).
RECORDED_THEN_CUT = """
import os, signal, time
from pathlib import Path
from pytest_kafka_mirror.plugin import SESSION_KEY
from pytest_kafka_mirror.verify import MirrorReport

def test_done(mirror_verifier):
    mirror_verifier.record(MirrorReport.load(os.environ["KM_REPORT"]))

def test_cut(request, mirror_verifier, tmp_path):
    mirror_verifier.record(MirrorReport.load(os.environ["KM_REPORT"]))
    runs = request.config.stash[SESSION_KEY].runs
    runs.append((request.node.nodeid, Path(os.environ["KM_RUN"])))  # its producer was cut short
    (tmp_path / "run-2").mkdir()  # cut short in its readiness round: no manifest
    runs.append((request.node.nodeid, tmp_path / "run-2"))
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(30)

def test_never_reached():
    pass
"""


def test_an_interrupted_session_says_what_it_verified_and_where_the_runs_are(
        pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    report = tmp_path / "recorded.json"
    sample_report(expected=200).write(report)
    monkeypatch.setenv("KM_REPORT", str(report))
    cut = SyntheticRun(tmp_path / "cut-run")
    cut.lane("orders", pid="p1", lane=0, partition=0, acked=range(100)).deliver(range(60), latency_ms=5)
    cut.write()
    monkeypatch.setenv("KM_RUN", str(cut.run_dir))
    pytester.makepyfile(test_cut=RECORDED_THEN_CUT)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    reports = pytester.path / ".kafka-mirror" / "reports"
    result.stdout.fnmatch_lines([
        "*= kafka-mirror: interrupted after 2 verified runs =*",
        "    test * records *",
        "    test_cut.py::test_cut * 200 *",
        "    test_cut.py::test_done * 200 *",
        f"reports: {reports} (plots: *index.html)",
        "interrupted: test_cut.py::test_cut",
        f"  run directory (not verified): {cut.run_dir}",
        "  run directory (not verified, nothing produced before the interrupt): */test_cut0/run-2",
        f"next: kafka-mirror verify {cut.run_dir}",
    ])
    # The hint, word for word, gives a verdict on what was acknowledged until the interrupt.
    [hint] = [line for line in result.stdout.lines if line.startswith("next: ")]
    words = shlex.split(hint.removeprefix("next: "))
    assert words[:2] == ["kafka-mirror", "verify"]
    done = subprocess.run([sys.executable, "-m", "pytest_kafka_mirror.cli", *words[1:]], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr  # the tail never arrived: a verdict, not "not a run directory"
    assert "unseen 40" in done.stdout and "mirror mismatch" in done.stderr and (cut.run_dir / "report.json").is_file(), done.stdout
    assert "test_never_reached" not in result.stdout.str()
    results = json.loads((reports / "session.json").read_text())["results"]
    assert {k: r["outcome"] for k, r in results.items()} == {"test_cut.py::test_cut": "interrupted",
                                                              "test_cut.py::test_done": "passed"}
    assert "test_cut.py::test_cut" in (reports / "index.html").read_text()


def test_an_interrupt_before_any_verification_still_points_at_the_reports(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_cut=
        """
        import os, signal, time

        def test_cut():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(30)
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines([
        "*= kafka-mirror: interrupted after no verified run =*",
        "reports: none written in this session (*/.kafka-mirror/reports)",
        "interrupted: test_cut.py::test_cut",
    ])


# SIGINT once the JVM process exists (while it starts), or once a Spark job runs.
SPARK_CUT = """
import os, signal, threading, time
import pytest
from pytest_kafka_mirror.plugin import SESSION_KEY
from pytest_kafka_mirror.verify.spark import _spark_children

def interrupt_when(predicate, delay=0.0):
    def watch():
        while not predicate():
            time.sleep(0.02)
        time.sleep(delay)
        os.kill(os.getpid(), signal.SIGINT)
    threading.Thread(target=watch, daemon=True).start()

def test_cut_while_the_jvm_starts(request):
    interrupt_when(lambda: bool(_spark_children()), delay=1.0)
    request.config.stash[SESSION_KEY].get_spark()
    time.sleep(60)  # only reached when the JVM started within the delay: interrupted here

def test_cut_during_a_spark_job(request):
    spark = request.config.stash[SESSION_KEY].get_spark()
    interrupt_when(lambda: True, delay=2.0)
    spark.range(0, 10 ** 12, numPartitions=2).selectExpr("sum(id % 7)").collect()  # minutes, no overflow
"""


@pytest.mark.parametrize("test", ["test_cut_while_the_jvm_starts", "test_cut_during_a_spark_job"])
def test_an_interrupt_leaves_no_spark_jvm_behind(pytester: pytest.Pytester, tagged_env: str, test: str) -> None:
    pytest.importorskip("pyspark")
    pytester.makepyfile(test_spark=SPARK_CUT)
    t0 = time.monotonic()
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", f"test_spark.py::{test}", timeout=240)
    elapsed = time.monotonic() - t0
    assert result.ret == pytest.ExitCode.INTERRUPTED, result.stdout.str()[-3000:]
    result.stdout.fnmatch_lines(["*= kafka-mirror: interrupted after no verified run =*",
                                 f"interrupted: test_spark.py::{test}"])
    # The JVM ends with pytest, not seconds later on its own (stdin EOF); an orphan would be
    # here now, reparented to init.
    assert processes_tagged(tagged_env) == []
    assert elapsed < 120, elapsed


def test_spark_s_sigint_handler_is_put_back_when_the_session_stops(tmp_path: Path) -> None:
    """pyspark replaces SIGINT's handler with one that calls the (stopped) context; after
    stop_spark a Ctrl-C is pytest's KeyboardInterrupt again (checked in a fresh process:
    this one's shared session stays up)."""
    import subprocess
    import sys

    pytest.importorskip("pyspark")
    script = (
        "import signal\n"
        "from pytest_kafka_mirror.verify import get_spark, stop_spark\n"
        "before = signal.getsignal(signal.SIGINT)\n"
        "get_spark('local[1]')\n"
        "assert signal.getsignal(signal.SIGINT) is not before\n"
        "stop_spark()\n"
        "assert signal.getsignal(signal.SIGINT) is before, signal.getsignal(signal.SIGINT)\n"
        "print('restored')\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=180,
                         env={**os.environ, "PYTHONWARNINGS": "ignore"})
    assert out.returncode == 0 and "restored" in out.stdout, out.stderr[-3000:]
