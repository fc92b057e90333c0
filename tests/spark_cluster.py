"""A real Spark standalone cluster on this host: one master and one worker (or ``workers=N``), from pyspark's
own ``spark-class`` (no Spark download), bound to 127.0.0.1 on free ports.

Both JVMs run as :class:`~pytest_kafka_mirror.processes.managed.ManagedProcess` (own process group,
killed with the test process); the worker starts executors as its children, in its
process group, so stopping the group leaves no JVM behind.  Executors read the run
directory's Parquet files by path: the cluster shares this host's file system.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from types import TracebackType

from pytest_kafka_mirror.clusters.base import free_port
from pytest_kafka_mirror.processes.managed import ManagedProcess, wait_until

__all__ = ["StandaloneSpark", "spark_class"]


def spark_class() -> Path:
    import pyspark

    path = Path(pyspark.__file__).parent / "bin" / "spark-class"
    if not os.access(path, os.X_OK):
        raise FileNotFoundError(f"pyspark ships no executable {path}")
    return path


def spark_env() -> dict[str, str]:
    """Environment of the cluster's JVMs and of any driver that uses it."""
    import pyspark

    env = dict(os.environ)
    env.update(
        SPARK_HOME=str(Path(pyspark.__file__).parent),
        SPARK_LOCAL_IP="127.0.0.1",
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_DRIVER_PYTHON=sys.executable,
    )
    return env


class StandaloneSpark:
    """``with StandaloneSpark(workdir) as cluster: ... cluster.master_url ...``"""

    def __init__(self, workdir: Path, *, cores: int = 2, memory: str = "1g", startup_timeout: float = 90.0,
                 workers: int = 1) -> None:
        self.workdir = workdir
        self.cores = cores
        self.workers_wanted = workers
        #: every worker's JVM (``worker``: the first)
        self.workers: list[ManagedProcess] = []
        self.memory = memory
        self.startup_timeout = startup_timeout
        self.port = free_port()
        self.master_url = f"spark://127.0.0.1:{self.port}"
        self.master: ManagedProcess | None = None
        self.worker: ManagedProcess | None = None

    def start(self) -> StandaloneSpark:
        if shutil.which("java") is None:
            raise FileNotFoundError("java is not on PATH: a Spark cluster needs Java 17")
        self.workdir.mkdir(parents=True, exist_ok=True)
        env = spark_env()
        cls = str(spark_class())
        self.master = ManagedProcess(
            "spark master",
            [cls, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(self.port),
             "--webui-port", str(free_port())],
            self.workdir / "master.log", env=env, cwd=self.workdir,
        ).start()
        try:
            self._wait_log(self.master, "I have been elected leader")
            for w in range(self.workers_wanted):
                suffix = "" if w == 0 else f"-{w}"
                worker = ManagedProcess(
                    f"spark worker{suffix}",
                    [cls, "org.apache.spark.deploy.worker.Worker", self.master_url, "--host", "127.0.0.1",
                     "--port", str(free_port()), "--webui-port", str(free_port()), "--cores", str(self.cores),
                     "--memory", self.memory, "--work-dir", str(self.workdir / f"work{suffix}")],
                    self.workdir / f"worker{suffix}.log", env=env, cwd=self.workdir,
                ).start()
                self.workers.append(worker)
                self.worker = self.workers[0]
                self._wait_log(worker, "Successfully registered with master")
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_log(self, proc: ManagedProcess, line: str) -> None:
        def ready() -> bool:
            if not proc.running:
                raise RuntimeError(f"the {proc.name} exited during start-up: {proc.describe_exit()}")
            try:
                return line in proc.log_path.read_text(errors="replace")
            except OSError:
                return False

        wait_until(ready, self.startup_timeout, f"the {proc.name} to log {line!r}", interval=0.1,
                   on_timeout=lambda: f"\n{proc.log_tail()}")

    def stop(self) -> None:
        for proc in (*reversed(self.workers), self.master):
            if proc is not None:
                proc.stop(timeout=15.0)

    def __enter__(self) -> StandaloneSpark:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
