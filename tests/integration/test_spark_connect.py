"""One Spark Connect server for a whole ``pytest -n 2`` run (verify/connect.py): the report
is the same as a local SparkSession's, the workers share the server and hold no JVM, and
the server ends with the session however it ends; a process a worker starts below it still
gets a local session."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_kafka_mirror.processes.managed import wait_until
from pytest_kafka_mirror.verify import verify_run
from pytest_kafka_mirror.verify.connect import ConnectServer, SparkConnectError, server_unavailable
from tests.conftest import processes_tagged
from tests.synthetic import SyntheticRun

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.integration


@pytest.fixture(autouse=True)
def _connect_available() -> None:
    reason = server_unavailable()
    if reason is not None:
        pytest.skip(f"no Spark Connect here: {reason}")


def _zoo(run_dir: Path) -> Path:
    """A run with every anomaly the job reports, a source log (three-log reconciliation)
    and several capture segments."""
    run = SyntheticRun(run_dir)
    lane = run.lane
    lane("orders", pid="p1", lane=0, acked=range(100)).deliver(range(100), latency_ms=lambda s: 2 + s % 7)
    lost = lane("orders", pid="p1", lane=1, acked=range(100))
    lost.deliver([*range(10), *range(15, 50), *range(51, 90)]).in_source([*range(10, 13), *range(90, 95)])
    lane("orders", pid="p1", lane=2, acked=range(50))  # nothing arrived
    lane("orders", pid="p1", lane=3, acked=range(20)).deliver(range(20)).deliver([3, 3, 7])  # duplicates
    lane("orders", pid="p1", lane=4, acked=range(6)).deliver([0, 5, 1, 2, 3, 4])  # reordered
    lane("orders", pid="p1", lane=5, acked=range(10), failed=[10, 11], sent=15).deliver([*range(10), 10, 13, 20])
    bad = lane("orders", pid="p1", lane=6, acked=range(10)).deliver(range(4))
    bad.deliver([4], checksum_ok=False).deliver(range(5, 10))  # corrupted
    lane("orders", pid="p1", lane=7, acked=range(10)).deliver(range(5)).deliver(range(5, 10), partition=1)  # split
    lane("orders", pid="p1", lane=8, acked=range(65530, 65546)).deliver(
        [s for s in range(65530, 65546) if s not in (65536, 65540)])  # holes across a seq bucket
    lane("orders", pid="ghost", lane=0, in_manifest=False).deliver([0, 1, 2])  # phantoms
    lane("payments", pid="p1", lane=0, acked=range(2000)).deliver(range(2000), latency_ms=lambda s: (s * 37) % 900 / 3,
                                                                  kind="body")
    run.foreign("orders", partition=0, count=2, evidence="b'not ours'")
    run.headerless("payments", lane=0, count=3)
    return run.write(segments=3)


# Verifies in a process of its own, as an xdist worker does: pyspark's switch between its
# local and its Connect classes is process-wide, and this process holds a local session.
VERIFY_THROUGH = """
import json, sys
from pytest_kafka_mirror.verify import get_spark, stop_spark, verify_run
from pytest_kafka_mirror.verify.spark import _spark_children
report = verify_run(sys.argv[1], master=sys.argv[2], write_report=False)
assert _spark_children() == set(), "a JVM in the client process"
stop_spark()
print(json.dumps(report.to_dict(), sort_keys=True))
"""


def test_the_report_is_the_same_through_spark_connect(spark: SparkSession, tmp_path: Path) -> None:
    run_dir = _zoo(tmp_path / "run")
    local = verify_run(run_dir, spark=spark, write_report=False)
    with ConnectServer(tmp_path / "server") as server:
        out = subprocess.run([sys.executable, "-c", VERIFY_THROUGH, str(run_dir), server.url], capture_output=True,
                             text=True, timeout=600, cwd=Path(__file__).resolve().parents[2])
        assert out.returncode == 0, out.stderr[-4000:]
    assert not server.running
    through_connect = json.loads(out.stdout.splitlines()[-1])
    # Every field, none excluded: a report holds no timing of its own verification (its
    # figures are the run's, stamped by producer and capture), and run_dir and capture are
    # the same directory's.  The round trip through JSON is what report.json stores.
    assert through_connect == json.loads(json.dumps(local.to_dict(), sort_keys=True))
    assert local.lost and local.duplicated and local.reordered and local.corrupted and local.phantom  # a real zoo
    assert local.reconciled and local.lane_split and local.foreign and local.headers_lost


def test_a_server_that_does_not_answer_in_time_is_one_error_and_is_stopped(tmp_path: Path) -> None:
    server = ConnectServer(tmp_path / "server")
    with pytest.raises(SparkConnectError, match=r"did not answer within 0.5 s \(--kafka-mirror-startup-timeout\); "
                                                r"log .*server.log") as e:
        server.start(timeout=0.5)
    assert "Hint: " in str(e.value)
    assert not server.running


SCENARIO = textwrap.dedent(
    """
    import json, os, pathlib, signal, time, pytest
    from pytest_kafka_mirror.plugin import SESSION_KEY
    from pytest_kafka_mirror.verify.spark import local_session_running

    @pytest.mark.parametrize("i", range(4))
    def test_verify(request, i):
        session = request.config.stash[SESSION_KEY]
        assert session.get_spark().range(5).count() == 5
        assert not local_session_running()  # a Spark Connect client: no py4j JVM of the worker's own
        endpoint = json.loads((session.share.path / "spark-connect.json").read_text())
        with open(os.environ["KM_LOG"], "a") as f:
            f.write(json.dumps([os.environ["PYTEST_XDIST_WORKER"], endpoint["url"]]) + "\\n")
        if i == 3 and os.environ["KM_END"] == "fail":
            pytest.fail("a failing test")
        if i == 3 and os.environ["KM_END"] == "interrupt":
            pathlib.Path(os.environ["KM_LOG"] + ".cut").write_text("verified")
            time.sleep(120)
    """
)


@pytest.mark.parametrize("end", ["fail", "interrupt"])
def test_workers_share_one_server_and_it_ends_with_the_session(
    pytester: pytest.Pytester, tagged_env: str, end: str
) -> None:
    log = pytester.path / "verified.jsonl"
    pytester.makepyfile(test_shared=SCENARIO)
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-n", "2", "-p", "no:cacheprovider", "-p", "no:benchmark", "-v"],
        cwd=pytester.path, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "KM_LOG": str(log), "KM_END": end}, start_new_session=True,
    )
    try:
        if end == "interrupt":
            cut = Path(f"{log}.cut")
            with contextlib.suppress(TimeoutError):
                wait_until(lambda: cut.exists() or proc.poll() is not None, 300, "the session to verify", interval=0.1)
            assert cut.exists(), "the session never verified"
            jvms = [p for p in processes_tagged(tagged_env) if "org.apache.spark.deploy.SparkSubmit" in p]
            assert len(jvms) == 1 and "SparkConnectServer" in jvms[0], jvms  # one JVM for the run
            os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C in a terminal: pytest and its workers
        out, _ = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate(timeout=10)
    # The server (and its supervisor) ended with pytest, not later: an orphan would be here now.
    assert processes_tagged(tagged_env) == [], out[-4000:]
    want = pytest.ExitCode.TESTS_FAILED if end == "fail" else pytest.ExitCode.INTERRUPTED
    assert proc.returncode == want, out[-4000:]
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    assert len({url for _, url in rows}) == 1, rows  # one server for the session ...
    if end == "fail":
        assert {worker for worker, _ in rows} == {"gw0", "gw1"}, rows  # ... that both workers used
        assert len(rows) == 4, out[-4000:]


# A worker's life when a test of its own holds a local SparkSession (the suite's ``spark``
# fixture, pytest-spark): pyspark cannot hold both kinds in one process, so the shared
# server's session gives way, and the verifier then shares the local one.
GIVE_WAY = """
import os, sys
from pathlib import Path
from pytest_kafka_mirror.clusters.shared import ShareDir
from pytest_kafka_mirror.config import resolve_settings
from pytest_kafka_mirror.session import KafkaMirrorSession
from pytest_kafka_mirror.verify import get_spark, stop_spark
from pytest_kafka_mirror.verify.spark import _is_remote

share = ShareDir(Path(sys.argv[1]), os.getpid())
session = KafkaMirrorSession(resolve_settings({}, lambda key: None, {}))
session.share = share
try:
    shared = session.get_spark()
    assert _is_remote(shared) and shared.range(3).count() == 3
    assert session.get_spark() is shared
    local = get_spark("local[1]")  # a test's own fixture, later in the same worker
    assert not _is_remote(local) and shared.is_stopped
    assert session.get_spark() is local and local.range(4).count() == 4
    stop_spark()
    print("gave way")
finally:
    share.stop_all()
"""


def test_the_shared_server_s_session_gives_way_to_a_test_s_local_session(tmp_path: Path, tagged_env: str) -> None:
    out = subprocess.run([sys.executable, "-c", GIVE_WAY, str(tmp_path / "share")], capture_output=True, text=True,
                         timeout=600, cwd=Path(__file__).resolve().parents[2])
    assert out.returncode == 0 and "gave way" in out.stdout, out.stderr[-4000:]
    assert processes_tagged(tagged_env) == []


# A worker holds a busy Spark Connect channel while it starts brokers and replicators with
# a preexec_fn (a fork, not a vfork).  With grpcio >= 1.80's fork handlers on, a child could
# abort before exec (grpc/grpc#43055: 6 of 300 here, and a reference mirror in CI).
FORKS_WHILE_BUSY = """
import os, subprocess, sys, threading
from pytest_kafka_mirror.verify import get_spark
spark = get_spark(sys.argv[1])
done = threading.Event()
def busy():
    while not done.is_set():
        spark.range(1000).selectExpr("sum(id)").collect()
threading.Thread(target=busy, daemon=True).start()
spark.range(10).count()
failed = [p.returncode for p in (subprocess.run(["true"], preexec_fn=lambda: None, start_new_session=True,
                                                capture_output=True) for _ in range(int(sys.argv[2])))
          if p.returncode != 0]
done.set()
print(os.environ.get("GRPC_ENABLE_FORK_SUPPORT"), len(failed), failed[:5], flush=True)
os._exit(0)
"""


def test_a_connect_client_s_process_starts_children_with_a_preexec_fn(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "GRPC_ENABLE_FORK_SUPPORT"}
    with ConnectServer(tmp_path / "server") as server:
        out = subprocess.run([sys.executable, "-c", FORKS_WHILE_BUSY, server.url, "300"], capture_output=True,
                             text=True, timeout=300, env=env, cwd=Path(__file__).resolve().parents[2])
    assert out.returncode == 0, out.stderr[-4000:]
    setting, failed, codes = out.stdout.strip().splitlines()[-1].split(maxsplit=2)
    # Children that died before exec, and the setting the verifier made before the client loaded gRPC.
    assert (failed, setting) == ("0", "false"), f"exit codes {codes}: {out.stderr[-2000:]}"


def test_a_local_session_starts_in_a_child_of_a_spark_connect_client() -> None:
    # A worker that verified through the shared server has pyspark's Connect switch in its
    # environment; the pytest or gate it runs below it inherits the switch, and must still
    # get a local session (it failed with CONNECT_URL_NOT_SET when tests/integration ran alone).
    code = (
        "import os\n"
        "from pytest_kafka_mirror.verify import get_spark, stop_spark\n"
        "from pytest_kafka_mirror.verify.spark import _is_remote\n"
        "spark = get_spark('local[1]')\n"
        "print(_is_remote(spark), spark.range(4).count(), 'SPARK_CONNECT_MODE_ENABLED' in os.environ)\n"
        "stop_spark()\n"
    )
    env = {**os.environ, "SPARK_CONNECT_MODE_ENABLED": "1"}
    env.pop("SPARK_REMOTE", None)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180, env=env)
    assert out.stdout.split() == ["False", "4", "False"], out.stderr[-3000:]
