"""A Spark Connect server for the verification job: one JVM shared by every xdist worker.

With ``pytest -n N`` every worker is a process of its own, and each would start its own
local SparkSession: N JVMs of 2 GB, and N JVM starts of ~10 s.  The job runs only
DataFrame operations, so it runs just as well through Spark Connect: one server (a
``spark-submit`` of ``SparkConnectServer``, in local mode) verifies for every worker, and
each worker holds only a thin gRPC client (:func:`~pytest_kafka_mirror.verify.get_spark`
with an ``sc://`` URL).

Lifetime, as for the clusters the workers share (``clusters/shared.py``): the first worker
that verifies starts the server under the run's share directory lock, :func:`detached
<pytest_kafka_mirror.processes.managed.detached>` under a supervisor that watches the
xdist controller, and writes its URL there; the other workers read it.  The controller
stops it with the shared clusters at the end of the session (also after a failure or a
Ctrl-C), and the supervisor ends it within half a second if the controller is killed.
Outside xdist, :class:`ConnectServer` is a context manager whose process dies with this
one (:class:`~pytest_kafka_mirror.processes.managed.ManagedProcess`).

The server's Java runs in the foreground (``sbin/start-connect-server.sh`` would
daemonise it, out of our reach), binds port 0 on 127.0.0.1 and logs the port it got; it
is ready when it said so and the port answers.

Nothing here imports pyspark: only its location is looked up, for ``spark-submit``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from filelock import FileLock

from ..processes.jvm_cds import use_only
from ..processes.managed import ManagedProcess, detached, tcp_reachable, wait_until

if TYPE_CHECKING:
    from ..clusters.shared import ShareDir

__all__ = ["CONNECT_CLASS", "ConnectServer", "SparkConnectError", "client_missing", "parse_connect_url",
           "server_unavailable", "shared_server"]

CONNECT_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
#: The server's log line once its gRPC port is bound (INFO, SparkConnectServer).
_STARTED = re.compile(r"Spark Connect server started at: \S*:(\d+)")
#: Spark's default Connect port, for a URL that names none.
DEFAULT_PORT = 15002
#: Modules of the Spark Connect client (``pip install 'pyspark[connect]'``) and their packages.
_CLIENT_MODULES = (("grpc", "grpcio"), ("grpc_status", "grpcio-status"), ("google.rpc", "googleapis-common-protos"),
                   ("pandas", "pandas"), ("pyarrow", "pyarrow"), ("zstandard", "zstandard"))
_URL = re.compile(
    r"^sc://(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?)(?::(?P<port>\d{1,5}))?"
    r"/?(?P<params>(?:;[^;=/]+=[^;]*)*)$"
)
# Quiet, except for the line that carries the port.
def log4j_properties(level: str, **loggers: str) -> str:
    """A log4j 2 configuration: the root logger at ``level`` on the JVM's stderr, and
    ``loggers`` (name -> level) that say more."""
    lines = [f"rootLogger.level = {level}", "rootLogger.appenderRef.stderr.ref = stderr",
             "appender.stderr.type = Console", "appender.stderr.name = stderr", "appender.stderr.target = SYSTEM_ERR",
             "appender.stderr.layout.type = PatternLayout",
             "appender.stderr.layout.pattern = %d{HH:mm:ss.SSS} %p %c{1}: %m%n%ex"]
    for i, (name, at) in enumerate(sorted(loggers.items())):
        lines += [f"logger.l{i}.name = {name}", f"logger.l{i}.level = {at}"]
    return "\n".join(lines) + "\n"


_LOG4J = log4j_properties("warn", **{"org.apache.spark.sql.connect.service.SparkConnectServer": "info"})


class SparkConnectError(RuntimeError):
    """The Spark Connect server did not start, or a Spark Connect endpoint cannot be used."""


def parse_connect_url(text: str) -> tuple[str, int, str]:
    """``(host, port, ";params")`` of a Spark Connect URL ``sc://HOST[:PORT][/;PARAM=VALUE...]``.

    Raises ``ValueError`` naming the accepted form (the option parsers wrap it).
    """
    text = text.strip()
    m = _URL.match(text)
    form = "sc://HOST[:PORT][/;PARAM=VALUE...], e.g. sc://127.0.0.1:15002"
    if m is None:
        raise ValueError(f"{text!r} is not a Spark Connect URL; accepted: {form}")
    port = int(m.group("port") or DEFAULT_PORT)
    if not 0 < port < 65536:
        raise ValueError(f"{text!r}: port {port} is out of range (1-65535); accepted: {form}")
    return m.group("host").strip("[]"), port, m.group("params")


def _spark_home() -> Path | None:
    """pyspark's directory (its ``bin/``, ``jars/``), found without importing it."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).parent


def client_missing() -> list[str]:
    """Packages of the Spark Connect client that are not installed (empty when it can run)."""
    missing = []
    for module, package in _CLIENT_MODULES:
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):  # the parent package ("google") is absent
            found = False
        if not found:
            missing.append(package)
    return missing


def server_unavailable() -> str | None:
    """Why this machine cannot run a Spark Connect server and its client; None when it can."""
    home = _spark_home()
    if home is None:
        return "pyspark is not installed"
    if not any((home / "jars").glob("spark-connect_*.jar")):
        return f"this pyspark ({home}) ships no Spark Connect server (spark-connect_*.jar: pyspark 4 does)"
    missing = client_missing()
    if missing:
        return f"the Spark Connect client needs {', '.join(missing)} (pip install 'pyspark[connect]')"
    return None


#: JVM options of every Spark driver the plugin starts (the local session's and the
#: Connect server's): HotSpot's C2 compiler starts on a method after 10x its default
#: invocation and loop counts.  A verification runs a dozen short queries, and with the
#: defaults C2 spent more CPU than the tasks did, compiling code that runs a few thousand
#: times (1.3-2.2 s of CPU per 10k-record verification on two cores, against 1.0-1.5 s for
#: the tasks).  Measured, same machine, alternating: 10M rows 44.3-45.5 -> 40.2-41.0 s,
#: 1M 10.5-10.9 -> 9.4-10.9 s; 40x was slower at 1M (11.8-13.0 s).
#:
#: And the parallel (throughput) collector, not G1: a verification is a batch job, and
#: G1's concurrent work and heavier write barriers took CPU that the two cores' tasks and
#: compilers need.  Measured, same machine, process pairs alternating: warm 10k-record
#: runs (median of five) 1.81 / 1.69 / 1.68 -> 1.50 / 1.44 / 1.52 s with 0.3-0.4 s less
#: JVM CPU per run; 1M rows 6.45 / 6.79 -> 5.70 / 6.16 s (JVM peak 1.85-1.96 -> 1.59-1.61
#: GB); 10M 38.5 / 31.9 -> 27.7 / 29.7 s (2.53 -> 2.39-2.42 GB).
DRIVER_JAVA_OPTIONS = ("-XX:+UseParallelGC "
                       "-XX:Tier4InvocationThreshold=50000 -XX:Tier4MinInvocationThreshold=6000 "
                       "-XX:Tier4CompileThreshold=150000 -XX:Tier4BackEdgeThreshold=400000")
#: Further JVM options of the Spark drivers the plugin starts (a local session, the shared
#: Spark Connect server), after its own: what ``KAFKA_OPTS`` is to Kafka's scripts.
JAVA_OPTS_ENV = "KAFKA_MIRROR_SPARK_JAVA_OPTS"
#: The C1 compiler alone: what a local session's driver starts with (``quick`` in
#: :func:`driver_java_options`).  C2's compilations are most of the CPU a cold driver spends
#: on its first small verifications, and on 2 cores they compete with the clusters and the
#: run: the first test of a session 6.6-7.5 -> 5.7 s, a warm one 2.9-3.1 -> 2.4-2.8 s, a
#: first 2,000-record verification 4.7 -> 3.3 s (docs/performance.md, "JVM start costs").
#: Large captures are where C2 pays: 1M records 5.6-6.3 -> 8.3-11.4 s with C1 (warm), 3M
#: 13.5 -> 28.5 s, 10M 31.7 -> 81.6 s; so a
#: verification of :data:`LARGE_CAPTURE_RECORDS` or more runs in a driver with C2 (a
#: session's local driver started with C1 is restarted for it, once: see
#: ``spark.get_spark``).  Options in ``$KAFKA_MIRROR_SPARK_JAVA_OPTS`` that choose the
#: compilers (``TieredStopAtLevel``, ``TieredCompilation``) are the user's choice: then
#: neither happens.
QUICK_JIT = "-XX:TieredStopAtLevel=1"
#: Captured records from which a verification runs in a driver with C2 (:data:`QUICK_JIT`).
#: A JVM's first verification of a large capture costs about the same either way (1M
#: records 12.6 s with C1 against 11.5-14.9 s with C2; 3M 28.8 against 21.5 s), but every
#: later one is much faster with C2 (warm 1M 5.6-6.3 s against 8.3-11.4 s), and the
#: restart (3-4 s) is a third or less of such a verification: so from half a million on.
LARGE_CAPTURE_RECORDS = 500_000


def user_chose_jit() -> bool:
    """Whether ``$KAFKA_MIRROR_SPARK_JAVA_OPTS`` chooses the JIT compilers itself."""
    return any("TieredStopAtLevel" in o or "TieredCompilation" in o for o in os.environ.get(JAVA_OPTS_ENV, "").split())


def driver_java_options(quick: bool = False) -> str:
    """:data:`DRIVER_JAVA_OPTIONS`, :data:`QUICK_JIT` when ``quick`` (unless the user's
    options choose the compilers), the driver's class-data archive when one was prepared
    (:func:`spark_archive_options`), then those of ``$KAFKA_MIRROR_SPARK_JAVA_OPTS`` (which
    may name an archive of their own: then they alone do)."""
    extra = os.environ.get(JAVA_OPTS_ENV, "").split()
    own = any(o.startswith(("-XX:SharedArchiveFile", "-XX:ArchiveClassesAtExit")) for o in extra)
    jit = (QUICK_JIT,) if quick and not user_chose_jit() else ()
    return " ".join([DRIVER_JAVA_OPTIONS, *jit, *(() if own else spark_archive_options()), *extra])


#: the class-data sharing archive of the Spark drivers the plugin starts (processes/jvm_cds.py)
SPARK_ARCHIVE = "spark-driver"


def spark_java() -> str:
    """The ``java`` Spark's launcher runs: ``$JAVA_HOME/bin/java``, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    if home:
        return os.path.join(home, "bin", "java")
    return shutil.which("java") or "java"


def spark_archive_options() -> tuple[str, ...]:
    """The options that start a Spark driver from its archive, once ``kafka-mirror spark
    prepare`` wrote one for this Java and this pyspark's jars; none before."""
    home = _spark_home()
    return () if home is None else use_only(SPARK_ARCHIVE, spark_java(), [home / "jars"])

#: Classes of generated code a driver keeps compiled (Spark's static
#: ``spark.sql.codegen.cache.maxEntries``; default 100).  The code a verification generates
#: is the same from one run to the next, but a 1M-record verification alone compiles some
#: 120 classes, so with the default every verification compiled them all again (and the JIT
#: started over on them).  Measured, one JVM, repeated 1M-record runs: 8.7-8.9 s and ~115
#: compilations each -> 5.0-6.7 s and none after the first.
CODEGEN_CACHE_ENTRIES = 2000

_LOCAL_MASTER = re.compile(r"^local(?:\[(?P<n>\*|\d+)(?:,\s*\d+)?\])?$")


def _local_cores(master: str) -> int | None:
    """Cores of a ``local``, ``local[N]``, ``local[*]`` or ``local[N,F]`` master; None otherwise."""
    m = _LOCAL_MASTER.match(master.strip())
    if m is None:
        return None
    n = m.group("n")
    if n is None:
        return 1
    if n == "*":
        return os.cpu_count() or 1
    return max(int(n), 1)


def session_conf(master: str) -> dict[str, str]:
    """The Spark settings of every driver the plugin starts: the local session of
    :func:`~.session.get_spark` and the Connect server's."""
    conf = {
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.catalogImplementation": "in-memory",
        "spark.dynamicAllocation.enabled": "false",
        "spark.sql.codegen.cache.maxEntries": str(CODEGEN_CACHE_ENTRIES),
    }
    cores = _local_cores(master)
    if cores is not None:
        # One shuffle partition per core: every task runs at once and none waits on a
        # scheduler round trip.  Clusters keep Spark's defaults (plus AQE coalescing).
        conf["spark.sql.shuffle.partitions"] = conf["spark.default.parallelism"] = str(cores)
    return conf


def server_conf(master: str) -> dict[str, str]:
    """The server's Spark settings: those :func:`~.session.get_spark` gives a local session,
    and its gRPC listener on loopback."""
    return {
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": "0",  # a free port; the log says which
        **session_conf(master),
    }


class ConnectServer:
    """One Spark Connect server process: ``with ConnectServer(workdir) as server: server.url``."""

    def __init__(self, workdir: str | os.PathLike[str], *, master: str = "local[2]", driver_memory: str = "2g",
                 conf: Mapping[str, str] | None = None) -> None:
        self.workdir = Path(workdir)
        self.master = master
        self.driver_memory = driver_memory
        self.conf = {**server_conf(master), **(conf or {})}
        self.port: int | None = None
        self.process: ManagedProcess | None = None

    @property
    def url(self) -> str:
        if self.port is None:
            raise SparkConnectError("the Spark Connect server is not started")
        return f"sc://127.0.0.1:{self.port}"

    def argv(self, home: Path) -> list[str]:
        log4j = self.workdir / "log4j2.properties"
        argv = [str(home / "bin" / "spark-submit"), "--class", CONNECT_CLASS, "--master", self.master,
                "--name", "pytest-kafka-mirror-connect", "--driver-memory", self.driver_memory,
                "--driver-java-options",
                f"-Dlog4j2.configurationFile=file:{log4j} {driver_java_options()}"]
        for key, value in sorted(self.conf.items()):
            argv += ["--conf", f"{key}={value}"]
        return [*argv, "spark-internal"]

    def start(self, timeout: float = 60.0) -> ConnectServer:
        """Start the server and wait until it answers; on failure nothing is left running."""
        reason = server_unavailable()
        home = _spark_home()
        if reason is not None or home is None:
            raise SparkConnectError(f"cannot start a Spark Connect server: {reason}")
        self.workdir.mkdir(parents=True, exist_ok=True)
        (self.workdir / "log4j2.properties").write_text(_LOG4J)
        env = {k: v for k, v in os.environ.items() if k not in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED")}
        # Loopback only (DESIGN.md); SPARK_CONNECT_MODE=0 as start-connect-server.sh sets it.
        env.update(SPARK_HOME=str(home), SPARK_LOCAL_IP="127.0.0.1", SPARK_CONNECT_MODE="0")
        self.process = ManagedProcess("spark-connect-server", self.argv(home), self.workdir / "server.log",
                                      env=env, cwd=self.workdir)
        try:
            # The log is appended to: a workdir used before holds an earlier server's port.
            start = self.process.log_path.stat().st_size if self.process.log_path.exists() else 0
            self.process.start()
            self.port = self._await_port(self.process, timeout, start)
        except BaseException:
            self.stop()
            raise
        return self

    def _await_port(self, process: ManagedProcess, timeout: float, start: int = 0) -> int:
        def port() -> int | None:
            found = _STARTED.search(_read(process.log_path, start))
            if found is not None and tcp_reachable("127.0.0.1", int(found.group(1))):
                return int(found.group(1))
            if not process.running:
                raise SparkConnectError(f"the Spark Connect server did not start: {process.describe_exit()}")
            return None

        try:
            return wait_until(port, timeout, "the Spark Connect server's port", interval=0.1)
        except TimeoutError:
            tail = process.log_tail(30)
            raise SparkConnectError(
                f"the Spark Connect server did not answer within {timeout:g} s (--kafka-mirror-startup-timeout); "
                f"log {process.log_path}" + (f", last lines:\n{tail}" if tail else " is empty")
                + "\nHint: a loaded machine starts a JVM slowly: raise --kafka-mirror-startup-timeout, or verify "
                  "in each process with --kafka-mirror-spark-master local[2]."
            ) from None

    def stop(self, timeout: float = 15.0) -> None:
        """Stop the server (SIGTERM, then SIGKILL after ``timeout``); idempotent."""
        if self.process is not None:
            self.process.stop(timeout)

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.running

    def __enter__(self) -> ConnectServer:
        return self.start() if not self.running else self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _read(path: Path, start: int = 0) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(start)
            return f.read().decode(errors="replace")
    except OSError:
        return ""


#: In a share directory: the shared server's URL (or its start error), and its own lock.
_ENDPOINT, _LOCK = "spark-connect.json", "spark-connect.lock"


def _locked(path: Path) -> FileLock:
    path.parent.mkdir(parents=True, exist_ok=True)
    return FileLock(path)


def shared_server(share: ShareDir, *, master: str = "local[2]", timeout: float = 60.0,
                  driver_memory: str = "2g") -> str:
    """The URL of the run's one Spark Connect server, starting it if no worker has yet.

    ``share`` is the run's share directory (:func:`~pytest_kafka_mirror.clusters.shared.worker_share_dir`).
    The server outlives the worker that started it and ends with the run (module docstring).
    A start failure is written down too: the other workers fail at once with the same message.
    Its own lock, not the clusters': a worker reading a cluster endpoint does not wait ~10 s
    for a JVM.
    """
    endpoint = share.path / _ENDPOINT
    with _locked(share.path / _LOCK):
        if endpoint.is_file():
            data: dict[str, Any] = json.loads(endpoint.read_text())
            if "error" in data:
                raise SparkConnectError(f"the run's shared Spark Connect server failed to start: {data['error']}")
            return str(data["url"])
        server = ConnectServer(share.path / "spark-connect", master=master, driver_memory=driver_memory)
        try:
            with detached(share.controller_pid, share.registry):
                server.start(timeout)
        except Exception as exc:
            endpoint.write_text(json.dumps({"error": str(exc)}))
            raise
        assert server.process is not None
        endpoint.write_text(json.dumps({
            "url": server.url, "master": master, "supervisor_pid": server.process.pid,
            "log": str(server.process.log_path), "started_by": os.environ.get("PYTEST_XDIST_WORKER", "master"),
        }))
        return server.url
