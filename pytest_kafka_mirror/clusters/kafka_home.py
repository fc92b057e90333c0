"""``kafka-home:PATH`` and ``kafka:VERSION[,brokers=N]``: Apache Kafka in KRaft mode, run with ``java -cp``.

Both run the jars of a :class:`~.kafka_dist.KafkaRelease`: an unpacked distribution
(``kafka-home:PATH``) or a release the plugin resolved from Maven Central into its cache
(``kafka:VERSION``).  No ``bin/`` script is needed: each node is ``java -cp libs/*
kafka.Kafka server.properties`` (:meth:`KafkaRelease.java_argv`, the command line
``kafka-run-class.sh`` builds), its storage formatted by ``kafka.tools.StorageTool``.

Start = render one ``server.properties`` per node into the work dir (combined broker +
controller, listeners on free loopback ports, log dir in the work dir), format every log
dir, start every node, then wait until the cluster's metadata shows every broker.
Stop = SIGTERM (controlled shutdown), SIGKILL after ``stop_timeout``.

The KRaft quorum is configured the way the distribution's own quickstart does it:

* one node, Kafka >= 3.9 (KIP-853): ``controller.quorum.bootstrap.servers`` and ``format
  --standalone`` (a dynamic quorum of one);
* one node before 3.9, and every multi-node cluster: a static ``controller.quorum.voters``
  and a plain ``format`` of each node with the same cluster id.

Every format passes ``--ignore-formatted`` so a restart into the same log dir keeps the data.

With ``brokers=N`` (N >= 2) the cluster is N combined nodes, topics get replication factor
min(N, 3) and ``min.insync.replicas`` 2 (as the internal topics): a broker killed or
restarted mid-run moves its partitions' leadership for real.  :meth:`KafkaCluster.broker`
gives one node's lifecycle verbs (``kill(cluster.broker(2))``); the cluster's own verbs act
on every node, ``restart()`` one node after the other (a rolling restart).

Heaps: 512 MB for a single broker, 384 MB per node of a multi-node cluster (a scenario
session runs two clusters, a MirrorMaker 2 per xdist worker and a Spark driver on one
2-core, 24 GB machine); ``KAFKA_HEAP_OPTS`` overrides them, as for the scripts.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

from .._clientconf import ClientProperties, format_properties, redact
from ..processes.jvm_cds import ArchiveUse, archive_for
from ..processes.managed import ManagedProcess, wait_until
from .base import Capabilities, ClusterAuthError, ClusterError, KafkaAdminMixin, free_port, kraft_cluster_id
from .kafka_dist import KafkaRelease, Version, java_executable, release_at

__all__ = ["SECURITIES", "KafkaCluster", "KafkaNode", "SecurityFiles", "check_kafka_home", "kafka_version", "render_server_properties",
           "storage_format_argv"]

DYNAMIC_QUORUM_SINCE = (3, 9)
#: loggers quietened to WARN in a broker's log (per request / per state change lines)
QUIET_LOGGERS = ("kafka.request.logger", "state.change.logger", "kafka.log.LogCleaner", "org.apache.kafka.storage")


SECURITIES = ("plaintext", "sasl_ssl")
SCRAM_MECHANISM = "SCRAM-SHA-512"
#: the SCRAM user of a ``security=sasl_ssl`` cluster (its password is generated per cluster)
SCRAM_USER = "kafka-mirror"


class SecurityFiles:
    """What a ``security=sasl_ssl`` cluster needs: a CA and a broker certificate
    (:mod:`._tls`), a SCRAM user with a random password, the inter-broker port."""

    def __init__(self, workdir: Path) -> None:
        import secrets

        from ._tls import make_tls_files

        self.tls = make_tls_files(workdir / "tls")
        self.user = SCRAM_USER
        self.password = secrets.token_urlsafe(18)
        self.internal_port = free_port()

    def server_properties(self, listeners: list[str]) -> dict[str, str]:
        props = {
            "sasl.enabled.mechanisms": SCRAM_MECHANISM,
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(self.tls.broker),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.tls.ca),
            "ssl.client.auth": "none",
        }
        for name in listeners:
            props[f"listener.name.{name}.{SCRAM_MECHANISM.lower()}.sasl.jaas.config"] = (
                "org.apache.kafka.common.security.scram.ScramLoginModule required;")
        return props

    def client_properties(self) -> dict[str, str]:
        """The librdkafka properties a client of the cluster needs (what a user would give
        with ``--kafka-mirror-source-config``)."""
        return {"security.protocol": "SASL_SSL", "sasl.mechanisms": SCRAM_MECHANISM, "sasl.username": self.user,
                "sasl.password": self.password, "ssl.ca.location": str(self.tls.ca)}


def check_kafka_home(path: str | os.PathLike[str], *, need: str = "broker") -> Path:
    """``path`` as a Path if it holds Apache Kafka's ``libs/`` with ``need``, else ValueError."""
    return release_at(path, need=need).home


def kafka_version(home: str | os.PathLike[str]) -> Version | None:
    """The release's version from its jar names, or None when it cannot be told."""
    from .kafka_dist import _version_of

    return _version_of(Path(home) / "libs")


def _dynamic_quorum(version: Version | None, nodes: int = 1) -> bool:
    return nodes == 1 and (version is None or version[:2] >= DYNAMIC_QUORUM_SINCE)


def render_server_properties(
    *,
    node_id: int,
    port: int,
    controller_port: int,
    log_dir: str | os.PathLike[str],
    version: Version | None,
    voters: dict[int, int] | None = None,
    link: tuple[int, int] | None = None,
    extra: dict[str, str] | None = None,
    security: SecurityFiles | None = None,
) -> str:
    """The ``server.properties`` of one combined broker + controller node on 127.0.0.1.

    ``voters`` (node id -> controller port) makes it one node of a static quorum of
    several; replication factors are then min(nodes, 3) with ``min.insync.replicas`` 2.
    ``link`` = (P, Q): a ``LINK`` listener on port Q that advertises 127.0.0.1:P, where a
    faultable link (``faults.schedule.Link``) forwards to it: a client that bootstraps
    through the link is told to connect through the link.
    ``security``: the client listener (``port``, and the link's) is SASL_SSL with
    SCRAM-SHA-512 and the PEM keystore of ``security``; the brokers talk to each other on a
    PLAINTEXT listener ``INTERNAL`` (port ``security.internal_port``), the controllers on
    their PLAINTEXT one.
    """
    nodes = len(voters) if voters else 1
    client = "SASL_SSL" if security is not None else "PLAINTEXT"
    name = "CLIENT" if security is not None else "PLAINTEXT"
    listeners = [f"{name}://127.0.0.1:{port}", f"CONTROLLER://127.0.0.1:{controller_port}"]
    advertised = [f"{name}://127.0.0.1:{port}"]
    protocols = f"CONTROLLER:PLAINTEXT,{name}:{client}"
    if security is not None:
        listeners.append(f"INTERNAL://127.0.0.1:{security.internal_port}")
        advertised.append(f"INTERNAL://127.0.0.1:{security.internal_port}")
        protocols += ",INTERNAL:PLAINTEXT"
    if link is not None:
        listeners.append(f"LINK://127.0.0.1:{link[1]}")
        advertised.append(f"LINK://127.0.0.1:{link[0]}")
        protocols += f",LINK:{client}"
    props: dict[str, str] = {
        "node.id": str(node_id),
        "process.roles": "broker,controller",
        "listeners": ",".join(listeners),
        "advertised.listeners": ",".join(advertised),
        "listener.security.protocol.map": protocols,
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT" if security is None else "INTERNAL",
    }
    if security is not None:
        props.update(security.server_properties(["client"] + (["link"] if link is not None else [])))
    if _dynamic_quorum(version, nodes):
        props["controller.quorum.bootstrap.servers"] = f"127.0.0.1:{controller_port}"
    else:
        quorum = voters or {node_id: controller_port}
        props["controller.quorum.voters"] = ",".join(f"{n}@127.0.0.1:{p}" for n, p in sorted(quorum.items()))
    rf, isr = str(min(nodes, 3)), str(min(nodes, 2))
    props.update({
        "log.dirs": str(log_dir),
        "num.partitions": "1",
        "default.replication.factor": rf,
        "min.insync.replicas": isr,
        "offsets.topic.replication.factor": rf,
        "transaction.state.log.replication.factor": rf,
        "transaction.state.log.min.isr": isr,
        "share.coordinator.state.topic.replication.factor": rf,
        "share.coordinator.state.topic.min.isr": isr,
        # 5 partitions, not 50, for each internal topic: a restart loads every partition of
        # the node, and with the defaults (offsets, transactions, share state) and MM2's topics
        # a broker restarted mid-scenario took 25 s to start on this project's 2-core machine
        "offsets.topic.num.partitions": "5",
        "transaction.state.log.num.partitions": "5",
        "share.coordinator.state.topic.num.partitions": "5",
        "group.initial.rebalance.delay.ms": "0",
        "auto.create.topics.enable": "false",
    })
    props.update(extra or {})
    kind = "single-node" if nodes == 1 else f"node {node_id} of {nodes}"
    return format_properties(props, f"rendered by pytest-kafka-mirror: {kind} KRaft on loopback")


def storage_format_argv(cluster_id: str, properties: str | os.PathLike[str], version: Version | None,
                        nodes: int = 1, scram: tuple[str, str] | None = None) -> list[str]:
    """``StorageTool``'s arguments that format one node's log dir (run with :meth:`KafkaRelease.java_argv`);
    ``scram`` = (user, password): a SCRAM-SHA-512 user in the bootstrap metadata (KRaft, Kafka >= 3.5)."""
    argv = ["format", "-t", cluster_id, "-c", str(properties)]
    if scram is not None:
        argv += ["--add-scram", f"{SCRAM_MECHANISM}=[name={scram[0]},password={scram[1]}]"]
    if _dynamic_quorum(version, nodes):
        argv.append("--standalone")
    argv.append("--ignore-formatted")
    return argv


class KafkaNode:
    """One broker + controller process of a :class:`KafkaCluster`; a fault target of its own."""

    def __init__(self, cluster: KafkaCluster, node_id: int) -> None:
        self.cluster = cluster
        self.node_id = node_id
        self.workdir = cluster.workdir if cluster.nodes == 1 else cluster.workdir / f"node-{node_id}"
        self.properties = self.workdir / "server.properties"
        self.log_dir = self.workdir / "data"
        self.port: int | None = None
        self.controller_port: int | None = None
        #: (P, Q) of the LINK listener (see :func:`render_server_properties`)
        self.link: tuple[int, int] | None = None
        self.runner: ManagedProcess | None = None
        self.cds = ArchiveUse()

    @property
    def fault_name(self) -> str:
        """How a fault on this node reads in the report's markers."""
        return f"{self.cluster.name} broker {self.node_id} ({self.cluster.spec})"

    def _argv(self, main: str, args: list[str], heap: str, cds: ArchiveUse) -> list[str]:
        log_config = self.cluster.release.write_log_config(self.workdir, QUIET_LOGGERS)
        return self.cluster.release.java_argv(main, args, heap=heap, log_config=log_config, jvm=cds.options)

    def _archive(self, kind: str) -> ArchiveUse:
        """The class-data sharing archive of a JVM of ``kind`` of this release (``processes.jvm_cds``)."""
        return archive_for(f"kafka-{kind}", java_executable(), [self.cluster.release.libs])

    def format_process(self) -> tuple[subprocess.Popen[bytes], ArchiveUse]:
        """``StorageTool`` formatting the log dir, and its archive to settle once it exited."""
        cds = self._archive("storage-tool")
        argv = self._argv("kafka.tools.StorageTool", storage_format_argv(
            self.cluster.cluster_id, self.properties, self.cluster.version, self.cluster.nodes,
            self.cluster.scram_user), "-Xmx256M", cds)
        log = open(self.workdir / "format.log", "wb")
        with log:
            return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    cwd=self.workdir), cds

    def launch(self) -> ManagedProcess:
        self.cds = self._archive("broker")
        proc = ManagedProcess(
            f"{self.cluster.name} (kafka {self.cluster.version_text} node {self.node_id} :{self.port})",
            self._argv("kafka.Kafka", [str(self.properties)], self.cluster.heap, self.cds),
            self.workdir / "kafka.log",
            cwd=self.workdir,
        )
        self.runner = proc.start()
        return proc

    def settle(self) -> None:
        """Once the broker exited: the class-data archive it wrote at its exit is published."""
        if self.runner is not None and not self.runner.running:
            self.cds.settle(self.runner.returncode)

    @property
    def running(self) -> bool:
        return self.runner is not None and self.runner.running

    # -- a node's lifecycle verbs (fault targets) ---------------------------------------------
    def stop(self) -> None:
        if self.runner is not None:
            self.runner.stop(timeout=self.cluster.stop_timeout)
            self.settle()
        self.cluster._admin = None

    def kill(self) -> None:
        if self.runner is not None:
            self.runner.kill()
            self.settle()
        self.cluster._admin = None

    def pause(self) -> None:
        if self.runner is None:
            raise ClusterError(f"cannot pause {self.fault_name}: it is not started")
        self.runner.pause()

    def resume(self) -> None:
        if self.runner is None:
            raise ClusterError(f"cannot resume {self.fault_name}: it is not started")
        self.runner.resume()

    def start(self) -> None:
        """Start this node again (same ports and log dir) and wait until it is back in the cluster."""
        if self.running:
            raise ClusterError(f"{self.fault_name} is already running")
        self.launch()
        self.cluster._await_brokers([self])

    def restart(self) -> None:
        self.stop()
        self.start()

    def logs(self, lines: int = 50) -> str:
        return self.runner.log_tail(lines) if self.runner is not None else ""


class KafkaCluster(KafkaAdminMixin):
    """KRaft Apache Kafka from ``release``: one combined node, or ``brokers`` of them."""

    def __init__(
        self,
        name: str,
        release: KafkaRelease,
        workdir: str | os.PathLike[str],
        *,
        spec: str | None = None,
        brokers: int = 1,
        startup_timeout: float = 120.0,
        stop_timeout: float = 30.0,
        heap: str | None = None,
        security: str = "plaintext",
        server_properties: Mapping[str, str] | None = None,
    ) -> None:
        if brokers < 1:
            raise ValueError(f"brokers must be at least 1, got {brokers}")
        if security not in SECURITIES:
            raise ValueError(f"security must be one of {', '.join(SECURITIES)}, got {security!r}")
        #: plaintext | sasl_ssl (the clients' listener; see :class:`SecurityFiles`)
        self.security = security
        self.security_files: SecurityFiles | None = None
        self.name = name
        self.release = release
        self.home = release.home
        self.version = release.version
        self.spec = spec or f"kafka-home:{self.home}"
        self.workdir = Path(workdir) / name
        self.nodes = brokers
        self.replication_factor = min(brokers, 3)
        self.startup_timeout = startup_timeout
        self.stop_timeout = stop_timeout
        self.heap = heap or ("-Xms256M -Xmx512M" if brokers == 1 else "-Xms192M -Xmx384M")
        self.cluster_id = kraft_cluster_id()
        self.brokers = [KafkaNode(self, i + 1) for i in range(brokers)]
        self._caps: Capabilities | None = None
        #: broker settings over the rendered ones (e.g. a test's ``auto.create.topics.enable=true``,
        #: as on a user's cluster)
        self.server_properties = dict(server_properties or {})

    @property
    def version_text(self) -> str:
        return self.release.version_text

    @property
    def scram_user(self) -> tuple[str, str] | None:
        f = self.security_files
        return (f.user, f.password) if f is not None else None

    @property
    def bootstrap_servers(self) -> str:
        if self.brokers[0].port is None:
            raise ClusterError(f"{self.name} is not started")
        return ",".join(f"127.0.0.1:{b.port}" for b in self.brokers)

    def link_listener(self) -> tuple[int, int] | None:
        """(P, Q) for a faultable link: the broker listens on Q for it and advertises P,
        where the link listens (single-node clusters; links forward to one broker)."""
        return self.brokers[0].link if self.nodes == 1 else None

    def broker(self, node_id: int) -> KafkaNode:
        """Node ``node_id`` (1-based): its own stop / kill / start / restart / pause / resume."""
        if not 1 <= node_id <= self.nodes:
            raise ValueError(f"{self.name} has brokers 1..{self.nodes}, not {node_id}")
        return self.brokers[node_id - 1]

    @property
    def runner(self) -> ManagedProcess | None:
        """The process of a single-node cluster (None for several nodes)."""
        return self.brokers[0].runner if self.nodes == 1 else None

    process = runner

    def _render_and_format(self) -> None:
        if self.security == "sasl_ssl" and self.security_files is None:
            self.security_files = SecurityFiles(self.workdir)
            # the user's properties (set_client_properties) stay over the generated ones
            generated = self.security_files.client_properties()
            self.client_properties = ClientProperties(generated).merged(self.client_properties)
            self.client_origins = {**dict.fromkeys(generated, f"{self.spec}, which generated them"),
                                   **self.client_origins}
        for b in self.brokers:
            b.port, b.controller_port = free_port(), free_port()
            b.link = (free_port(hold=True), free_port()) if self.nodes == 1 else None  # (the link binds it later, if ever)
        voters = {b.node_id: b.controller_port for b in self.brokers} if self.nodes > 1 else None
        for b in self.brokers:
            assert b.port is not None and b.controller_port is not None
            b.workdir.mkdir(parents=True, exist_ok=True)
            b.properties.write_text(render_server_properties(
                node_id=b.node_id, port=b.port, controller_port=b.controller_port, log_dir=b.log_dir,
                version=self.version, voters=voters, link=b.link, security=self.security_files,
                extra=self.server_properties))
        formats = [(b, *b.format_process()) for b in self.brokers]
        for b, proc, cds in formats:
            try:
                rc = proc.wait(120)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
                rc = -9
            cds.settle(rc)
            if rc != 0:
                text = (b.workdir / "format.log").read_text(errors="replace")
                raise ClusterError(
                    f"{self.name}: formatting the log dir of node {b.node_id} failed (exit {rc}): "
                    f"kafka.tools.StorageTool {' '.join(storage_format_argv(self.cluster_id, b.properties, self.version, self.nodes))}"
                    f"\n{redact(text[-2000:], [self.scram_user[1]] if self.scram_user else [])}")

    def start(self) -> None:
        """Render and format (first start only), start every node; returns when metadata shows them all."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        if self.brokers[0].port is None:  # first start; a restart keeps ports and data
            self._render_and_format()
        try:
            for b in self.brokers:
                if not b.running:
                    b.launch()
            self._await_brokers(self.brokers)
        except BaseException:
            self.kill()
            raise

    def _await_brokers(self, nodes: list[KafkaNode]) -> None:
        """Until metadata lists every node of the cluster (``nodes``: the ones just started,
        whose exit during start-up is an error with their log)."""
        from confluent_kafka import KafkaException

        self._admin = None
        deadline = time.monotonic() + self.startup_timeout
        want = {b.node_id for b in self.brokers}
        last = ["no answer yet"]

        def all_brokers() -> bool:
            for b in nodes:
                if b.runner is not None and not b.runner.running:
                    raise ClusterError(f"{self.name}: Kafka exited during start-up: {b.runner.describe_exit()}")
            failure = self.auth_failure(definite=True)
            if failure:  # no retry cures wrong credentials: say so now, not at the timeout
                raise ClusterAuthError(failure)
            try:
                md = self.admin().list_topics(timeout=max(0.5, min(3.0, deadline - time.monotonic())))
            except KafkaException as exc:
                last[0] = str(exc.args[0] if exc.args else exc)
                return False
            seen = set(md.brokers)
            last[0] = f"metadata shows brokers {sorted(seen)}"
            return want <= seen

        try:
            wait_until(all_brokers, self.startup_timeout, "the brokers in metadata", interval=0.2)
        except TimeoutError:
            tails = "\n".join(f"node {b.node_id}:\n{b.logs(15)}" for b in nodes)
            raise ClusterError(
                f"{self.name}: Kafka {self.version_text} from {self.home} did not show its {self.nodes} "
                f"broker(s) in metadata within {self.startup_timeout:g} s ({last[0]}). Last log lines:\n{tails}"
            ) from None

    # -- the whole cluster's lifecycle -------------------------------------------------------------
    def stop(self) -> None:
        """SIGTERM every node at once (a controlled shutdown), SIGKILL what is left after
        ``stop_timeout``.  (One after the other, the last nodes would wait out the timeout:
        without a quorum of controllers their controlled shutdown cannot complete.)"""
        running = [b.runner for b in self.brokers if b.runner is not None and b.runner.running]
        for proc in running:
            if proc.paused:
                proc.resume()
            proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + self.stop_timeout
        for proc in running:
            proc.stop(timeout=max(0.1, deadline - time.monotonic()))
        for b in self.brokers:
            b.settle()
        self._admin = None

    def kill(self) -> None:
        for b in self.brokers:
            b.kill()
        self._admin = None

    def pause(self) -> None:
        for b in self.brokers:
            b.pause()

    def resume(self) -> None:
        for b in self.brokers:
            b.resume()

    def restart(self) -> None:
        """Stop and start on the same ports and log dirs: the data survives.  Several nodes:
        one after the other, each back in the cluster before the next stops (a rolling restart)."""
        if self.nodes == 1:
            self.stop()
            self.start()
            return
        for b in self.brokers:
            b.restart()

    def logs(self, lines: int = 50) -> str:
        if self.nodes == 1:
            return self.brokers[0].logs(lines)
        return "\n".join(f"-- node {b.node_id}\n{b.logs(lines)}" for b in self.brokers)

    def capabilities(self) -> Capabilities:
        if self._caps is None:
            from ._probe import probe_capabilities

            self._caps = probe_capabilities(
                self,
                delete_records=True,
                declared={"restart_keeps_data": (True, "the log dirs are on disk in the work dir and reused by restart()"),
                          "log_compaction": (True, "Apache Kafka's log cleaner (log.cleaner.enable defaults to true)")},
                lifecycle=True,
            )
        return self._caps

    def describe(self) -> str:
        running = [b for b in self.brokers if b.running]
        state = (", ".join(f"node {b.node_id} pid {b.runner.pid}" for b in running if b.runner) or "stopped")
        where = self.bootstrap_servers if self.brokers[0].port else "-"
        secured = ", SASL_SSL (SCRAM-SHA-512) for clients" if self.security == "sasl_ssl" else ""
        return (f"{self.name}: Kafka {self.version_text} from {self.home}, {self.nodes} broker(s) at {where}{secured} "
                f"({state})")
