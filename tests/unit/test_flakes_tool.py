"""tools/flakes.py: JUnit parsing, the table, the runs (against a fake suite) and the CPU hog's end."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from pytest_kafka_mirror.processes.managed import wait_until
from tools import flakes
from tools.flakes import RunResult, TestOutcome, cpu_hog, parse_junit, render

ROOT = Path(__file__).resolve().parents[2]

# What pytest 9 writes (trimmed): a pass, a failure with a multi-line message, a skip, a test
# that failed and then errored in teardown (two testcases), a parametrized failure, an xfail
# and a method of a class.
JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites name="pytest tests"><testsuite name="pytest" errors="1"
failures="4" skipped="2" tests="8" time="0.076"><testcase classname="sub.test_x" name="test_ok" time="0.003" />
<testcase classname="sub.test_x" name="test_fail" time="0.001"><failure message="AssertionError: one is not
two&#10;  second line&#10;assert 1 == 2">&gt;   def test_fail(): ...
E   AssertionError: one is not two

sub/test_x.py:3: AssertionError</failure></testcase>
<testcase classname="sub.test_x" name="test_skip" time="0.000"><skipped type="pytest.skip" message="nope">sub/test_x.py:4:
nope</skipped></testcase>
<testcase classname="sub.test_x" name="test_teardown" time="0.000"><failure message="assert False">E   assert False
</failure></testcase>
<testcase classname="sub.test_x" name="test_teardown" time="0.000"><error message="failed on teardown with
&quot;RuntimeError: teardown boom&quot;">E       RuntimeError: teardown boom</error></testcase>
<testcase classname="sub.test_x" name="test_p[1]" time="0.000" />
<testcase classname="sub.test_x" name="test_p[2]" time="0.000"><failure message="">x = 2
E   assert 2 == 1
</failure></testcase>
<testcase classname="sub.test_x" name="test_xf" time="0.000"><skipped type="pytest.xfail" message="" /></testcase>
<testcase classname="sub.test_x.TestK" name="test_m" time="0.000"><failure message="UserWarning: warned">E
UserWarning: warned</failure></testcase>
<testcase classname="gone.module" name="test_elsewhere" time="0.000" />
</testsuite></testsuites>
"""


def _junit(tmp_path: Path, text: str = JUNIT) -> Path:
    (tmp_path / "sub").mkdir(exist_ok=True)
    (tmp_path / "sub" / "test_x.py").write_text("")
    path = tmp_path / "junit.xml"
    path.write_text(text)
    return path


def test_parse_junit_outcomes_ids_and_first_lines(tmp_path: Path) -> None:
    got = parse_junit(_junit(tmp_path), root=tmp_path)
    assert {t: (o.status, o.messages) for t, o in got.items()} == {
        "sub/test_x.py::test_ok": ("passed", []),
        "sub/test_x.py::test_fail": ("failed", ["AssertionError: one is not two"]),
        "sub/test_x.py::test_skip": ("skipped", []),
        # a failed call and a teardown error: one test, its worst status, both messages
        "sub/test_x.py::test_teardown": ("error", [
            "assert False", 'error: failed on teardown with "RuntimeError: teardown boom"']),
        "sub/test_x.py::test_p[1]": ("passed", []),
        # no message attribute: the first E line of the traceback
        "sub/test_x.py::test_p[2]": ("failed", ["assert 2 == 1"]),
        "sub/test_x.py::test_xf": ("skipped", []),
        "sub/test_x.py::TestK::test_m": ("failed", ["UserWarning: warned"]),
        # no such file under the root: the JUnit names as they are
        "gone.module::test_elsewhere": ("passed", []),
    }


def _runs() -> list[RunResult]:
    warn = ("pytest_kafka_mirror._warnings.PytestKafkaMirrorWarning: producer p1 cannot reach 200 msg/s per "
            "topic on 1 topic(s)")
    return [
        RunResult(1, 0, 301.25, {
            "scenarios/test_burst.py::test_burst_10x": TestOutcome("passed"),
            "scenarios/test_failover.py::test_failover": TestOutcome("passed"),
            "scenarios/test_topology.py::test_fan_in": TestOutcome("skipped"),
        }),
        RunResult(2, 1, 298.5, {
            "scenarios/test_burst.py::test_burst_10x": TestOutcome("failed", [warn]),
            "scenarios/test_failover.py::test_failover": TestOutcome("error", ["error: failed on setup with x"]),
            "scenarios/test_topology.py::test_fan_in": TestOutcome("skipped"),
        }),
        RunResult(3, 2, 1800.0, {
            "scenarios/test_burst.py::test_burst_10x": TestOutcome("failed", [warn, warn]),
            "scenarios/test_failover.py::test_failover": TestOutcome("error", ["error: failed on setup with x"]),
        }, note="timed out after 1800 s"),
    ]


def test_render_table() -> None:
    assert render(_runs(), title="flakes: 3 run(s)") == textwrap.dedent("""\
        flakes: 3 run(s)
        test                                       pass  fail  skip
        scenarios/test_burst.py::test_burst_10x       1     2     0  FLAKY
            2× pytest_kafka_mirror._warnings.PytestKafkaMirrorWarning: producer p1 cannot reach 200 msg/s per topic on 1 topic(s)
        scenarios/test_failover.py::test_failover     1     2     0  FLAKY
            2× error: failed on setup with x
        scenarios/test_topology.py::test_fan_in       0     0     2

        run  exit      wall  passed  failed  skipped  note
          1     0   301.2 s       2       0        1
          2     1   298.5 s       0       2        1  tests failed
          3     2  1800.0 s       0       2        0  timed out after 1800 s
        3 run(s), 3 test(s): 4 failure(s); 2 flaky test(s) (failed and passed), 0 always failing; 2 run(s) not clean; exit codes 0, 1, 2""")


def test_render_cuts_long_messages_and_marks_always_failing() -> None:
    runs = [RunResult(1, 1, 1.0, {"t": TestOutcome("failed", ["x" * 500])})]
    lines = render(runs).splitlines()
    assert lines[1] == "t        0     1     0  FAILS"
    assert lines[2] == "    1× " + "x" * (flakes.MESSAGE_WIDTH - 1) + "…"


# -- the runs, against a fake suite ------------------------------------------------------------

FAKE_SUITE = '''\
import os, pathlib, sys, time
here = pathlib.Path(__file__).parent
args = sys.argv[1:]
junit = pathlib.Path(next(a.split("=", 1)[1] for a in args if a.startswith("--junitxml=")))
count = here / "count"
n = int(count.read_text()) + 1 if count.exists() else 1
count.write_text(str(n))
(here / f"argv-{n}").write_text("\\n".join(args))
(here / f"pid-{n}").write_text(str(os.getpid()))
mode = (here / "plan").read_text().split()[n - 1]
case = '<testcase classname="scenarios.test_fake" name="test_a" time="1">{}</testcase>'
cases = {
    "pass": case.format(""),
    "fail": case.format('<failure message="AssertionError: lag 3 s&#10;more">E  x</failure>'),
    "empty": "",
}
if mode == "hang":
    time.sleep(60)
junit.write_text('<?xml version="1.0"?><testsuites><testsuite name="pytest">' + cases[mode] +
                 '<testcase classname="scenarios.test_fake" name="test_b"><skipped message="no"/></testcase>' * (mode != "empty") +
                 '</testsuite></testsuites>')
sys.exit({"pass": 0, "fail": 1, "empty": 5}[mode])
'''


@pytest.fixture
def suite(tmp_path: Path) -> tuple[list[str], Path]:
    d = tmp_path / "suite"
    d.mkdir()
    (d / "fake_pytest.py").write_text(FAKE_SUITE)
    return [sys.executable, str(d / "fake_pytest.py")], d


def test_runs_tabulated_and_exit_1_for_a_flaky_test(suite: tuple[list[str], Path], tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    cmd, d = suite
    (d / "plan").write_text("pass fail pass")
    out = tmp_path / "out"
    code = flakes.main(["--runs", "3", "-n", "2", "--out", str(out), "--", "-k", "burst"], suite=cmd)
    text = capsys.readouterr().out
    assert code == 1
    assert "scenarios.test_fake::test_a     2     1     0  FLAKY" in text
    assert "    1× AssertionError: lag 3 s" in text
    assert "scenarios.test_fake::test_b     0     0     3" in text
    # each run: no cache, its own JUnit XML and report directory, then -n and the extra arguments
    assert (d / "argv-2").read_text().splitlines() == [
        "-p", "no:cacheprovider", f"--junitxml={out / 'run-02' / 'junit.xml'}",
        "--kafka-mirror-report-dir", str(out / "run-02" / "reports"), "-n", "2", "-k", "burst"]
    assert (out / "run-03" / "junit.xml").exists() and (out / "run-03" / "pytest.log").exists()


def test_exit_0_only_when_every_run_passed(suite: tuple[list[str], Path], tmp_path: Path) -> None:
    cmd, d = suite
    (d / "plan").write_text("pass pass")
    assert flakes.main(["--runs", "2", "--out", str(tmp_path / "out")], suite=cmd) == 0


def test_collecting_no_tests_is_a_failure(suite: tuple[list[str], Path], tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    cmd, d = suite
    (d / "plan").write_text("empty")
    assert flakes.main(["--runs", "1", "--out", str(tmp_path / "out")], suite=cmd) == 1
    assert "collected no tests (exit 5)" in capsys.readouterr().out


def test_a_run_over_its_timeout_is_stopped_and_failed(suite: tuple[list[str], Path], tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    cmd, d = suite
    (d / "plan").write_text("hang pass")
    t0 = time.monotonic()
    assert flakes.main(["--runs", "2", "--timeout", "1", "--out", str(tmp_path / "out")], suite=cmd) == 1
    assert time.monotonic() - t0 < 20
    assert "timed out after 1 s" in capsys.readouterr().out
    assert not _alive(int((d / "pid-1").read_text()))


@pytest.mark.parametrize("argv", [["--runs", "0"], ["--runs", "x"], ["-n", "two"], ["--timeout", "-1"]])
def test_bad_arguments(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert flakes.main(argv) == flakes.EXIT_USAGE
    assert "error: argument" in capsys.readouterr().err


# -- the CPU hog: never left behind ------------------------------------------------------------

def _alive(pid: int) -> bool:
    try:
        state = psutil.Process(pid).status()
    except psutil.Error:
        return False
    return state != psutil.STATUS_ZOMBIE  # a zombie waits for a reaper that a container's init may not be


def _gone(pid: int, within: float = 10.0) -> bool:
    try:
        wait_until(lambda: not _alive(pid), within, f"process {pid} to end")
    except TimeoutError:
        return False
    return True


def test_the_hog_is_stopped_when_the_block_ends_or_raises(tmp_path: Path) -> None:
    with cpu_hog(tmp_path, 60) as hog:
        assert hog.pid is not None and _alive(hog.pid)
    assert _gone(hog.pid)
    with pytest.raises(KeyboardInterrupt), cpu_hog(tmp_path, 60) as hog:
        raise KeyboardInterrupt
    assert hog.pid is not None and _gone(hog.pid)


def test_the_hog_dies_with_a_killed_parent(tmp_path: Path) -> None:
    # SIGKILL leaves no chance to clean up: the hog ends by PR_SET_PDEATHSIG (or by noticing
    # it was orphaned)
    code = (f"import os, signal, sys; sys.path.insert(0, {str(ROOT)!r}); from pathlib import Path; "
            f"from tools.flakes import cpu_hog\n"
            f"with cpu_hog(Path({str(tmp_path)!r}), 60) as hog:\n"
            f"    print(hog.pid, flush=True); os.kill(os.getpid(), signal.SIGKILL)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert proc.returncode == -signal.SIGKILL
    assert _gone(int(proc.stdout.split()[0]))


def test_ctrl_c_stops_the_run_and_the_hog_and_prints_the_table(suite: tuple[list[str], Path], tmp_path: Path) -> None:
    cmd, d = suite
    (d / "plan").write_text("pass hang pass")
    code = (f"import sys; sys.path.insert(0, {str(ROOT)!r}); from tools import flakes\n"
            f"sys.exit(flakes.main(['--runs', '3', '--hog', '--out', {str(tmp_path / 'out')!r}], suite={cmd!r}))")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        def hanging() -> bool:  # the second run
            assert proc.poll() is None, "the tool ended before its second run"
            return (d / "pid-2").exists()

        wait_until(hanging, 30, "the second run to hang")
        proc.send_signal(signal.SIGINT)  # what a terminal sends to the foreground job
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == flakes.EXIT_INTERRUPTED
    hog_pid = int(next(ln for ln in out.splitlines() if "CPU hog pid" in ln).split()[-1])
    assert _gone(hog_pid)
    assert _gone(int((d / "pid-2").read_text()))
    assert "interrupted after 2 run(s)" in out
    assert "scenarios.test_fake::test_a     1     0     0" in out
    assert "interrupted" in out.splitlines()[-2]  # the second run's row
