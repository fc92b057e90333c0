"""``kafka-mirror`` argument errors: fast, before Spark starts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_kafka_mirror.cli import commands as cli
from pytest_kafka_mirror.cli import main
from tests.stored import sample_report, sample_result, sample_run
from tests.synthetic import SyntheticRun


def test_allow_source_loss_needs_a_source_log(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = SyntheticRun(tmp_path)
    run.lane("orders", pid="p1", lane=0, acked=range(10)).deliver(range(10))
    run.write()
    assert main(["verify", str(tmp_path), "--allow-source-loss"]) == 2
    err = capsys.readouterr().err
    assert "--allow-source-loss needs the source log" in err and "capture_source=True" in err


# -- every error is one line and an exit status, never a traceback (issue 13) ---------------


def _one_error_line(capsys: pytest.CaptureFixture[str], *expected: str) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    for text in expected:
        assert text in err, err
    return err


def test_show_a_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", str(tmp_path / "nope.json")]) == 2
    _one_error_line(capsys, "kafka-mirror show: ", "nope.json: no such file", "show accepts a verifier report")


def test_show_a_stored_run_says_what_it_is(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    session = tmp_path / "session.json"
    session.write_text(json.dumps(sample_run(sample_result("t.py::test_a", sample_report()))))
    assert main(["show", str(session)]) == 2
    _one_error_line(capsys, "session.json is a stored run (the results of a pytest session)", "kafka-mirror compare",
                    "show accepts")


def test_show_a_manifest_says_what_it_is(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = SyntheticRun(tmp_path)
    run.lane("orders", pid="p1", lane=0, acked=range(10)).deliver(range(10))
    run.write()
    manifest = next(tmp_path.glob("manifest-*.json"))
    assert main(["show", str(manifest)]) == 2
    _one_error_line(capsys, f"{manifest} is a producer manifest", "kafka-mirror verify RUN_DIR")
    assert main(["show", str(tmp_path)]) == 2  # a run directory not verified yet
    _one_error_line(capsys, "is a directory without report.json", f"kafka-mirror verify {tmp_path}")


@pytest.mark.parametrize("text,expected", [("{not json", "is not JSON"), ("[1, 2]", "is a JSON list, not an object"),
                                           ('{"a": 1}', "is JSON, but not a verifier report"),
                                           ('{"run_dir": "r", "expected": 1, "version": 9}',
                                            "looks like a verifier report but cannot be read: unsupported report "
                                            "version 9")])
def test_show_other_files(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, expected: str) -> None:
    (tmp_path / "x.json").write_text(text)
    assert main(["show", str(tmp_path / "x.json")]) == 2
    _one_error_line(capsys, expected)


def test_show_a_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = sample_report(expected=10)
    report.write(tmp_path / "report.json")
    for arg in (tmp_path / "report.json", tmp_path):
        assert main(["show", str(arg)]) == 0
        assert capsys.readouterr().out.strip() == report.summary()


def test_an_unexpected_error_is_one_line(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def boom(args: object) -> int:
        raise RuntimeError("disk on fire\nsecond line")

    monkeypatch.setattr(cli, "_cmd_list", boom)
    assert main(["list"]) == 3
    _one_error_line(capsys, "kafka-mirror list: unexpected error: RuntimeError: disk on fire second line "
                            "(-v shows the traceback)")
    with pytest.raises(RuntimeError, match="disk on fire"):
        main(["-v", "list"])


def test_list_counts_in_words(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_kafka_mirror.report.storage import FileStorage

    storage = FileStorage(tmp_path)
    storage.save(sample_run(sample_result("t.py::test_a", sample_report())), "one")
    storage.save(sample_run(*(sample_result(f"t.py::test_{n}", sample_report()) for n in "ab")), "two")
    assert main(["list", "--storage", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert ": 1 verified run\n" in out and ": 2 verified runs\n" in out


def test_produce_checks_the_message_size_before_connecting(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["produce", "--bootstrap", "127.0.0.1:1", "--topics", "t", "--run-dir", str(tmp_path), "--rate", "10",
            "--count", "1", "--message-size", "10"]
    assert main(args) == 2
    _one_error_line(capsys, "kafka-mirror produce: --message-size 10 cannot hold a record of the headers format",
                    "give --message-size 60 or more")
    assert main([*args[:-1], "45", "--format", "body"]) == 2
    _one_error_line(capsys, "body format: its metadata takes 46 B")


def test_produce_to_an_unreachable_cluster_is_one_line(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    args = ["produce", "--bootstrap", "127.0.0.1:1", "--topics", "t", "--run-dir", str(tmp_path), "--rate", "10",
            "--count", "1", "--connect-timeout", "1"]
    assert main(args) == 2
    out, err = capfd.readouterr()
    assert err.count("\n") == 1 and "rdkafka" not in out + err, err
    assert err.startswith("kafka-mirror produce: source: no answer from bootstrap servers 127.0.0.1:1 within 1 s")
    assert "check the address given to --bootstrap (HOST:PORT[,...])" in err


def _helps() -> dict[str, str]:
    import argparse

    parser = cli.build_parser()
    helps = {"kafka-mirror": " ".join(parser.format_help().split())}
    todo = [("kafka-mirror", parser)]
    while todo:
        name, p = todo.pop()
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub_name, sub in action.choices.items():
                    helps[f"{name} {sub_name}"] = " ".join(sub.format_help().split())  # unwrapped
                    todo.append((f"{name} {sub_name}", sub))
    return helps


def test_help_is_plain_text_in_the_command_line_s_words() -> None:
    helps = _helps()
    assert {"kafka-mirror show", "kafka-mirror produce", "kafka-mirror image build"} <= set(helps)
    for name, text in helps.items():
        for markup in ("``", "`", ":class:", ":data:", ":func:", ".py", "rootdir", "Fail the session"):
            assert markup not in text, f"{name} --help shows {markup!r}"
    assert "relative to the current directory" in helps["kafka-mirror compare"]
    assert "Exit 1 when a figure of RUN_B regressed against RUN_A" in helps["kafka-mirror compare"]
    assert "Exit status: 0 success" in helps["kafka-mirror"]
