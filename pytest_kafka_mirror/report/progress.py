"""Live progress of the runs while the session runs: phase, counts, latency so far, ETA.

Who knows what, and where it is read (the same shape as ``metrics.py``):

* the pytest process that runs a test (an xdist worker or the only one) keeps a
  :class:`ProgressSpool`: one small JSON file per process in a directory the controller
  created, with each running run's phase (readiness, producing, produced, draining, verifying), when
  it began, how long it should take, and the producers' counts (``on_counts``, about once
  a second);
* the capture process's ``capture-progress*.json`` of each listed run directory holds the
  arrivals and a cumulative latency histogram (``capture/rows.py``, ``LiveFigures``);
* :class:`ProgressDisplay`, in the process that owns the terminal (the xdist controller or
  the only one), reads both every second and writes the status to the terminal: on a
  TTY one line kept up to date at the end of pytest's current line and erased before
  pytest writes there; otherwise (CI logs) one line per running run every
  ``interval`` seconds (10 by default), the first once runs have been seen for that long.
  The interval is the display's, not each run's: a run that starts right after another
  one ended gets its first line at the next round, so a CI log is never silent for much
  longer than ``interval`` while anything runs (counted per run, such a run waited an
  interval of its own after the other's last line: up to twice the interval of silence).

The display writes to a duplicate of the terminal's file descriptor taken at configure
time: while a test runs, pytest's capture redirects descriptor 1 to a file.
:func:`status_line` is the wording, a pure function of a :class:`RunStatus`.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import pytest

from ..capture.rows import merge_progress
from ..rundir import write_json_atomic
from .metrics import PROGRESS_GLOB, _read_json

__all__ = ["PHASES", "ProgressDisplay", "ProgressSpool", "RunStatus", "read_statuses", "status_line"]

#: The phases of a run, in order.
PHASES = ("readiness", "producing", "produced", "draining", "verifying")
#: workerinput key of the progress spool directory.
SPOOL_KEY = "kafka_mirror_progress_spool"
#: Seconds between two updates of the live line on a TTY.
LIVE_EVERY = 1.0
_ERASE_LINE = "\x1b[K"


class ProgressSpool:
    """What one pytest process's runs are doing, in ``directory/<worker>.json``.

    Plain Python and cheap: :meth:`phase` at each phase change, :meth:`counts` from the
    producers' ``on_counts`` (about once a second); each writes the file."""

    def __init__(self, directory: str | Path, worker: str) -> None:
        self.path = Path(directory) / f"{worker}.json"
        self.runs: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._write()

    def _write(self) -> None:
        with self._lock:
            write_json_atomic(self.path, {"runs": self.runs})

    def _entry(self, test: str, run_dir: str | Path) -> dict[str, Any]:
        return self.runs.setdefault(str(run_dir), {"test": test, "producers": {}, "phase": "readiness",
                                                   "since": time.time()})

    def phase(self, test: str, run_dir: str | Path, phase: str, *, expected_s: float | None = None,
              limit_s: float | None = None) -> None:
        """``run_dir`` of ``test`` entered ``phase`` (one of :data:`PHASES`), which takes
        about ``expected_s`` seconds (producing) or ends after at most ``limit_s``."""
        if phase not in PHASES:
            raise ValueError(f"phase {phase!r}: one of {', '.join(PHASES)}")
        with self._lock:
            self._entry(test, run_dir).update(phase=phase, since=time.time(), expected_s=expected_s, limit_s=limit_s)
        self._write()

    def counts(self, test: str, run_dir: str | Path, producer_id: str,
               counts: Mapping[str, Mapping[str, float]]) -> None:
        """A producer's cumulative counts (``on_counts``: ``{topic: {sent, acked, failed, rate}}``,
        about once a second, and once at its end: each is written)."""
        total = {k: int(sum(c.get(k, 0) for c in counts.values())) for k in ("sent", "acked", "failed")}
        with self._lock:
            self._entry(test, run_dir)["producers"][producer_id] = total
        self._write()

    def done(self, run_dir: str | Path) -> None:
        """The run was verified (or closed): no more progress of it."""
        with self._lock:
            found = self.runs.pop(str(run_dir), None)
        if found is not None:
            self._write()

    def for_run(self, test: str, run_dir: str | Path) -> RunProgress:
        return RunProgress(self, test, str(run_dir))


@dataclass(frozen=True)
class RunProgress:
    """The callbacks of one run (``MirrorRun.on_phase`` and an ``on_counts``)."""

    spool: ProgressSpool
    test: str
    run_dir: str

    def on_phase(self, phase: str, expected_s: float | None = None, limit_s: float | None = None) -> None:
        """``MirrorRun.on_phase``: one of :data:`PHASES`, or ``done`` (verified or closed)."""
        if phase == "done":
            self.spool.done(self.run_dir)
            return
        self.spool.phase(self.test, self.run_dir, phase, expected_s=expected_s, limit_s=limit_s)

    def on_counts(self, producer_id: str, counts: Mapping[str, Mapping[str, float]]) -> None:
        self.spool.counts(self.test, self.run_dir, producer_id, counts)



# -- the side that owns the terminal ---------------------------------------------------------


@dataclass
class RunStatus:
    """One running run as the display sees it."""

    worker: str
    test: str
    phase: str
    since: float  # UTC epoch seconds
    expected_s: float | None = None
    limit_s: float | None = None
    sent: int = 0
    acked: int = 0
    failed: int = 0
    arrived: int = 0
    latency_count: int = 0
    latency_sum_us: int = 0
    bounds_ms: list[float] = field(default_factory=list)
    cumulative: list[int] = field(default_factory=list)

    def percentile_bound(self, q: float) -> float | None:
        """The histogram bound (ms) at or under which ``q`` of the latencies so far lie."""
        if not self.latency_count:
            return None
        for bound, n in zip(self.bounds_ms, self.cumulative, strict=False):
            if n >= q * self.latency_count:
                return bound
        return None  # above the largest bound


def read_statuses(spool_dir: str | Path) -> list[RunStatus]:
    """Every running run of every process of the session, by worker and test."""
    out: list[RunStatus] = []
    for spool in sorted(Path(spool_dir).glob("*.json")):
        for run_dir, entry in sorted(_read_json(spool).get("runs", {}).items()):
            producers = entry.get("producers", {}).values()
            s = RunStatus(spool.stem, str(entry.get("test", "")), str(entry.get("phase", "")),
                          float(entry.get("since", time.time())), entry.get("expected_s"), entry.get("limit_s"),
                          sent=sum(p.get("sent", 0) for p in producers), acked=sum(p.get("acked", 0) for p in producers),
                          failed=sum(p.get("failed", 0) for p in producers))
            progress = merge_progress([_read_json(p) for p in sorted(Path(run_dir).glob(PROGRESS_GLOB))] or [{}])
            s.arrived = int(sum(progress.get("by_topic", {}).values()))
            hist = progress.get("latency") or {}
            s.latency_count, s.latency_sum_us = int(hist.get("count", 0)), int(hist.get("sum_us", 0))
            s.bounds_ms, s.cumulative = list(hist.get("bounds_ms", [])), list(hist.get("cumulative", []))
            out.append(s)
    return out


def _seconds(s: float) -> str:
    s = max(0.0, s)
    if s < 60:
        return f"{s:.0f} s"
    return f"{int(s // 60)} min {int(s % 60):02d} s"


def _ms(ms: float) -> str:
    return f"{ms:.0f} ms" if ms < 10_000 else f"{ms / 1000:.0f} s"


def _phase_words(s: RunStatus, now: float, compact: bool) -> str:
    """``producing 12 s of 60 s, ETA 48 s`` and the like (``compact``: ``producing 12/60 s, ETA 48 s``)."""
    took = now - s.since
    if s.phase == "producing" and s.expected_s:
        span = f"{took:.0f}/{_seconds(s.expected_s)}" if compact else f"{_seconds(took)} of {_seconds(s.expected_s)}"
        return f"producing {span}, ETA {_seconds(s.expected_s - took)}"
    if s.phase == "draining" and s.limit_s:
        return f"draining {_seconds(took)}" + ("" if compact else f" (ends {_seconds(s.limit_s)} after the last arrival)")
    if s.phase == "readiness" and s.limit_s:
        return f"readiness {_seconds(took)}" if compact else f"waiting for readiness {_seconds(took)} (at most {_seconds(s.limit_s)})"
    if s.phase == "produced":  # the producers are done; the scenario's own steps until it verifies
        return f"produced {_seconds(took)} ago" + ("" if compact else " (the scenario's own steps)")
    if s.phase == "verifying":
        return f"verifying {_seconds(took)}" if compact else f"verifying with Spark {_seconds(took)}"
    return f"{s.phase} {_seconds(took)}"


def status_line(s: RunStatus, now: float | None = None, *, worker: bool = False, compact: bool = False) -> str:
    """One run's status in words, numbers rounded: phase, time, ETA, counts, latency so far.
    ``compact``: fewer words, for the live line at the end of pytest's own."""
    now = time.time() if now is None else now
    test = s.test.rsplit("::", 1)[-1] or "a run"
    head = f"{f'[{s.worker}] ' if worker else ''}{test} {_phase_words(s, now, compact)}"
    figures = []
    if s.phase != "readiness" or s.sent:
        figures = [f"sent {s.sent:,}"] + ([] if compact and s.acked == s.sent else [f"acked {s.acked:,}"])
        figures.append(f"arrived {s.arrived:,}")
        if s.acked > s.arrived:
            figures.append(f"missing {s.acked - s.arrived:,}")
        if s.failed:
            figures.append(f"failed {s.failed:,}")
    if s.latency_count:
        p99 = s.percentile_bound(0.99)
        if not compact:
            figures.append(f"latency mean {_ms(s.latency_sum_us / s.latency_count / 1000)}")
        if p99 is not None:
            figures.append(f"p99 <= {_ms(p99)}")
        elif s.bounds_ms:
            figures.append(f"p99 > {_ms(s.bounds_ms[-1])}")
    return f"{head}: {', '.join(figures)}" if figures else head


class ProgressDisplay:
    """Writes the statuses of :func:`read_statuses` to ``stream`` (see the module docstring).

    ``terminal``: pytest's terminal reporter (None in tests), whose current line this
    reads: the live status goes at its end (or on a line below when it does not fit), and
    lines of ours go below it, after which it is written again for pytest to go on with.
    ``live``: a TTY line kept up to date; else a line per running run every ``interval``
    seconds while runs are running, the first an interval after the display first saw one
    (a pause without runs shorter than an interval does not restart the count)."""

    def __init__(self, spool_dir: str | Path, stream: IO[str], *, live: bool, interval: float,
                 terminal: Any = None, worker_names: bool = False,
                 clock: Callable[[], float] = time.time) -> None:
        self.spool_dir = Path(spool_dir)
        self.stream = stream
        self.live = live
        self.interval = interval
        self.terminal = terminal
        self.worker_names = worker_names
        self.clock = clock
        self.lock = threading.Lock()
        self._shown = 0  # characters of the live status now on the terminal (0: none)
        self._column = -1  # live status on a line of its own: pytest's column to go back to
        #: since when runs have been running without a line of ours (None: no run seen, or
        #: none for an interval); ``_idle_since``: since when no run has been running
        self._quiet_since: float | None = None
        self._idle_since: float | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- the thread ---------------------------------------------------------------------------
    def start(self) -> ProgressDisplay:
        self._thread = threading.Thread(target=self._loop, name="kafka-mirror-progress", daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.wait(LIVE_EVERY):
            try:
                self.tick()
            except Exception:  # a display error must never fail the session
                pass

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        with self.lock:
            self.erase()

    # -- one round ------------------------------------------------------------------------------
    def tick(self) -> None:
        statuses = read_statuses(self.spool_dir)
        now = self.clock()
        with self.lock:
            if self.live:
                self._live(statuses, now)
            else:
                self._lines(statuses, now)

    def _lines(self, statuses: list[RunStatus], now: float) -> None:
        """A line per running run once runs have been running for ``interval`` s without one."""
        if not statuses:
            if self._idle_since is None:
                self._idle_since = now
            if now - self._idle_since >= self.interval:  # a pause between tests: start counting afresh
                self._quiet_since = None
            return
        self._idle_since = None
        if self._quiet_since is None:
            self._quiet_since = now
        if now - self._quiet_since < self.interval:
            return
        self._quiet_since = now
        self._write_own_lines([f"kafka-mirror: {status_line(s, now, worker=self.worker_names)}" for s in statuses])

    def _live(self, statuses: list[RunStatus], now: float) -> None:
        self.erase()
        if not statuses:
            return
        text = " | ".join(status_line(s, now, worker=self.worker_names, compact=True) for s in statuses)
        used, width = self._line_position()
        if len(text) + 3 <= width - used - 1:
            text = f" [{text}]"
            self._column = -1
        else:  # no room on pytest's line: a line of our own below it, taken back by erase()
            text = "\n" + _fit(f"kafka-mirror: {text}", width - 1)
            self._column = used
        self.stream.write(text)
        self.stream.flush()
        self._shown = len(text)

    def erase(self) -> None:
        """Take the live status off the terminal (call with :attr:`lock` held): the cursor
        is back where pytest left it."""
        if not self._shown:
            return
        if self._column < 0:
            self.stream.write(f"\x1b[{self._shown}D{_ERASE_LINE}")
        else:  # our own line: erase it, back to pytest's line, at its end
            self.stream.write(f"\r{_ERASE_LINE}\x1b[1A\r" + (f"\x1b[{self._column}C" if self._column else ""))
        self.stream.flush()
        self._shown = 0

    @contextlib.contextmanager
    def pytest_writes(self) -> Iterator[None]:
        """Around a hook in which pytest writes to the terminal: the live status goes first."""
        with self.lock:
            self.erase()
            yield

    # -- pytest's terminal ----------------------------------------------------------------------
    def _line_position(self) -> tuple[int, int]:
        """(pytest's column, the terminal's width)."""
        tw = getattr(self.terminal, "_tw", None)
        used = int(getattr(tw, "width_of_current_line", 0)) if tw is not None else 0
        return used, self._width(tw)

    def _width(self, tw: Any) -> int:
        """The width of the terminal :attr:`stream` is on: ``COLUMNS`` when set (as pytest and
        shutil read it), else the size of the stream's own terminal.  Not pytest's
        ``fullwidth`` first: it asks descriptor 1, which pytest's capture holds while a test
        runs (when the status is shown), and falls back to 80 columns whatever the terminal."""
        import os

        columns = os.environ.get("COLUMNS", "")
        if columns.isdigit() and int(columns) > 0 and self.stream.isatty():
            return int(columns)
        try:
            return os.get_terminal_size(self.stream.fileno()).columns
        except (AttributeError, ValueError, OSError):  # not a terminal (a pipe, a StringIO in tests)
            pass
        return int(getattr(tw, "fullwidth", 80)) if tw is not None else 80

    def _write_own_lines(self, lines: list[str]) -> None:
        """Lines of ours below pytest's current one, which is then written again (as text)
        for pytest to go on with: its results land where it expects them."""
        tw = getattr(self.terminal, "_tw", None)
        current = str(getattr(tw, "_current_line", "")) if tw is not None else ""
        self.stream.write(("\n" if current else "") + "\n".join(lines) + "\n" + current)
        self.stream.flush()


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(width - 3, 0)] + "..."


# -- pytest --------------------------------------------------------------------------------------

#: The interval of ``--kafka-mirror-progress auto`` when the terminal is not a TTY: a CI log
#: should not stay silent for longer than about 10 s while a scenario runs.
DEFAULT_INTERVAL = 10.0


def parse_progress(text: str) -> str | float:
    """``auto`` | ``live`` | ``off`` | SECONDS (a line every SECONDS, on a TTY too)."""
    word = text.strip().lower()
    if word in ("auto", "live", "off"):
        return word
    try:
        seconds = float(word)
    except ValueError:
        seconds = -1.0
    if not seconds > 0:
        raise ValueError(f"{text!r}: accepted: auto (a live line on a TTY, else a line every "
                         f"{DEFAULT_INTERVAL:g} s) | live | off | SECONDS (a line every SECONDS, e.g. 15)")
    return seconds


def display_mode(setting: str | float, isatty: bool, log_cli: bool) -> tuple[bool, float] | None:
    """(live, interval) of a setting, or None (no display).  ``auto`` is live on a TTY, but
    not with pytest's live logging (``--log-cli-level``), whose lines would cut through ours."""
    if setting == "off":
        return None
    if isinstance(setting, float):
        return False, setting
    live = setting == "live" or (isatty and not log_cli)
    return live, DEFAULT_INTERVAL


class ProgressReporting:
    """The display's pytest side, in the process that owns the terminal."""

    def __init__(self, config: Any, setting: str | float) -> None:
        import tempfile

        self.config = config
        self.spool_dir = Path(tempfile.mkdtemp(prefix="kafka-mirror-progress-"))
        self.display: ProgressDisplay | None = None
        self.setting = setting

    def start(self, stream: IO[str]) -> ProgressDisplay | None:
        """Start the display on ``stream`` (a duplicate of the terminal's descriptor), or
        not at all when the setting says so."""
        log_cli = bool(self.config.getoption("log_cli_level", None) or self.config.getini("log_cli"))
        mode = display_mode(self.setting, stream.isatty(), log_cli)
        if mode is None:
            stream.close()
            return None
        terminal = self.config.pluginmanager.get_plugin("terminalreporter")
        distributed = getattr(self.config.option, "dist", "no") != "no"
        self.display = ProgressDisplay(self.spool_dir, stream, live=mode[0], interval=mode[1], terminal=terminal,
                                       worker_names=distributed).start()
        return self.display

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        """xdist: tell each worker where to write its progress spool."""
        node.workerinput[SPOOL_KEY] = str(self.spool_dir)

    def _around(self) -> Iterator[None]:
        if self.display is None:
            yield
            return
        with self.display.pytest_writes():
            yield

    # pytest writes to the terminal in these: the live status is erased first
    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_logstart(self) -> Iterator[None]:
        yield from self._around()

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_logreport(self) -> Iterator[None]:
        yield from self._around()

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_logfinish(self) -> Iterator[None]:
        yield from self._around()

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self) -> None:
        self.stop()

    def pytest_unconfigure(self) -> None:
        self.stop()
        import shutil

        shutil.rmtree(self.spool_dir, ignore_errors=True)

    def stop(self) -> None:
        if self.display is not None:
            self.display.stop()
            self.display.stream.close()
            self.display = None
