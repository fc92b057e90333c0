"""Stored runs: the document's shape (golden), numbering, finding runs, commit info, and
``kafka-mirror compare`` / ``list`` on stored files without any cluster."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

from pytest_kafka_mirror.cli import main
from pytest_kafka_mirror.report.storage import (
    FAILOVER,
    STORED_RUN_VERSION,
    VERIFICATION,
    FileStorage,
    StorageError,
    TestResult,
    autosave_name,
    count_results,
    get_commit_info,
    get_machine_id,
    load_run,
)
from tests.golden import assert_golden
from tests.stored import (
    FIXED,
    sample_failover_report,
    sample_failover_result,
    sample_report,
    sample_result,
    sample_run,
)

NODE = "tests/test_mirror.py::test_steady[headers]"


def test_golden_stored_run_document() -> None:
    run = sample_run(
        sample_result(NODE, sample_report(lost=1, duplicated=2), fmt="headers"),
        sample_result(NODE, sample_report(), index=1, fmt="headers"),
        sample_failover_result(NODE, sample_failover_report(partitions=1, rereads=3), fmt="headers"),
    )
    assert list(run["results"]) == [NODE, f"{NODE}#1", f"{NODE}#failover"]
    assert_golden("stored_run.json", json.dumps(run, indent=1) + "\n")


def test_a_failover_check_is_stored_and_loaded(tmp_path: Path) -> None:
    report = sample_failover_report(rereads=297, untranslatable=1)
    first, second = sample_failover_result(NODE, report), sample_failover_result(NODE, report, index=1)
    assert (first.key, second.key) == (f"{NODE}#failover", f"{NODE}#failover#1")
    path = FileStorage(tmp_path).save(sample_run(sample_result(NODE, sample_report()), first, second), "base")
    results = load_run(path)["results"]
    stored = results[f"{NODE}#failover"]
    assert (stored["kind"], stored["nodeid"], stored["index"]) == (FAILOVER, NODE, 0)
    assert stored["figures"]["failover_rereads_max"] == 297 and stored["figures"]["failover_untranslatable"] == 1
    assert stored["report"] == json.loads(json.dumps(report.to_dict()))  # the whole failover report
    assert stored["report_path"].endswith("-failover.json")
    # as the controller takes it from a worker's test report, and from a stored document
    assert TestResult.from_dict({"key": first.key, **first.to_dict()}) == first
    assert TestResult.from_dict(results[f"{NODE}#failover#1"]).key == f"{NODE}#failover#1"
    # documents written before failover checks were stored: every result is a verified run
    old = {k: v for k, v in results[NODE].items() if k != "kind"}
    assert (TestResult.from_dict(old).kind, TestResult.from_dict(old).key) == (VERIFICATION, NODE)


def test_results_are_counted_by_kind() -> None:
    assert count_results([VERIFICATION]) == "1 verified run"
    assert count_results([FAILOVER, VERIFICATION, VERIFICATION]) == "2 verified runs and 1 failover check"
    assert count_results([FAILOVER], plural=True) == "1 failover checks"
    assert count_results([]) == "0 verified runs"


def test_save_numbers_runs_per_machine(tmp_path: Path) -> None:
    storage = FileStorage(tmp_path, machine_id="m1")
    first = storage.save(sample_run(), "base")
    second = storage.save(sample_run(), "next")
    other = FileStorage(tmp_path, machine_id="m2").save(sample_run(), "elsewhere")
    assert [first.name, second.name, other.name] == ["0001_base.json", "0002_next.json", "0001_elsewhere.json"]
    assert storage.runs() == [first, second]
    assert load_run(second)["version"] == STORED_RUN_VERSION


def test_concurrent_saves_get_distinct_numbers(tmp_path: Path) -> None:
    storage = FileStorage(tmp_path, machine_id="m1")
    saved: list[Path] = []
    threads = [threading.Thread(target=lambda i=i: saved.append(storage.save(sample_run(), f"s{i}"))) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    numbers = sorted(int(p.name[:4]) for p in saved)
    assert numbers == list(range(1, 9))


def test_resolve_refers_to_runs_by_number_name_machine_or_path(tmp_path: Path) -> None:
    storage = FileStorage(tmp_path, machine_id="m1")
    base = storage.save(sample_run(), "release-2.4")
    storage.save(sample_run(), "0123abc_20250314_092653")
    latest = storage.save(sample_run(), "release-2.5")
    theirs = FileStorage(tmp_path, machine_id="m2").save(sample_run(), "theirs")
    assert storage.resolve("latest") == latest
    assert storage.resolve("1") == base and storage.resolve("0001") == base
    assert storage.resolve("2.4") == base
    assert storage.resolve("m2/1") == theirs
    assert storage.resolve("theirs") == theirs  # not on this machine: searched on the others
    assert storage.resolve(str(theirs)) == theirs
    with pytest.raises(StorageError, match=r"'release' matches 2 stored runs: m1/0001_release-2.4.json, m1/0003_release-2.5.json"):
        storage.resolve("release")
    with pytest.raises(StorageError, match=r"no stored run matches '7' in .*m1; stored runs \(newest last\): 0001_release-2.4"):
        storage.resolve("7")


def test_latest_without_runs_says_how_to_make_one(tmp_path: Path) -> None:
    with pytest.raises(StorageError, match="no stored run in .*m1 to compare with; save one first with --kafka-mirror-save"):
        FileStorage(tmp_path, machine_id="m1").resolve("latest")
    FileStorage(tmp_path, machine_id="m2").save(sample_run(), "x")
    with pytest.raises(StorageError, match=r"runs of other machines exist \(m2\): name one as MACHINE/NNNN"):
        FileStorage(tmp_path, machine_id="m1").resolve("latest")


@pytest.mark.parametrize(
    "content,message",
    [
        ("{", "is not a stored run: not JSON"),
        ('{"expected": 3, "lanes": []}', "no 'results' object"),
        ('{"version": 99, "results": {}}', "has stored-run version 99; this pytest-kafka-mirror reads version 1"),
    ],
)
def test_load_run_rejects_what_is_not_a_stored_run(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "0001_x.json"
    path.write_text(content)
    with pytest.raises(StorageError, match=message):
        load_run(path)


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_commit_info_of_a_work_tree(tmp_path: Path) -> None:
    assert get_commit_info(tmp_path)["id"] == "unversioned"

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True, text=True).stdout.strip()

    git("init", "-q", "-b", "main")
    (tmp_path / "f").write_text("1")
    git("add", "f")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    info = get_commit_info(tmp_path)
    assert info["id"] == git("rev-parse", "HEAD") and info["dirty"] is False and info["branch"] == "main"
    (tmp_path / "untracked").write_text("x")
    assert get_commit_info(tmp_path)["dirty"] is False  # as git describe --dirty
    (tmp_path / "f").write_text("2")
    assert get_commit_info(tmp_path)["dirty"] is True
    assert autosave_name(get_commit_info(tmp_path), FIXED["now"]) == f"{info['id']}_20250314_092653_uncommitted-changes"


def test_machine_id_names_system_python_and_bits() -> None:
    _system, impl, version, bits = get_machine_id().split("-")
    assert impl in ("CPython", "PyPy") and version.count(".") == 1 and bits.endswith("bit")


# -- the console command -------------------------------------------------------------------


def _store(tmp_path: Path) -> FileStorage:
    storage = FileStorage(tmp_path)
    storage.save(sample_run(sample_result(NODE, sample_report(p99=20.0))), "base")
    storage.save(sample_run(sample_result(NODE, sample_report(p99=30.0, duplicated=1))), "next")
    return storage


def test_cli_compare_exits_1_on_a_regression(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _store(tmp_path)
    code = main(["compare", "1", "2", "--storage", str(tmp_path), "--compare-fail", "latency_p99:10%",
                 "--compare-fail", "duplicated:0"])
    out = capsys.readouterr().out
    assert code == 1
    assert f"{NODE}: latency_p99 30 ms vs 20 ms in the baseline (+10 ms, +50.0%), more than latency_p99:10% allows" in out
    assert f"{NODE}: duplicated 1 vs 0 in the baseline (+1), more than duplicated:0 allows (at most +0)" in out
    assert out.startswith("baseline: 0001_base (2025-03-14 09:26:53 UTC, commit 0123456789ab)")


def test_cli_compare_exits_0_without_regression(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _store(tmp_path)
    assert main(["compare", "base", "next", "--storage", str(tmp_path), "--compare-fail", "latency_p99:60%"]) == 0
    assert "no regression: latency_p99:60% held for 1 verified run" in capsys.readouterr().out


def test_cli_compare_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _store(tmp_path)
    assert main(["compare", "1", "9", "--storage", str(tmp_path)]) == 2
    assert "kafka-mirror compare: no stored run matches '9'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["compare", "1", "2", "--storage", str(tmp_path), "--compare-fail", "p99:10%"])
    assert exc.value.code == 2
    assert "'p99' is not a figure; accepted figures: missing" in capsys.readouterr().err


def test_cli_compare_gates_on_failover_figures(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    storage = FileStorage(tmp_path)
    storage.save(sample_run(sample_result(NODE, sample_report()),
                            sample_failover_result(NODE, sample_failover_report(rereads=40))), "mm2-3.4")
    storage.save(sample_run(sample_result(NODE, sample_report()),
                            sample_failover_result(NODE, sample_failover_report(rereads=297))), "mm2-3.5")
    code = main(["compare", "mm2-3.4", "mm2-3.5", "--storage", str(tmp_path),
                 "--compare-fail", "failover_rereads_max:0", "--compare-fail", "failover_skipped:0"])
    out = capsys.readouterr().out
    assert code == 1
    assert (f"{NODE}#failover: failover_rereads_max 297 vs 40 in the baseline (+257, +642.5%), more than "
            "failover_rereads_max:0 allows (at most +0)") in out
    assert "1 regression:" in out
    assert main(["compare", "1", "2", "--storage", str(tmp_path), "--compare-fail", "failover_rereads_max:700%"]) == 0
    assert "no regression: failover_rereads_max:700% held for 1 verified run and 1 failover check" in (
        capsys.readouterr().out)
    with pytest.raises(SystemExit):
        main(["compare", "1", "2", "--storage", str(tmp_path), "--compare-fail", "failover_reread:0"])
    assert "'failover_reread' is not a figure; accepted figures: missing" in capsys.readouterr().err


def test_cli_list(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # no last session in ./.kafka-mirror/reports (a scenario run's, in a checkout)
    _store(tmp_path)
    assert main(["list", "--storage", str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1:] == [
        "  0001_base.json (2025-03-14 09:26:53 UTC, commit 0123456789ab): 1 verified run",
        "  0002_next.json (2025-03-14 09:26:53 UTC, commit 0123456789ab): 1 verified run",
    ]
