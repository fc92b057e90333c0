"""``reference``: the built-in consume/produce mirror, run as its own process."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from .._process import ManagedProcess, wait_until
from .base import NamingPolicy, ReplicatorError

__all__ = ["ReferenceReplicator"]


class ReferenceReplicator:
    """Controls one reference-mirror process between two clusters.

    ``topics`` is a regex over source topic names; topics created later that match it are
    discovered within ``discovery_interval`` seconds.
    """

    def __init__(
        self,
        source_bootstrap: str,
        target_bootstrap: str,
        workdir: str | os.PathLike[str],
        *,
        topics: str,
        naming: NamingPolicy | None = None,
        startup_timeout: float = 30.0,
        discovery_interval: float = 0.25,
        warmup_topic: str = "kafka-mirror-warmup",
    ) -> None:
        self.spec = "reference"
        self.source_bootstrap = source_bootstrap
        self.target_bootstrap = target_bootstrap
        self.workdir = Path(workdir)
        self.topics = topics
        self.naming = naming or NamingPolicy()
        self.startup_timeout = startup_timeout
        self.discovery_interval = discovery_interval
        self.warmup_topic = warmup_topic
        self.process: ManagedProcess | None = None
        self.starts = 0

    def target_topic(self, source_topic: str) -> str:
        return self.naming.target(source_topic)

    def start(self) -> None:
        if self.process is not None and self.process.running:
            raise ReplicatorError("the reference mirror is already running")
        self.workdir.mkdir(parents=True, exist_ok=True)
        ready = self.workdir / f"reference-mirror.ready.{self.starts}"
        ready.unlink(missing_ok=True)
        argv = [
            sys.executable, "-m", "pytest_kafka_mirror.replicators._reference_main",
            "--source", self.source_bootstrap,
            "--target", self.target_bootstrap,
            "--topics", self.topics,
            "--prefix", self.naming.prefix,
            "--discovery-interval", str(self.discovery_interval),
            "--ready-file", str(ready),
            "--warmup-topic", self.warmup_topic,
        ]
        proc = ManagedProcess("reference mirror", argv, self.workdir / "reference-mirror.log")
        self.process = proc.start()
        self.starts += 1
        t0 = time.monotonic()
        try:
            wait_until(
                lambda: ready.exists() or not proc.running,
                self.startup_timeout,
                "the reference mirror to report ready",
                on_timeout=lambda: f"\nlast log lines:\n{proc.log_tail()}",
            )
        except TimeoutError as exc:
            proc.kill()
            raise ReplicatorError(str(exc)) from None
        if not proc.running:
            raise ReplicatorError(f"the reference mirror exited during start-up: {proc.describe_exit()}")
        self.startup_seconds = time.monotonic() - t0

    def _proc(self, verb: str) -> ManagedProcess:
        if self.process is None:
            raise ReplicatorError(f"cannot {verb} the reference mirror: it was never started")
        return self.process

    def stop(self) -> None:
        """SIGTERM: the mirror flushes what it has consumed and exits."""
        if self.process is not None:
            self.process.stop(timeout=15.0)

    def kill(self) -> None:
        """SIGKILL: whatever was consumed but not yet produced is lost to this process."""
        if self.process is not None:
            self.process.kill()

    def pause(self) -> None:
        self._proc("pause").pause()

    def resume(self) -> None:
        self._proc("resume").resume()

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.running

    def logs(self, lines: int = 50) -> str:
        return self.process.log_tail(lines) if self.process else ""

    def describe(self) -> str:
        state = f"pid {self.process.pid}" if self.running and self.process else "stopped"
        return f"reference mirror {self.source_bootstrap} -> {self.target_bootstrap} ({self.naming}; {state})"

    def __enter__(self) -> ReferenceReplicator:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
