"""Where verification runs (no JVM here): the rule between --kafka-mirror-spark-remote,
--kafka-mirror-spark-master and the run's shared Spark Connect server, and the errors a
bad endpoint gets before anything starts.  The server itself: tests/integration/test_spark_connect.py."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_kafka_mirror.config import resolve_settings
from pytest_kafka_mirror.session import KafkaMirrorSession
from pytest_kafka_mirror.verify import connect
from pytest_kafka_mirror.verify.connect import ConnectServer, parse_connect_url, server_conf

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def _session(cli: dict | None = None, env: dict | None = None) -> KafkaMirrorSession:
    return KafkaMirrorSession(resolve_settings(cli or {}, lambda key: None, env or {}, rootdir=Path("/r")))


@pytest.fixture
def connect_here(monkeypatch: pytest.MonkeyPatch) -> None:
    """This machine can run Spark Connect, whatever is installed."""
    monkeypatch.setattr(connect, "server_unavailable", lambda: None)
    monkeypatch.setattr(connect, "client_missing", lambda: [])


@pytest.mark.usefixtures("connect_here")
@pytest.mark.parametrize(
    "cli,env,distributed,plan",
    [
        ({}, {}, False, ("local", "local[2]")),  # one process, one JVM either way: the local session
        ({}, {}, True, ("shared", "local[2]")),  # xdist: one server for every worker
        ({"kafka_mirror_spark_master": "local[2]"}, {}, True, ("local", "local[2]")),  # given: each process its own
        ({}, {"KAFKA_MIRROR_SPARK_MASTER": "local[1]"}, True, ("local", "local[1]")),
        ({"kafka_mirror_spark_remote": "sc://h:1"}, {}, True, ("remote", "sc://h:1")),
        ({}, {"KAFKA_MIRROR_SPARK_REMOTE": "sc://h:1"}, False, ("remote", "sc://h:1")),
    ],
)
def test_the_rule_of_where_verification_runs(cli: dict, env: dict, distributed: bool,
                                             plan: tuple[str, str]) -> None:
    assert _session(cli, env).spark.plan(distributed) == plan


def test_without_spark_connect_each_worker_runs_its_own_spark(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(connect, "server_unavailable", lambda: "no spark-connect jar")
    assert _session().spark.plan(True) == ("local", "local[2]")


@pytest.mark.usefixtures("connect_here")
def test_the_header_says_where_verification_runs() -> None:
    assert _session().spark.describe(False) == "local[2]"
    assert _session().spark.describe(True) == "local[2] in one shared Spark Connect server"
    remote = _session({"kafka_mirror_spark_remote": "sc://h:1"})
    assert remote.spark.describe(True) == "sc://h:1 (Spark Connect)"


def test_connect_urls() -> None:
    assert parse_connect_url("sc://127.0.0.1:15002") == ("127.0.0.1", 15002, "")
    assert parse_connect_url("sc://spark.example") == ("spark.example", 15002, "")
    assert parse_connect_url("sc://[::1]:7/;token=x;use_ssl=true") == ("::1", 7, ";token=x;use_ssl=true")
    with pytest.raises(ValueError, match=r"'sc://h:99999': port 99999 is out of range"):
        parse_connect_url("sc://h:99999")


def test_the_server_runs_in_the_foreground_on_loopback_with_the_local_session_s_settings(tmp_path: Path) -> None:
    argv = ConnectServer(tmp_path, master="local[3]").argv(Path("/spark"))
    assert argv[:5] == ["/spark/bin/spark-submit", "--class", connect.CONNECT_CLASS, "--master", "local[3]"]
    assert argv[-1] == "spark-internal"
    confs = dict(a.split("=", 1) for a in argv[argv.index("--conf") + 1::2] if "=" in a and a.startswith("spark."))
    assert confs["spark.connect.grpc.binding.address"] == "127.0.0.1"
    assert confs["spark.connect.grpc.binding.port"] == "0"
    assert confs["spark.sql.shuffle.partitions"] == confs["spark.default.parallelism"] == "3"
    assert confs["spark.ui.enabled"] == "false"
    assert server_conf("spark://h:7077").get("spark.sql.shuffle.partitions") is None
    # the same JIT settings as a local session's driver (verify/connect.py, DRIVER_JAVA_OPTIONS)
    java_options = argv[argv.index("--driver-java-options") + 1].split()
    assert java_options[0].startswith("-Dlog4j2.configurationFile=file:")
    # then $KAFKA_MIRROR_SPARK_JAVA_OPTS, then the class-data archive's (processes/jvm_cds.py)
    own = connect.driver_java_options().split()
    assert java_options[1:1 + len(own)] == own and own[:len(connect.DRIVER_JAVA_OPTIONS.split())] == \
        connect.DRIVER_JAVA_OPTIONS.split()
    assert "-XX:Tier4InvocationThreshold=50000" in java_options
    assert connect.QUICK_JIT not in java_options  # a shared server keeps C2: it cannot restart for a large capture
    assert confs["spark.sql.codegen.cache.maxEntries"] == str(connect.CODEGEN_CACHE_ENTRIES)


def test_the_local_session_s_driver_gets_the_jit_and_gc_settings(spark: SparkSession) -> None:
    options = spark.sparkContext.getConf().get("spark.driver.extraJavaOptions")
    assert options is not None and connect.DRIVER_JAVA_OPTIONS in options
    management = spark.sparkContext._jvm.java.lang.management.ManagementFactory
    flags = management.getRuntimeMXBean().getInputArguments()
    assert "-XX:Tier4CompileThreshold=150000" in list(flags)  # the JVM runs with them
    assert connect.QUICK_JIT in list(flags)  # C1 alone: a local session's small verifications (test_spark_jit.py)
    # ... and with the throughput collector (its young and old collectors), not G1
    assert sorted(gc.getName() for gc in management.getGarbageCollectorMXBeans()) == ["PS MarkSweep", "PS Scavenge"]
    assert spark.conf.get("spark.sql.codegen.cache.maxEntries") == str(connect.CODEGEN_CACHE_ENTRIES)


def test_a_spark_connect_url_nobody_answers_at_fails_at_once(tmp_path: Path) -> None:
    # In a process of its own: this one may hold a local SparkSession (the two cannot mix).
    code = (
        "from pytest_kafka_mirror.verify import get_spark\n"
        "from pytest_kafka_mirror.verify.connect import SparkConnectError\n"
        "try:\n"
        "    get_spark('sc://127.0.0.1:1')\n"
        "except SparkConnectError as e:\n"
        "    print(e)\n"
    )
    t0 = time.monotonic()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "the Spark Connect server sc://127.0.0.1:1 does not answer" in out.stdout, out.stderr[-2000:]
    assert "check --kafka-mirror-spark-remote" in out.stdout
    assert time.monotonic() - t0 < 30


@pytest.mark.parametrize(
    "args,message",
    [
        (["--kafka-mirror-spark-remote", "http://h:1"],
         "*--kafka-mirror-spark-remote: *'http://h:1' is not a Spark Connect URL; accepted: sc://HOST[[]:PORT]*"),
        (["--kafka-mirror-spark-master", "sc://h:1"], "*give it as --kafka-mirror-spark-remote sc://h:1*"),
        (["--kafka-mirror-spark-remote", "sc://h:1", "--kafka-mirror-spark-master", "local[2]"],
         "*--kafka-mirror-spark-remote (sc://h:1) and --kafka-mirror-spark-master (local[[]2]) exclude each other*"),
    ],
)
def test_a_bad_spark_endpoint_is_one_usage_error_before_anything_starts(
    pytester: pytest.Pytester, args: list[str], message: str
) -> None:
    pytester.makepyfile("def test_x(): pass")
    t0 = time.monotonic()
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:benchmark", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])
    assert "Traceback" not in result.stderr.str()
    assert time.monotonic() - t0 < 30


def test_a_reused_workdir_s_log_does_not_give_the_old_server_s_port(tmp_path: Path) -> None:
    """The server log is appended to: the port is read from what this start wrote."""
    import socket
    from types import SimpleNamespace

    log = tmp_path / "server.log"
    log.write_text("10:00:00.000 INFO SparkConnectServer: Spark Connect server started at: 127.0.0.1:1\n")
    start = log.stat().st_size
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        with open(log, "a") as f:
            f.write(f"10:05:00.000 INFO SparkConnectServer: Spark Connect server started at: 127.0.0.1:{port}\n")
        process = SimpleNamespace(log_path=log, running=True)
        assert ConnectServer(tmp_path)._await_port(process, 5.0, start) == port  # type: ignore[arg-type]
