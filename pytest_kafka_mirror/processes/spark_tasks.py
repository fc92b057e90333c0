"""Children as tasks of a Spark application: the ``spark`` engine (``--kafka-mirror-engine spark``).

The local engine starts the capture's processes and a producer group's processes on this
host (:class:`~.managed.ManagedProcess`).  The ``spark`` engine starts the same commands
(``python -m pytest_kafka_mirror.capture.process …``, ``… produce.group DIR I``) on the
executors of the session's Spark application, wherever its master places them:

* a batch of children (a capture's M processes, a produce() call's N producers) is one
  **barrier stage** of N tasks (``mapInArrow(..., barrier=True)``): Spark starts every task
  of it at once or none, so no producer waits for a free slot while the others run; a
  batch that needs more task slots than the application has fails at once, saying so,
  instead of Spark's 40 retries of 15 s;
* task I measures its clock against the driver's (:class:`ClockServer`: the request with the
  shortest round trip of eight, as an NTP client picks its sample), starts child I with the
  executor's own Python, waits for it and relays the driver's stop and kill (files);
* a task never raises: how its child ended is its result row, so Spark never retries it
  (a producer run twice would produce its records twice); a task that Spark retries all the
  same (its executor was lost) finds its own earlier start and refuses to run again;
* the driver keeps a :class:`SparkTask` handle per child with the interface the capture and
  the producer group use of a process (``running``, ``returncode``, ``wait``, ``stop``,
  ``kill``, ``log_tail``, ``describe_exit``).  The run directory is their protocol, as it is
  between local processes: it must be one file system for the driver and the executors
  (one host, or a shared path).

Each task's host, executor and clock offset are written to the stage directory
(``task-I.json``, ``done-I.json``) and gathered by :meth:`SparkEngine.tasks` for the run's
``engine.json``.  Imports nothing above :mod:`.processes` (the Spark session is given).
"""

from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

__all__ = ["CLOCK_ROUNDS", "ClockServer", "EngineError", "SparkEngine", "SparkTask", "TaskStage", "measure_clock"]

#: requests per clock measurement: the one with the shortest round trip is kept
CLOCK_ROUNDS = 8
#: the result row of a task: (column, Spark SQL type)
_ROW = (("i", "long"), ("host", "string"), ("executor", "string"), ("pid", "long"), ("rc", "long"),
        ("error", "string"), ("started", "double"), ("ended", "double"), ("offset_ms", "double"),
        ("uncertainty_ms", "double"))
_SCHEMA = ", ".join(f"{name} {type_}" for name, type_ in _ROW)
#: ``KAFKA_MIRROR_ENGINE_FAKE_CLOCK=NAME_PART:SECONDS``: a task whose child's name contains
#: NAME_PART reads its clock SECONDS off (the tests' injected offset)
FAKE_CLOCK_ENV = "KAFKA_MIRROR_ENGINE_FAKE_CLOCK"


class EngineError(RuntimeError):
    """The spark engine cannot run a batch of children (slots, session, a failed stage)."""


# --------------------------------------------------------------------------- clocks
class ClockServer:
    """On the driver: answers each 1-byte request with its clock (``time.time_ns()``, 8 bytes)."""

    def __init__(self, host: str) -> None:
        self.sock = socket.create_server((host, 0))
        self.address = (host, self.sock.getsockname()[1])
        self._thread = threading.Thread(target=self._serve, name="kafka-mirror-clock", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    @staticmethod
    def _answer(conn: socket.socket) -> None:
        with conn:
            try:
                while conn.recv(1):
                    conn.sendall(struct.pack("!q", time.time_ns()))
            except OSError:
                return

    def close(self) -> None:
        self.sock.close()


def measure_clock(address: tuple[str, int], clock: Callable[[], float] = time.time,
                  rounds: int = CLOCK_ROUNDS) -> tuple[float, float]:
    """``(offset, uncertainty)`` in ms of the driver's clock minus ``clock``: the server's
    time against the midpoint of the round trip with the shortest of ``rounds`` requests;
    the uncertainty is half that round trip (the server answered somewhere inside it)."""
    best: tuple[float, float] | None = None
    with socket.create_connection(address, timeout=5) as conn:
        for _ in range(rounds):
            t0 = clock()
            conn.sendall(b"t")
            data = b""
            while len(data) < 8:
                chunk = conn.recv(8 - len(data))
                if not chunk:
                    raise OSError("the driver's clock server closed the connection")
                data += chunk
            t3 = clock()
            server = struct.unpack("!q", data)[0] / 1e9
            sample = ((server - (t0 + t3) / 2) * 1000, (t3 - t0) / 2 * 1000)
            if best is None or sample[1] < best[1]:
                best = sample
    assert best is not None
    return best


def _fake_clock(name: str) -> Callable[[], float]:
    given = os.environ.get(FAKE_CLOCK_ENV, "")
    part, _, seconds = given.rpartition(":")
    if part and part in name:
        off = float(seconds)
        return lambda: time.time() + off
    return time.time


# --------------------------------------------------------------------------- executor side
def _run_task(spec: dict[str, Any], i: int, attempt: int, executor: str = "") -> dict[str, Any]:
    """Task ``i`` on its executor (``executor``: its id or address): the clock, child ``i``'s
    command, how it ended (never raises).  With a run store, the task works in a copy of the
    run directory of its own, kept in step with the store (processes/store.py)."""
    row: dict[str, Any] = {"i": i, "host": socket.gethostname(), "executor": executor,
                           "pid": -1, "rc": -1, "error": "", "started": time.time(), "ended": 0.0,
                           "offset_ms": 0.0, "uncertainty_ms": 0.0}
    mirror = None
    stage = Path(spec["dir"])
    try:
        if spec.get("store"):
            mirror, spec = _task_copy(spec)
            stage = Path(spec["dir"])
        _run_child(spec, i, attempt, stage, row)
    except BaseException as exc:  # noqa: BLE001 - the row says it; a raising task would be retried
        row["error"] = row["error"] or f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=4)}"
    finally:
        row["ended"] = time.time()
        if mirror is None:
            _write(stage / f"done-{i}.json", row)
        else:
            _close_copy(mirror, row, stage / f"done-{i}.json")
    return row


def _task_copy(spec: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """The run directory pulled into a new directory of this executor, kept in step with the
    store from now on, and ``spec`` with the driver's paths of it replaced by this copy's."""
    import tempfile

    from .store import DirMirror

    root, uri = spec["store"]["root"], spec["store"]["uri"]
    local = tempfile.mkdtemp(prefix="kafka-mirror-task-")
    mirror = DirMirror(local, uri)
    mirror.sync()  # the run as the driver left it: the specs, the manifests so far
    mirror.start()

    def here(text: str) -> str:
        return local + text[len(root):] if text == root or text.startswith(root + "/") else text

    children = [{**c, "argv": [here(a) for a in c["argv"]], "log": here(c["log"])} for c in spec["children"]]
    return mirror, {**spec, "dir": here(spec["dir"]), "children": children, "copy": local}


def _close_copy(mirror: Any, row: dict[str, Any], done: Path) -> None:
    """The last push of the child's files, then ``done`` (``done-I.json``) pushed after them
    (whoever sees it in the store finds every file the child wrote there), then the copy removed."""
    import shutil

    try:
        try:
            mirror.close()
        except Exception as exc:  # noqa: BLE001 - the result row says it
            row["error"] = (row["error"] + "; " if row["error"] else "") + str(exc)
        _write(done, row)
        try:
            mirror.flush()
        except Exception as exc:  # noqa: BLE001 - the Spark row says it
            row["error"] = (row["error"] + "; " if row["error"] else "") + str(exc)
    finally:
        shutil.rmtree(mirror.local, ignore_errors=True)


def _run_child(spec: dict[str, Any], i: int, attempt: int, stage: Path, row: dict[str, Any]) -> None:
    """Start child ``i`` (once: a retried task refuses), wait for it, measure the clock."""
    child = spec["children"][i]
    started = stage / f"task-{i}.json"
    if attempt > 0 or started.exists():
        first = _read(started) or {}
        where = f" on {first.get('host')} (executor {first.get('executor')})" if first else ""
        row["error"] = (f"its first attempt{where} ended without a result (its executor lost?), and Spark ran it "
                        f"again (attempt {attempt}): {child['name']} is not started twice (a producer would "
                        "produce its records twice)")
        return
    try:
        import confluent_kafka  # noqa: F401 - what every child needs, checked before it starts

        from .managed import ManagedProcess
    except ImportError as exc:
        row["error"] = (f"the executor on {row['host']} lacks {exc.name or exc}: ({exc}); ship the plugin's Python "
                        "environment with the application (spark.archives, docs/running.md)")
        return
    clock = _fake_clock(child["name"])
    row["offset_ms"], row["uncertainty_ms"] = measure_clock(tuple(spec["clock"]), clock)
    argv = [sys.executable, *child["argv"][1:]]  # the executor's Python, not the driver's path
    proc = ManagedProcess(child["name"], argv, child["log"]).start()
    row["pid"] = proc.pid or -1
    _write(started, {**{k: row[k] for k in ("host", "executor", "pid", "started", "offset_ms", "uncertainty_ms")},
                     "copy": spec.get("copy", "")})  # its copy of the run directory, with a run store
    row["rc"] = _follow(proc, stage, i)
    if row["rc"] != 0:
        row["error"] = proc.describe_exit()
    end_offset, end_uncertainty = measure_clock(tuple(spec["clock"]), clock)
    if abs(end_offset) > abs(row["offset_ms"]):
        row["offset_ms"], row["uncertainty_ms"] = end_offset, end_uncertainty


def _follow(proc: Any, stage: Path, i: int) -> int:
    """Wait for the child, relaying the driver's ``stop-I`` (SIGTERM, then SIGKILL after the
    timeout it gives) and ``kill-I`` files."""
    while proc.running:
        if (stage / f"kill-{i}").exists():
            proc.kill()
        elif (stage / f"stop-{i}").exists():
            proc.stop(timeout=float((stage / f"stop-{i}").read_text() or 10))
        time.sleep(0.05)
    rc = proc.returncode
    return -1 if rc is None else int(rc)


def _write(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


def _stage_function(spec: dict[str, Any]) -> Callable[[Iterator[Any]], Iterator[Any]]:
    def run(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa
        from pyspark import BarrierTaskContext

        for _ in batches:
            pass
        ctx = BarrierTaskContext.get()
        ctx.barrier()  # every task of the batch started: none waits for a slot
        i = ctx.partitionId()
        row = _run_task(spec, i, ctx.attemptNumber(), _executor_id() or ctx.getTaskInfos()[i].address)
        yield pa.RecordBatch.from_pylist([row], schema=_arrow_schema())
    return run


def _executor_id() -> str:
    """The id of the executor this Python worker serves (``--executor-id`` of the
    ``CoarseGrainedExecutorBackend`` JVM above it), ``driver`` in local mode (the
    ``SparkSubmit`` JVM), ``""`` when neither is found."""
    import psutil

    try:
        proc = psutil.Process().parent()
        while proc is not None:
            cmdline = proc.cmdline()
            if any("CoarseGrainedExecutorBackend" in a for a in cmdline) and "--executor-id" in cmdline:
                return str(cmdline[cmdline.index("--executor-id") + 1])
            if any("SparkSubmit" in a for a in cmdline):
                return "driver"
            proc = proc.parent()
    except (psutil.Error, IndexError):
        pass
    return ""


def _arrow_schema() -> Any:
    import pyarrow as pa

    arrow = {"long": pa.int64(), "string": pa.string(), "double": pa.float64()}
    return pa.schema([(name, arrow[type_]) for name, type_ in _ROW])


# --------------------------------------------------------------------------- driver side
class SparkTask:
    """The driver's handle of child ``i`` of a :class:`TaskStage` (a process's interface)."""

    def __init__(self, stage: TaskStage, i: int, name: str, log_path: Path) -> None:
        self.stage, self.i, self.name, self.log_path = stage, i, name, log_path
        self._pulled = False

    def _done(self) -> dict[str, Any] | None:
        done = _read(self.stage.dir / f"done-{self.i}.json")
        if done is not None and self.stage.mirror is not None and not self._pulled:
            # with a run store, done-I.json reached the store after every file the child
            # wrote: one more round brings those here before anyone reads them
            self.stage.mirror.flush()
            self._pulled = True
        return done

    def info(self) -> dict[str, Any]:
        """Where it ran: host, executor, pid, clock offset (ms) and its uncertainty."""
        return _read(self.stage.dir / f"task-{self.i}.json") or {}

    def start(self) -> SparkTask:
        return self

    @property
    def pid(self) -> int | None:
        return self.info().get("pid")

    @property
    def running(self) -> bool:
        return self._done() is None and self.stage.error is None

    @property
    def returncode(self) -> int | None:
        done = self._done()
        if done is not None:
            return int(done["rc"])
        return -1 if self.stage.error is not None else None

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.running:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(self.name, timeout or 0.0)
            time.sleep(0.05)
        return int(self.returncode if self.returncode is not None else -1)

    def stop(self, timeout: float = 5.0, sig: int = 15) -> int | None:
        """The child's SIGTERM on its host, SIGKILL after ``timeout``."""
        if self.running:
            (self.stage.dir / f"stop-{self.i}").write_text(str(timeout))
            try:
                self.wait(timeout + 5.0)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.returncode

    def kill(self) -> int | None:
        if self.running:
            (self.stage.dir / f"kill-{self.i}").touch()
            try:
                self.wait(10.0)
            except subprocess.TimeoutExpired:
                self.stage.cancel(f"{self.name} did not end 10 s after its kill")
        return self.returncode

    def log_tail(self, lines: int = 30) -> str:
        from .managed import log_tail

        return log_tail(self.log_path, lines)

    def describe_exit(self) -> str:
        done = self._done()
        where = self.info()
        at = f" on {where.get('host') or (done or {}).get('host', '?')}"
        if where.get("executor"):
            at += f" (executor {where['executor']})"
        if done is None and self.stage.error is not None:
            return f"the Spark task of {self.name}{at} failed: {self.stage.error}"
        if done is None:
            return f"{self.name}{at} still runs"
        if done.get("error") and done.get("pid", -1) < 0:
            return f"{self.name}{at} did not start: {done['error'].strip().splitlines()[0]}"
        return f"{self.name}{at} exited with code {done['rc']}: {(done.get('error') or '').strip()[:2000]}"

    def __repr__(self) -> str:
        return f"SparkTask({self.name!r}, stage {self.stage.dir.name})"


def _read(path: Path) -> dict[str, Any] | None:
    try:
        return dict(json.loads(path.read_text()))
    except (OSError, ValueError):
        return None


class TaskStage:
    """One batch of children as one barrier stage (see the module docstring)."""

    def __init__(self, spark: Any, directory: Path, children: Sequence[tuple[str, Sequence[str], Path]],
                 clock: ClockServer, *, startup_timeout: float = 120.0, mirror: Any = None,
                 held: Sequence[str] = ()) -> None:
        self.spark = spark
        #: the driver's DirMirror of the run directory (processes/store.py), None: no run store
        self.mirror = mirror
        #: the children of this engine's other stages still running: each holds a task slot
        self.held = list(held)
        self.handles: list[SparkTask] = []
        self.dir = directory
        self.children = [(name, list(argv), Path(log)) for name, argv, log in children]
        self.clock = clock
        self.startup_timeout = startup_timeout
        self.group = f"kafka-mirror-{directory.name}-{os.getpid()}-{id(self)}"
        #: why the stage failed (Spark's own words), None while it runs or once it ended well
        self.error: str | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> list[SparkTask]:
        n = len(self.children)
        slots = _slots(self.spark)
        if n > slots - len(self.held):
            held = (f" ({len(self.held)} of them held by {', '.join(self.held)}, still running)" if self.held else "")
            raise EngineError(
                f"the spark engine runs {', '.join(name for name, _, _ in self.children)} as one barrier stage of {n} "
                f"tasks, and the Spark application has {slots} task slots{held}: give it more executors or cores "
                "(--kafka-mirror-spark-master local[N] or a cluster), or fewer processes")
        self.dir.mkdir(parents=True, exist_ok=True)
        spec = {"dir": str(self.dir), "clock": list(self.clock.address),
                "children": [{"name": name, "argv": argv, "log": str(log)} for name, argv, log in self.children]}
        if self.mirror is not None:
            spec["store"] = {"root": str(self.mirror.local), "uri": self.mirror.uri}
        _write(self.dir / "spec.json", spec)
        if self.mirror is not None:
            self.mirror.flush()  # the tasks start from the run as it is now (the producers' spec, ...)
        df = self.spark.range(0, n, numPartitions=n).mapInArrow(_stage_function(spec), _SCHEMA, barrier=True)
        self._thread = threading.Thread(target=self._collect, args=(df,), name=f"kafka-mirror-{self.dir.name}",
                                        daemon=True)
        self._thread.start()
        handles = [SparkTask(self, i, name, log) for i, (name, _, log) in enumerate(self.children)]
        self.handles = handles
        self._await_started(handles)
        return handles

    def _collect(self, df: Any) -> None:
        sc = self.spark.sparkContext
        sc.setJobGroup(self.group, f"kafka-mirror: {', '.join(name for name, _, _ in self.children)}",
                       interruptOnCancel=True)
        try:
            df.collect()  # how each task ended is in its done-I.json
        except Exception as exc:  # noqa: BLE001 - the handles report it
            self.error = _spark_reason(exc)

    def _await_started(self, handles: Sequence[SparkTask]) -> None:
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.error is not None:
                raise EngineError(f"the Spark stage of {', '.join(h.name for h in handles)} failed: {self.error}")
            if all((self.dir / f"task-{h.i}.json").exists() or h._done() is not None for h in handles):
                return
            time.sleep(0.05)
        self.cancel("not started in time")
        raise EngineError(f"the Spark tasks of {', '.join(h.name for h in handles)} did not start within "
                          f"{self.startup_timeout:g} s (free task slots, executors registered?)")

    def cancel(self, why: str) -> None:
        """Cancel the stage's job (its Python workers and their children die with it)."""
        if self.error is None and self._thread is not None and self._thread.is_alive():
            self.spark.sparkContext.cancelJobGroup(self.group)
            self._thread.join(30)
            self.error = self.error or f"cancelled: {why}"


def _slots(spark: Any) -> int:
    """Task slots of the application: its default parallelism (local[N]: N; a cluster: its
    executors' cores, once they registered)."""
    return int(spark.sparkContext.defaultParallelism)


def _spark_reason(exc: BaseException) -> str:
    """The lines of a failed job that say why (the task, the host, the executor's loss)."""
    text = str(exc)
    lines = [line.strip().lstrip(": ") for line in text.splitlines()
             if line.strip() and not line.strip().startswith("at ")]
    keep = [line for line in lines if any(w in line for w in ("Lost", "lost", "failure", "Exception", "exited"))]
    return " | ".join((keep or lines)[:4])[:1500]


class SparkEngine:
    """The ``spark`` engine of one session: its Spark application (``get_spark``, called at
    the first batch) and the driver's clock server.  ``launcher(directory)`` is what the
    capture and the producer group take in place of starting processes here."""

    def __init__(self, get_spark: Callable[[], Any]) -> None:
        self._get_spark = get_spark
        self._clock: ClockServer | None = None
        self.stages: list[TaskStage] = []

    def _spark(self) -> Any:
        spark = self._get_spark()
        if not hasattr(spark, "sparkContext") or type(spark).__module__.startswith("pyspark.sql.connect"):
            raise EngineError("the spark engine needs a Spark application of its own (--kafka-mirror-spark-master, "
                              "e.g. local[4] or spark://HOST:PORT), not a Spark Connect server")
        return spark

    def launcher(self, directory: Path, *, mirror: Any = None
                 ) -> Callable[[Sequence[tuple[str, Sequence[str], Path]]], list[Any]]:
        """What starts a batch of children of the run in ``directory`` (``mirror``: its
        DirMirror when the run is kept in a run store)."""
        def launch(children: Sequence[tuple[str, Sequence[str], Path]]) -> list[Any]:
            spark = self._spark()
            if self._clock is None:
                host = str(spark.sparkContext.getConf().get("spark.driver.host", "127.0.0.1"))
                self._clock = ClockServer(host)
            held = [h.name for stage in self.stages for h in stage.handles if h.running]
            stage = TaskStage(spark, directory / f"tasks-{len(self.stages)}", children, self._clock, mirror=mirror,
                              held=held)
            self.stages.append(stage)
            return stage.start()
        return launch

    def tasks(self, under: Path | None = None) -> list[dict[str, Any]]:
        """Every task so far (of the stages in directory ``under``): its child's name, host,
        executor, pid, exit code and clock."""
        out = []
        for stage in self.stages:
            if under is not None and Path(under) not in stage.dir.parents:
                continue
            for i, (name, _, _) in enumerate(stage.children):
                done = _read(stage.dir / f"done-{i}.json") or {}
                started = _read(stage.dir / f"task-{i}.json") or {}
                out.append({"name": name, **{k: v for k, v in {**started, **done}.items() if k != "i"},
                            "stage": stage.dir.name})
        return out

    def close(self) -> None:
        for stage in self.stages:
            stage.cancel("the session ended")
        if self._clock is not None:
            self._clock.close()
            self._clock = None
