"""The report directory holds one session's reports: the first report a session writes
removes the files an earlier session wrote there (and only those), and xdist workers of
one session never remove each other's.  Reports are taken in with
``mirror_verifier.record`` (no broker, no Spark)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pytest_kafka_mirror.report.plots import PLOT_KINDS
from pytest_kafka_mirror.rundir import WRITTEN_LIST, WRITTEN_LOCK, note_report_files
from tests.stored import sample_report

RECORDING = """
import os, pytest
from pytest_kafka_mirror.verify import MirrorReport

@pytest.mark.parametrize("i", range({n}))
def test_{name}(mirror_verifier, i):
    mirror_verifier.record(MirrorReport.load(os.environ["KM_REPORT"]))
"""


def _reports(directory: Path) -> set[str]:
    return {p.name for p in directory.iterdir() if p.name not in (WRITTEN_LIST, WRITTEN_LOCK)}


def test_the_first_note_of_a_session_removes_the_files_the_last_one_wrote(tmp_path: Path) -> None:
    d = tmp_path / "reports"
    assert note_report_files(d, "one") == []
    for name in ("a.json", "a.latency.svg", "index.html"):
        (d / name).write_text("old")
    note_report_files(d, "one", [d / "a.json", d / "a.latency.svg", d / "index.html"])
    (d / "notes.txt").write_text("the user's")  # never written by the plugin
    outside = tmp_path / "elsewhere.json"
    outside.write_text("not in the directory")
    note_report_files(d, "one", [outside])  # not noted: outside the report directory
    with open(d / WRITTEN_LIST, "a") as f:  # a hand-edited list cannot reach out of the directory
        f.write("../elsewhere.json\n")

    assert note_report_files(d, "one") == []  # same session: nothing removed
    removed = note_report_files(d, "two")
    assert sorted(p.name for p in removed) == ["a.json", "a.latency.svg", "index.html"]
    assert _reports(d) == {"notes.txt"}
    assert outside.read_text() == "not in the directory"
    assert (d / WRITTEN_LIST).read_text() == "session two\n"


def test_a_file_listed_but_already_gone_or_replaced_by_a_link_is_left_alone(tmp_path: Path) -> None:
    d = tmp_path / "reports"
    target = tmp_path / "precious.json"
    target.write_text("keep")
    note_report_files(d, "one", [d / "gone.json", d / "link.json"])
    (d / "link.json").symlink_to(target)
    assert note_report_files(d, "two") == []
    assert target.read_text() == "keep" and (d / "link.json").is_symlink()


def test_a_second_session_replaces_the_reports_of_the_first(pytester: pytest.Pytester, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    report = tmp_path / "recorded.json"
    sample_report(expected=200).write(report)
    monkeypatch.setenv("KM_REPORT", str(report))
    reports = pytester.path / ".kafka-mirror" / "reports"

    pytester.makepyfile(test_first=RECORDING.format(n=2, name="first"))
    pytester.runpytest("-p", "no:cacheprovider", "-p", "no:benchmark", "test_first.py").assert_outcomes(passed=2)
    first = _reports(reports)
    assert {"test_first.py.test_first_0.json", "test_first.py.test_first_1.json", "session.json",
            "index.html"} <= first
    (reports / "mine.txt").write_text("written by the user")

    pytester.makepyfile(test_second=RECORDING.format(n=1, name="second"))
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:benchmark", "test_second.py")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([f"reports: {reports} (plots: *index.html)"])
    second = _reports(reports)
    assert not any("test_first" in name for name in second), second
    assert "mine.txt" in second
    assert {"test_second.py.test_second_0.json", "session.json", "index.html"} <= second
    index = (reports / "index.html").read_text()
    assert "test_second" in index and "test_first" not in index
    assert list(json.loads((reports / "session.json").read_text())["results"]) == ["test_second.py::test_second[0]"]


def test_a_session_that_verifies_nothing_keeps_the_last_reports(pytester: pytest.Pytester, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    report = tmp_path / "recorded.json"
    sample_report(expected=200).write(report)
    monkeypatch.setenv("KM_REPORT", str(report))
    reports = pytester.path / ".kafka-mirror" / "reports"
    pytester.makepyfile(test_first=RECORDING.format(n=1, name="first"), test_plain="def test_plain(): pass")
    pytester.runpytest("-p", "no:cacheprovider", "-p", "no:benchmark", "test_first.py").assert_outcomes(passed=1)
    before = _reports(reports)
    pytester.runpytest("-p", "no:cacheprovider", "-p", "no:benchmark", "test_plain.py").assert_outcomes(passed=1)
    assert _reports(reports) == before


def test_xdist_workers_of_one_session_keep_each_other_s_reports(pytester: pytest.Pytester, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("xdist")
    report = tmp_path / "recorded.json"
    sample_report(expected=200).write(report)
    monkeypatch.setenv("KM_REPORT", str(report))
    reports = pytester.path / ".kafka-mirror" / "reports"
    reports.mkdir(parents=True)
    old = reports / "test_old.py.test_old.json"
    old.write_text("{}")
    note_report_files(reports, "an earlier session", [old])

    pytester.makepyfile(test_many=RECORDING.format(n=8, name="many"))
    result = pytester.runpytest_subprocess("-n", "2", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=8)
    names = _reports(reports)
    assert not old.exists()
    jsons = {n for n in names if n.startswith("test_many") and n.endswith(".json")}
    assert jsons == {f"test_many.py.test_many_{i}.json" for i in range(8)}, names
    assert sum(n.endswith(".svg") for n in names) == 8 * len(PLOT_KINDS)
    listed = (reports / WRITTEN_LIST).read_text().splitlines()
    assert listed[0].startswith("session ") and len(listed) == len(set(listed))
    assert set(listed[1:]) == names  # every file the session wrote, each once
    index = (reports / "index.html").read_text()
    assert all(f"test_many[{i}]" in index for i in range(8)) and "test_old" not in index
    assert os.listdir(reports)  # sanity: the directory was not removed
