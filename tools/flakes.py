"""Hunt flaky scenarios: run the scenario suite N times and tabulate what each test did.

    python -m tools.flakes --runs 10 --hog -n 2        # ten runs with one core kept busy
    python -m tools.flakes --runs 3 -n 0 -- -k burst   # pytest arguments after ``--``
    python tools/flakes.py --runs 2                    # the same, as a script

Each run is ``python -m pytest scenarios -p no:cacheprovider --junitxml=RUN/junit.xml
--kafka-mirror-report-dir RUN/reports [-n N] [extra arguments]``, from the repository's root,
in a directory of its own under ``--out`` (a new temporary directory unless given; it is
kept, with each run's output in ``RUN/pytest.log``).  Its outcomes are read from the JUnit
XML, so the table is the same with and without xdist: per test, the runs it passed, failed
(a failure or an error) and was skipped in, and the first line of each distinct failure
message with how often it occurred; then per run its exit code, wall time and counts.

``--hog`` keeps one core busy for the whole time with a busy-loop process (a loaded CI
machine, where timing-dependent scenarios flake).  It is a
:class:`~pytest_kafka_mirror.processes.managed.ManagedProcess`: stopped at the end, on Ctrl-C and on
SIGTERM, killed with this process even by SIGKILL (``PR_SET_PDEATHSIG``), and it also
exits by itself when orphaned or after the longest the runs can take.

Every run is bounded by ``--timeout`` (default 1800 s): then, as on Ctrl-C, pytest gets
SIGINT (so its fixtures tear down and it writes its JUnit XML), then SIGTERM and SIGKILL.

Exit status: 0 when every run exited 0 and no test failed or errored; 1 otherwise (a test
failure, or a run that timed out, crashed, or collected no tests: pytest's exit 5 is a
failure here); 2 when interrupted (the table of the runs so far is printed first); 4 for
bad arguments.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

if __package__ in (None, ""):  # run as a script: python tools/flakes.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_kafka_mirror.processes.managed import ManagedProcess

__all__ = ["RunResult", "TestOutcome", "cpu_hog", "main", "parse_junit", "render"]

ROOT = Path(__file__).resolve().parents[1]
#: The suite the README tells users to run.
SUITE = ("scenarios",)
DEFAULT_TIMEOUT = 1800.0
#: After SIGINT (timeout, Ctrl-C): how long pytest gets to tear down and write its report.
INTERRUPT_GRACE = 60.0
#: Width at which failure messages are cut in the table.
MESSAGE_WIDTH = 160

EXIT_OK, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_USAGE = 0, 1, 2, 4
#: pytest's exit codes, for the runs table
PYTEST_EXITS = {0: "ok", 1: "tests failed", 2: "interrupted", 3: "internal error", 4: "usage error",
                5: "collected no tests"}

# Worst first: a test that failed in its call and errored in teardown counts as failed once.
_RANK = {"error": 3, "failed": 2, "skipped": 1, "passed": 0}


@dataclass
class TestOutcome:
    """What one test did in one run: ``passed``, ``failed``, ``error`` or ``skipped``."""

    __test__ = False  # not a pytest test class

    status: str
    messages: list[str] = field(default_factory=list)  # first lines of its failures / errors

    @property
    def failed(self) -> bool:
        return self.status in ("failed", "error")


@dataclass
class RunResult:
    """One run of the suite."""

    index: int
    exit_code: int | None  # None: killed (timeout or interrupt) before it exited
    wall_s: float
    outcomes: dict[str, TestOutcome]
    note: str = ""  # why the run is not clean besides its tests: timeout, no JUnit XML, ...

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.note and not any(o.failed for o in self.outcomes.values())


def _first_line(text: str | None) -> str:
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()
    return ""


def _message(element: ET.Element) -> str:
    """The first line of a <failure>/<error>: its message attribute, else the first ``E``
    line of the traceback, else the traceback's first line."""
    first = _first_line(element.get("message"))
    if not first:
        text = element.text or ""
        e_lines = [ln[1:].strip() for ln in text.splitlines() if ln.startswith("E ")]
        first = e_lines[0] if e_lines else _first_line(text)
    if element.tag == "error":
        first = f"error: {first}" if first else "error"
    return first or element.tag


def _test_id(classname: str, name: str, root: Path) -> str:
    """The pytest node id behind a JUnit ``classname`` + ``name`` (``scenarios.test_burst`` +
    ``test_burst_10x`` → ``scenarios/test_burst.py::test_burst_10x``); classname::name when
    no file under ``root`` matches."""
    parts = classname.split(".") if classname else []
    for i in range(len(parts), 0, -1):
        path = "/".join(parts[:i]) + ".py"
        if (root / path).is_file():
            return "::".join([path, *parts[i:], name])
    return f"{classname}::{name}" if classname else name


def parse_junit(path: Path, root: Path = ROOT) -> dict[str, TestOutcome]:
    """Test id → outcome, from a pytest JUnit XML file.

    A test reported more than once (a failed call and an error in teardown) gets its worst
    status and every message.  Expected failures (``xfail``) count as skipped.
    """
    out: dict[str, TestOutcome] = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        test = _test_id(case.get("classname", ""), case.get("name", "?"), root)
        status, messages = "passed", []
        for child in case:
            kind = {"failure": "failed", "error": "error", "skipped": "skipped"}.get(child.tag)
            if kind is None:
                continue  # system-out, properties, ...
            if _RANK[kind] > _RANK[status]:
                status = kind
            if kind != "skipped":
                messages.append(_message(child))
        seen = out.get(test)
        if seen is None:
            out[test] = TestOutcome(status, messages)
        else:
            if _RANK[status] > _RANK[seen.status]:
                seen.status = status
            seen.messages += messages
    return out


def _cut(text: str, width: int = MESSAGE_WIDTH) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def render(runs: Sequence[RunResult], *, title: str = "") -> str:
    """The table: per test passes / failures / skips and its distinct failure messages, then
    per run its exit code, wall time and counts, then one summary line."""
    tests = sorted({t for r in runs for t in r.outcomes})
    lines = [title] if title else []
    width = max([len("test"), *(len(t) for t in tests)])
    lines.append(f"{'test':<{width}}  {'pass':>4}  {'fail':>4}  {'skip':>4}")
    flaky = always = 0
    for test in tests:
        seen = [r.outcomes[test] for r in runs if test in r.outcomes]
        passes = sum(o.status == "passed" for o in seen)
        fails = sum(o.failed for o in seen)
        skips = sum(o.status == "skipped" for o in seen)
        mark = ""
        if fails and passes:
            flaky += 1
            mark = "  FLAKY"
        elif fails:
            always += 1
            mark = "  FAILS"
        lines.append(f"{test:<{width}}  {passes:>4}  {fails:>4}  {skips:>4}{mark}")
        counts: dict[str, int] = {}
        for o in seen:
            for m in dict.fromkeys(o.messages):  # once per run
                counts[m] = counts.get(m, 0) + 1
        for m, n in counts.items():
            lines.append(f"    {n}× {_cut(m)}")
    lines.append("")
    lines.append(f"{'run':>3}  {'exit':>4}  {'wall':>8}  {'passed':>6}  {'failed':>6}  {'skipped':>7}  note")
    for r in runs:
        passed = sum(o.status == "passed" for o in r.outcomes.values())
        failed = sum(o.failed for o in r.outcomes.values())
        skipped = sum(o.status == "skipped" for o in r.outcomes.values())
        code = "-" if r.exit_code is None else str(r.exit_code)
        note = r.note or (PYTEST_EXITS.get(r.exit_code, "") if r.exit_code else "")
        row = f"{r.index:>3}  {code:>4}  {r.wall_s:>6.1f} s  {passed:>6}  {failed:>6}  {skipped:>7}  {note}"
        lines.append(row.rstrip())
    failures = sum(o.failed for r in runs for o in r.outcomes.values())
    bad_runs = sum(not r.ok for r in runs)
    lines.append(
        f"{len(runs)} run(s), {len(tests)} test(s): {failures} failure(s); {flaky} flaky test(s) (failed and "
        f"passed), {always} always failing; {bad_runs} run(s) not clean; exit codes "
        f"{', '.join('-' if r.exit_code is None else str(r.exit_code) for r in runs) or 'none'}"
    )
    return "\n".join(lines)


# -- the CPU hog -------------------------------------------------------------------------------

_HOG = """\
import os, sys, time
parent, deadline = os.getppid(), time.monotonic() + float(sys.argv[1])
while os.getppid() == parent and time.monotonic() < deadline:
    for _ in range(100_000):
        pass
"""


@contextlib.contextmanager
def cpu_hog(log_dir: Path, max_seconds: float) -> Iterator[ManagedProcess]:
    """A process keeping one core busy while the block runs; stopped when it ends, however it
    ends.  The process also ends by itself when orphaned or after ``max_seconds``."""
    hog = ManagedProcess("cpu hog", [sys.executable, "-c", _HOG, f"{max_seconds:.0f}"], log_dir / "hog.log")
    hog.start()
    try:
        yield hog
    finally:
        hog.stop(timeout=2.0)


# -- the runs ----------------------------------------------------------------------------------

def _finish(proc: ManagedProcess, grace: float) -> None:
    """SIGINT to pytest's process group (what Ctrl-C in a terminal sends), then, after
    ``grace`` seconds, SIGTERM and SIGKILL."""
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        pass
    except KeyboardInterrupt:  # a second Ctrl-C: no more patience
        proc.kill()
        raise
    proc.stop(timeout=10.0)


def run_once(index: int, command: Sequence[str], junit: Path, timeout: float, *,
             grace: float = INTERRUPT_GRACE, root: Path = ROOT) -> RunResult:
    """Run ``command`` (which writes its JUnit XML to ``junit``) once, its output in
    ``pytest.log`` beside ``junit``; Ctrl-C is passed on to pytest, then re-raised."""
    run_dir = junit.parent
    run_dir.mkdir(parents=True, exist_ok=True)
    proc = ManagedProcess(f"pytest run {index}", command, run_dir / "pytest.log", cwd=root)
    t0 = time.monotonic()
    proc.start()
    note = ""
    interrupted = False
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        note = f"timed out after {timeout:g} s"
        _finish(proc, grace)
    except KeyboardInterrupt:
        interrupted = True
        note = "interrupted"
        _finish(proc, grace)
    wall = time.monotonic() - t0
    code = proc.returncode
    outcomes: dict[str, TestOutcome] = {}
    try:
        outcomes = parse_junit(junit, root)
    except (OSError, ET.ParseError) as exc:
        if not note:
            note = f"no JUnit XML ({type(exc).__name__}); see {run_dir / 'pytest.log'}"
    if not note and code not in (0, 1):
        note = f"{PYTEST_EXITS.get(code, 'killed') if code is not None else 'no exit code'} (exit {code}); " \
               f"see {run_dir / 'pytest.log'}"
    if not note and code == 1 and not any(o.failed for o in outcomes.values()):
        note = f"exit 1 without a failed test; see {run_dir / 'pytest.log'}"
    result = RunResult(index, code, wall, outcomes, note)
    if interrupted:
        raise _Interrupted(result)
    return result


class _Interrupted(KeyboardInterrupt):
    def __init__(self, result: RunResult) -> None:
        super().__init__()
        self.result = result


def _parse_args(argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    argv = list(argv)
    extra: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, extra = argv[:cut], argv[cut + 1 :]

    def positive_int(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = 0
        if value < 1:
            raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
        return value

    def positive_seconds(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = 0.0
        if not value > 0:
            raise argparse.ArgumentTypeError(f"expected seconds > 0, got {text!r}")
        return value

    def workers(text: str) -> str:
        if text in ("auto", "logical") or (text.isdigit()):
            return text
        raise argparse.ArgumentTypeError(f"expected a number of xdist workers (0, 2, ...) or auto, got {text!r}")

    p = argparse.ArgumentParser(
        prog="python -m tools.flakes",
        description="Run the scenario suite N times and print, per test, passes / failures / skips and the first "
                    "line of each distinct failure.  Arguments after -- go to pytest.",
    )
    p.add_argument("--runs", type=positive_int, default=10, metavar="N", help="Runs of the suite. Default: %(default)r")
    p.add_argument("--hog", action="store_true", help="Keep one core busy with a busy-loop process the whole time.")
    p.add_argument("-n", dest="workers", type=workers, default=None, metavar="N",
                   help="xdist workers, passed to pytest as -n N. Default: pytest's own (no -n)")
    p.add_argument("--timeout", type=positive_seconds, default=DEFAULT_TIMEOUT, metavar="SECONDS",
                   help="Longest one run may take; then it is interrupted and counted as failed. Default: %(default)r")
    p.add_argument("--out", type=Path, default=None, metavar="DIR",
                   help="Where the runs' JUnit XML, reports and output go. Default: a new temporary directory")
    return p.parse_args(argv), extra


def main(argv: Sequence[str] | None = None, *, suite: Sequence[str] | None = None) -> int:
    """The command; ``suite`` replaces ``python -m pytest scenarios`` (for its tests)."""
    try:
        args, extra = _parse_args(sys.argv[1:] if argv is None else argv)
    except SystemExit as exc:
        return EXIT_USAGE if exc.code else EXIT_OK
    out = args.out if args.out is not None else Path(tempfile.mkdtemp(prefix="kafka-mirror-flakes-"))
    out.mkdir(parents=True, exist_ok=True)
    base = list(suite) if suite is not None else [sys.executable, "-m", "pytest", *SUITE]
    xdist = ["-n", args.workers] if args.workers is not None else []
    shown = " ".join([*(["python", "-m", "pytest", *SUITE] if suite is None else base), *xdist, *extra])
    title = f"flakes: {args.runs} run(s) of `{shown}`{', CPU hog on one core' if args.hog else ''}; runs in {out}"
    print(title, flush=True)
    runs: list[RunResult] = []
    code = EXIT_OK
    with contextlib.ExitStack() as stack:
        if args.hog:
            hog = stack.enter_context(cpu_hog(out, args.runs * (args.timeout + INTERRUPT_GRACE + 30) + 60))
            print(f"flakes: CPU hog pid {hog.pid}", flush=True)
        try:
            for i in range(1, args.runs + 1):
                run_dir = out / f"run-{i:02d}"
                junit = run_dir / "junit.xml"
                command = [*base, "-p", "no:cacheprovider", f"--junitxml={junit}",
                           "--kafka-mirror-report-dir", str(run_dir / "reports"), *xdist, *extra]
                r = run_once(i, command, junit, args.timeout)
                runs.append(r)
                _progress(r, args.runs)
        except _Interrupted as stop:
            runs.append(stop.result)
            code = EXIT_INTERRUPTED
        except KeyboardInterrupt:
            code = EXIT_INTERRUPTED
    if code == EXIT_INTERRUPTED:
        print(f"flakes: interrupted after {len(runs)} run(s); the hog is stopped", flush=True)
    print()
    print(render(runs, title=title))
    if code == EXIT_OK and not all(r.ok for r in runs):
        code = EXIT_FAILED
    return code


def _progress(r: RunResult, total: int) -> None:
    failed = sum(o.failed for o in r.outcomes.values())
    passed = sum(o.status == "passed" for o in r.outcomes.values())
    code = "-" if r.exit_code is None else r.exit_code
    print(f"flakes: run {r.index}/{total}: exit {code} in {r.wall_s:.1f} s, {passed} passed, {failed} failed"
          f"{'; ' + r.note if r.note else ''}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
