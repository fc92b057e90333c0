"""``mm2-connect:VERSION[,workers=N]``: MirrorMaker 2 as most operators run it, three
connectors on a Kafka Connect cluster.

Strimzi's ``KafkaMirrorMaker2`` (and managed Connect services) deploy a Connect cluster of
N distributed workers whose group and internal topics live on the target, and create MM2's
``MirrorSourceConnector``, ``MirrorCheckpointConnector`` and ``MirrorHeartbeatConnector``
through the Connect REST API.  This backend does the same from the release the plugin
resolved from Maven Central (the same cache as ``mm2:``): N
``org.apache.kafka.connect.cli.ConnectDistributed`` JVMs on loopback ports, then
``PUT /connectors/NAME/config`` of each connector.

The configuration is the one ``mm2:`` renders (``mm2.render_mm2``: naming, topic and group
filters, record size, replication factors, intervals, client security, the user's
``--kafka-mirror-replicator-properties``), translated as MM2's own ``MirrorMakerConfig``
translates it for its ``source->target`` herder (Kafka 4.3.1 and 3.9.1 give the same):

* the **worker** (:func:`connect_worker_properties`, ``MirrorMakerConfig.workerConfig``):
  every ``target.X`` key as ``X`` (so ``target.producer.max.request.size`` is the worker
  producer's, which writes the copied records), the client settings of the target copied to
  its producer / consumer / admin, the ``*.storage.*``, converter, ``task*``, ``worker*`` and
  ``replication.policy*`` keys, ByteArrayConverter for keys, values and headers; plus what a
  distributed worker needs of its own: a REST listener on a free loopback port;
* each **connector** (:func:`connector_configs`, ``MirrorMakerConfig.connectorBaseConfig``):
  the top-level MM2 keys, ``source.X`` as ``source.cluster.X`` (``source.consumer.X``,
  ``source.producer.X``, ``source.admin.X`` as they are, the client settings copied to each),
  the same for ``target``, the aliases, then the ``source->target.X`` flow keys as ``X``
  over everything; ``enabled`` false unless the flow says so.  The three connectors get one
  map, but for ``name`` and ``connector.class``, with the converters set on them too (a
  shared Connect cluster's own converters would wrap the records).

Not the same as dedicated MM2, by design of a Connect deployment: no ``target->source``
herder, so the heartbeat connector writes ``heartbeats`` on the target only (no
``source.heartbeats`` replicated back); the plugin's ``source->target.*`` keys apply to the
connectors, ``target.*`` ones to the workers.

Health between tests comes from ``GET /connectors/NAME/status`` (a FAILED task quoted with
its trace's root cause); :meth:`MirrorMaker2Connect.restart_failed` restarts failed tasks
through ``POST /connectors/NAME/restart?includeTasks=true&onlyFailed=true`` (KIP-745).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._clientconf import format_properties, is_secret, write_private
from ..clusters.base import free_port
from ..processes.managed import ManagedProcess, wait_until
from .base import ReplicatorError
from .mm2 import MirrorMaker2
from .mm2_user import CONNECTORS, connector_scoped

if TYPE_CHECKING:
    from ..clusters.base import Cluster
    from .strimzi import StrimziResource

__all__ = ["CONNECTORS", "MirrorMaker2Connect", "WorkerGroup", "connect_worker_properties", "connector_configs"]

log = logging.getLogger("pytest_kafka_mirror.mm2")

WORKER_CLASS = "org.apache.kafka.connect.cli.ConnectDistributed"
CONNECTOR_PACKAGE = "org.apache.kafka.connect.mirror."
#: the connector that reads each setting of the failover checks (replicators/_checkpoints.py)
READERS = {"emit.checkpoints.enabled": "MirrorCheckpointConnector",
           "emit.checkpoints.interval.seconds": "MirrorCheckpointConnector",
           "sync.group.offsets.enabled": "MirrorCheckpointConnector",
           "sync.group.offsets.interval.seconds": "MirrorCheckpointConnector",
           "groups": "MirrorCheckpointConnector", "groups.exclude": "MirrorCheckpointConnector",
           "offset-syncs.topic.location": "MirrorCheckpointConnector",
           "offset.lag.max": "MirrorSourceConnector", "emit.offset-syncs.enabled": "MirrorSourceConnector",
           "emit.heartbeats.enabled": "MirrorHeartbeatConnector",
           "emit.heartbeats.interval.seconds": "MirrorHeartbeatConnector"}
BYTES = "org.apache.kafka.connect.converters.ByteArrayConverter"
CONVERTERS = {"key.converter": BYTES, "value.converter": BYTES, "header.converter": BYTES}
#: the workers' test tuning (``target.KEY`` in the replicator properties gives yours): a
#: departed worker's connectors and tasks wait this long for it to come back before the group
#: hands them to the others (KIP-415; Connect's default 5 min: a rolling upgrade of three
#: workers would take a quarter of an hour, a stopped worker's tasks stand idle that long)
WORKER_TEST_SETTINGS = {"scheduled.rebalance.max.delay.ms": "10000"}
#: a worker's heap: Connect's tasks buffer less than a broker; N of them share the machine
WORKER_HEAP = "-Xms128M -Xmx512M"
#: the client settings MM2 copies into every client of a cluster (MirrorClientConfig's CLIENT_CONFIG_DEF)
_CLIENT_KEYS = ("bootstrap.servers", "security.protocol")
_CLIENT_PREFIXES = ("ssl.", "sasl.")
_ROLES = ("consumer.", "producer.", "admin.")
#: top-level mm2.properties keys that are MirrorMakerConfig's own, not a connector's
_MM2_ONLY = ("clusters", "dedicated.mode.enable.internal.rest", "plugin.discovery")
#: top-level key prefixes MirrorMakerConfig.workerConfig copies into a herder's worker
_WORKER_PREFIXES = ("offset.storage", "config.storage", "status.storage", "key.converter", "value.converter",
                    "header.converter", "task", "worker", "replication.policy", "config.providers")


def _is_client_key(key: str) -> bool:
    return key in _CLIENT_KEYS or key.startswith(_CLIENT_PREFIXES)


def _cluster_props(props: Mapping[str, str], alias: str) -> dict[str, str]:
    """``MirrorMakerConfig.clusterProps``: ``ALIAS.X`` as ``X``, the client settings copied
    to each client role, top-level client settings filling in what the alias leaves unset."""
    cp = {k[len(alias) + 1:]: v for k, v in props.items() if k.startswith(alias + ".")}
    for key in [k for k in cp if _is_client_key(k)]:
        for role in _ROLES:
            cp.setdefault(role + key, cp[key])
    for key, value in props.items():
        if _is_client_key(key):
            for role in _ROLES:
                cp.setdefault(role + key, value)
            cp.setdefault(key, value)
    return cp


def _aliases(props: Mapping[str, str]) -> tuple[str, str]:
    names = [a.strip() for a in props.get("clusters", "").split(",") if a.strip()]
    if len(names) < 2:
        raise ReplicatorError(f"MirrorMaker 2's properties name no two clusters (clusters = {props.get('clusters')!r})")
    return names[0], names[1]


def _flow_prefixed(key: str, aliases: tuple[str, str]) -> bool:
    return any(key.startswith(f"{x}->") or key.startswith(f"{x}.") for x in aliases)


def connector_configs(props: Mapping[str, str], source: str, target: str, *,
                      connectors: Mapping[str, str] | None = None) -> dict[str, dict[str, str]]:
    """The connectors' configs of the ``source -> target`` flow of mm2.properties ``props``
    (see the module docstring), by connector name; ``connectors``: class (simple name) ->
    connector name of those to create (the three, by their class names, when None).  A
    ``CLASS.X`` key (:func:`connector_scoped`) is that connector's ``X``, over the flow's."""
    aliases = _aliases(props)
    base = {k: v for k, v in props.items() if not _flow_prefixed(k, aliases) and k not in _MM2_ONLY
            and not connector_scoped(k) and not k.startswith(("offset.storage", "config.storage", "status.storage"))}
    for alias, side in ((source, "source"), (target, "target")):
        for key, value in _cluster_props(props, alias).items():
            base[f"{side}.{key}" if key.startswith(_ROLES) else f"{side}.cluster.{key}"] = value
    base.update({"source.cluster.alias": source, "target.cluster.alias": target})
    flow = f"{source}->{target}."
    base.update({k[len(flow):]: v for k, v in props.items() if k.startswith(flow)})
    base.setdefault("enabled", "false")
    for key, value in CONVERTERS.items():
        base.setdefault(key, value)
    out = {}
    for cls, name in (connectors or {c: c for c in CONNECTORS}).items():
        own = {k[len(cls) + 1:]: v for k, v in props.items() if connector_scoped(k) == cls}
        out[name] = {**base, **own, "name": name, "connector.class": CONNECTOR_PACKAGE + cls}
    return out


def connect_worker_properties(props: Mapping[str, str], source: str, target: str, *, port: int) -> dict[str, str]:
    """A distributed worker of the ``source -> target`` herder (``MirrorMakerConfig.workerConfig``)
    with its REST listener on ``port`` (see the module docstring)."""
    worker = _cluster_props(props, target)
    worker.update({k: v for k, v in props.items() if k.startswith(_WORKER_PREFIXES)})
    defaults = {"client.id": f"{source}->{target}", "group.id": f"{source}-mm2",
                "offset.storage.topic": f"mm2-offsets.{source}.internal",
                "status.storage.topic": f"mm2-status.{source}.internal",
                "config.storage.topic": f"mm2-configs.{source}.internal", **CONVERTERS,
                "plugin.discovery": props.get("plugin.discovery", "service_load")}
    for key, value in defaults.items():
        worker.setdefault(key, value)
    worker["listeners"] = f"http://127.0.0.1:{port}"
    worker["rest.advertised.host.name"] = "127.0.0.1"
    worker["rest.advertised.port"] = str(port)
    worker["rest.advertised.listener"] = "http"
    return worker


class WorkerGroup:
    """N Connect workers as one runner: the verbs act on every worker (``workers[i]`` for one)."""

    def __init__(self, workers: list[ManagedProcess], urls: list[str]) -> None:
        self.workers = workers
        self.urls = urls
        self.started_at = time.time()

    @property
    def pid(self) -> int | None:
        return self.workers[0].pid if self.workers else None

    @property
    def running(self) -> bool:
        return any(w.running for w in self.workers)

    @property
    def paused(self) -> bool:
        return bool(self.workers) and all(w.paused for w in self.workers)

    @property
    def returncode(self) -> int | None:
        codes = [w.returncode for w in self.workers]
        return None if any(c is None for c in codes) else next((c for c in codes if c), 0)

    def dead(self) -> list[ManagedProcess]:
        return [w for w in self.workers if not w.running and not w.paused]

    def stop(self, timeout: float = 30.0, sig: int | None = None) -> int | None:
        """SIGTERM to every worker at once (each commits its offsets and leaves the group),
        then each waited for (SIGKILL after ``timeout``)."""
        for w in self.workers:
            if w.running:
                w.send_signal(sig or signal.SIGTERM)
        for w in self.workers:
            w.stop(timeout=timeout)
        return self.returncode

    def kill(self) -> int | None:
        for w in self.workers:
            w.kill()
        return self.returncode

    def pause(self) -> None:
        for w in self.workers:
            w.pause()

    def resume(self) -> None:
        for w in self.workers:
            w.resume()

    def log_tail(self, lines: int = 30) -> str:
        per = max(5, lines // max(1, len(self.workers)))
        return "\n".join(f"--- {w.name} ---\n{w.log_tail(per)}" for w in self.workers)

    def describe_exit(self) -> str:
        gone = [w for w in self.workers if not w.running]
        return "; ".join(w.describe_exit() for w in gone) or "every worker runs"


def rest(url: str, method: str = "GET", body: Any = None, timeout: float = 10.0) -> tuple[int, Any]:
    """(status, parsed JSON or None) of one Connect REST call; OSError when nobody answers."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            raw = answer.read()
            return answer.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as exc:
        raw = exc.read()
        try:
            return exc.code, json.loads(raw) if raw else None
        except ValueError:
            return exc.code, raw.decode(errors="replace")


class MirrorMaker2Connect(MirrorMaker2):
    """MM2's connectors on a Connect cluster of ``workers`` distributed workers (see the
    module docstring).  The rendering, naming, settings and checkpoint semantics are
    :class:`~.mm2.MirrorMaker2`'s; the process, readiness of the REST API, the connectors'
    creation, status and health are its own."""

    connectors_apart = True
    #: what the failover checks cannot see from a Connect cluster, by its design
    failover_leaves_out = {"heartbeats": "MM2 on a Connect cluster runs the source -> target connectors only: no "
                                         "target -> source herder writes heartbeats on the source, so no replicated "
                                         "source.heartbeats reaches the target (a heartbeat connector writes its "
                                         "heartbeats on the target itself)"}

    def __init__(self, source: Cluster, target: Cluster, workdir: str | os.PathLike[str], *, workers: int = 1,
                 strimzi: StrimziResource | None = None, **kwargs: Any) -> None:
        if workers < 1:
            raise ReplicatorError(f"mm2-connect: workers={workers}: a Connect cluster needs one worker or more")
        kwargs.setdefault("heap", WORKER_HEAP)
        if strimzi is not None:
            kwargs["base"] = strimzi.user
        #: the Strimzi resource it runs as written (``strimzi=FILE``), or None
        self.strimzi = strimzi
        super().__init__(source, target, workdir, **kwargs)
        self.workers = workers
        assert self.release is not None  # mm2-connect runs a release (no container form)
        self.spec = self.spec.replace("mm2:", "mm2-connect:", 1) + (f",workers={workers}" if workers != 1 else "")
        self.label = self.label.replace("MirrorMaker 2 (", f"MirrorMaker 2 on Connect ({workers} worker"
                                        f"{'s' if workers != 1 else ''}, ", 1)
        #: connector class (simple name) -> its name on the cluster
        self.connector_names = {c: c for c in CONNECTORS}
        if strimzi is not None:
            self._as_written(strimzi)
        self.connectors = connector_configs(self.properties, self.source_alias, self.target_alias,
                                            connectors=self.connector_names)
        self.ports = [free_port() for _ in range(workers)]
        self.urls = [f"http://127.0.0.1:{p}" for p in self.ports]
        self.worker_starts = 0
        self._log_config: Path | None = None

    def _as_written(self, strimzi: StrimziResource) -> None:
        """The resource's connectors, by Strimzi's names, and what they do about consumer
        groups (each read from the connector that reads it, :data:`READERS`)."""
        from .strimzi import refuse_providers

        self.spec += f",strimzi={strimzi.user.path}"
        self.connector_names = strimzi.connector_names(self.source_alias, self.target_alias)
        try:
            refuse_providers(strimzi, lambda k: self.origins.get(strimzi.user.renamed(
                k, (self.source_alias, self.target_alias)) or "") == strimzi.user.origin)
        except ValueError as exc:
            raise ReplicatorError(str(exc)) from None
        origins = {k: self.origins.get(k, self.settings.rendered) for k in self.properties}
        pairs = list(self.properties.items())
        for cls, key in (("MirrorCheckpointConnector", "emit.checkpoints.enabled"),
                         ("MirrorHeartbeatConnector", "emit.heartbeats.enabled")):
            if cls not in self.connector_names:
                pairs.append((f"{cls}.{key}", "false"))
                origins[f"{cls}.{key}"] = f"{strimzi.user.origin} declares no {cls}"
        self.checkpoints = self.checkpoints.with_properties(
            pairs, f"{self.source_alias}->{self.target_alias}", origins=origins, readers=READERS)[0]
        for line in strimzi.notes:
            log.info("%s: %s", self.label, line)

    def node(self, workdir: str | os.PathLike[str], *, heap: str | None = None) -> MirrorMaker2:
        raise ReplicatorError(f"{self.label}: its nodes are Connect workers (workers=N in the spec), not dedicated "
                              "MirrorMaker 2 processes")

    def render_worker(self, i: int) -> Path:
        props = connect_worker_properties(self.properties, self.source_alias, self.target_alias, port=self.ports[i])
        for key, value in WORKER_TEST_SETTINGS.items():
            props.setdefault(key, value)  # target.KEY in the replicator properties sets it
        path = self.config_dir / f"worker-{i}.properties"
        self.config_dir.mkdir(parents=True, exist_ok=True)
        secret = any(is_secret(k) and v for k, v in props.items())
        write_private(path, format_properties(props, f"Connect worker {i} of MirrorMaker 2, rendered by "
                                                    "pytest-kafka-mirror"), 0o600 if secret else 0o644)
        return path

    def _launch(self) -> Any:
        from .mm2 import QUIET_LOGGERS

        self.render()  # mm2.properties: what the connectors and workers are derived from, for the reader
        self.connectors = connector_configs(self.properties, self.source_alias, self.target_alias,
                                            connectors=self.connector_names)
        assert self.release is not None
        log_config = self.release.write_log_config(self.config_dir, QUIET_LOGGERS)
        self._log_config = log_config
        group = WorkerGroup([self._worker(i).start() for i in range(self.workers)], self.urls)
        try:
            self._await_rest(group)
            self._create_connectors()
        except BaseException:
            group.kill()
            raise
        return group

    def _worker(self, i: int) -> ManagedProcess:
        """Worker ``i``'s process (not started): its own properties, REST port and log."""
        assert self.release is not None and self._log_config is not None
        argv = self.release.java_argv(WORKER_CLASS, [str(self.render_worker(i))], heap=self.heap,
                                      log_config=self._log_config)
        self.worker_starts += 1
        return ManagedProcess(f"{self.label} worker {i}", argv, self.workdir / f"worker-{i}-{self.worker_starts}.log",
                              cwd=self.workdir)

    def recover(self) -> str:
        """What an operator of a Connect cluster does when the replicator is broken: the
        workers that exited started again, the FAILED connectors and tasks restarted through
        the REST API (KIP-745), not the whole cluster; proven by a probe record copied.  A
        cluster with no worker left starts anew.  Returns what it did."""
        group = self.runner
        if group is None or not group.running:
            self.stop()
            self.start()
            return "no worker was left: the Connect cluster started anew"
        done = []
        for i, worker in enumerate(group.workers):
            if not worker.running and not worker.paused:
                done.append(f"worker {i} started again ({worker.describe_exit()})")
                group.workers[i] = self._worker(i).start()
        self._await_rest(group)
        restarted = self.restart_failed()
        if restarted:
            done.append(f"the failed tasks of {restarted} restarted through the REST API "
                        "(POST /connectors/NAME/restart?includeTasks=true&onlyFailed=true)")
        self._await_copying(group)
        return "; ".join(done) or "nothing was broken any more"

    def _await_rest(self, group: WorkerGroup) -> None:
        def answering() -> bool:
            if not group.running:
                raise ReplicatorError(f"{self.label} exited while starting: {group.describe_exit()}\n"
                                      f"{group.log_tail(40)}")
            try:
                return all(rest(f"{u}/connectors", timeout=2)[0] == 200 for u in self.urls)
            except OSError:
                return False

        try:
            wait_until(answering, self.startup_timeout, f"{self.label}'s REST API")
        except TimeoutError as exc:
            raise ReplicatorError(f"{exc}\n{group.log_tail(40)}") from None

    def _create_connectors(self, which: Mapping[str, dict[str, str]] | None = None) -> None:
        """``PUT /connectors/NAME/config`` of each connector (idempotent: a restart puts the
        same); a refusal is the connector's validation errors, quoted."""
        deadline = time.monotonic() + self.startup_timeout
        for name, config in (self.connectors if which is None else which).items():
            while True:
                try:
                    status, answer = rest(f"{self.urls[0]}/connectors/{_path(name)}/config", "PUT", config, timeout=30)
                except OSError as exc:
                    status, answer = -1, str(exc)
                if status in (200, 201):
                    break
                # 409: a rebalance is in progress (the group is forming); retried
                if status not in (409, -1, 500) or time.monotonic() > deadline:
                    raise ReplicatorError(f"{self.label}: the Connect REST API refused {name}'s config "
                                          f"(HTTP {status}): {_rest_error(answer)}")
                time.sleep(0.5)

    def status(self) -> str:
        """Every connector's and task's state, from the REST API (one line); never raises."""
        from .connect_status import describe, read_status_rest

        for url in self.urls:
            try:
                return f"MirrorMaker 2's connectors ({url}): {describe(read_status_rest(url), url)}"
            except (OSError, ValueError) as exc:
                last = f"{type(exc).__name__}: {exc}"
        return f"MirrorMaker 2's Connect REST API does not answer ({', '.join(self.urls)}): {last}"

    def health(self) -> str:
        """A worker that exited, else the FAILED connectors and tasks the REST API gives."""
        runner = self.runner
        if runner is None or self.paused:
            return ""
        if not runner.running:
            return f"it is not running: {runner.describe_exit()}"
        dead = runner.dead()
        if dead:
            return f"{len(dead)} of its {len(runner.workers)} workers exited: " + "; ".join(
                w.describe_exit() for w in dead)
        from .connect_status import describe, failed, read_status_rest

        url = next(u for w, u in zip(runner.workers, runner.urls, strict=True) if w.running)
        try:
            broken = failed(read_status_rest(url), 0)
        except (OSError, ValueError) as exc:
            return f"its Connect REST API ({url}) does not answer: {type(exc).__name__}: {exc}"
        return f"MirrorMaker 2's connectors ({url}): {describe(broken, url)}" if broken else ""

    # -- one worker, and the connectors through REST ----------------------------------------
    def _group(self, verb: str) -> WorkerGroup:
        group = self._runner(verb)
        assert isinstance(group, WorkerGroup)
        return group

    def stop_worker(self, i: int) -> None:
        """SIGTERM worker ``i`` (SIGKILL after the stop timeout): its tasks move to the others
        once ``scheduled.rebalance.max.delay.ms`` has passed (:data:`WORKER_TEST_SETTINGS`:
        10 s here; Connect's default 5 min)."""
        self._group("stop a worker of").workers[i].stop(timeout=self.stop_timeout)

    def kill_worker(self, i: int) -> None:
        self._group("kill a worker of").workers[i].kill()

    def pause_worker(self, i: int) -> None:
        self._group("pause a worker of").workers[i].pause()

    def resume_worker(self, i: int) -> None:
        self._group("resume a worker of").workers[i].resume()

    def start_worker(self, i: int) -> None:
        """Worker ``i`` again, with its properties and port (after :meth:`stop_worker` or
        :meth:`kill_worker`): it rejoins the group."""
        group = self._group("start a worker of")
        if group.workers[i].running:
            raise ReplicatorError(f"{self.label}: worker {i} is already running")
        group.workers[i] = self._worker(i).start()

    def roll_onto(self, new: MirrorMaker2Connect) -> list[float]:
        """A rolling upgrade: worker by worker, this one's worker I stopped (SIGTERM, its
        exit awaited) and ``new``'s worker I (another release, the same Connect group and
        internal topics) started in its place, each step done once it answers REST and every
        connector and task is RUNNING again; then ``new`` owns the cluster, and the connector
        configs it renders differently are put through REST.  Returns each step's seconds."""
        from .mm2 import QUIET_LOGGERS

        group = self._group("roll")
        if new.workers != len(group.workers) or new.instance != self.instance:
            raise ReplicatorError(f"a rolling upgrade replaces each of the {len(group.workers)} workers of one Connect "
                                  f"cluster: {new.spec} has {new.workers} (instance {new.instance}, not {self.instance})")
        assert new.release is not None
        # each worker comes back on its own port (its worker id), as a Strimzi pod keeps its
        # name; the group gives the tasks it held to the workers there are once the scheduled
        # rebalance delay has passed (WORKER_TEST_SETTINGS: 10 s here, Connect's default 5 min)
        new.ports, new.urls = list(self.ports), list(self.urls)
        new.render()
        new._log_config = new.release.write_log_config(new.config_dir, QUIET_LOGGERS)
        took = []
        for i in range(len(group.workers)):
            t0 = time.monotonic()
            group.workers[i].stop(timeout=self.stop_timeout)
            group.workers[i] = new._worker(i).start()
            group.urls[i] = new.urls[i]
            new._await_running(group, i)
            took.append(time.monotonic() - t0)
        new.runner, new.starts = group, 1
        self.runner = None
        changed = {n: c for n, c in new.connectors.items() if c != self.connectors.get(n)}
        if changed:
            new._create_connectors(changed)
        return took

    def _await_running(self, group: WorkerGroup, i: int) -> None:
        """Until worker ``i`` answers REST and every connector and task is RUNNING."""
        from .connect_status import read_status_rest

        url = group.urls[i]

        def running() -> bool:
            if not group.workers[i].running:
                raise ReplicatorError(f"{self.label}: worker {i} exited while joining: "
                                      f"{group.workers[i].describe_exit()}\n{group.workers[i].log_tail(30)}")
            try:
                states = read_status_rest(url, timeout=2)
            except (OSError, ValueError):
                return False
            copier = self.connector_names.get(CONNECTORS[0])
            tasks = [s for s in states if s.task is not None and s.connector == copier]
            return bool(tasks) and all(s.state == "RUNNING" for s in states)

        try:
            wait_until(running, self.startup_timeout, f"worker {i} of {self.label} to run every task")
        except TimeoutError as exc:
            raise ReplicatorError(f"{exc}: {self.status()}") from None

    def _connectors_rest(self, verb: str) -> None:
        for name in self.connectors:
            status, answer = rest(f"{self.urls[0]}/connectors/{_path(name)}/{verb}", "PUT")
            if status not in (200, 202, 204):
                raise ReplicatorError(f"{self.label}: {verb} of {name} through REST failed (HTTP {status}): "
                                      f"{_rest_error(answer)}")

    def pause_connectors(self) -> None:
        """``PUT /connectors/NAME/pause`` of the three: the tasks stop copying, the workers run."""
        self._connectors_rest("pause")

    def resume_connectors(self) -> None:
        self._connectors_rest("resume")

    def restart_failed(self) -> str:
        """Restart the failed connectors and tasks through REST (KIP-745); what was restarted."""
        from .connect_status import failed, read_status_rest

        broken = failed(read_status_rest(self.urls[0]), 0)
        names = sorted({s.connector for s in broken})
        for name in names:
            status, answer = rest(f"{self.urls[0]}/connectors/{_path(name)}/restart?includeTasks=true&onlyFailed=true", "POST")
            if status not in (200, 202, 204):
                raise ReplicatorError(f"{self.label}: restarting {name} through REST failed (HTTP {status}): "
                                      f"{_rest_error(answer)}")
        return ", ".join(names)


def _path(name: str) -> str:
    """A connector's name in a REST path (Strimzi's ``source->target.MirrorSourceConnector``: ``>`` escaped)."""
    from urllib.parse import quote

    return quote(name, safe="")


def _rest_error(answer: Any) -> str:
    if isinstance(answer, dict):
        errors = [f"{c['value']['name']}: {'; '.join(c['value']['errors'])}" for c in answer.get("configs", [])
                  if c.get("value", {}).get("errors")]
        return "; ".join(errors) or str(answer.get("message") or json.dumps(answer))[:500]
    return str(answer)[:500]
