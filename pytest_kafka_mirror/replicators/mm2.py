"""``mm2:KAFKA_HOME`` and ``mm2:container:IMAGE``: MirrorMaker 2 in dedicated mode.

``bin/connect-mirror-maker.sh mm2.properties`` with an ``mm2.properties`` rendered from
the two clusters and the test topic prefix (:func:`render_mm2_properties`, unit-tested),
then user overrides (``--kafka-mirror-replicator-properties`` / ini
``kafka_mirror_replicator_properties``) applied on top.  The target topic names follow
from the effective ``replication.policy.class`` (:func:`naming_from_properties`):
``DefaultReplicationPolicy`` → ``source.TOPIC``, ``IdentityReplicationPolicy`` → ``TOPIC``.

Readiness is a probe record copied from source to target, not a log line: a real MM2
takes about 45 s to come up (Connect worker, three connectors, task assignment), so the
start-up limit defaults to :data:`STARTUP_TIMEOUT`.  Its log is the process output (home)
or the container log, quoted in start-up errors and attached to failed tests.

Measured against a real MM2 with Tansu brokers: Tansu does not wake a waiting fetch when
data arrives, so MM2's consumer gets ``fetch.max.wait.ms=50`` (else ~500 ms latency per
batch), and ``use.defaults.from=source`` stops the topic-config sync from deleting the
configs Tansu reports as defaults.

Every instance is a Connect cluster of its own (:func:`worker_properties`): MM2 derives
a herder's Connect group id and internal topics from the source alias alone
(``source-mm2``, ``mm2-configs.source.internal``, ...), so with the fixed aliases every
MM2 on the same clusters (the session's, each test's dedicated one, one of an earlier
run on a shared cluster) would join one Connect group and share one config topic, where
the leader's connector configs (its topic filter) win, and a member leaving rebalances
every other instance.  (Measured with a real MM2 on the embedded brokers before this:
after SIGTERM + start, the MM2 never copied its probe record within 180 s.)  Each
instance therefore gets its own id (``MirrorMaker2.instance``, kept over its restarts
so that a restart resumes its own offsets and connector configs), and
:meth:`MirrorMaker2.status` reads the connector and task states from its status topic
(``connect_status``) when it does not copy in time.
"""

from __future__ import annotations

import os
import re
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..processes.managed import ManagedProcess
from ._checkpoints import MM2_DEFAULTS
from ._runner import RunnerReplicator
from .base import NamingPolicy, ReplicatorError

if TYPE_CHECKING:
    from ..clusters.base import Cluster

__all__ = [
    "STARTUP_TIMEOUT",
    "MirrorMaker2",
    "format_properties",
    "herder_topic",
    "mm2_container_script",
    "naming_from_properties",
    "parse_properties",
    "render_mm2_properties",
    "topics_regex",
    "worker_properties",
]

#: Default start-up limit: MM2 needs ~45 s before it copies its first record.
STARTUP_TIMEOUT = 180.0
POLICY_PACKAGE = "org.apache.kafka.connect.mirror."
DEFAULT_POLICY = POLICY_PACKAGE + "DefaultReplicationPolicy"
IDENTITY_POLICY = POLICY_PACKAGE + "IdentityReplicationPolicy"
CONTAINER_CONFIG_DIR = "/etc/kafka-mirror"


def topics_regex(topic_prefix: str) -> str:
    """The topic filter every replicator gets: ``^PREFIX-.*`` (a full match in Java, which
    MM2, uReplicator, Brooklin and Confluent Replicator use, and a search in Python)."""
    return "^" + re.escape(topic_prefix) + "-.*"


def is_tansu(cluster: Any) -> bool:
    return getattr(cluster, "spec", "") == "tansu" or getattr(cluster, "flavour", "") == "tansu"


#: Connect worker settings MM2 derives from the herder's source alias (MirrorMakerConfig.workerConfig)
WORKER_TOPICS = {"offset": "mm2-offsets", "status": "mm2-status", "config": "mm2-configs"}


def worker_properties(instance: str, source_alias: str = "source", target_alias: str = "target") -> dict[str, str]:
    """The Connect group id and internal topics of one MM2 instance, for both herders.

    MM2 runs a herder (a Connect worker) per flow, and the disabled ``target->source``
    one too when heartbeats are on; it reads a herder's worker settings from the
    properties prefixed with the herder's *target* alias and fills in ``SOURCE-mm2`` and
    ``mm2-{offsets,status,configs}.SOURCE.internal`` (on the target cluster) when absent.
    These keep MM2's names with the instance id inserted:
    ``target.group.id = source-mm2-ID``, ``target.status.storage.topic =
    mm2-status.source.ID.internal`` and so on (``source.*`` for the reverse herder).
    Top-level ``offset.storage.topic`` etc. still win (MM2 applies them over these).
    """
    props: dict[str, str] = {}
    for herder_source, herder_target in ((source_alias, target_alias), (target_alias, source_alias)):
        props[f"{herder_target}.group.id"] = f"{herder_source}-mm2-{instance}"
        for kind, stem in WORKER_TOPICS.items():
            props[f"{herder_target}.{kind}.storage.topic"] = f"{stem}.{herder_source}.{instance}.internal"
    return props


def herder_topic(props: dict[str, str], kind: str, source_alias: str = "source", target_alias: str = "target") -> str:
    """The ``offset`` / ``status`` / ``config`` topic of the ``source -> target`` herder as
    MM2 resolves it: top-level key, else the target-alias one, else MM2's default."""
    key = f"{kind}.storage.topic"
    default = f"{WORKER_TOPICS[kind]}.{source_alias}.internal"
    return props.get(key) or props.get(f"{target_alias}.{key}") or default


def render_mm2_properties(
    *,
    source_bootstrap: str,
    target_bootstrap: str,
    topics: str,
    source_alias: str = "source",
    target_alias: str = "target",
    source_is_tansu: bool = False,
    target_is_tansu: bool = False,
    instance: str | None = None,
    overrides: tuple[tuple[str, str], ...] | list[tuple[str, str]] = (),
) -> dict[str, str]:
    """The properties of a one-way ``source -> target`` MM2 for single-node clusters;
    with ``instance``, its own Connect group and internal topics (:func:`worker_properties`)."""
    a, b = source_alias, target_alias
    flow = f"{a}->{b}"
    props: dict[str, str] = {
        "clusters": f"{a}, {b}",
        f"{a}.bootstrap.servers": source_bootstrap,
        f"{b}.bootstrap.servers": target_bootstrap,
        f"{flow}.enabled": "true",
        f"{b}->{a}.enabled": "false",
        f"{flow}.topics": topics,
        # Topics created by a test must be picked up in seconds (MM2's default: 10 min).
        "refresh.topics.interval.seconds": "2",
        "refresh.groups.interval.seconds": "10",
        "replication.policy.class": DEFAULT_POLICY,
        "replication.policy.separator": ".",
        "tasks.max": "4",
        # single-node clusters: every topic MM2 creates, internal ones included, has RF 1
        "replication.factor": "1",
        "checkpoints.topic.replication.factor": "1",
        "heartbeats.topic.replication.factor": "1",
        "offset-syncs.topic.replication.factor": "1",
        "offset.storage.replication.factor": "1",
        "status.storage.replication.factor": "1",
        "config.storage.replication.factor": "1",
        "sync.topic.acls.enabled": "false",
        "sync.topic.configs.enabled": "true",
        "emit.checkpoints.enabled": "true",
        "emit.checkpoints.interval.seconds": "5",
        "sync.group.offsets.enabled": "false",
        "sync.group.offsets.interval.seconds": "5",
        # checkpoints for the test's consumer groups (named like its topics, see witness.py)
        f"{flow}.groups": topics,
        "emit.heartbeats.enabled": "true",
        "emit.heartbeats.interval.seconds": "5",
        "offset-syncs.topic.location": "source",
        "offset.lag.max": "100",
        # the delayed (time-based) offset syncs go out at the target herder's offset flush
        # (Kafka 3.7+): 5 s instead of 60 s, so an idle partition's group is translated exactly
        f"{b}.offset.flush.interval.ms": "5000",
    }
    if instance is not None:
        props.update(worker_properties(instance, a, b))
    if source_is_tansu:
        # Tansu does not wake a waiting fetch on new data: bound the wait instead.
        props[f"{a}.consumer.fetch.max.wait.ms"] = "50"
    if source_is_tansu or target_is_tansu:
        # else the topic-config sync deletes the configs Tansu reports as defaults
        props[f"{flow}.use.defaults.from"] = "source"
    for key, value in overrides:
        props[key] = value
    return props


def _escape(text: str, *, key: bool) -> str:
    """java.util.Properties escaping: backslash first, then leading blanks and separators."""
    out = text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    if key:
        out = out.replace("=", "\\=").replace(":", "\\:").replace(" ", "\\ ")
    elif out.startswith(" "):
        out = "\\" + out
    for ch in "#!":
        if out.startswith(ch):
            out = "\\" + out
    return out


def format_properties(props: dict[str, str], header: str = "rendered by pytest-kafka-mirror") -> str:
    lines = [f"# {header}"] + [f"{_escape(k, key=True)} = {_escape(v, key=False)}" for k, v in props.items()]
    return "\n".join(lines) + "\n"


_UNESCAPE = {"n": "\n", "r": "\r", "t": "\t", "f": "\f"}


def parse_properties(text: str) -> dict[str, str]:
    """java.util.Properties lines (``key = value``, ``key: value``, ``key value``) -> dict.

    The inverse of :func:`format_properties` (escapes, comments, blank lines); line
    continuations are not supported (the plugin never writes them).
    """
    out: dict[str, str] = {}
    for line in text.splitlines():
        stripped = line.lstrip()
        if not stripped or stripped[0] in "#!":
            continue
        key: list[str] = []
        i, n = 0, len(stripped)
        while i < n:
            ch = stripped[i]
            if ch == "\\" and i + 1 < n:
                key.append(_UNESCAPE.get(stripped[i + 1], stripped[i + 1]))
                i += 2
                continue
            if ch in "=: \t":
                break
            key.append(ch)
            i += 1
        rest = stripped[i:].lstrip(" \t")
        if rest[:1] in ("=", ":"):
            rest = rest[1:].lstrip(" \t")
        value: list[str] = []
        j = 0
        while j < len(rest):
            if rest[j] == "\\" and j + 1 < len(rest):
                value.append(_UNESCAPE.get(rest[j + 1], rest[j + 1]))
                j += 2
            else:
                value.append(rest[j])
                j += 1
        out["".join(key)] = "".join(value)
    return out


def naming_from_properties(props: dict[str, str], source_alias: str = "source") -> NamingPolicy:
    """Target topic names under the effective replication policy; ValueError when unknown."""
    policy = props.get("replication.policy.class", DEFAULT_POLICY).strip()
    short = policy.rsplit(".", 1)[-1]
    if short == "IdentityReplicationPolicy":
        return NamingPolicy()
    if short == "DefaultReplicationPolicy":
        return NamingPolicy(source_alias + props.get("replication.policy.separator", "."))
    raise ValueError(
        f"cannot tell MM2's target topic names under replication.policy.class={policy}; "
        "set --kafka-mirror-naming to the names it produces (identity | prefix:PREFIX)"
    )


def mm2_container_script(image: str) -> list[str]:
    """The MM2 launcher inside ``image``; ValueError for images without Connect."""
    from ..clusters.container import image_flavour

    flavour = image_flavour(image)
    repo = image.split("@", 1)[0].rsplit("/", 1)[-1].split(":", 1)[0]
    if flavour == "apache" and repo == "kafka":
        return ["/opt/kafka/bin/connect-mirror-maker.sh"]
    if flavour == "confluent":
        return ["connect-mirror-maker"]
    raise ValueError(
        f"image {image!r} has no MirrorMaker 2: use an Apache Kafka image (apache/kafka; not kafka-native) "
        "or a Confluent one (confluentinc/cp-kafka)"
    )


class MirrorMaker2(RunnerReplicator):
    """MirrorMaker 2 (dedicated mode) from a Kafka distribution or a container image.

    ``instance`` (default: the topic prefix and 8 random hex digits) names this MM2's
    Connect group and internal topics (:func:`worker_properties`); it is fixed for the
    object's life, so ``stop()`` + ``start()`` is an operator's restart: SIGTERM lets
    the worker commit its source offsets, write its connectors and tasks UNASSIGNED to
    the status topic and leave its group; the next start joins the same (now empty)
    group, becomes its leader, reads the connector and task configs it wrote and
    resumes from its committed offsets.  ``stop()`` returns once the process (or
    container) has exited (SIGKILL after ``stop_timeout``), so two generations never
    run at once.  ``--kafka-mirror-replicator-properties`` still win over every
    rendered key, these included.
    """

    def __init__(
        self,
        source: Cluster,
        target: Cluster,
        workdir: str | os.PathLike[str],
        *,
        topic_prefix: str,
        home: str | None = None,
        image: str | None = None,
        overrides: tuple[tuple[str, str], ...] = (),
        naming: NamingPolicy | None = None,
        startup_timeout: float = STARTUP_TIMEOUT,
        heap: str = "-Xms256M -Xmx1G",
        instance: str | None = None,
    ) -> None:
        if (home is None) == (image is None):
            raise ValueError("MirrorMaker2 needs exactly one of home= or image=")
        self.home = Path(home) if home else None
        self.image = image
        self.overrides = tuple(overrides)
        self.heap = heap
        self.source_alias, self.target_alias = "source", "target"
        #: this MM2's own Connect group and internal topics, the same over its restarts
        self.instance = instance or f"{topic_prefix}-{uuid.uuid4().hex[:8]}"
        self.properties = render_mm2_properties(
            source_bootstrap=source.bootstrap_servers,
            target_bootstrap=target.bootstrap_servers,
            topics=topics_regex(topic_prefix),
            source_is_tansu=is_tansu(source),
            target_is_tansu=is_tansu(target),
            instance=self.instance,
            overrides=self.overrides,
        )
        #: where the copying herder (source -> target) writes its connector and task states
        self.status_topic = herder_topic(self.properties, "status", self.source_alias, self.target_alias)
        try:
            #: what this MM2 does about consumer groups, from its properties (the failover checks read it)
            self.checkpoints = MM2_DEFAULTS.with_properties(self.properties)[0]
        except ValueError as exc:
            raise ReplicatorError(f"MirrorMaker 2: {exc}") from None
        #: MM2's heartbeats carry no emitter id: the replicated heartbeats topic is this MM2's alone
        self.heartbeat_emitter: str | None = None
        derived = self._derive_naming(naming)
        super().__init__(
            source, target, workdir, topic_prefix=topic_prefix, naming=derived, startup_timeout=startup_timeout
        )
        self.spec = f"mm2:container:{image}" if image else f"mm2:{self.home}"
        self.label = f"MirrorMaker 2 ({image or self.home})"
        self.config_dir = self.workdir / "mm2-config"
        self.properties_path = self.config_dir / "mm2.properties"

    def _derive_naming(self, explicit: NamingPolicy | None) -> NamingPolicy:
        try:
            derived = naming_from_properties(self.properties, self.source_alias)
        except ValueError:
            if explicit is None:
                raise ReplicatorError(
                    f"MM2 uses replication.policy.class={self.properties['replication.policy.class']}: "
                    "set --kafka-mirror-naming to the target topic names it produces"
                ) from None
            return explicit
        if explicit is not None and explicit != derived:
            policy = self.properties["replication.policy.class"].rsplit(".", 1)[-1]
            raise ReplicatorError(
                f"--kafka-mirror-naming {explicit} contradicts MM2's {policy}, which names target topics {derived} "
                f"(e.g. 'km-x' -> {derived.target('km-x')!r}). Drop --kafka-mirror-naming (MM2's naming is derived "
                f"from its policy), or choose the policy with --kafka-mirror-replicator-properties "
                f"replication.policy.class={IDENTITY_POLICY if explicit.prefix == '' else DEFAULT_POLICY}"
            )
        return derived

    def status(self) -> str:
        """The connectors' and tasks' states from the status topic on the target (one
        line, see :func:`~.connect_status.describe_status_topic`); never raises."""
        from .connect_status import describe_status_topic

        try:
            client_config = getattr(self.target, "client_config", None)
            config = client_config() if callable(client_config) else {"bootstrap.servers": self.target.bootstrap_servers}
            text = describe_status_topic(config, self.status_topic)
        except Exception as exc:
            text = f"cannot read it: {type(exc).__name__}: {exc}"
        return f"MirrorMaker 2's Connect status ({self.status_topic}): {text}"

    def render(self) -> Path:
        """Write mm2.properties (readable by the container's non-root user)."""
        self.config_dir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.config_dir, 0o755)
        self.properties_path.write_text(format_properties(self.properties, "MirrorMaker 2, rendered by pytest-kafka-mirror"))
        os.chmod(self.properties_path, 0o644)
        return self.properties_path

    def _launch(self) -> Any:
        self.render()
        if self.home is not None:
            env = dict(os.environ)
            env.setdefault("KAFKA_HEAP_OPTS", self.heap)
            env["LOG_DIR"] = str(self.workdir / "logs")
            proc = ManagedProcess(
                self.label,
                [str(self.home / "bin" / "connect-mirror-maker.sh"), str(self.properties_path)],
                self.workdir / f"mm2-{self.starts}.log",
                env=env,
                cwd=self.workdir,
            )
            return proc.start()
        from ..processes.docker import DockerUnavailable, ManagedContainer

        assert self.image is not None
        container = ManagedContainer(
            self.label,
            self.image,
            role="mm2",
            log_path=self.workdir / f"mm2-{self.starts}.log",
            command=[*mm2_container_script(self.image), f"{CONTAINER_CONFIG_DIR}/mm2.properties"],
            env={"KAFKA_HEAP_OPTS": self.heap},
            volumes=[(str(self.config_dir), CONTAINER_CONFIG_DIR, "ro")],
        )
        try:
            return container.start()
        except DockerUnavailable as exc:
            raise ReplicatorError(str(exc)) from None
