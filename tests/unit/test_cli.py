"""``kafka-mirror`` argument errors: fast, before Spark starts."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from pytest_kafka_mirror.cli import commands as cli
from pytest_kafka_mirror.cli import main
from tests.stored import sample_failover_report, sample_failover_result, sample_report, sample_result, sample_run
from tests.synthetic import SyntheticRun


def test_allow_source_loss_needs_a_source_log(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = SyntheticRun(tmp_path)
    run.lane("orders", pid="p1", lane=0, acked=range(10)).deliver(range(10))
    run.write()
    assert main(["verify", str(tmp_path), "--allow-source-loss"]) == 2
    err = capsys.readouterr().err
    assert "--allow-source-loss needs the source log" in err and "capture_source=True" in err


# -- every error is one line and an exit status, never a traceback ----------------------------


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


def test_show_a_failing_report_says_why_and_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = sample_report(expected=10, lost=2, duplicated=1)
    report.write(tmp_path / "report.json")
    assert main(["show", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert out.startswith(report.summary()) and "at-least-once violated" in out and "duplicates: 1 extra copy" in out
    assert main(["show", str(tmp_path), "--allow-duplicates"]) == 1  # the loss still fails it
    assert "duplicates" not in capsys.readouterr().out


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
    assert main(["list", "--storage", str(tmp_path), "--report-dir", str(tmp_path / "reports")]) == 0
    out = capsys.readouterr().out
    assert ": 1 verified run\n" in out and ": 2 verified runs\n" in out and "last session" not in out


def test_list_shows_the_last_session_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    reports = tmp_path / "reports"
    reports.mkdir()
    (reports / "session.json").write_text(json.dumps(sample_run(
        sample_result("t.py::test_a", sample_report()),
        sample_failover_result("t.py::test_a", sample_failover_report()))))
    assert main(["list", "--storage", str(tmp_path / "none"), "--report-dir", str(reports)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"no stored runs under {tmp_path / 'none'}")
    assert f"the last session ({reports / 'session.json'}" in out and ": 1 verified run and 1 failover check\n" in out


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


# -- verify --spark-remote sc://HOST:PORT (Spark Connect), as pytest's --kafka-mirror-spark-remote ---------


def _run_dir(path: Path) -> Path:
    run = SyntheticRun(path)
    run.lane("orders", pid="p1", lane=0, acked=range(10)).deliver(range(10))
    run.write()
    return path


def _usage_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.startswith("usage: kafka-mirror verify"), err
    return err.splitlines()[-1]


@pytest.mark.parametrize("env", [None, "sc://127.0.0.1:1"])
def test_verify_spark_master_and_spark_remote_exclude_each_other(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, env: str | None
) -> None:
    argv = ["verify", str(tmp_path), "--spark-master", "local[2]"]
    if env is None:
        monkeypatch.delenv("KAFKA_MIRROR_SPARK_REMOTE", raising=False)
        argv += ["--spark-remote", "sc://127.0.0.1:1"]
    else:
        monkeypatch.setenv("KAFKA_MIRROR_SPARK_REMOTE", env)
    line = _usage_error(capsys, argv)
    assert line.startswith("kafka-mirror verify: error: --spark-remote (sc://127.0.0.1:1)"), line
    assert "and --spark-master (local[2]) exclude each other" in line and "give only one" in line
    assert ("KAFKA_MIRROR_SPARK_REMOTE" in line) == (env is not None)


@pytest.mark.parametrize("argv,message", [
    (["--spark-remote", "http://h:1"], ("argument --spark-remote: 'http://h:1' is not a Spark Connect URL; "
                                        "accepted: sc://HOST[:PORT]")),
    (["--spark-remote", "sc://h:99999"], "argument --spark-remote: 'sc://h:99999': port 99999 is out of range"),
    (["--spark-master", "sc://h:1"], ("argument --spark-master: 'sc://h:1' is a Spark Connect URL: give it as "
                                      "--spark-remote sc://h:1")),
])
def test_verify_a_malformed_spark_url_names_the_option(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                       argv: list[str], message: str) -> None:
    line = _usage_error(capsys, ["verify", str(tmp_path), *argv])
    assert line.startswith("kafka-mirror verify: error: ") and message in line, line


def test_verify_spark_remote_needs_the_connect_client(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_kafka_mirror import verify
    from pytest_kafka_mirror.verify import connect

    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("verify_run must not start")

    monkeypatch.setattr(connect, "client_missing", lambda: ["grpcio", "grpcio-status"])
    monkeypatch.setattr(verify, "verify_run", never)
    assert main(["verify", str(_run_dir(tmp_path)), "--spark-remote", "sc://127.0.0.1:1"]) == 2
    _one_error_line(capsys, "kafka-mirror verify: --spark-remote: verifying through Spark Connect needs its client",
                    "grpcio, grpcio-status is not installed: pip install 'pyspark[connect]'")


def test_verify_passes_spark_remote_to_verify_run(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_kafka_mirror import verify
    from pytest_kafka_mirror.verify import connect

    calls: list[dict[str, object]] = []

    def fake_verify_run(run_dir: object, **kwargs: object) -> object:
        calls.append({"run_dir": run_dir, **kwargs})
        return sample_report(expected=10)

    monkeypatch.setattr(connect, "client_missing", list)
    monkeypatch.setattr(verify, "verify_run", fake_verify_run)
    monkeypatch.delenv("KAFKA_MIRROR_SPARK_REMOTE", raising=False)
    run = _run_dir(tmp_path)
    assert main(["verify", str(run), "--spark-remote", " sc://127.0.0.1:15002/;user_id=me ", "--examples", "3"]) == 0
    assert calls == [{"run_dir": run, "master": "sc://127.0.0.1:15002/;user_id=me", "examples": 3}]
    monkeypatch.setenv("KAFKA_MIRROR_SPARK_REMOTE", "sc://h:2")  # the environment's default
    assert main(["verify", str(run)]) == 0
    assert calls[-1]["master"] == "sc://h:2"
    monkeypatch.delenv("KAFKA_MIRROR_SPARK_REMOTE")
    assert main(["verify", str(run)]) == 0  # neither: the default master, as before
    assert calls[-1]["master"] == "local[2]"
    capsys.readouterr()


def test_verify_leaves_a_running_spark_session_to_its_owner(tmp_path: Path, spark: Any,
                                                            monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """``kafka-mirror verify`` called in a process that already runs a SparkSession (this
    suite's ``spark`` fixture) stops only what it started: it stopped the process-wide session,
    and every later Spark test of that xdist worker (or of a serial run) failed with py4j's
    ConnectionRefusedError."""
    from pytest_kafka_mirror import verify

    monkeypatch.setattr(verify, "verify_run", lambda run_dir, **kw: sample_report(expected=10))
    assert main(["verify", str(_run_dir(tmp_path))]) == 0
    assert spark.range(3).count() == 3  # still alive
    capsys.readouterr()


def test_verify_at_a_spark_connect_url_nobody_answers_at_is_one_line(tmp_path: Path) -> None:
    from pytest_kafka_mirror.verify.connect import client_missing

    if client_missing():  # checked first: test_verify_spark_remote_needs_the_connect_client
        pytest.skip(f"the Spark Connect client needs {client_missing()}")
    # A process of its own: this one may hold a local SparkSession (the two kinds cannot mix).
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"sc://127.0.0.1:{port}"
    t0 = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "pytest_kafka_mirror.cli", "verify", str(_run_dir(tmp_path)),
                          "--spark-remote", url], capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 2, out.stderr[-2000:]
    assert "Traceback" not in out.stderr and out.stderr.count("\n") == 1, out.stderr[-2000:]
    assert out.stderr.startswith(f"kafka-mirror verify: the Spark Connect server {url} does not answer"), out.stderr
    assert "check --spark-remote and that the server runs" in out.stderr
    assert time.monotonic() - t0 < 30


def test_verify_help_shows_spark_remote() -> None:
    text = _helps()["kafka-mirror verify"]
    assert "--spark-remote URL Verify through this Spark Connect server, sc://HOST[:PORT]" in text
    assert "Excludes --spark-master. Also env KAFKA_MIRROR_SPARK_REMOTE." in text
    assert "--kafka-mirror-" not in text
    assert "--spark-remote sc://HOST:PORT" in _helps()["kafka-mirror"]


@pytest.mark.parametrize("argv,message", [
    (["gate", "mm2:4.x", "mm2:4.3.1"], "kafka-mirror gate: OLD 'mm2:4.x': '4.x' is not an Apache Kafka release version"),
    (["gate", "mm2:4.3.1", "mm2:4.3.1,properties=/nonexistent/mm2.properties"],
     "kafka-mirror gate: NEW 'mm2:4.3.1,properties=/nonexistent/mm2.properties': your mm2.properties "
     "/nonexistent/mm2.properties: no such file"),
    (["gate", "reference", "reference", "--compare-fail", "latency:5"],
     "kafka-mirror gate: --compare-fail latency:5: 'latency:5': 'latency' is not a figure; accepted figures: missing"),
    (["gate", "reference", "mm2:4.3.1", "--", "scenarios", "--kafka-mirror-replicator=reference"],
     "kafka-mirror gate: the pytest arguments name a replicator (--kafka-mirror-replicator): the gate sets it"),
    (["gate", "mm2:4.3.1", "external:prefix:dc1.", "--old-command", "stop=true"],
     "kafka-mirror gate: --old-command: OLD is mm2:4.3.1, which the plugin starts and controls itself; "
     "--old-command and --old-status are for an external: replicator you run"),
    (["gate", "external:identity", "external:identity", "--new-command", "restart=true"],
     "kafka-mirror gate: --new-command: 'restart=true' is not VERB=COMMAND with VERB one of stop | start"),
    (["gate", "external:identity", "external:identity", "--new-status", "http//x"],
     "kafka-mirror gate: --new-status: 'http//x' is neither a topic name nor a Connect REST URL"),
    (["gate", "external:identity", "external:identity", "--new-command", "start=true", "--",
      "--kafka-mirror-replicator-command=stop=true"],
     "kafka-mirror gate: the pytest arguments give --kafka-mirror-replicator-command to both sessions, and "
     "--old-/--new- options give each its own: give them per side only"),
])
def test_gate_checks_its_arguments_before_running_anything(argv: list[str], message: str,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(message) and len(err.strip().splitlines()) == 1, err


def test_gate_sessions_store_the_baseline_and_gate_the_candidate(tmp_path: Path) -> None:
    from pytest_kafka_mirror.cli.gate import DEFAULT_CHECKS, gate_sessions

    baseline, candidate = gate_sessions("mm2:3.4.0", "mm2:3.5.1", ["scenarios", "-m", "upgrade_gate"],
                                        checks=DEFAULT_CHECKS, storage=tmp_path, stamp="S")
    assert baseline[-6:] == ["scenarios", "-m", "upgrade_gate", f"--kafka-mirror-storage={tmp_path}",
                             "--kafka-mirror-replicator=mm2:3.4.0", "--kafka-mirror-save=gate-mm2-3.4.0-S"]
    stored = tmp_path / "0001_gate-mm2-3.4.0-S.json"
    argv = candidate(stored)
    assert "--kafka-mirror-replicator=mm2:3.5.1" in argv and f"--kafka-mirror-compare={stored}" in argv
    assert [a for a in argv if a.startswith("--kafka-mirror-compare-fail=")] == [
        f"--kafka-mirror-compare-fail={c}" for c in DEFAULT_CHECKS]


def test_each_side_of_the_gate_gets_its_own_lifecycle_commands(tmp_path: Path) -> None:
    from pytest_kafka_mirror.cli.gate import gate_sessions, side_options

    old = side_options(["stop=systemctl stop mm2-old"], "mm2-status.a.internal")
    assert old == ["--kafka-mirror-replicator-command=stop=systemctl stop mm2-old",
                   "--kafka-mirror-replicator-status=mm2-status.a.internal"]
    new = side_options(["start=systemctl start mm2-new"], None)
    baseline, candidate = gate_sessions("external:identity", "external:identity", ["t.py"], checks=["missing:0"],
                                        storage=tmp_path, stamp="S", old_options=old, new_options=new)
    argv = candidate(tmp_path / "stored.json")
    assert [a for a in baseline if "replicator-" in a] == old
    assert [a for a in argv if "replicator-" in a] == new


def test_every_subcommand_and_argument_says_what_it_is() -> None:
    """``kafka-mirror X --help`` describes X, and every argument has a help text."""
    import argparse

    from pytest_kafka_mirror.cli.commands import build_parser

    missing: list[str] = []

    def walk(parser: argparse.ArgumentParser, path: str) -> None:
        if path and not parser.description:
            missing.append(f"{path}: no description")
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, child in action.choices.items():
                    walk(child, f"{path} {name}".strip())
            elif not isinstance(action, argparse._HelpAction) and not action.help:
                missing.append(f"{path or 'kafka-mirror'} {'/'.join(action.option_strings) or action.dest}: no help")

    walk(build_parser(), "")
    assert missing == []


def test_produce_checks_its_compacted_topics_before_connecting(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    args = ["produce", "--bootstrap", "127.0.0.1:1", "--topics", "t,u", "--run-dir", str(tmp_path), "--rate", "10",
            "--count", "5", "--compacted", "u,v"]
    assert main(args) == 2
    _one_error_line(capsys, "kafka-mirror produce: --compacted v: not among --topics t,u")


def test_verify_where_java_cannot_start_says_what_the_jvm_said_in_one_line(tmp_path: Path) -> None:
    """A JAVA_HOME that holds no Java: pyspark alone says "Java gateway process exited
    before sending its port number"; the CLI says what the launcher said, in one line."""
    env = {**os.environ, "JAVA_HOME": str(tmp_path / "no-java"), "TMPDIR": str(tmp_path)}
    out = subprocess.run([sys.executable, "-m", "pytest_kafka_mirror.cli", "verify", str(_run_dir(tmp_path))],
                         capture_output=True, text=True, timeout=120, check=False, env=env)
    assert out.returncode == 2, out.stderr[-2000:]
    assert "Traceback" not in out.stderr and out.stderr.count("\n") == 1, out.stderr[-2000:]
    assert out.stderr.startswith("kafka-mirror verify: the Spark JVM (master local[2], driver memory "), out.stderr
    assert str(tmp_path / "no-java") in out.stderr, out.stderr
    assert not any(p.name.startswith("kafka-mirror-spark-") for p in tmp_path.iterdir())


# -- cleanup: the plugin's topics and groups left on clusters it does not run ------------------------------


def test_cleanup_of_an_unreachable_cluster_is_one_line(capfd: pytest.CaptureFixture[str]) -> None:
    assert main(["cleanup", "--bootstrap", "127.0.0.1:1", "--connect-timeout", "1", "--yes"]) == 2
    out, err = capfd.readouterr()
    assert out == "" and err.count("\n") == 1 and "rdkafka" not in err and "Traceback" not in err, err
    assert err.startswith("kafka-mirror cleanup: cluster: no answer from bootstrap servers 127.0.0.1:1 within 1 s")
    assert err.rstrip().endswith("Hint: check the address given to --bootstrap (HOST:PORT[,...]) and that the "
                                 "cluster is up.")


@pytest.mark.parametrize(("argv", "message"), [
    (["cleanup"], "the following arguments are required: --bootstrap"),
    (["cleanup", "--bootstrap", "a:1", "--topic-prefix", "km*"], "argument --topic-prefix: 'km*' must be 1-40 "
                                                                  "characters of letters, digits, '.', '_' or '-'"),
    (["cleanup", "--bootstrap", "a:1", "--connect-timeout", "soon"], "argument --connect-timeout"),
])
def test_cleanup_checks_its_arguments_before_connecting(argv: list[str], message: str,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.splitlines()[-1].startswith("kafka-mirror cleanup: error: ") and message in err


def test_cleanup_refuses_a_client_property_librdkafka_does_not_know(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cleanup", "--bootstrap", "127.0.0.1:1", "--client-config-set", "sasl.jaas.config=x"]) == 2
    _one_error_line(capsys, "kafka-mirror cleanup: --client-config / --client-config-set: ")


def test_cleanup_takes_the_plugin_s_names_and_their_copies_only() -> None:
    from pytest_kafka_mirror.cli.cleanup import plugin_names

    names = {"km-master-t-1", "primary.km-master-t-1", "backup.primary.km-gw0-t-2", "km", "kmx-1", "orders",
             "primary.orders", "mm2-offset-syncs.backup.internal", "heartbeats", "primary.checkpoints.internal",
             "kafka-mirror-warmup", "other-km-1"}
    assert plugin_names(names, "km") == ["backup.primary.km-gw0-t-2", "km-master-t-1", "primary.km-master-t-1"]
    assert plugin_names(names, "km", copies=False) == ["km-master-t-1"]
    assert plugin_names({"a.b-1", "axb-1"}, "a.b") == ["a.b-1"]  # the prefix is literal


def test_cleanup_help_says_what_it_deletes_and_that_it_asks_first() -> None:
    text = _helps()["kafka-mirror cleanup"]
    for part in ("nothing is deleted without --yes", "ALIAS.PREFIX-", "auto.create.topics.enable=true",
                 "1 something stayed", "--client-config", "Also env KAFKA_MIRROR_TOPIC_PREFIX. Default: 'km'"):
        assert part in text, part
    assert "kafka-mirror cleanup --bootstrap" in _helps()["kafka-mirror"]


def test_the_cleanup_recipe_is_what_the_command_takes() -> None:
    """docs/your-clusters.md's cleanup commands parse as written: a dry run, then --yes."""
    import shlex

    from tests.docs import marked_block

    commands = [shlex.split(line) for line in marked_block("docs/your-clusters", "recipe-cleanup").splitlines()
                if line.strip() and not line.startswith("#")]
    assert [c[:2] for c in commands] == [["kafka-mirror", "cleanup"]] * 2
    parsed = [cli.build_parser().parse_args(c[1:]) for c in commands]
    assert [p.yes for p in parsed] == [False, True]
    assert parsed[0].bootstrap == ["kafka-primary-1.example.com:9092", "kafka-backup-1.example.com:9092"]
    assert parsed[0].topic_prefix == "km"


def test_spark_prepare_without_archives_says_why_in_one_line(monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("KAFKA_MIRROR_JVM_CDS", "0")
    assert main(["spark", "prepare"]) == 1
    _one_error_line(capsys, "kafka-mirror spark prepare: no archive written", "KAFKA_MIRROR_JVM_CDS=0")


def test_the_prepared_run_is_a_passing_run(tmp_path: Path) -> None:
    """What ``kafka-mirror spark prepare`` verifies (to load every class a verification
    loads) is a run as a passing test leaves it: the plain-Python oracle finds it clean."""
    from pytest_kafka_mirror.verify.oracle import oracle_report
    from pytest_kafka_mirror.verify.prepare import LANES, RECORDS, write_run

    report = oracle_report(write_run(tmp_path / "run"))
    assert report.expected == report.received == LANES * RECORDS, report.summary()
    report.assert_ok()
