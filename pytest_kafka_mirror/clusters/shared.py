"""Clusters shared by the xdist workers of one run.

With ``pytest -n N`` every worker is its own process with its own session fixtures, so
by default each would start its own source and target clusters.  With
``--kafka-mirror-share run`` (the default) the first worker that needs a cluster starts
it under a file lock and writes its endpoint to a JSON file in the run's share directory;
the other workers read the file and connect to the same cluster.  Each worker still runs
its own replicator, mirroring only its own topics (topic names carry the worker id), so
workers never see each other's records.

Lifetime: the shared cluster must outlive the worker that started it, and must not
outlive the run.  Its processes are started :func:`detached
<pytest_kafka_mirror.processes.managed.detached>` under a supervisor that watches the xdist
controller: the controller stops them in ``pytest_sessionfinish``, and if the controller
itself is killed the supervisors notice and stop their clusters.  A worker that crashes
takes nothing with it.

``--kafka-mirror-share worker`` gives every worker clusters of its own (more processes,
full isolation, e.g. to restart a broker).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from filelock import FileLock

from .._clientconf import write_private
from ..processes.cleanup import stop_registered
from ..processes.managed import detached
from .base import Capabilities, ClusterError
from .bootstrap import BootstrapCluster

if TYPE_CHECKING:
    from . import Cluster

__all__ = ["SHARE_MODES", "ShareDir", "SharedCluster", "controller_share_dir", "worker_share_dir"]

SHARE_MODES = ("run", "worker")
_ROOT_ENV = "KAFKA_MIRROR_SHARE_ROOT"


def _root() -> Path:
    return Path(os.environ.get(_ROOT_ENV) or tempfile.gettempdir()) / "kafka-mirror-share"


class ShareDir:
    """The directory where the workers of one run meet: endpoints, lock, supervisor pids."""

    def __init__(self, path: Path, controller_pid: int) -> None:
        self.path = path
        self.controller_pid = controller_pid

    @property
    def registry(self) -> Path:
        return self.path / "supervisors.txt"

    def lock(self) -> FileLock:
        """The run's lock on its shared clusters: one worker starts a cluster, the others wait."""
        self.path.mkdir(parents=True, exist_ok=True)
        return FileLock(self.path / "lock")

    def endpoint_file(self, role: str) -> Path:
        return self.path / f"{role}.json"

    def get_or_start(self, role: str, start: Callable[[], Cluster]) -> dict[str, Any]:
        """The endpoint of the shared ``role`` cluster, starting it if nobody has yet.

        ``start`` builds and starts the cluster; it runs inside :func:`detached`, so the
        cluster outlives this worker.  A start failure is written down too, so the other
        workers fail fast with the same message instead of each retrying.
        """
        path = self.endpoint_file(role)
        with self.lock():
            if path.exists():
                return dict(json.loads(path.read_text()))
            try:
                with detached(self.controller_pid, self.registry):
                    cluster = start()
                caps = cluster.capabilities().to_dict()
                caps["lifecycle"] = False  # shared: no worker may stop or restart it
                data: dict[str, Any] = {
                    "role": role, "spec": cluster.spec, "bootstrap_servers": cluster.bootstrap_servers,
                    "capabilities": caps, "started_by": os.environ.get("PYTEST_XDIST_WORKER", "master"),
                    # what a replicator's configuration depends on (replicators/mm2.py)
                    "flavour": cluster.flavour,
                    "replication_factor": cluster.replication_factor,
                    # its clients' properties (a secured backend's generated credentials): the file is 0600
                    "client_properties": dict(cluster.client_properties),
                    "client_origins": dict(cluster.client_origins),
                }
            except Exception as exc:
                data = {"role": role, "error": f"{type(exc).__name__}: {exc}"}
                write_private(path, json.dumps(data))  # 0600: it may hold credentials
                raise
            write_private(path, json.dumps(data))  # 0600: it may hold credentials
            return data

    def stop_all(self) -> list[int]:
        """Stop every shared process of the run and remove the directory (controller only)."""
        stopped = stop_registered(self.registry)
        shutil.rmtree(self.path, ignore_errors=True)
        return stopped


def worker_share_dir(workerinput: dict[str, Any] | None) -> ShareDir | None:
    """This xdist worker's share directory, or None when not running as an xdist worker.

    ``workerinput`` is ``config.workerinput`` (absent outside workers).  Environment
    variables cannot decide this: ``PYTEST_XDIST_*`` leak into every subprocess of a
    worker, including a nested pytest run that is not part of this run at all.
    """
    if not workerinput or "testrunuid" not in workerinput:
        return None
    # popen gateways: the worker is a child of the controller
    return ShareDir(_root() / str(workerinput["testrunuid"]), os.getppid())


def controller_share_dir(testrunuid: str) -> ShareDir:
    return ShareDir(_root() / testrunuid, os.getpid())


class SharedCluster(BootstrapCluster):
    """A cluster another worker started: reachable, not controllable by this worker."""

    def __init__(self, name: str, endpoint: dict[str, Any]) -> None:
        if "error" in endpoint:
            raise ClusterError(f"the shared {endpoint.get('role', name)} cluster failed to start: {endpoint['error']}")
        super().__init__(name, str(endpoint["bootstrap_servers"]))
        self.spec = f"{endpoint['spec']} (shared by the xdist workers)"
        self._caps = Capabilities(**endpoint.get("capabilities", {}))
        self.flavour = str(endpoint.get("flavour", ""))
        self.replication_factor = int(endpoint.get("replication_factor", -1))
        self.set_client_properties(endpoint.get("client_properties") or {}, endpoint.get("client_origins") or {})
        self.client_config()  # registers them before this worker starts any child process

    def capabilities(self) -> Capabilities:
        return self._caps

    def describe(self) -> str:
        return f"{self.name}: {self.spec} at {self.bootstrap_servers}"
