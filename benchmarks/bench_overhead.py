"""The per-test overhead of a scenario: everything a test costs but producing and the settle
time.

A tiny scenario file (``TESTS`` tests, each ``mirror_producer(mirror_topics(1), rate=R,
duration=D)`` then ``mirror_verifier(run).assert_ok()``) runs in one ``python -m pytest``
session with the plugin and its defaults (embedded Tansu clusters, the reference
replicator, local Spark).  Per test, from what the session itself records:

- wall: the test's time in the JUnit XML (setup + call + teardown, ``junit_duration_report=total``);
- produce: the producers' ``produce_seconds`` (the report's ``producers``: from the
  schedule's start to the last record handed to the client);
- settle: the capture's ``settle`` (the report's ``capture``: how long it waits once every
  lane is complete);
- overhead = wall - produce - settle: topic creation and the replicator's discovery of it
  (the report's ``discovery[topic]``: created -> a warm-up record of every partition
  copied, shown apart as ``discovery``), the capture's start, the client's flush, the
  capture's drain, the Spark verification, the report and its plots.

The first test also carries the session's start (clusters, replicator, JVM); the warm tests
are what each further test of a suite costs.  The session's teardown is timed apart, in a
last test with no fixture: pytest runs it in the last test's teardown, which JUnit counts in
that test's time (it made one warm test in five look like a 6 s stall).  The reference of
both figures is the time the test asks for (produce + settle), so the ratio says how many
times that a test spends around it.

    python -m benchmarks --sections overhead [--quick | --smoke]
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks._common import Figure, Section, env_with_worktree, median

SCENARIO = textwrap.dedent(
    """
    import pytest


    @pytest.mark.parametrize("i", range({tests}))
    def test_scenario(mirror_topics, mirror_producer, mirror_verifier, i):
        run = mirror_producer(mirror_topics(1, partitions={partitions}), rate={rate}, duration={duration})
        mirror_verifier(run).assert_ok()


    # last, with no fixture: the session's teardown (the clusters, the replicator and Spark
    # stopped) is timed in this test's JUnit duration, not in the last scenario's
    def test_session_end():
        pass
    """
)
#: the scenario file's last test (:data:`SCENARIO`): its duration is the session's teardown
SESSION_END = "test_session_end"


@dataclass(frozen=True)
class Scenario:
    """The scenario of one benchmark mode."""

    tests: int
    rate: float
    duration: float
    partitions: int = 4
    #: the whole session, first test (cluster boot, JVM) included
    timeout: float = 900.0


SCENARIOS = {
    "full": Scenario(tests=5, rate=1000, duration=2),
    "quick": Scenario(tests=3, rate=1000, duration=2),
    "smoke": Scenario(tests=2, rate=200, duration=1, timeout=600),
}


def run_session(work: Path, scenario: Scenario) -> tuple[Path, Path]:
    """Run the scenario file in a fresh ``python -m pytest`` session under ``work``; returns
    the JUnit XML and the stored run.  Raises RuntimeError (with the output's tail) when the
    session fails or times out."""
    work.mkdir(parents=True, exist_ok=True)
    (work / "test_overhead.py").write_text(SCENARIO.format(
        tests=scenario.tests, partitions=scenario.partitions, rate=scenario.rate, duration=scenario.duration))
    (work / "pytest.ini").write_text("[pytest]\n")  # the rootdir: not the checkout's ini
    junit, storage, out = work / "junit.xml", work / "stored", work / "pytest.log"
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "test_overhead.py",
           f"--junitxml={junit}", "-o", "junit_duration_report=total", "-o", "junit_family=xunit2",
           "--kafka-mirror-save=overhead", f"--kafka-mirror-storage={storage}",
           f"--kafka-mirror-report-dir={work / 'reports'}"]
    with out.open("w") as log:
        # A session of its own: on a timeout the whole group (clusters included) goes.
        proc = subprocess.Popen(cmd, cwd=work, env=env_with_worktree(), stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            code = proc.wait(timeout=scenario.timeout)
        except subprocess.TimeoutExpired:
            _stop_group(proc)
            code = None
    if code != 0:
        tail = out.read_text()[-3000:]
        what = f"timed out after {scenario.timeout:g} s" if code is None else f"exited {code}"
        raise RuntimeError(f"the overhead scenario session {what} ({out}):\n{tail}")
    stored = sorted(storage.glob("*/*_overhead.json"))
    if not stored:
        raise RuntimeError(f"the overhead scenario session stored no run under {storage} ({out})")
    return junit, stored[-1]


def _stop_group(proc: subprocess.Popen[Any]) -> None:
    for sig, wait in ((signal.SIGTERM, 20.0), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def per_test(junit: Path, stored: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per test, in the order they ran: ``test``, ``wall``, ``produce``, ``settle``,
    ``overhead`` and ``discovery`` (seconds; the part of the overhead spent until the
    replicator copied the test's new topics), from the JUnit XML and the stored run."""
    reports = {r["nodeid"].rsplit("::", 1)[-1]: r["report"] for r in stored["results"].values() if r["index"] == 0}
    rows = []
    for case in ET.parse(junit).iter("testcase"):
        name = case.get("name", "")
        if name == SESSION_END:
            continue
        report = reports.get(name)
        if report is None:
            raise RuntimeError(f"test {name} has no stored result (was it verified?)")
        wall = float(case.get("time", "nan"))
        # several producers of one test run side by side: the longest is the test's producing
        produce = max(float(p.get("produce_seconds") or 0.0) for p in report["producers"])
        settle = float(report["capture"].get("settle") or 0.0)
        # topics the test created itself (not taken from the session's pool): their discovery is the test's
        discovery = [d["discovery_s"] for d in report.get("discovery", {}).values()
                     if d.get("provisioned") == "test" and d.get("discovery_s") is not None]
        rows.append({"test": name, "wall": round(wall, 3), "produce": round(produce, 3), "settle": round(settle, 3),
                     "overhead": round(wall - produce - settle, 3),
                     "discovery": round(max(discovery), 3) if discovery else 0.0})
    return rows


def session_end(junit: Path) -> float | None:
    """The seconds of the session's teardown: the duration of :data:`SESSION_END`."""
    for case in ET.parse(junit).iter("testcase"):
        if case.get("name") == SESSION_END:
            return round(float(case.get("time", "nan")), 3)
    return None


def figures(rows: list[dict[str, Any]], scenario: Scenario, end: float | None = None) -> list[Figure]:
    """``overhead.first_test``, ``overhead.warm_test`` (the median of the others) and, when
    measured, ``overhead.session_end`` (the session's teardown)."""
    if len(rows) < 2:
        raise RuntimeError(f"the overhead scenario needs a first and a warm test, got {len(rows)} results")
    params = {"tests": len(rows), "rate": scenario.rate, "duration": scenario.duration,
              "partitions": scenario.partitions, "per_test": rows}
    first, warm = rows[0], rows[1:]
    reference = "produce + settle (the time the test asks for)"
    return [
        Figure("overhead", "first_test", first["overhead"], "s", reference,
               round(first["produce"] + first["settle"], 3), better="lower", params=params,
               note="includes the session's start: clusters, replicator, Spark"),
        Figure("overhead", "warm_test", round(median([r["overhead"] for r in warm]), 3), "s", reference,
               round(median([r["produce"] + r["settle"] for r in warm]), 3), better="lower", params=params,
               note=f"median of {len(warm)} tests after the first"),
    ] + ([] if end is None else [
        Figure("overhead", "session_end", end, "s", "", None, better="lower", params=params,
               note="the session's teardown: clusters, replicator and Spark stopped, reports written"),
    ])


def run(mode: Section, work: Path, log: Any) -> list[Figure]:
    scenario = SCENARIOS[mode.name]
    junit, stored = run_session(work / "overhead", scenario)
    rows = per_test(junit, json.loads(stored.read_text()))
    for r in rows:
        log(f"overhead {r['test']}: wall {r['wall']:.2f} s = produce {r['produce']:.2f} s + settle "
            f"{r['settle']:.2f} s + overhead {r['overhead']:.2f} s (of which discovery {r['discovery']:.2f} s)")
    end = session_end(junit)
    log(f"overhead: the session's teardown {end} s (timed apart, in a last test of its own)")
    return figures(rows, scenario, end)
