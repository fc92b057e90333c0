"""Child processes that never outlive the test run.

Every broker, replicator and capture the plugin starts goes through :class:`ManagedProcess`:

* it runs in its own process group, so a stop reaches its children too;
* on Linux it gets ``PR_SET_PDEATHSIG = SIGKILL``, so it dies with the pytest process even
  when that process is killed with SIGKILL (teardown code cannot run then);
* every live process is registered and killed by an ``atexit`` hook and on SIGTERM, the
  belt to the fixtures' braces (fixture teardown already runs on failure and Ctrl-C);
* its output goes to a log file whose tail is quoted in error messages;
* it imports this package from where this process did (:func:`child_env`).
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import queue
import signal
import site
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

__all__ = ["ManagedProcess", "ProcessFailed", "child_env", "detached", "live_processes", "register_cleanup", "tcp_reachable", "wait_until"]

T = TypeVar("T")

_PR_SET_PDEATHSIG = 1
_live: dict[int, ManagedProcess] = {}
_lock = threading.Lock()
#: (watched pid, file listing supervisor pids) while inside ``detached()``; see there.
_detach: tuple[int, Path] | None = None


@contextlib.contextmanager
def detached(watch_pid: int, registry: Path) -> Iterator[None]:
    """Processes started inside outlive this process and end with ``watch_pid``.

    Used for clusters shared by the xdist workers of a run: the worker that starts them
    must not take them down when it exits.  Each process is started under
    ``pytest_kafka_mirror.processes.supervise`` (which ends it when ``watch_pid``, the xdist
    controller, is gone), is not killed by this process's exit hooks, and the
    supervisor's pid is appended to ``registry`` so the controller can stop it at the end
    of the run (:func:`.cleanup.stop_registered`).
    """
    global _detach
    with _lock:
        previous, _detach = _detach, (watch_pid, registry)
    try:
        yield
    finally:
        with _lock:
            _detach = previous


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child of ours (not reaped yet) is dead for our purposes.
    import psutil

    try:
        zombie = psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
    if zombie:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        return False
    return True
_cleanups: list[Callable[[], None]] = []


class ProcessFailed(RuntimeError):
    """A managed process exited early or did not become ready."""


def _pdeathsig() -> None:  # runs in the child between fork and exec
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError:
        pass


_spawner: tuple[threading.Thread, queue.Queue[Any]] | None = None


def _spawner_loop(q: queue.Queue[Any]) -> None:
    while True:
        fn, box, done = q.get()
        try:
            box.append((True, fn()))
        except BaseException as exc:
            box.append((False, exc))
        done.set()


def _spawn(fn: Callable[[], subprocess.Popen[bytes]]) -> subprocess.Popen[bytes]:
    """Run ``fn`` (a Popen) on a thread that lives as long as the process.

    PR_SET_PDEATHSIG fires when the *thread* that forked the child ends, not the process:
    a replicator restarted by a fault from the fault-schedule thread would be SIGKILLed
    as soon as that thread finished.  The main thread outlives every child; other threads
    hand the fork to one long-lived spawner thread.
    """
    global _spawner
    if threading.current_thread() is threading.main_thread():
        return fn()
    with _lock:
        if _spawner is None or not _spawner[0].is_alive():
            q: queue.Queue[Any] = queue.Queue()
            t = threading.Thread(target=_spawner_loop, args=(q,), name="kafka-mirror-spawner", daemon=True)
            t.start()
            _spawner = (t, q)
        q = _spawner[1]
    box: list[tuple[bool, Any]] = []
    done = threading.Event()
    q.put((fn, box, done))
    done.wait()
    ok, value = box[0]
    if not ok:
        raise value
    return value  # type: ignore[no-any-return]


def live_processes() -> list[ManagedProcess]:
    """Processes started by this Python process and not yet reaped (for orphan checks)."""
    with _lock:
        return [p for p in _live.values() if p.running]


def wait_until(
    predicate: Callable[[], T | None],
    timeout: float,
    what: str,
    *,
    interval: float = 0.05,
    on_timeout: Callable[[], str] | None = None,
    pause: Callable[[float], object] = time.sleep,
) -> T:
    """Call ``predicate`` until it returns something true, and return that; after ``timeout``
    seconds raise ``TimeoutError("timed out after T s waiting for WHAT")`` with the text of
    ``on_timeout()`` appended (what was seen last: the predicate's closure can keep it).

    The predicate is called at once, then after each ``interval``, and once more after the
    deadline passed, before the error.  An exception it raises ends the wait (say, the awaited process
    exited).  ``pause(interval)`` spends the interval: ``time.sleep``, or a Kafka client's
    ``poll``, which serves the client's callbacks meanwhile.  For a wait that may end
    unfulfilled (a best effort before going on), catch the ``TimeoutError``.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            extra = on_timeout() if on_timeout else ""
            raise TimeoutError(f"timed out after {timeout:g} s waiting for {what}{extra}")
        pause(interval)


#: what marks an error line in a process's log (log4j levels, Java exceptions, Python tracebacks)
ERROR_MARKERS = (" ERROR ", "Exception:", "Error:", "Traceback (most recent call last)")


#: the directory this package was imported from (a checkout, or site-packages)
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])


def child_env(env: dict[str, str] | None) -> dict[str, str] | None:
    """``env`` (else this process's environment) with this package's root first on ``PYTHONPATH``.

    The plugin's Python children (``python -m pytest_kafka_mirror.…`` in their own work
    directories) must run the code this process runs.  Imported from a checkout (an editable
    install, or ``python -m pytest`` from the checkout beside an installed copy), a child
    would otherwise import whatever the interpreter finds, an older installed copy or nothing
    (an editable install moved away: ``No module named 'pytest_kafka_mirror'``).  Imported
    from site-packages, the interpreter finds it anyway: ``env`` is returned as it is.
    """
    installed = {str(Path(p).resolve()) for p in [*site.getsitepackages(), site.getusersitepackages()]}
    if _PACKAGE_ROOT in installed:
        return env
    env = dict(os.environ if env is None else env)
    rest = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != _PACKAGE_ROOT]
    env["PYTHONPATH"] = os.pathsep.join([_PACKAGE_ROOT, *rest])
    return env


class ManagedProcess:
    """A subprocess with a name, a log file and a guaranteed end."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        log_path: str | os.PathLike[str],
        *,
        env: dict[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        stop_signal: int = signal.SIGTERM,
    ) -> None:
        self.name = name
        #: the signal :meth:`stop` sends by default, and a supervisor of a detached one
        #: (Tansu exits at once on SIGINT, and waits for its clients on SIGTERM)
        self.stop_signal = stop_signal
        self.argv = list(argv)
        self.log_path = Path(log_path)
        self.env = env
        self.cwd = cwd
        self.proc: subprocess.Popen[bytes] | None = None
        self.paused = False
        #: when the last start() happened (epoch seconds; 0: never)
        self.started_at = 0.0

    # -- lifecycle -------------------------------------------------------------------
    def start(self) -> ManagedProcess:
        if self.running:
            raise RuntimeError(f"{self.name} is already running (pid {self.pid})")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        detach = _detach
        argv = self.argv
        if detach is not None:
            argv = [sys.executable, "-m", "pytest_kafka_mirror.processes.supervise", "--watch", str(detach[0]),
                    "--stop-signal", str(int(self.stop_signal)), "--", *argv]
        log = open(self.log_path, "ab")
        self.started_at = time.time()
        try:
            self.proc = _spawn(
                lambda: subprocess.Popen(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=child_env(self.env),
                    cwd=self.cwd,
                    start_new_session=True,
                    preexec_fn=_pdeathsig if sys.platform.startswith("linux") and detach is None else None,
                )
            )
        except OSError as exc:
            raise ProcessFailed(f"cannot start {self.name}: {exc} (command: {' '.join(self.argv)})") from exc
        finally:
            log.close()
        self.paused = False
        if detach is not None:
            with open(detach[1], "a") as reg:
                reg.write(f"{self.proc.pid}\n")
        else:
            with _lock:
                _live[self.proc.pid] = self
        return self

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def returncode(self) -> int | None:
        return self.proc.poll() if self.proc else None

    def _signal_group(self, sig: int) -> None:
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, sig)
        except ProcessLookupError:
            pass
        except PermissionError:  # pragma: no cover - group gone and pid reused
            self.proc.send_signal(sig)

    def send_signal(self, sig: int) -> None:
        """Send ``sig`` to the whole process group (no-op when not started or gone)."""
        self._signal_group(sig)

    def stop(self, timeout: float = 5.0, sig: int | None = None) -> int | None:
        """``sig`` (default: its :attr:`stop_signal`, SIGTERM unless given), wait up to
        ``timeout``, then SIGKILL.  Idempotent; returns the exit code."""
        if self.proc is None:
            return None
        if sig is None:
            sig = self.stop_signal
        if self.proc.poll() is None:
            if self.paused:
                self._signal_group(signal.SIGCONT)
            self._signal_group(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self._signal_group(signal.SIGKILL)
                self.proc.wait(10)
        self._reap()
        return self.proc.returncode

    def kill(self) -> int | None:
        """SIGKILL the whole process group and reap it."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self._signal_group(signal.SIGKILL)
            self.proc.wait(10)
        self._reap()
        return self.proc.returncode

    def pause(self) -> None:
        """SIGSTOP: the process keeps its sockets but does nothing (a GC pause, a hung VM)."""
        self._require_running("pause")
        self._signal_group(signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        self._require_running("resume")
        self._signal_group(signal.SIGCONT)
        self.paused = False

    def wait(self, timeout: float | None = None) -> int:
        if self.proc is None:
            raise RuntimeError(f"{self.name} was never started")
        rc = self.proc.wait(timeout)
        self._reap()
        return rc

    def _require_running(self, verb: str) -> None:
        if not self.running:
            raise ProcessFailed(f"cannot {verb} {self.name}: it is not running (exit code {self.returncode})")

    def _reap(self) -> None:
        with _lock:
            if self.proc is not None:
                _live.pop(self.proc.pid, None)

    # -- diagnostics -----------------------------------------------------------------
    def log_tail(self, lines: int = 30) -> str:
        return log_tail(self.log_path, lines)

    def first_error(self, markers: Sequence[str] = ERROR_MARKERS) -> str:
        """The first line of the log holding one of ``markers`` ('' when none): a JVM that
        fails early goes on logging its shutdown, which buries the cause under the tail."""
        try:
            with open(self.log_path, "rb") as f:
                for raw in f:
                    line = raw.decode(errors="replace").rstrip()
                    if any(m in line for m in markers):
                        cause = next(f, b"").decode(errors="replace").strip()  # log4j: the exception follows
                        if "Exception" in cause or "Error" in cause:
                            line = f"{line} | {cause}"
                        return line[:500]
        except OSError:
            pass
        return ""

    def describe_exit(self) -> str:
        tail = self.log_tail()
        first = self.first_error()
        return (
            f"{self.name} (pid {self.pid}) exited with code {self.returncode}; log {self.log_path}"
            + (f"; its first error: {first}" if first and first not in tail else "")
            + (f", last lines:\n{tail}" if tail else " is empty")
        )

    def __enter__(self) -> ManagedProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.running else f"exited {self.returncode}"
        return f"<ManagedProcess {self.name} pid={self.pid} {state}>"


def log_tail(path: Path, lines: int = 30) -> str:
    """The last ``lines`` lines of a log file (of its last 16 KiB; '' when unreadable)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 16384))
            data = f.read().decode(errors="replace")
    except OSError:
        return ""
    return "\n".join(data.splitlines()[-lines:])


#: What starts a batch of children: ``[(name, argv, log path), ...]`` -> their handles
#: (started).  :func:`launch_local` here; the ``spark`` engine's runs them as Spark tasks
#: (:meth:`.spark_tasks.SparkEngine.launcher`), with the same handle interface.
Launcher = Callable[[Sequence[tuple[str, Sequence[str], Path]]], list[Any]]


def launch_local(children: Sequence[tuple[str, Sequence[str], Path]]) -> list[Any]:
    """The local engine: each child a :class:`ManagedProcess` on this host, started in
    order (one that cannot start stops those started before it)."""
    started: list[ManagedProcess] = []
    try:
        for name, argv, log in children:
            started.append(ManagedProcess(name, argv, log).start())
    except BaseException:
        for proc in started:
            proc.kill()
        raise
    return started


def register_cleanup(fn: Callable[[], None]) -> None:
    """Run ``fn`` with the last-resort kill (at exit and on SIGTERM): containers use it."""
    if fn not in _cleanups:
        _cleanups.append(fn)


def _kill_all() -> None:
    for p in list(_live.values()):
        try:
            p.kill()
        except Exception:
            pass
    for fn in list(_cleanups):
        try:
            fn()
        except Exception:
            pass


atexit.register(_kill_all)


def _install_sigterm_handler() -> None:
    # A CI runner that times out sends SIGTERM; Python's default would exit without
    # running atexit.  Only install when nobody else handles SIGTERM.
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return

    def handler(signum: int, frame: object) -> None:
        _kill_all()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)

    signal.signal(signal.SIGTERM, handler)


_install_sigterm_handler()


def tcp_reachable(host: str, port: int, timeout: float = 0.2) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False
