"""``kafka-home:PATH``: single-node KRaft Apache Kafka from an unpacked distribution.

Start = render ``server.properties`` into the work dir (combined broker + controller,
listeners on free loopback ports, log dir in the work dir, internal topics with
replication factor 1), ``bin/kafka-storage.sh format``, ``bin/kafka-server-start.sh``,
then wait until the broker answers metadata.  Stop = SIGTERM (controlled shutdown),
SIGKILL after ``stop_timeout``.

The KRaft quorum is configured the way the distribution's own quickstart does it:

* Kafka >= 3.9 (KIP-853): ``controller.quorum.bootstrap.servers`` and
  ``kafka-storage.sh format --standalone`` (a dynamic quorum of one);
* older 3.x: a static ``controller.quorum.voters`` and a plain ``format``.

Both formats pass ``--ignore-formatted`` so a restart into the same log dir keeps the data.
The version comes from the ``libs/kafka-clients-X.Y.Z.jar`` (or ``kafka_2.13-X.Y.Z.jar``)
file name; an unknown version is treated as current.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

from ..processes.managed import ManagedProcess
from .base import Capabilities, ClusterError, RunnerClusterMixin, free_port, kraft_cluster_id

__all__ = ["KafkaHomeCluster", "check_kafka_home", "kafka_version", "render_server_properties", "storage_format_argv"]

_JAR = re.compile(r"^kafka(?:-clients|_[0-9.]+)-(\d+)\.(\d+)\.(\d+)(?:[.-].*)?\.jar$")
DYNAMIC_QUORUM_SINCE = (3, 9)


def check_kafka_home(path: str | os.PathLike[str], *, script: str = "kafka-server-start.sh") -> Path:
    """``path`` as a Path if it is an unpacked Kafka distribution (has ``bin/SCRIPT``), else ValueError."""
    home = Path(path).expanduser()
    if not home.is_dir():
        raise ValueError(f"{str(path)!r} is not a directory (expected an unpacked Apache Kafka distribution)")
    if not (home / "bin" / script).is_file():
        raise ValueError(f"{str(path)!r} has no bin/{script}: not an unpacked Apache Kafka distribution")
    return home.resolve()


def kafka_version(home: str | os.PathLike[str]) -> tuple[int, int, int] | None:
    """The distribution's version from its jar names, or None when it cannot be told."""
    libs = Path(home) / "libs"
    try:
        names = sorted(p.name for p in libs.iterdir())
    except OSError:
        return None
    for name in names:
        m = _JAR.match(name)
        if m:
            return int(m.group(1)), int(m.group(2)), int(m.group(3))
    return None


def _dynamic_quorum(version: tuple[int, int, int] | None) -> bool:
    return version is None or version[:2] >= DYNAMIC_QUORUM_SINCE


def render_server_properties(
    *,
    node_id: int,
    port: int,
    controller_port: int,
    log_dir: str | os.PathLike[str],
    version: tuple[int, int, int] | None,
    extra: dict[str, str] | None = None,
) -> str:
    """The ``server.properties`` of a single-node combined broker + controller on 127.0.0.1."""
    props: dict[str, str] = {
        "node.id": str(node_id),
        "process.roles": "broker,controller",
        "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
    }
    if _dynamic_quorum(version):
        props["controller.quorum.bootstrap.servers"] = f"127.0.0.1:{controller_port}"
    else:
        props["controller.quorum.voters"] = f"{node_id}@127.0.0.1:{controller_port}"
    props.update({
        "log.dirs": str(log_dir),
        "num.partitions": "1",
        "offsets.topic.replication.factor": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        "group.initial.rebalance.delay.ms": "0",
        "auto.create.topics.enable": "false",
    })
    props.update(extra or {})
    lines = ["# rendered by pytest-kafka-mirror (kafka-home backend): single-node KRaft on loopback"]
    lines += [f"{k}={v}" for k, v in props.items()]
    return "\n".join(lines) + "\n"


def storage_format_argv(
    home: str | os.PathLike[str], cluster_id: str, properties: str | os.PathLike[str], version: tuple[int, int, int] | None
) -> list[str]:
    argv = [str(Path(home) / "bin" / "kafka-storage.sh"), "format", "-t", cluster_id, "-c", str(properties)]
    if _dynamic_quorum(version):
        argv.append("--standalone")
    argv.append("--ignore-formatted")
    return argv


class KafkaHomeCluster(RunnerClusterMixin):
    """A single-node KRaft Kafka run from ``home``; its logs and data live in ``workdir``."""

    def __init__(
        self,
        name: str,
        home: str | os.PathLike[str],
        workdir: str | os.PathLike[str],
        *,
        startup_timeout: float = 120.0,
        stop_timeout: float = 30.0,
        heap: str = "-Xmx512M -Xms256M",
    ) -> None:
        self.name = name
        self.home = check_kafka_home(home)
        self.spec = f"kafka-home:{self.home}"
        self.workdir = Path(workdir) / name
        self.startup_timeout = startup_timeout
        self.stop_timeout = stop_timeout
        self.heap = heap
        self.version = kafka_version(self.home)
        self.cluster_id = kraft_cluster_id()
        self.port: int | None = None
        self.controller_port: int | None = None
        self.runner: ManagedProcess | None = None
        self.properties = self.workdir / "server.properties"
        self.log_dir = self.workdir / "data"
        self._caps: Capabilities | None = None

    @property
    def bootstrap_servers(self) -> str:
        if self.port is None:
            raise ClusterError(f"{self.name} is not started")
        return f"127.0.0.1:{self.port}"

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.setdefault("KAFKA_HEAP_OPTS", self.heap)
        env["LOG_DIR"] = str(self.workdir / "logs")  # kafka-run-class.sh writes server.log etc. there
        return env

    def _format(self) -> None:
        argv = storage_format_argv(self.home, self.cluster_id, self.properties, self.version)
        try:
            out = subprocess.run(
                argv, capture_output=True, text=True, timeout=120, env=self._env(), stdin=subprocess.DEVNULL, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ClusterError(f"{self.name}: {' '.join(argv)} failed: {exc}") from None
        (self.workdir / "format.log").write_text(out.stdout + out.stderr)
        if out.returncode != 0:
            raise ClusterError(
                f"{self.name}: formatting the log dir failed (exit {out.returncode}): {' '.join(argv)}\n"
                f"{(out.stdout + out.stderr)[-2000:]}"
            )

    def start(self) -> None:
        """Render, format (first start only) and start; returns when metadata answers."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        if self.port is None:  # first start; a restart keeps ports and data
            self.port, self.controller_port = free_port(), free_port()
            self.properties.write_text(render_server_properties(
                node_id=1, port=self.port, controller_port=self.controller_port, log_dir=self.log_dir, version=self.version
            ))
            self._format()
        proc = ManagedProcess(
            f"{self.name} (kafka {self.home.name} :{self.port})",
            [str(self.home / "bin" / "kafka-server-start.sh"), str(self.properties)],
            self.workdir / "kafka-server-start.log",
            env=self._env(),
            cwd=self.workdir,
        )
        proc.start()
        self.runner = proc
        self._admin = None
        deadline = time.monotonic() + self.startup_timeout
        while True:
            if not proc.running:
                proc.stop()
                self._admin = None
                raise ClusterError(f"{self.name}: Kafka exited during start-up: {proc.describe_exit()}")
            left = deadline - time.monotonic()
            try:
                if self.ping(timeout=max(0.5, min(3.0, left))) > 0:
                    return
            except ClusterError as exc:
                if time.monotonic() >= deadline:
                    proc.stop(self.stop_timeout)
                    self._admin = None
                    raise ClusterError(
                        f"{exc}; Kafka from {self.home} did not answer metadata within {self.startup_timeout:g} s. "
                        f"Last log lines:\n{proc.log_tail()}"
                    ) from None
            time.sleep(0.2)

    @property
    def process(self) -> ManagedProcess | None:
        return self.runner

    def restart(self) -> None:
        """Stop and start on the same ports and log dir: the data survives."""
        self.stop()
        self.start()

    def capabilities(self) -> Capabilities:
        if self._caps is None:
            from ._probe import probe_capabilities

            self._caps = probe_capabilities(
                self,
                delete_records=True,
                declared={"restart_keeps_data": (True, "the log dir is on disk in the work dir and reused by restart()")},
                lifecycle=True,
            )
        return self._caps

    def describe(self) -> str:
        v = ".".join(map(str, self.version)) if self.version else "unknown version"
        state = f"pid {self.process.pid}" if self.process and self.process.running else "stopped"
        return f"{self.name}: Kafka {v} from {self.home} at {self.bootstrap_servers if self.port else '-'} ({state})"
