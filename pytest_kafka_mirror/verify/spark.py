"""One SparkSession per process, tuned for verifying test runs.

The verifier runs inside pytest, usually in local mode on a CI machine with a couple of
cores.  Spark's defaults are made for clusters: 200 shuffle partitions, a web UI on port
4040, console progress bars, INFO logging.  Each of those costs seconds or clutters test
output, so :func:`get_spark` switches them off, the way pytest-spark's defaults do.

Starting a JVM takes several seconds, so the session is created once and cached for the
life of the process; every verification in a test session shares it.

A master ``sc://HOST:PORT`` gives a Spark Connect session instead: a gRPC client of a
server that runs the job (``connect.py`` starts one for the xdist workers of a run to
share).  No JVM starts in this process then.  pyspark's DataFrame functions pick their
implementation from a process-wide switch (``SPARK_CONNECT_MODE_ENABLED``), so a process
holds one kind of session at a time: asking for the other kind while one runs is a
:class:`SparkSessionConflictError`, as is asking for another master.

pyspark is imported inside the functions only: ``pytest_kafka_mirror.verify`` is imported
by the plugin module, which pytest imports on every run (even ``pytest --help`` in an
unrelated project), and importing pyspark there would be slow for no reason.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .connect import LARGE_CAPTURE_RECORDS, driver_java_options, log4j_properties, session_conf, user_chose_jit

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from ..clusters.shared import ShareDir

__all__ = ["ProcessSpark", "SparkSessionConflictError", "SparkStartError", "get_spark", "stop_spark"]

log = logging.getLogger("pytest_kafka_mirror")

_lock = threading.Lock()
_session: SparkSession | None = None
#: ``_session`` is a Spark Connect session that a request for a local one may stop.
_replaceable = False
#: The gateway JVM :func:`get_spark` launched (``spark-submit``, exec'd into ``java``).
_jvm: subprocess.Popen[bytes] | None = None
#: ``_session`` is our local one, its driver started with the C1 compiler alone
#: (``connect.QUICK_JIT``): a verification of a large capture restarts it with C2.
_quick = False
#: SIGINT's handler before pyspark replaced it with one calling ``cancelAllJobs()`` on a
#: context that is gone after :func:`stop_spark`; put back when the session stops.
_sigint: Any = None


class SparkSessionConflictError(RuntimeError):
    """A SparkSession with another master already runs in this process."""


class SparkStartError(RuntimeError):
    """The local Spark JVM did not start; the message holds the end of its own output."""


def _jvm_dir() -> Path:
    """Where the local JVM's log4j configuration and stderr live (one per process)."""
    return Path(tempfile.gettempdir()) / f"kafka-mirror-spark-{os.getpid()}"


def _jvm_log_size() -> int:
    """How much the JVM's stderr file holds (0: none yet), to read what a start adds to it."""
    try:
        return (_jvm_dir() / "jvm-stderr.log").stat().st_size
    except OSError:
        return 0


def _jvm_said(since: int, lines: int = 12) -> str:
    """The last ``lines`` lines the JVM wrote to its stderr file after offset ``since``."""
    try:
        with open(_jvm_dir() / "jvm-stderr.log", "rb") as log:
            log.seek(since)
            text = log.read().decode(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.strip().splitlines()[-lines:])


@contextlib.contextmanager
def _quiet_jvm_start() -> Iterator[str]:
    """While the local JVM starts: its stderr (the JVM's own warnings, Spark's start-up
    lines) goes to a file it keeps for life (:func:`_jvm_said` reads it), and log4j reads a
    configuration of errors only; yields the ``-Dlog4j2.configurationFile`` option.  py4j's
    INFO lines ("Closing down clientserver connection") are kept from pytest's live log as well."""
    logging.getLogger("py4j").setLevel(logging.WARNING)
    where = _jvm_dir()
    where.mkdir(exist_ok=True)
    (where / "log4j2.properties").write_text(log4j_properties("error"))
    option = f"-Dlog4j2.configurationFile=file:{where / 'log4j2.properties'}"
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (AttributeError, OSError, ValueError):  # no descriptor 2 to take over
        yield option
        return
    log_fd = os.open(where / "jvm-stderr.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(log_fd, 2)  # the JVM inherits it when pyspark starts it
    try:
        yield option
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(log_fd)


def _remove_jvm_dir() -> None:
    """The JVM's files, once it has ended (nothing of a test run stays in $TMP)."""
    import shutil

    shutil.rmtree(_jvm_dir(), ignore_errors=True)


def _is_remote(spark: Any) -> bool:
    return type(spark).__module__.startswith("pyspark.sql.connect")


def _is_alive(spark: SparkSession) -> bool:
    """Whether ``spark`` still has a running SparkContext (someone may have stopped it)."""
    if _is_remote(spark):
        return not getattr(spark, "is_stopped", False)
    from pyspark import SparkContext

    active = SparkContext._active_spark_context
    return active is not None and active is spark.sparkContext


def _check_master(spark: SparkSession, master: str) -> SparkSession:
    running = _remote_url.get(id(spark), "sc://?") if _is_remote(spark) else spark.sparkContext.master
    if running != master:
        raise SparkSessionConflictError(
            f"a SparkSession with master {running!r} already runs in this process, but the "
            f"verifier was asked for master {master!r}; a process can hold only one SparkContext. "
            f"Use the same master everywhere (option --kafka-mirror-spark-master), pass the existing "
            f"session explicitly (verify_run(..., spark=session)), or stop it first (stop_spark())."
        )
    return spark


def get_spark(master: str = "local[2]", *, driver_memory: str = "2g", replaceable: bool = False,
              large: bool = False) -> SparkSession:
    """Return the process-wide SparkSession for ``master``, creating it on first use.

    Settings tuned for tests: no web UI, no progress bars, shuffle partitions and default
    parallelism equal to the local core count (Spark's default of 200 partitions makes
    every small job slow), UTC session time zone, an in-memory catalog (no ``metastore_db``
    or ``spark-warehouse`` left in the working directory), the driver bound to loopback, and
    log level ERROR.

    ``driver_memory`` only takes effect when this call starts the JVM.

    ``master`` ``sc://HOST:PORT`` returns a Spark Connect session with that server instead
    (see the module docstring); the server's own settings apply, and the session's time
    zone is set to UTC.  It raises :class:`~pytest_kafka_mirror.verify.connect.SparkConnectError`
    when nothing answers there.

    Raises :class:`SparkSessionConflictError` if a session with another master is already
    running in the process (ours or one created elsewhere, e.g. by pytest-spark).
    ``replaceable=True`` (Spark Connect only) makes the session give way instead: a later
    call for a local master stops it and starts the local session.  The plugin's default
    shared server is asked for that way, so a test's own local SparkSession (a ``spark``
    fixture) still starts in a worker that verified through the shared server before.

    A local master's driver starts with the C1 compiler alone, the quicker start of a
    session's small verifications (``connect.QUICK_JIT``), unless ``large``: a verification
    of a large capture (``job.large_capture``), which then gets a driver with C2.  A
    session of ours started with C1 is stopped and started again for it, once (its cached
    frames are gone: nothing of the plugin's outlives a verification).
    """
    global _session, _replaceable, _quick
    if large and _quick:
        log.info("kafka-mirror: Spark's driver restarts with the C2 compiler for a capture of %s records or more "
                 "(C1 alone started it quicker, and verifies a large capture 2-3x slower)", f"{LARGE_CAPTURE_RECORDS:,}")
        stop_spark()
    with _lock:
        remote = master.strip().startswith("sc://")
        if _session is not None and _is_alive(_session):
            if not (_replaceable and _is_remote(_session) and not remote):
                return _check_master(_session, master)
            _stop_remote(_session, 15.0)
        _session, _quick = None, False
        if remote:
            _session = _connect(master.strip())
            _replaceable = replaceable
            return _session

        # pyspark's switch to Spark Connect is an environment variable, so a child inherits it
        # from a parent that held a Connect session (an xdist worker verifying through the
        # shared server that runs pytest or `kafka-mirror gate` below it); with it, a local
        # session cannot start ("CONNECT_URL_NOT_SET").  No Connect session of ours runs here.
        os.environ.pop(_CONNECT_MODE, None)
        from pyspark.sql import SparkSession

        existing = SparkSession.getActiveSession()
        if existing is not None and _is_alive(existing):
            # Someone else (a user fixture, pytest-spark) created one: share it rather than
            # fail, since a second SparkContext in one process is impossible anyway.
            _session = _check_master(existing, master)
            return _session

        # Spark resolves the host name to pick its bind address; on CI machines whose name
        # does not resolve, or resolves to a LAN address, that is slow or fails.  Tests stay
        # on loopback (DESIGN.md conventions).
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

        global _jvm, _sigint
        quick = not large and master.strip().startswith("local") and not user_chose_jit()
        main = threading.current_thread() is threading.main_thread()
        previous = signal.getsignal(signal.SIGINT) if main else None
        before, start = _spark_children(), _jvm_log_size()
        try:
            with _quiet_jvm_start() as log4j:
                java_options = f"{log4j} {driver_java_options(quick)}"
                builder = (
                    SparkSession.builder.master(master)
                    .appName("pytest-kafka-mirror-verify")
                    .config("spark.driver.memory", driver_memory)
                    .config("spark.driver.extraJavaOptions", java_options)
                )
                for key, value in session_conf(master).items():
                    builder = builder.config(key, value)
                spark = builder.getOrCreate()
            spark.sparkContext.setLogLevel("ERROR")
        except BaseException as exc:
            # A Ctrl-C (or a failure) while the JVM starts: pyspark may hold no handle on it
            # yet, and it would live on until this process exits and a few seconds after.
            _kill(_spark_children() - before)
            _forget_gateway()
            if previous is not None:
                signal.signal(signal.SIGINT, previous)
            said = _jvm_said(start)
            _remove_jvm_dir()
            if isinstance(exc, Exception) and said:  # a Ctrl-C stays a KeyboardInterrupt
                raise SparkStartError(f"the Spark JVM (master {master}, driver memory {driver_memory}) did not "
                                      f"start; it said:\n{said}") from None
            raise
        _session, _quick = spark, quick
        _jvm = _gateway_proc()
        if previous is not None:
            _sigint = previous
        if _jvm is not None:
            from ..processes.managed import register_cleanup

            register_cleanup(_kill_jvm)  # at exit and on SIGTERM, whatever state py4j is in
        return spark


def stop_spark(jvm_timeout: float = 15.0) -> None:
    """Stop the session created by :func:`get_spark`, if any (idempotent), and its JVM.

    ``SparkSession.stop()`` leaves the py4j gateway JVM running until the Python process
    exits, and it outlives the process by a moment even then.  A test run must leave no
    process behind, so the gateway is shut down and its JVM waited for (killed after
    ``jvm_timeout`` seconds).  A later :func:`get_spark` starts a new JVM.

    The stop is bounded: after a Ctrl-C in the middle of a Spark call the py4j connection
    is in an unknown state and ``stop()`` may never return, so it runs on a thread of its
    own, and the JVM is killed if it has not ended within ``jvm_timeout`` (or if this call
    is interrupted itself).

    A Spark Connect session is closed on the server (its cached frames released); no JVM
    of this process is involved, the server runs on until its owner stops it.
    """
    global _session, _jvm, _sigint
    with _lock:
        if _session is not None and _is_remote(_session):
            session, _session = _session, None
            _stop_remote(session, jvm_timeout)
            return
        if _sigint is not None:
            # From here on, Ctrl-C is pytest's again (KeyboardInterrupt), not a py4j call.
            if threading.current_thread() is threading.main_thread():
                signal.signal(signal.SIGINT, _sigint)
            _sigint = None
        if _session is None:
            return
        session, _session, _quick = _session, None, False
        jvm, _jvm = _jvm, None
        try:
            stopper = threading.Thread(target=_stop_quietly, args=(session,), name="kafka-mirror-spark-stop",
                                       daemon=True)
            stopper.start()
            stopper.join(jvm_timeout)
            if stopper.is_alive():  # py4j hangs: end the JVM, then drop pyspark's handles on it
                if jvm is not None:
                    _kill({jvm.pid}, jvm)
                _forget_gateway()
            else:
                _shutdown_gateway(jvm_timeout)  # waits for the JVM to exit
        finally:
            if jvm is not None and jvm.poll() is None:
                _kill({jvm.pid}, jvm)
            _remove_jvm_dir()


#: URL of each Spark Connect session :func:`_connect` made (a session does not say its own).
_remote_url: dict[int, str] = {}
#: Set while a Spark Connect session of ours runs: pyspark's switch to its Connect classes.
_CONNECT_MODE = "SPARK_CONNECT_MODE_ENABLED"
#: pyspark.sql.connect modules behind what the job calls (functions, Window, DataFrame...).
_CONNECT_MODULES = ("session", "functions", "window", "dataframe", "column", "group", "readwriter", "conf",
                    "expressions", "plan", "types")


_GRPC_FORK_SUPPORT = "GRPC_ENABLE_FORK_SUPPORT"


def _connect(url: str) -> SparkSession:
    """A Spark Connect session with the server at ``url``, checked to answer (bounded)."""
    from ..processes.managed import tcp_reachable
    from .connect import SparkConnectError, client_missing, parse_connect_url

    host, port, _ = parse_connect_url(url)
    if local_session_running():
        raise SparkSessionConflictError(
            f"a local SparkSession already runs in this process, but the verifier was asked for the Spark Connect "
            f"server {url}; a process holds one kind of session at a time (pyspark's switch is process-wide). Stop "
            f"it first (stop_spark()), or use one way of verifying (--kafka-mirror-spark-remote or "
            f"--kafka-mirror-spark-master) for the whole session."
        )
    # The client's own retries take minutes to give up on an address nobody listens on.
    if not tcp_reachable(host, port, timeout=5.0):
        raise SparkConnectError(f"the Spark Connect server {url} does not answer (nothing accepts connections on "
                                f"{host}:{port}); check --kafka-mirror-spark-remote and that the server runs")
    missing = client_missing()
    if missing:
        raise SparkConnectError(f"cannot verify through {url}: the Spark Connect client needs {', '.join(missing)} "
                                f"(pip install 'pyspark[connect]')")
    os.environ[_CONNECT_MODE] = "1"  # as pyspark's builder.remote() does: F.col & co. build Connect columns
    # gRPC's fork handlers (grpcio >= 1.80, grpc/grpc#43055) restart its poller thread in a
    # child forked while a channel is busy; subprocess then closes the poller's epoll fd
    # before exec and the child aborts (SIGABRT: "epoll_wait error: Bad file descriptor").
    # This process starts brokers, replicators and captures with a preexec_fn, so it forks:
    # 6 of 300 such starts failed with the handlers on, none with them off.  Read by gRPC
    # when it initialises, so set before the client is imported; a value given is kept.
    os.environ.setdefault(_GRPC_FORK_SUPPORT, "false")
    try:
        with warnings.catch_warnings():
            # pyspark 4 warns on import that it "does not yet fully support pandas >= 3.0.0": the
            # job hands no pandas objects to Spark, and a test run with -W error must not fail on it.
            # Each Connect module checks its dependencies (and warns) when first imported: all
            # that the job uses are imported here, under this filter.
            warnings.filterwarnings("ignore", message=".*does not yet fully support pandas", category=FutureWarning)
            import importlib

            for module in _CONNECT_MODULES:
                importlib.import_module(f"pyspark.sql.connect.{module}")
            from pyspark.sql.connect.session import SparkSession as RemoteSparkSession

            spark = RemoteSparkSession.builder.remote(url).create()
            spark.conf.set("spark.sql.session.timeZone", "UTC")  # also answers: the server speaks
    except BaseException as exc:
        os.environ.pop(_CONNECT_MODE, None)
        if isinstance(exc, Exception) and not isinstance(exc, SparkConnectError):
            raise SparkConnectError(f"the Spark Connect server {url} did not accept a session: {exc}") from exc
        raise
    _remote_url[id(spark)] = url
    return spark


def quick_jit() -> bool:
    """Whether the session :func:`get_spark` started here runs a driver with the C1 compiler
    alone (``connect.QUICK_JIT``)."""
    return _quick


def session_running() -> bool:
    """Whether a SparkSession runs in this process: :func:`get_spark`'s (local or Spark
    Connect) or anyone's classic one.  A caller that found one running leaves it to its
    owner instead of stopping it (``stop_spark`` stops the process-wide session)."""
    with _lock:
        if _session is not None and _is_alive(_session):
            return True
    return local_session_running()


def local_session_running() -> bool:
    """Whether a classic (py4j) SparkSession runs in this process, ours or anyone's."""
    import sys

    if "pyspark" not in sys.modules:
        return False
    from pyspark import SparkContext

    return SparkContext._active_spark_context is not None


def running_local_session() -> SparkSession | None:
    """The classic SparkSession running in this process, whatever its master, or None."""
    if not local_session_running():
        return None
    with _lock:
        if _session is not None and not _is_remote(_session) and _is_alive(_session):
            return _session
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession() or SparkSession._instantiatedSession
    return active if active is not None and _is_alive(active) else None


def _stop_remote(session: SparkSession, timeout: float) -> None:
    """End a Spark Connect session (the server releases it) on a thread, bounded: a
    Ctrl-C in the middle of a call leaves the gRPC channel in an unknown state."""
    stopper = threading.Thread(target=_stop_quietly, args=(session,), name="kafka-mirror-spark-stop", daemon=True)
    stopper.start()
    stopper.join(timeout)
    _remote_url.pop(id(session), None)
    os.environ.pop(_CONNECT_MODE, None)


def _stop_quietly(session: SparkSession) -> None:
    try:
        session.stop()
    except Exception:
        pass


def _gateway_proc() -> subprocess.Popen[bytes] | None:
    from pyspark import SparkContext

    return getattr(SparkContext._gateway, "proc", None)


def _forget_gateway() -> None:
    """Drop pyspark's handles on a gateway that is being killed, so a later
    :func:`get_spark` launches a new JVM instead of calling a dead one."""
    try:
        from pyspark import SparkContext
    except ImportError:
        return
    gateway = SparkContext._gateway
    SparkContext._active_spark_context = None
    SparkContext._gateway = None
    SparkContext._jvm = None
    if gateway is not None:
        try:
            gateway.close()  # the Python side only: sockets and callback server
        except Exception:
            pass


def _kill_jvm() -> None:
    """Last resort (at exit, on SIGTERM): the JVM :func:`get_spark` launched, if it still runs."""
    jvm = _jvm
    if jvm is not None and jvm.poll() is None:
        _kill({jvm.pid}, jvm)
    if jvm is not None:
        _remove_jvm_dir()


def _spark_children() -> set[int]:
    """Pids of this process's children that run ``spark-submit`` (the py4j gateway JVM)."""
    import psutil

    found = set()
    for child in psutil.Process().children():
        try:
            cmdline = " ".join(child.cmdline())
        except psutil.Error:  # gone, or not ours to read
            continue
        if "spark-submit" in cmdline or "org.apache.spark.deploy.SparkSubmit" in cmdline:
            found.add(child.pid)
    return found


def _kill(pids: set[int], proc: subprocess.Popen[bytes] | None = None) -> None:
    """SIGKILL ``pids`` (children of this process) and reap them."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            continue
        try:
            if proc is not None and proc.pid == pid:
                proc.wait(5)
            else:
                os.waitpid(pid, 0)
        except (ChildProcessError, subprocess.TimeoutExpired):
            pass


def _shutdown_gateway(timeout: float) -> None:
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    if gateway is None or SparkContext._active_spark_context is not None:
        return  # not started, or someone else's context still uses it
    proc = getattr(gateway, "proc", None)  # set by pyspark's launch_gateway
    SparkContext._gateway = None
    SparkContext._jvm = None
    try:
        gateway.shutdown()
    except Exception:
        pass
    if proc is None:
        return
    try:
        if proc.stdin is not None:
            proc.stdin.close()  # the gateway server exits when its stdin closes
        proc.wait(timeout)
    except Exception:
        proc.kill()
        proc.wait(5)


class ProcessSpark:
    """The SparkSession a pytest process verifies with, chosen from its settings.

    :meth:`plan` says which kind, :meth:`get` starts it on first use (or finds it running),
    :meth:`stop` stops it at the end when this object started it.  ``master_given``: the
    user chose ``master`` (``--kafka-mirror-spark-master``), so xdist workers do not share
    a Spark Connect server; ``startup_timeout`` bounds the shared server's start.
    """

    def __init__(self, master: str, *, remote: str | None = None, master_given: bool = False,
                 startup_timeout: float = 60.0) -> None:
        self.master = master
        self.remote = remote
        self.master_given = master_given
        self.startup_timeout = startup_timeout
        #: the session :meth:`get` returned last (None before, and after :meth:`stop`)
        self.session: SparkSession | None = None
        #: whether :meth:`get` started ``session`` (stopped at the end) or found it running (left alone)
        self._owns = False
        #: the thread of :meth:`prestart`, while it starts the session
        self._starting: threading.Thread | None = None

    def plan(self, distributed: bool) -> tuple[str, str]:
        """How this process verifies: ``(kind, where)``, kind one of

        * ``"remote"``: the Spark Connect server ``--kafka-mirror-spark-remote`` names (where = its URL);
        * ``"shared"``: one Spark Connect server for the run, started by the first xdist worker
          that verifies (where = the master it runs): the default under xdist;
        * ``"local"``: a SparkSession in each process (where = the master): the default
          outside xdist, whenever ``--kafka-mirror-spark-master`` is given, and when this
          machine cannot run Spark Connect (the reason is logged).

        ``distributed``: the session is an xdist run (worker or controller).
        """
        if self.remote is not None:
            return "remote", self.remote
        if not distributed or self.master_given:
            return "local", self.master
        from .connect import server_unavailable

        reason = server_unavailable()
        if reason is not None:
            log.info("kafka-mirror: each xdist worker runs its own Spark (%s)", reason)
            return "local", self.master
        return "shared", self.master

    def describe(self, distributed: bool) -> str:
        """For the report header: where verification runs."""
        kind, where = self.plan(distributed)
        return {"remote": f"{where} (Spark Connect)", "shared": f"{where} in one shared Spark Connect server",
                "local": where}[kind]

    def get(self, share: ShareDir | None, large: bool = False) -> SparkSession:
        """The session for verification, per :meth:`plan`; ``share``: an xdist worker's share
        directory (where the run's shared Spark Connect server is found), None elsewhere.
        An early start (:meth:`prestart`) still under way is waited for.  ``large``: for
        the verification of a large capture (:func:`get_spark`: a local driver started with
        the C1 compiler is restarted with C2)."""
        starting = self._starting
        if starting is not None and starting is not threading.current_thread():
            starting.join()
        if self.session is not None and not getattr(self.session, "is_stopped", False) and not (
                large and self._owns and quick_jit()):
            return self.session
        kind, where = self.plan(share is not None)
        running = running_local_session()
        if kind == "shared" and running is not None:
            # A local SparkSession already runs here (a test's own ``spark`` fixture, pytest-spark):
            # pyspark cannot hold it and a Spark Connect session in one process, so share it,
            # whatever its master (none was asked for).
            self.session, self._owns = running, False
            return running
        if kind == "shared" and share is not None:
            from .connect import shared_server

            where = shared_server(share, master=where, timeout=self.startup_timeout)
        self.session = get_spark(where, replaceable=kind == "shared", large=large)
        self._owns = self.session is not running
        return self.session

    def prestart(self, share: ShareDir | None) -> None:
        """Start the session (:meth:`get`) on a thread of its own, once: a run that will be
        verified calls it when it begins, so that the JVM starts while the run produces
        instead of after it (3-7 s on a 2-core machine).  A start that fails here fails
        again, and is reported, in the :meth:`get` of the verification."""
        if self.session is not None or self._starting is not None:
            return

        def start() -> None:
            t0 = time.monotonic()
            try:
                self.get(share)
                log.debug("kafka-mirror: the Spark session started in %.1f s", time.monotonic() - t0)
            except BaseException as exc:  # noqa: BLE001 - the verification's own get() reports it
                log.debug("kafka-mirror: the Spark session's early start failed (the verification retries): %s", exc)

        self._starting = threading.Thread(target=start, name="kafka-mirror-spark-start", daemon=True)
        self._starting.start()

    def stop(self) -> None:
        """Stop the session :meth:`get` started (its JVM too), after an early start
        (:meth:`prestart`) has ended; one it found running (a test's own ``spark`` fixture,
        an outer pytest session in the same process) is its owner's to stop: stopping it here
        killed that owner's JVM under its feet."""
        if self._starting is not None:
            self._starting.join(max(60.0, self.startup_timeout))
            self._starting = None
        if self.session is not None and self._owns:
            stop_spark()
        self.session = None
