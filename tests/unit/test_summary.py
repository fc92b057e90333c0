"""The session summary on the controller: verified runs and failover checks taken from the
workers' test reports, one table each, in a stable order (no pytest session, no cluster)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from pytest_kafka_mirror.config import resolve_settings
from pytest_kafka_mirror.report.summary import RESULTS_ATTR
from pytest_kafka_mirror.results import ResultsPlugin
from tests.golden import assert_golden
from tests.stored import sample_failover_report, sample_failover_result, sample_report, sample_result

FO = "scenarios/test_failover.py::test_after_restart[sigterm]"
LOW = "scenarios/test_failover.py::test_low_throughput_partition"
OFF = "scenarios/test_failover.py::test_with_checkpoints_off"


class _Terminal:
    """What ``pytest_terminal_summary`` writes, as text."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def write_sep(self, sep: str, title: str, **markup: Any) -> None:
        self.lines.append(f"{sep * 3} {title} {sep * 3}")

    def write_line(self, line: str, **markup: Any) -> None:
        self.lines.append(line)


def _reporting(tmp_path: Path) -> ResultsPlugin:
    settings = resolve_settings({}, lambda key: None, {}, rootdir=tmp_path)
    return ResultsPlugin(None, SimpleNamespace(settings=settings, closing_notes=[]))  # type: ignore[arg-type]


def _deliver(reporting: ResultsPlugin, *results: Any) -> None:
    """As xdist hands the controller a test report carrying its results."""
    payload = [{"key": r.key, **r.to_dict()} for r in results]
    reporting.pytest_runtest_logreport(SimpleNamespace(**{RESULTS_ATTR: payload}))  # type: ignore[arg-type]


def test_golden_summary_of_verified_runs_and_failover_checks(tmp_path: Path) -> None:
    reporting = _reporting(tmp_path)
    # workers finish in any order: a failover-only test, then a test's second check before its first
    _deliver(reporting, sample_failover_result(LOW, sample_failover_report(partitions=1)))
    _deliver(reporting, sample_failover_result(FO, sample_failover_report(rereads=10), index=1))
    _deliver(reporting,
             sample_result(FO, sample_report(duplicated=2, copy_rate=17_600.0, copy_lower_bound=True)),
             sample_failover_result(FO, sample_failover_report(rereads=297, skipped=3, untranslatable=1,
                                                               delay_s=2.25, heartbeat_lag_ms=None)))
    # a replicator that wrote no checkpoints, in a session that leaves out the synced offsets
    _deliver(reporting, sample_failover_result(OFF, sample_failover_report(
        not_run={"checkpoints": "emit.checkpoints.enabled=false (--kafka-mirror-replicator-properties)"},
        left_out={"synced offsets": "left out by --kafka-mirror-leave-out"})))
    assert [r.key for r in reporting.sorted_results()] == [FO, f"{FO}#failover", f"{FO}#failover#1", f"{LOW}#failover",
                                                           f"{OFF}#failover"]
    tr = _Terminal()
    reporting.pytest_terminal_summary(tr)
    assert tr.lines[0] == "=== kafka-mirror: 1 verified run and 4 failover checks ==="
    assert "none (FAILED)" in tr.lines[-2] and "checkpoints (FAILED), synced offsets" in tr.lines[-2]
    assert_golden("summary.txt", "\n".join(tr.lines) + "\n")


def test_a_session_of_failover_checks_only(tmp_path: Path) -> None:
    reporting = _reporting(tmp_path)
    _deliver(reporting, sample_failover_result(LOW, sample_failover_report(untranslatable=2)))
    tr = _Terminal()
    reporting.pytest_terminal_summary(tr)
    lines = "\n".join(tr.lines).splitlines()
    assert lines[:3] == [
        "=== kafka-mirror: 1 failover check ===",
        "    test                                                                groups/translations  skipped  "
        "rereads max  untranslated  beyond end  rewinds  checkpoint delay  heartbeat lag  not checked",
        f"    {LOW}#failover  1 / 4                0        0            2 (2)         0           0        "
        "1.50 s            850 ms",
    ]
    assert lines[3].startswith("    skipped: records a group had not consumed")
    assert len(lines) == 4  # no verification table, no separator


# -- through the plugin: mirror_failover's results travel like mirror_verifier's -------------------------

# The environment is faked (no broker, no replicator): what is tested is the way from
# mirror_failover(run) to the controller's summary, session.json, the stored run and the gate.
FAKE_ENV = """
import os, types, pytest
from pytest_kafka_mirror.replicators.base import ReplicatorBase
from tests.stored import sample_failover_report

class FakeReplicator(ReplicatorBase):
    spec = "fake"
    checkpoints = object()  # it says how it translates offsets (the report is made up anyway)

@pytest.fixture
def mirror_env():
    return types.SimpleNamespace(replicator=FakeReplicator(), extra_flows={})

class FakeRun:
    replicator = None  # produced on the test's own flow

    def __init__(self, rereads):
        self.rereads = rereads

    def failover(self, settings, *, wait, reset, emitter, leave_out=None):
        return sample_failover_report(rereads=self.rereads)
"""
FAILOVER_TESTS = """
import os
from conftest import FakeRun

def test_only_failover(mirror_failover):
    mirror_failover(FakeRun(int(os.environ["KM_REREADS"])))

def test_both(mirror_failover, mirror_verifier):
    from tests.stored import sample_report
    mirror_verifier.record(sample_report(expected=200))
    mirror_failover(FakeRun(3))
    mirror_failover(FakeRun(4))
"""


def test_failover_checks_reach_the_summary_the_stored_run_and_the_gate(pytester: Any, monkeypatch: Any) -> None:
    import json

    import pytest

    from pytest_kafka_mirror.report.storage import FileStorage, load_run

    pytest.importorskip("xdist")
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parents[2]))
    monkeypatch.setenv("KM_REREADS", "40")
    pytester.makeconftest(FAKE_ENV)
    pytester.makepyfile(test_fo=FAILOVER_TESTS)
    first = pytester.runpytest_subprocess("-n", "2", "-p", "no:cacheprovider", "--kafka-mirror-save=old",
                                          "--junitxml=junit.xml")
    first.assert_outcomes(passed=2)
    first.stdout.fnmatch_lines([
        "*kafka-mirror: 1 verified run and 3 failover checks*",
        "    test_fo.py::test_both * 200 *",
        "*kafka-mirror failover checks*",
        "    test * groups/translations  skipped  rereads max  untranslated*",
        "    test_fo.py::test_both#failover * 1 / 4 * 0 * 3 *",
        "    test_fo.py::test_both#failover#1 * 1 / 4 * 0 * 4 *",
        "    test_fo.py::test_only_failover#failover * 1 / 4 * 0 * 40 *",
    ])
    reports = pytester.path / ".kafka-mirror" / "reports"
    session = json.loads((reports / "session.json").read_text())["results"]
    assert list(session) == ["test_fo.py::test_both", "test_fo.py::test_both#failover",
                             "test_fo.py::test_both#failover#1", "test_fo.py::test_only_failover#failover"]
    only = session["test_fo.py::test_only_failover#failover"]
    assert (only["kind"], only["outcome"], only["figures"]["failover_rereads_max"]) == ("failover", "passed", 40)
    assert only["report"]["entries"] and Path(only["report_path"]).name == "test_fo.py.test_only_failover-failover.json"
    assert Path(only["report_path"]).is_file()
    junit = (pytester.path / "junit.xml").read_text()
    assert 'name="kafka_mirror.failover.failover_rereads_max" value="40"' in junit
    assert 'name="kafka_mirror.failover[1].failover_rereads_max" value="4"' in junit

    monkeypatch.setenv("KM_REREADS", "297")
    second = pytester.runpytest_subprocess("-n", "2", "-p", "no:cacheprovider", "--kafka-mirror-compare=old",
                                           "--kafka-mirror-compare-fail=failover_rereads_max:10%",
                                           "--kafka-mirror-save=new")
    second.assert_outcomes(passed=2)
    assert second.ret == pytest.ExitCode.TESTS_FAILED  # the tests passed; the regression fails the session
    second.stdout.fnmatch_lines([
        "*kafka-mirror comparison*",
        "*test_fo.py::test_only_failover#failover * failover_rereads_max * 40 * 297 * +257 (+642.5%) *"
        "failover_rereads_max:10% FAILED",
        "1 regression:",
        "  test_fo.py::test_only_failover#failover: failover_rereads_max 297 vs 40 in the baseline (+257, +642.5%), "
        "more than failover_rereads_max:10% allows (at most +10%)",
    ])
    stored = load_run(FileStorage(pytester.path / ".kafka-mirror").resolve("new"))["results"]
    assert stored["test_fo.py::test_only_failover#failover"]["figures"]["failover_rereads_max"] == 297


def test_the_summary_lists_the_figures_a_scenario_measured_itself(tmp_path: Path) -> None:
    reporting = _reporting(tmp_path)
    report = sample_report()
    report.scenario = {"upgrade_resume_s": {"value": 4.25, "note": "mm2:3.9.1 stopped -> mm2:4.3.1 copied"},
                       "upgrade_duplicates_bound": {"value": 1500, "note": "300 msg/s x 5 s flush"}}
    _deliver(reporting, sample_result(FO, report), sample_result(LOW, sample_report()))
    tr = _Terminal()
    reporting.pytest_terminal_summary(tr)
    header, fo_row, low_row = tr.lines[1].splitlines()
    assert header.split()[-1] == "measured"
    assert fo_row.strip().startswith(FO) and fo_row.endswith("upgrade_resume_s 4.25 s, upgrade_duplicates_bound 1500")
    assert low_row.strip().startswith(LOW) and low_row.endswith("n/a")  # measured nothing: an empty cell
    assert "measured: figures the scenario measured itself" in tr.lines[2]


STOPPED = "scenarios/test_replicator_pause.py::test_sigstop"


def test_a_run_with_missing_records_has_its_latency_marked_partial(tmp_path: Path) -> None:
    """The latency cells of a run with missing records carry the mark, the legend says what
    it means; a complete run's cells and a session of complete runs' legend do not."""
    from pytest_kafka_mirror.report.compare import PARTIAL_LEGEND

    reporting = _reporting(tmp_path)
    _deliver(reporting, sample_result(FO, sample_report()),
             sample_result(STOPPED, sample_report(expected=8000, unseen=6152, p50=44.0, p99=313.0)))
    tr = _Terminal()
    reporting.pytest_terminal_summary(tr)
    assert_golden("summary_partial.txt", "\n".join(tr.lines) + "\n")
    header, complete, stopped = tr.lines[1].splitlines()
    cells = {name: header.index(f" {name} ") + 1 for name in ("missing", "p50", "p99", "p99.9", "offered")}

    def cell(row: str, name: str) -> str:  # the text under the column's heading
        return row[cells[name]:].split("  ")[0]

    assert cell(stopped, "missing") == "6152"
    assert [cell(stopped, name) for name in ("p50", "p99", "p99.9")] == ["44 ms*", "313 ms*", "469.5 ms*"]
    assert [cell(complete, name) for name in ("p50", "p99", "p99.9")] == ["10 ms", "20 ms", "30 ms"]
    assert tr.lines[2].endswith(f"; {PARTIAL_LEGEND}")

    reporting = _reporting(tmp_path)
    _deliver(reporting, sample_result(FO, sample_report()))
    tr = _Terminal()
    reporting.pytest_terminal_summary(tr)
    assert "*" not in tr.lines[1] and "partial" not in tr.lines[2]


def test_the_report_says_its_latency_is_partial_when_records_are_missing() -> None:
    import pytest

    from pytest_kafka_mirror.verify import MirrorMismatchError

    stopped = sample_report(expected=8000, unseen=6152, p50=44.0, p99=313.0)
    assert stopped.summary().endswith("latency p50 44 ms, p99 313 ms (partial: over 1,848 of 8,000 acknowledged "
                                      "records)")
    with pytest.raises(MirrorMismatchError) as e:
        stopped.assert_latency(p99_ms=300)
    assert str(e.value).splitlines()[-1].startswith(
        "  over 1848 records, partial: 6,152 of the 8,000 acknowledged never arrived and have no latency: min 1 ms")
    complete = sample_report(p99=313.0)
    assert complete.summary().endswith("latency p50 10 ms, p99 313 ms")
    with pytest.raises(MirrorMismatchError) as e:
        complete.assert_latency(p99_ms=300)
    assert "partial" not in str(e.value)
