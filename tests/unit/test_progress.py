"""Live progress (report/progress.py): the wording, the spool, the display on a TTY and in
a CI log, and the plugin's wiring in a pytest session (subprocess: no TTY there, so the
live line is tested on the display with a fake terminal)."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_kafka_mirror.config import OPTIONS_BY_NAME
from pytest_kafka_mirror.report.progress import (
    DEFAULT_INTERVAL,
    ProgressDisplay,
    ProgressSpool,
    RunStatus,
    display_mode,
    parse_progress,
    read_statuses,
    status_line,
)

T0 = 1_700_000_000.0
PROGRESS = OPTIONS_BY_NAME["progress"].flag


def producing(**kw: object) -> RunStatus:
    base: dict[str, object] = dict(worker="gw1", test="scenarios/test_a.py::test_steady[headers]", phase="producing",
                                   since=T0, expected_s=60.0, sent=2400, acked=2390, arrived=2380, latency_count=2380,
                                   latency_sum_us=2380 * 14_400, bounds_ms=[10.0, 50.0, 100.0],
                                   cumulative=[1000, 2370, 2380])
    base.update(kw)
    return RunStatus(**base)  # type: ignore[arg-type]


def test_a_status_is_a_sentence_with_rounded_numbers() -> None:
    assert status_line(producing(), T0 + 12.3) == (
        "test_steady[headers] producing 12 s of 1 min 00 s, ETA 48 s: sent 2,400, acked 2,390, arrived 2,380, "
        "missing 10, latency mean 14 ms, p99 <= 50 ms")
    assert status_line(producing(), T0 + 12.3, worker=True, compact=True) == (
        "[gw1] test_steady[headers] producing 12/1 min 00 s, ETA 48 s: sent 2,400, acked 2,390, arrived 2,380, "
        "missing 10, p99 <= 50 ms")


@pytest.mark.parametrize("kw,now,words", [
    (dict(phase="readiness", limit_s=60.0, sent=0, acked=0, arrived=0, latency_count=0), 4.0,
     "test_steady[headers] waiting for readiness 4 s (at most 1 min 00 s)"),
    (dict(phase="draining", limit_s=30.0, acked=2400, arrived=2400), 75.0,
     "test_steady[headers] draining 1 min 15 s (ends 30 s after the last arrival): sent 2,400, acked 2,400, "
     "arrived 2,400, latency mean 14 ms, p99 <= 50 ms"),
    # the producers are done, the scenario does its own steps (a group sync, a config change...)
    (dict(phase="produced", acked=2400, arrived=2400), 23.0,
     "test_steady[headers] produced 23 s ago (the scenario's own steps): sent 2,400, acked 2,400, arrived 2,400, "
     "latency mean 14 ms, p99 <= 50 ms"),
    (dict(phase="verifying", failed=3, latency_count=10, latency_sum_us=10 * 20_000_000, cumulative=[0, 0, 0]), 19.0,
     "test_steady[headers] verifying with Spark 19 s: sent 2,400, acked 2,390, arrived 2,380, missing 10, "
     "failed 3, latency mean 20 s, p99 > 100 ms"),
])
def test_each_phase_says_what_it_waits_for(kw: dict[str, object], now: float, words: str) -> None:
    assert status_line(producing(**kw), T0 + now) == words


def test_a_run_without_planned_length_has_no_eta() -> None:
    assert status_line(producing(expected_s=None), T0 + 5).startswith("test_steady[headers] producing 5 s: sent")


def test_the_spool_and_the_capture_s_progress_make_the_status(tmp_path: Path) -> None:
    run_dir = tmp_path / "run-0"
    run_dir.mkdir()
    (tmp_path / "spool").mkdir()
    spool = ProgressSpool(tmp_path / "spool", "gw0")
    assert read_statuses(tmp_path / "spool") == []
    run = spool.for_run("t.py::test_x", run_dir)
    run.on_phase("producing", 10.0)
    run.on_counts("p1", {"a": {"sent": 10, "acked": 8, "failed": 1, "rate": 5.0}, "b": {"sent": 5, "acked": 5}})
    for group, n in ((0, 6), (1, 4)):  # two capture processes
        (run_dir / f"capture-progress-g{group}.json").write_text(json.dumps(
            {"by_topic": {"a": n}, "latency": {"bounds_ms": [10, 50], "cumulative": [n, n], "count": n,
                                                "sum_us": n * 5000}}))
    [s] = read_statuses(tmp_path / "spool")
    assert (s.worker, s.test, s.phase, s.expected_s) == ("gw0", "t.py::test_x", "producing", 10.0)
    assert (s.sent, s.acked, s.failed, s.arrived, s.latency_count) == (15, 13, 1, 10, 10)
    assert s.percentile_bound(0.99) == 10
    with pytest.raises(ValueError, match="phase 'waiting': one of readiness, producing, produced, draining, verifying"):
        run.on_phase("waiting")
    run.on_phase("done")
    assert read_statuses(tmp_path / "spool") == []


class FakeTerminal:
    """What the display reads of pytest's terminal reporter."""

    def __init__(self, used: int, width: int = 120) -> None:
        line = "test_a.py " + "." * max(used - 10, 0)
        self._tw = SimpleNamespace(width_of_current_line=used, fullwidth=width, _current_line=line)


def _display(tmp_path: Path, *, live: bool, terminal: FakeTerminal | None = None,
             interval: float = DEFAULT_INTERVAL) -> tuple[ProgressDisplay, io.StringIO, list[float], ProgressSpool]:
    (tmp_path / "spool").mkdir(exist_ok=True)
    spool = ProgressSpool(tmp_path / "spool", "master")
    out = io.StringIO()
    clock = [T0]
    display = ProgressDisplay(tmp_path / "spool", out, live=live, interval=interval, terminal=terminal,
                              clock=lambda: clock[0])
    return display, out, clock, spool


def test_without_a_tty_a_line_comes_only_once_the_interval_is_reached(tmp_path: Path) -> None:
    terminal = FakeTerminal(used=10)
    display, out, clock, spool = _display(tmp_path, live=False, terminal=terminal, interval=15)
    display.tick()
    assert out.getvalue() == ""  # no run
    spool.phase("test_a.py::test_x", tmp_path / "run-0", "producing", expected_s=60)
    spool.runs[str(tmp_path / "run-0")]["since"] = T0
    spool._write()
    for t in (0, 5, 14.9):
        clock[0] = T0 + t
        display.tick()
    assert out.getvalue() == ""  # not a line before the run lasted an interval
    clock[0] = T0 + 15
    display.tick()
    # below pytest's line, which is written again for its next result to land on
    line = "kafka-mirror: test_x producing 15 s of 1 min 00 s, ETA 45 s: sent 0, acked 0, arrived 0"
    assert out.getvalue() == f"\n{line}\ntest_a.py "
    clock[0] = T0 + 20
    display.tick()
    assert out.getvalue().count("kafka-mirror: ") == 1  # the next one an interval later
    clock[0] = T0 + 30
    display.tick()
    assert out.getvalue().count("\nkafka-mirror: test_x producing") == 2
    terminal._tw._current_line = ""
    clock[0] = T0 + 45
    display.tick()  # pytest at the start of a line: nothing to end, nothing to write again
    assert out.getvalue().endswith("\ntest_a.py kafka-mirror: test_x producing 45 s of 1 min 00 s, ETA 15 s: sent 0, "
                                   "acked 0, arrived 0\n")


def test_a_piped_session_is_never_silent_for_much_longer_than_the_default_interval(tmp_path: Path) -> None:
    """A session as CI logs it: the display ticks every second (as its thread does) over
    runs one after the other (a test's run-0 then run-1, a pause between two tests, two
    workers at once); the longest time anything ran without a progress line is measured."""
    from pytest_kafka_mirror.report.progress import LIVE_EVERY

    assert LIVE_EVERY == 1.0  # the display thread's tick, simulated below
    assert display_mode("auto", False, False) == (False, 10.0)  # the default of a CI log
    display, out, clock, spool = _display(tmp_path, live=False, terminal=FakeTerminal(used=0))
    other = ProgressSpool(tmp_path / "spool", "gw1")
    #: (spool, run, start, end) in seconds from T0
    runs = [(spool, "run-a0", 0.0, 25.0), (spool, "run-a1", 25.4, 52.0),  # one test's two runs
            (spool, "run-b0", 55.0, 63.0),  # the next test, after a 3 s pause
            (other, "run-c0", 58.0, 90.0), (spool, "run-d0", 63.5, 77.0)]  # another worker meanwhile
    lines_at: list[int] = []
    longest, quiet_since = 0, None
    for tick in range(100):  # seconds from T0, a tick each
        clock[0] = T0 + tick
        for s, name, start, end in runs:
            if start <= tick < end and str(tmp_path / name) not in s.runs:
                s.phase(f"test_a.py::test_{name}", tmp_path / name, "producing", expected_s=end - start)
                s.runs[str(tmp_path / name)]["since"] = T0 + start
                s._write()
            elif tick >= end:
                s.done(tmp_path / name)
        before = out.getvalue().count("kafka-mirror: ")
        display.tick()
        wrote = out.getvalue().count("kafka-mirror: ") > before
        # silent since the last line (or the first run's start); the pauses between the runs
        # here are shorter than an interval, so they count, as they do for someone reading the log
        if wrote or any(start <= tick < end for _, _, start, end in runs):
            quiet_since = tick if quiet_since is None else quiet_since
            longest = max(longest, tick - quiet_since)
        if wrote:
            lines_at.append(tick)
            quiet_since = tick
    assert longest <= DEFAULT_INTERVAL, (longest, lines_at)
    # a line for each run running then, two at once while two workers run
    assert out.getvalue().count("test_run-c0 producing") == 3


def test_on_a_tty_the_live_status_ends_pytest_s_line_and_is_erased_before_pytest_writes(tmp_path: Path) -> None:
    terminal = FakeTerminal(used=len("test_a.py .."))
    display, out, clock, spool = _display(tmp_path, live=True, terminal=terminal)
    spool.phase("test_a.py::test_x", tmp_path / "run-0", "draining", limit_s=30)
    spool.runs[str(tmp_path / "run-0")]["since"] = T0 - 3
    spool._write()
    display.tick()
    status = " [test_x draining 3 s: sent 0, arrived 0]"
    assert out.getvalue() == status
    clock[0] = T0 + 1
    display.tick()  # replaced in place
    assert out.getvalue() == f"{status}\x1b[{len(status)}D\x1b[K [test_x draining 4 s: sent 0, arrived 0]"
    with display.pytest_writes():
        assert out.getvalue().endswith(f"\x1b[{len(status)}D\x1b[K")  # gone before pytest writes its result


def test_a_status_longer_than_pytest_s_line_has_room_for_gets_a_line_that_erase_takes_back(tmp_path: Path) -> None:
    terminal = FakeTerminal(used=70, width=80)
    display, out, clock, spool = _display(tmp_path, live=True, terminal=terminal)
    spool.phase("test_a.py::test_x", tmp_path / "run-0", "producing", expected_s=60)
    spool.runs[str(tmp_path / "run-0")]["since"] = T0
    spool._write()
    display.tick()
    text = out.getvalue()
    assert text.startswith("\nkafka-mirror: test_x producing 0/1 min 00 s") and len(text) <= 80
    with display.pytest_writes():
        assert out.getvalue()[len(text):] == "\r\x1b[K\x1b[1A\r\x1b[70C"  # back at the end of pytest's line


@pytest.mark.parametrize("setting,isatty,log_cli,mode", [
    ("auto", True, False, (True, DEFAULT_INTERVAL)),
    ("auto", False, False, (False, DEFAULT_INTERVAL)),
    ("auto", True, True, (False, DEFAULT_INTERVAL)),  # live log lines would cut through the live line
    ("live", False, False, (True, DEFAULT_INTERVAL)),
    (15.0, True, False, (False, 15.0)),
    ("off", True, False, None),
])
def test_display_modes(setting: str | float, isatty: bool, log_cli: bool, mode: tuple[bool, float] | None) -> None:
    assert display_mode(setting, isatty, log_cli) == mode


@pytest.mark.parametrize("text", ["0", "-3", "often", ""])
def test_a_bad_progress_setting_names_the_accepted_forms(text: str) -> None:
    with pytest.raises(ValueError, match=r"accepted: auto .* \| live \| off \| SECONDS"):
        parse_progress(text)
    assert parse_progress(" 15 ") == 15.0 and parse_progress("OFF") == "off"


SCENARIO = """
import time
from pytest_kafka_mirror.plugin import SESSION_KEY

def test_slow(request, tmp_path):
    spool = request.config.stash[SESSION_KEY].progress_spool
    if spool is None:  # --kafka-mirror-progress off
        return
    run = spool.for_run(request.node.nodeid, tmp_path)
    run.on_phase("producing", 60.0)
    run.on_counts("p1", {"t": {"sent": 1234, "acked": 1200, "failed": 0, "rate": 1.0}})
    time.sleep(float({sleep!r}))
    run.on_phase("done")
"""


@pytest.mark.parametrize("args", [[], ["-n", "1"]])
def test_a_ci_log_gets_a_progress_line_per_interval(pytester: pytest.Pytester, args: list[str]) -> None:
    pytester.makepyfile(test_slow=SCENARIO.replace("{sleep!r}", "3.5"))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", f"{PROGRESS}=1", *args)
    result.assert_outcomes(passed=1)
    worker = "[gw0] " if args else ""
    pattern = worker.replace("[", "[[]")  # fnmatch: [gw0] is a character class
    result.stdout.fnmatch_lines([f"kafka-mirror: {pattern}test_slow producing * s of 1 min 00 s, ETA * s: sent 1,234, "
                                 "acked 1,200, arrived 0, missing 1,200"])
    lines = result.stdout.lines
    first = next(i for i, line in enumerate(lines) if line.startswith(f"kafka-mirror: {worker}test_slow"))
    assert lines[first - 1].strip() in ("test_slow.py", "")  # pytest's line, ended before ours
    # the result lands on pytest's own line (written again below ours), not at the end of ours
    assert lines[-1 - next(i for i, line in enumerate(reversed(lines)) if line.startswith("kafka-mirror: "))
                 + 1].startswith("." if args else "test_slow.py .")


def test_no_progress_line_before_the_interval_nor_when_off(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_slow=SCENARIO.replace("{sleep!r}", "1.5"))
    for args in ([], [f"{PROGRESS}=off"]):  # auto without a TTY: a line every 10 s
        result = pytester.runpytest_subprocess("-p", "no:cacheprovider", *args)
        result.assert_outcomes(passed=1)
        assert "kafka-mirror: test_slow" not in result.stdout.str()


def _on_a_pty(pytester: pytest.Pytester, sleep: float, columns: int, env: dict[str, str]) -> str:
    """What pytest writes to a pseudo-terminal of ``columns`` columns, running the scenario."""
    import fcntl
    import os
    import pty
    import struct
    import subprocess
    import sys
    import termios
    import time

    pytester.makepyfile(test_slow=SCENARIO.replace("{sleep!r}", repr(sleep)))
    main, child = pty.openpty()
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "test_slow.py"],
                            cwd=pytester.path, stdin=subprocess.DEVNULL, stdout=child, stderr=child, env=env)
    os.close(child)
    out = b""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            chunk = os.read(main, 65536)
        except OSError:  # the child side closed
            break
        if not chunk:
            break
        out += chunk
    os.close(main)
    assert proc.wait(timeout=30) == 0, out.decode(errors="replace")[-3000:]
    return out.decode(errors="replace")


def test_on_a_real_tty_the_live_status_is_shown_and_taken_back(pytester: pytest.Pytester) -> None:
    """pytest on a pseudo-terminal: the status appears at the end of pytest's line, every
    second, and is erased before the result is written there."""
    import os

    text = _on_a_pty(pytester, 2.5, 200, {**os.environ, "COLUMNS": "200"})
    # at the end of pytest's line: after its "test_slow.py ", or where the previous status was erased
    found = list(re.finditer(r"(?:test_slow\.py |\x1b\[K)( \[test_slow producing \d+/1 min 00 s, ETA [^:\]]+: sent 1,234, "
                             r"acked 1,200, arrived 0, missing 1,200\])", text))
    assert found and "test_slow.py  [test_slow " in text, text[-3000:]
    for status in found:  # each taken back (cursor back its length, erase to the end of the line) before the next
        assert text[status.end():].startswith(f"\x1b[{len(status.group(1))}D\x1b[K"), text[status.end():][:200]
    assert re.search(r"\x1b\[K(\x1b\[32m)?\.", text), text[-3000:]  # the result lands where the status was


def test_on_a_wide_tty_the_live_status_uses_the_terminal_s_width(pytester: pytest.Pytester) -> None:
    """A 150-column terminal, no COLUMNS: the status (about 95 characters) fits after
    pytest's "test_slow.py " and is shown whole there, not cut for an 80-column one (while a
    test runs pytest's capture holds descriptor 1, whose size is then unknown)."""
    import os

    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    text = _on_a_pty(pytester, 2.5, 150, env)
    whole = re.findall(r"test_slow\.py  \[test_slow producing \d+/1 min 00 s, ETA [^:\]]+: sent 1,234, acked 1,200, "
                       r"arrived 0, missing 1,200\]", text)
    # neither on a line of its own nor cut ("...") to fit 80 columns
    assert whole and "kafka-mirror: test_slow" not in text and "...\x1b[K" not in text, text[-3000:]
