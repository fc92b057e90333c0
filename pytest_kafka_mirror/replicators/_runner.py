"""The lifecycle every replicator backend with a process or container shares.

A backend builds a *runner* (:class:`~.._process.ManagedProcess` or
:class:`~.._docker.ManagedContainer`, which have the same verbs) in ``_launch()``; this
base gives it the uniform verbs of the Replicator protocol and readiness by a probe
record (see ``_probe``).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._probe import WARM_UP_RECORDS, ensure_probe_topic, probe_topic_name, wait_replicating, warm_up
from .base import NamingPolicy, ReplicatorBase, ReplicatorError

if TYPE_CHECKING:
    from ..clusters.base import Cluster

__all__ = ["RunnerReplicator"]


class RunnerReplicator(ReplicatorBase):
    """Start = ``_launch()`` + wait until a probe record is copied; stop / kill / pause /
    resume / logs act on the runner.  Subclasses set ``spec``, ``label`` and ``_launch``."""

    label: str = "replicator"
    warm_up_records: int = WARM_UP_RECORDS  # the burst through the probe topic (``_probe.warm_up``)

    def __init__(
        self,
        source: Cluster,
        target: Cluster,
        workdir: str | os.PathLike[str],
        *,
        topic_prefix: str,
        naming: NamingPolicy,
        startup_timeout: float,
        stop_timeout: float = 30.0,
    ) -> None:
        self.source = source
        self.target = target
        self.workdir = Path(workdir)
        self.topic_prefix = topic_prefix
        self.naming = naming
        self.startup_timeout = startup_timeout
        self.stop_timeout = stop_timeout
        self.runner: Any = None
        self.starts = 0
        #: one probe topic for every start: a restart is proven on a topic it already mirrors
        self.probe_topic: str = probe_topic_name(topic_prefix)

    def target_topic(self, source_topic: str) -> str:
        return self.naming.target(source_topic)

    def _launch(self) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def start(self) -> None:
        if self.running:
            raise ReplicatorError(f"{self.label} is already running")
        self.workdir.mkdir(parents=True, exist_ok=True)
        t0 = time.monotonic()
        ensure_probe_topic(self.source.bootstrap_servers, self.probe_topic)
        runner = self._launch()
        self.runner = runner
        self.starts += 1
        try:
            self._await_copying(runner)
            # the start-up a restart repeats (scenarios size their runs by it): without the burst
            self.startup_seconds = time.monotonic() - t0
            if self.starts == 1 and self.warm_up_records:
                warm_up(self.source.bootstrap_servers, self.target.bootstrap_servers, self.probe_topic,
                        self.target_topic(self.probe_topic), count=self.warm_up_records)
        except BaseException:
            runner.kill()
            raise

    def _await_copying(self, runner: Any) -> None:
        """Until ``runner`` copies the probe record (a start, a recovery); its exit, its log
        and :meth:`status` quoted when it does not in time."""
        wait_replicating(
            self.source.bootstrap_servers,
            self.target.bootstrap_servers,
            self.probe_topic,
            self.target_topic(self.probe_topic),
            timeout=self.startup_timeout,
            what=self.label,
            alive=lambda: bool(runner.running),
            describe_exit=runner.describe_exit,
            logs=lambda: str(runner.log_tail(40)),
            status=self.status,
            create=False,
            replicator=self,
        )

    def status(self) -> str:
        """What the replicator says about itself (MirrorMaker 2: its connectors and tasks);
        quoted when it does not copy in time.  '' when it has no such thing."""
        return ""

    def health(self) -> str:
        """'' while it runs as it should; else what is wrong: it exited (with its log's
        last lines), or (MirrorMaker 2) a connector or task of this process FAILED.  The
        plugin asks after every test on the shared replicator (and restarts a broken one)."""
        runner = self.runner
        if runner is None or self.paused:
            return ""
        if not runner.running:
            return f"it is not running: {runner.describe_exit()}"
        return ""

    def _runner(self, verb: str) -> Any:
        if self.runner is None:
            raise ReplicatorError(f"cannot {verb} {self.label}: it was never started")
        return self.runner

    def stop(self) -> None:
        """SIGTERM (graceful), SIGKILL after ``stop_timeout``."""
        if self.runner is not None:
            self.runner.stop(timeout=self.stop_timeout)

    def kill(self) -> None:
        """SIGKILL: whatever it consumed but did not produce is lost to it."""
        if self.runner is not None:
            self.runner.kill()

    def pause(self) -> None:
        """SIGSTOP (a container: the cgroup freezer): it keeps its connections and does nothing."""
        self._runner("pause").pause()

    def resume(self) -> None:
        self._runner("resume").resume()

    @property
    def running(self) -> bool:
        return self.runner is not None and bool(self.runner.running)

    @property
    def paused(self) -> bool:
        return self.runner is not None and bool(self.runner.paused)

    def logs(self, lines: int = 50) -> str:
        return str(self.runner.log_tail(lines)) if self.runner is not None else ""

    def describe(self) -> str:
        state = "running" if self.running else "stopped"
        return (
            f"{self.label} {self.source.bootstrap_servers} -> {self.target.bootstrap_servers} "
            f"({self.naming}; {state})"
        )

    def __enter__(self) -> RunnerReplicator:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
