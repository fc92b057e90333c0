"""``mm2:VERSION``, ``mm2:KAFKA_HOME`` and ``mm2:container:IMAGE``: MirrorMaker 2 in dedicated mode.

``java -cp libs/* org.apache.kafka.connect.mirror.MirrorMaker mm2.properties`` (what
``bin/connect-mirror-maker.sh`` runs) from a release the plugin resolved from Maven
Central (``mm2:4.3.1``, see ``clusters/kafka_dist.py``) or an unpacked distribution, or the
image's own script in a container, with an ``mm2.properties`` rendered from
the two clusters and the test topic prefix (:func:`render_mm2_properties`, unit-tested),
then user overrides (``--kafka-mirror-replicator-properties`` / ini
``kafka_mirror_replicator_properties``) applied on top.  The target topic names follow
from the effective ``replication.policy.class`` (:func:`naming_from_properties`):
``DefaultReplicationPolicy`` → ``source.TOPIC``, ``IdentityReplicationPolicy`` → ``TOPIC``.
The aliases are ``source`` and ``target`` unless the flow is one of a topology
(``MirrorEnv.add_flow``): the reverse flow of an active-active pair is ``target -> source``
(a topic of that cluster is ``target.TOPIC`` on the other), so that MM2's own cycle
detection recognises ``source.TOPIC`` as a copy it must not send back.

Readiness is a probe record copied from source to target, not a log line: a real MM2
comes up in 5 s from Kafka 3.6 on (with ``plugin.discovery=service_load``, rendered), but
an older release scans its classpath for plugins first (30-45 s), and a loaded machine
slows either, so the start-up limit defaults to :data:`STARTUP_TIMEOUT`.  Its log is the
process output (home) or the container log, quoted in start-up errors and attached to failed tests.

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

import dataclasses
import logging
import os
import re
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._clientconf import format_properties, is_secret, parse_properties, write_private
from ..clusters.base import free_port
from ..processes.managed import ManagedProcess
from ._checkpoints import MM2_DEFAULTS
from ._java_client import client_properties_of, java_client_properties, warn_untranslated
from ._runner import RunnerReplicator
from .base import NamingPolicy, ReplicatorError
from .mm2_user import (
    PROPERTIES_SUFFIX,
    Based,
    Change,
    UserProperties,
    apply_user_properties,
    connector_scoped,
    describe_based,
)
from .settings import EffectiveSettings

if TYPE_CHECKING:
    from ..clusters.base import Cluster
    from ..clusters.kafka_dist import KafkaRelease

__all__ = [
    "STARTUP_TIMEOUT",
    "MirrorMaker2",
    "exactly_once",
    "format_properties",
    "herder_topic",
    "mm2_container_script",
    "naming_from_properties",
    "parse_properties",
    "preview_user_properties",
    "remote_aware_regex",
    "render_mm2",
    "render_mm2_properties",
    "topics_regex",
    "worker_properties",
]

log = logging.getLogger("pytest_kafka_mirror.mm2")
#: what a setting rendered from the plugin's template says it came from when your mm2.properties is the base
RENDERED_WITH_BASE = "rendered by the plugin: your mm2.properties does not set it"
#: Default start-up limit: MM2 4.3.1 copies its first record 5 s after its start; a
#: release before 3.6 scans its classpath for plugins first (30-45 s measured).
STARTUP_TIMEOUT = 180.0
#: dedicated mode's entry point (what ``bin/connect-mirror-maker.sh`` runs)
MAIN_CLASS = "org.apache.kafka.connect.mirror.MirrorMaker"
#: the worker's heap (``connect-mirror-maker.sh``: -Xms256M -Xmx2G; a test MM2 copies far less)
HEAP = "-Xms128M -Xmx768M"
#: loggers at WARN in MM2's log: every client and connector prints its whole configuration
#: at INFO on each (re)start, which buried the lines that say what went wrong
QUIET_LOGGERS = (
    "org.apache.kafka.clients.consumer.ConsumerConfig", "org.apache.kafka.clients.producer.ProducerConfig",
    "org.apache.kafka.clients.admin.AdminClientConfig", "org.apache.kafka.connect.runtime.distributed.DistributedConfig",
    "org.apache.kafka.connect.runtime.ConnectorConfig", "org.apache.kafka.connect.runtime.SourceConnectorConfig",
    "org.apache.kafka.connect.runtime.TaskConfig", "org.apache.kafka.connect.mirror.MirrorSourceConfig",
    "org.apache.kafka.connect.mirror.MirrorCheckpointConfig", "org.apache.kafka.connect.mirror.MirrorHeartbeatConfig",
    "org.apache.kafka.connect.mirror.MirrorMakerConfig", "org.apache.kafka.connect.mirror.MirrorConnectorConfig",
    "org.apache.kafka.connect.mirror.MirrorSourceTaskConfig", "org.apache.kafka.connect.mirror.MirrorCheckpointTaskConfig",
    "org.apache.kafka.connect.json.JsonConverterConfig", "org.apache.kafka.connect.storage.StringConverterConfig",
    "org.apache.kafka.common.utils.AppInfoParser", "org.apache.kafka.common.telemetry", "org.reflections",
)
POLICY_PACKAGE = "org.apache.kafka.connect.mirror."
DEFAULT_POLICY = POLICY_PACKAGE + "DefaultReplicationPolicy"
IDENTITY_POLICY = POLICY_PACKAGE + "IdentityReplicationPolicy"
CONTAINER_CONFIG_DIR = "/etc/kafka-mirror"


def topics_regex(topic_prefix: str) -> str:
    """The topic filter every replicator gets: ``^PREFIX-.*`` (a full match in Java, which
    MM2, uReplicator, Brooklin and Confluent Replicator use, and a search in Python)."""
    return "^" + re.escape(topic_prefix) + "-.*"


def remote_aware_regex(topic_prefix: str, separator: str = ".") -> str:
    """The topic filter of a flow in a topology of several flows: the test topics and their
    remote copies under any chain of cluster aliases (``^(?:ALIAS.)*PREFIX-.*``).

    With the plain ``^PREFIX-.*`` the reverse flow of an active-active pair never even
    considers ``source.PREFIX-x`` on its source: no cycle would be seen because of the
    filter, whatever the replicator does.  With this one it is the replicator's cycle
    detection that must keep ``source.PREFIX-x`` from going back (MM2: ``isCycle``, a topic
    whose source alias is the flow's target alias is never replicated)."""
    return "^(?:[A-Za-z0-9_-]+" + re.escape(separator) + ")*" + re.escape(topic_prefix) + "-.*"


def is_tansu(cluster: Cluster) -> bool:
    """An embedded Tansu broker, a Tansu container, or one of them shared by the xdist workers."""
    return cluster.flavour == "tansu"


def replication_of(cluster: Cluster) -> int:
    """The replication factor of the topics MM2 creates on ``cluster`` (-1: its broker's default)."""
    rf = cluster.replication_factor
    return rf if rf != 0 else -1


#: the Java clients' default ``max.request.size`` / ``max.partition.fetch.bytes`` (1 MiB)
JAVA_MAX_REQUEST_SIZE = 1024 * 1024
#: room for a record batch's header and a record's own framing, keys and headers
RECORD_OVERHEAD = 64 * 1024
#: Kafka's default ``message.max.bytes``: the largest record a topic without a
#: ``max.message.bytes`` of its own accepts
KAFKA_MESSAGE_MAX_BYTES = 1048588

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


def render_mm2_properties(**kwargs: Any) -> dict[str, str]:
    """The properties alone of :func:`render_mm2` (same arguments)."""
    return render_mm2(**kwargs).properties


def render_mm2(
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
    source_replication: int = 1,
    target_replication: int = 1,
    max_record_bytes: int | None = None,
    source_client: Mapping[str, str] | None = None,
    target_client: Mapping[str, str] | None = None,
    base: UserProperties | None = None,
) -> Based:
    """The properties of a one-way ``source -> target`` MM2; with ``instance``, its own
    Connect group and internal topics (:func:`worker_properties`).

    ``source_client`` / ``target_client``: the clusters' librdkafka client properties
    (security), rendered in the Java clients' names as ``ALIAS.KEY`` (see
    :mod:`._java_client`): MM2's clients of that cluster and the Connect worker of the
    herder that writes to it use them.  Untranslated keys are left out (the caller warns).

    ``source_replication`` / ``target_replication``: the replication factor of every topic
    MM2 creates on that cluster (remote topics, checkpoints, heartbeats, offset syncs,
    Connect's internal topics; -1: the broker's default), set per cluster so that a
    single-node cluster on one side and a three-broker one on the other both work.
    ``max_record_bytes``: the largest record the session may produce; MM2's producer
    (``max.request.size``, 1 MiB by default: a 1 MiB record is refused and kills its task)
    and consumer (``max.partition.fetch.bytes``) are sized to carry it, with room for the
    batch overhead.  (The remote topic gets the source topic's ``max.message.bytes`` from
    MM2's own config sync when it creates it.)

    ``base``: your own mm2.properties (:mod:`.mm2_user`): its lines over this template,
    but for what the session needs (the template's keys marked required here, each with
    its reason).  ``overrides`` win over both."""
    a, b = source_alias, target_alias
    flow = f"{a}->{b}"
    syncs_on = syncs_written_on(base, overrides, (a, b))
    props, required = _template(a, b, source_bootstrap=source_bootstrap, target_bootstrap=target_bootstrap,
                                topics=topics, source_replication=source_replication,
                                target_replication=target_replication, max_record_bytes=max_record_bytes,
                                syncs_on=syncs_on)
    if instance is not None:
        worker = worker_properties(instance, a, b)
        props.update(worker)
        required.update(dict.fromkeys(worker, "this MM2's own Connect group and internal topics: MM2 derives them "
                                              "from the aliases, and every MM2 on these clusters would join one group"))
    for alias, client, role in ((a, source_client, "source"), (b, target_client, "target")):
        keys = {f"{alias}.{k}": v for k, v in java_client_properties(client or {})[0].items()}
        props.update(keys)
        required.update(dict.fromkeys(keys, f"the session's {role} cluster's client properties"))
    if source_is_tansu:
        # Tansu does not wake a waiting fetch on new data: bound the wait instead.
        props[f"{a}.consumer.fetch.max.wait.ms"] = "50"
        required[f"{a}.consumer.fetch.max.wait.ms"] = "a Tansu source does not wake a waiting fetch"
    if source_is_tansu or target_is_tansu:
        # else the topic-config sync deletes the configs Tansu reports as defaults
        props[f"{flow}.use.defaults.from"] = "source"
        required[f"{flow}.use.defaults.from"] = ("Tansu reports every topic config as a default: the config sync "
                                                 "would delete them")
    if base is None:
        based = Based(props, {})
    else:
        for alias in (a, b):
            # a REST listener of your file has a fixed port: two MM2s on this machine (xdist
            # workers, a test's own) would collide, so each gets a free one
            if any(base.renamed(k, (a, b)) == f"{alias}.listeners" for _, k, _ in base.lines):
                props[f"{alias}.listeners"] = f"http://127.0.0.1:{free_port()}"
                required[f"{alias}.listeners"] = "a port of its own: several MM2s may run on this machine at once"
        for _, written, _ in base.lines:
            key = base.renamed(written, (a, b)) or ""
            if connector_scoped(key) and key.endswith("replication.factor"):
                # a connector's own replication factor (a Strimzi resource's): as the flow's
                flow_key = f"{flow}.{key.split('.', 1)[1]}"
                props[key] = props.get(flow_key, str(target_replication))
                required[key] = required.get(flow_key, "a topic on the session's target cluster, with the "
                                                       "replication factor it allows")
        based = apply_user_properties(base, props, required, (a, b))
    props = based.properties
    given = dict(overrides)
    for key, value in overrides:
        props[key] = value
        # an override is the test's or the user's word: over a connector's own key too
        # (a Strimzi resource's MirrorCheckpointConnector.X), unless it names one itself
        bare = key[len(flow) + 1:] if key.startswith(flow + ".") else key
        for scoped in [k for k in props if connector_scoped(k) and k.split(".", 1)[1] == bare and k not in given]:
            props[scoped] = value
            based.overridden[scoped] = key
            line, written, was = next(((n, w, v) for n, w, v in (base.lines if base else ())
                                       if base.renamed(w, (a, b)) == scoped), (0, scoped, ""))  # type: ignore[union-attr]
            based.changes.append(Change(line, written, was, scoped, "replaced", value, f"{key} given for this run"))
    if not offset_syncs(props, flow):
        # MM2's source connector refuses its config when offset syncs are off and any
        # offset-syncs.topic.* (or offset-syncs-*) key is set (KIP-1031): drop ours
        given = {k for k, _ in overrides} | {k for k, o in based.origins.items() if base and o == base.origin}
        for key in (f"{flow}.offset-syncs.topic.replication.factor", "offset-syncs.topic.location"):
            if key not in given:
                props.pop(key, None)
    if exactly_once(props):
        # A worker with exactly-once source support fences its tasks' producers through the
        # leader's REST API: dedicated MM2 has it only with its internal REST server (KIP-710),
        # one listener per herder (each cluster that is some flow's target).
        props.setdefault("dedicated.mode.enable.internal.rest", "true")
        for alias in (a, b):
            props.setdefault(f"{alias}.listeners", f"http://127.0.0.1:{free_port()}")
    return based


def syncs_written_on(base: UserProperties | None, overrides: tuple[tuple[str, str], ...] | list[tuple[str, str]],
                     aliases: tuple[str, str]) -> str:
    """The cluster ("source" or "target") on which MM2's source connector writes, and
    creates, the offset-syncs topic: ``offset-syncs.topic.location`` of your file (the
    flow's key over the top-level one, a source connector's own over both), the overrides'
    over it; "source" by default."""
    flow = f"{aliases[0]}->{aliases[1]}"
    rank = {"offset-syncs.topic.location": 0, f"{flow}.offset-syncs.topic.location": 1,
            "MirrorSourceConnector.offset-syncs.topic.location": 2}
    found: dict[int, str] = {}
    for _, written, value in (base.lines if base is not None else ()):
        key = base.renamed(written, aliases) if base is not None else written
        if key in rank:
            found[rank[key]] = value
    given: dict[int, str] = {rank[k]: v for k, v in overrides if k in rank}
    chosen = (given or found)
    where = chosen[max(chosen)].strip().lower() if chosen else "source"
    return "target" if where == "target" else "source"


def _template(a: str, b: str, *, source_bootstrap: str, target_bootstrap: str, topics: str, source_replication: int,
              target_replication: int, max_record_bytes: int | None,
              syncs_on: str = "source") -> tuple[dict[str, str], dict[str, str]]:
    """The plugin's template of a ``a -> b`` MM2 (see :func:`render_mm2`), and which of its
    keys the session needs whatever a user's mm2.properties says (key -> why).  ``syncs_on``:
    the cluster the offset-syncs topic is on (:func:`syncs_written_on`)."""
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
        # every topic MM2 creates, internal ones included, with the replication factor of the
        # cluster it lives on: remote topics, checkpoints and heartbeats on the target, the
        # offset syncs where offset-syncs.topic.location puts them (the source by default),
        # each herder's Connect topics on its target (the reverse herder's on the source)
        f"{flow}.replication.factor": str(target_replication),
        f"{flow}.checkpoints.topic.replication.factor": str(target_replication),
        f"{flow}.heartbeats.topic.replication.factor": str(target_replication),
        f"{b}->{a}.heartbeats.topic.replication.factor": str(source_replication),
        f"{flow}.offset-syncs.topic.replication.factor": str(target_replication if syncs_on == "target"
                                                             else source_replication),
        **{f"{cluster}.{kind}.replication.factor": str(rf)
           for cluster, rf in ((b, target_replication), (a, source_replication))
           for kind in ("offset.storage", "status.storage", "config.storage")},
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
    # Connect scans the whole classpath for plugins by reflection, once for MM2's config and
    # once per herder: 16 + 9 + 7 s of a measured 4.3.1 start on this project's machine.
    # Every plugin of a release has ServiceLoader manifests (Connect says so in a WARN), so
    # the manifests suffice (KIP-898, Kafka 3.6; older releases ignore the key).
    for where in ("", f"{a}.", f"{b}."):
        props[f"{where}plugin.discovery"] = "service_load"
    if max_record_bytes is not None:
        fits = str(max(JAVA_MAX_REQUEST_SIZE, max_record_bytes + RECORD_OVERHEAD))
        props[f"{b}.producer.max.request.size"] = fits
        props[f"{a}.consumer.max.partition.fetch.bytes"] = fits
    # What a user's mm2.properties cannot change (the rest of the template is the plugin's
    # test tuning, which a user's line replaces): the clusters are the session's, ...
    required = {
        "clusters": f"the session's two clusters, {a} and {b}",
        f"{a}.bootstrap.servers": "the session's source cluster",
        f"{b}.bootstrap.servers": "the session's target cluster",
        # ... the flow is the one the session checks, one way, over the session's topics ...
        f"{flow}.enabled": "the flow the session tests",
        f"{b}->{a}.enabled": "one flow: the session copies source to target only",
        f"{flow}.topics": "the session's test topics",
        f"{flow}.groups": "the tests' witness consumer groups, named like their topics, for the failover checks",
    }
    # ... and every topic MM2 creates fits the session's clusters (a production file's
    # replication factor 3 on a one-broker test cluster: MM2 cannot create its topics)
    for key in props:
        if key.endswith("replication.factor"):
            on = ("source" if key.startswith((f"{b}->{a}.", f"{a}.")) else
                  syncs_on if ".offset-syncs." in key else "target")
            required[key] = f"a topic on the session's {on} cluster, with the replication factor it allows"
    return props, required


def preview_user_properties(path: str, *, topics: str, source_is_tansu: bool = False, target_is_tansu: bool = False,
                            source_client: Mapping[str, str] | None = None,
                            target_client: Mapping[str, str] | None = None, strimzi: bool = False) -> list[str]:
    """What the plugin will do to your mm2.properties (``strimzi``: your KafkaMirrorMaker2
    resource, replicators/strimzi.py), before any cluster exists (the
    session header): :func:`~.mm2_user.describe_based` of a rendering with stand-in
    addresses, keys only; each MM2 logs its own with the values.  ValueError when the file
    cannot be read or mapped."""
    from .mm2_user import read_user_properties

    notes: tuple[str, ...] = ()
    if strimzi:
        from .strimzi import read_strimzi

        resource = read_strimzi(path)
        base, notes = resource.user, resource.notes
    else:
        base = read_user_properties(path)
    based = render_mm2(source_bootstrap="SOURCE", target_bootstrap="TARGET", topics=topics, instance="ID",
                       source_is_tansu=source_is_tansu, target_is_tansu=target_is_tansu,
                       source_client=source_client, target_client=target_client, base=base)
    return describe_based(based, base, values=False) + list(notes)


def offset_syncs(props: dict[str, str], flow: str) -> bool:
    """Whether these MM2 properties leave offset syncs on (``emit.offset-syncs.enabled``,
    Kafka 3.9+; the flow's own key wins)."""
    value = props.get(f"{flow}.emit.offset-syncs.enabled", props.get("emit.offset-syncs.enabled", "true"))
    return value.strip().lower() != "false"


def exactly_once(props: dict[str, str]) -> bool:
    """Whether these MM2 properties ask for exactly-once source support (Kafka 3.5+),
    top-level or for a cluster (``exactly.once.source.support=enabled``)."""
    key = "exactly.once.source.support"
    return any((k == key or k.endswith("." + key)) and v.strip().lower() == "enabled" for k, v in props.items())


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
        release: KafkaRelease | None = None,
        overrides: tuple[tuple[str, str], ...] = (),
        naming: NamingPolicy | None = None,
        startup_timeout: float = STARTUP_TIMEOUT,
        heap: str = HEAP,
        instance: str | None = None,
        max_record_bytes: int | None = KAFKA_MESSAGE_MAX_BYTES,
        aliases: tuple[str, str] = ("source", "target"),
        topics: str | None = None,
        origins: Mapping[str, str] | None = None,
        base: UserProperties | None = None,
    ) -> None:
        if sum(x is not None for x in (home, image, release)) != 1:
            raise ValueError("MirrorMaker2 needs exactly one of home=, image= or release=")
        if home is not None:
            from ..clusters.kafka_dist import release_at

            try:
                release = release_at(home, need="mm2")
            except ValueError as exc:
                raise ReplicatorError(str(exc)) from None
        self.release = release
        self.home = release.home if release is not None else None
        self.image = image
        self.overrides = tuple(overrides)
        scoped = [k for k, _ in self.overrides if connector_scoped(k)] + [
            k for _, k, _ in (base.lines if base is not None else ()) if connector_scoped(k)]
        if scoped and not self.connectors_apart:
            raise ReplicatorError(f"{scoped[0]}: a setting of one connector, which MirrorMaker 2 on a Connect cluster "
                                  "(mm2-connect:) has; dedicated MirrorMaker 2 gives its three connectors one config "
                                  f"(set {scoped[0].split('.', 1)[1]} or source->target.{scoped[0].split('.', 1)[1]})")
        self.heap = heap
        #: the clusters' names in its properties: the reverse flow of an active-active pair
        #: swaps them, so that MM2's cycle detection knows the remote topics it must not copy back
        self.source_alias, self.target_alias = aliases
        #: this MM2's own Connect group and internal topics, the same over its restarts
        self.instance = instance or f"{topic_prefix}-{uuid.uuid4().hex[:8]}"
        #: its topic filter (``topics`` and ``groups`` of its flow)
        self.topics = topics or topics_regex(topic_prefix)
        #: your own mm2.properties, the base of the rendered one (``mm2:...,properties=FILE``)
        self.base = base
        rendered = render_mm2(
            source_bootstrap=source.bootstrap_servers,
            target_bootstrap=target.bootstrap_servers,
            topics=self.topics,
            source_alias=self.source_alias,
            target_alias=self.target_alias,
            source_is_tansu=is_tansu(source),
            target_is_tansu=is_tansu(target),
            instance=self.instance,
            overrides=self.overrides,
            source_replication=replication_of(source),
            target_replication=replication_of(target),
            max_record_bytes=max_record_bytes,
            source_client=client_properties_of(source),
            target_client=client_properties_of(target),
            base=base,
        )
        self.properties = rendered.properties
        #: what the plugin did to your mm2.properties (``base``): changed lines, renamed aliases, added keys
        self.based = rendered
        warn_untranslated("MirrorMaker 2", {"source": source, "target": target})
        #: where the given properties came from (the others are rendered): failure messages quote it
        self.origins = {**rendered.origins,
                        **{k: v for k, v in (origins or {}).items() if k in dict(self.overrides)}}
        for scoped, key in rendered.overridden.items():  # a connector's key an override replaced
            self.origins[scoped] = (origins or {}).get(key, self.origins.get(key, ""))
        self.settings = EffectiveSettings(self.properties, origins=self.origins, aliases=aliases,
                                          rendered=RENDERED_WITH_BASE if base else "rendered by the plugin")
        #: where the copying herder (source -> target) writes its connector and task states
        self.status_topic = herder_topic(self.properties, "status", self.source_alias, self.target_alias)
        try:
            #: what this MM2 does about consumer groups, from its properties (the failover checks read it)
            self.checkpoints = MM2_DEFAULTS.for_aliases(*aliases).with_properties(
                self.properties, f"{self.source_alias}->{self.target_alias}",
                origins={k: self.origins.get(k, self.settings.rendered) for k in self.properties})[0]
        except ValueError as exc:
            raise ReplicatorError(f"MirrorMaker 2: {exc}") from None
        if release is not None and release.version is not None and release.version < (3, 4, 1):
            # OffsetSyncStore before KAFKA-14666 (3.4.1, 3.5.0): the newest sync only
            self.checkpoints = dataclasses.replace(self.checkpoints, sync_store="latest")
        #: MM2's heartbeats carry no emitter id: the replicated heartbeats topic is this MM2's alone
        self.heartbeat_emitter: str | None = None
        derived = self._derive_naming(naming)
        super().__init__(
            source, target, workdir, topic_prefix=topic_prefix, naming=derived, startup_timeout=startup_timeout
        )
        if release is not None:
            cached = release.components.get("mm2") is True  # from the plugin's cache: named by its version
            self.spec = f"mm2:{release.version_text}" if cached else f"mm2:{release.home}"
            self.label = f"MirrorMaker 2 ({release.version_text}{'' if cached else ' from ' + str(release.home)})"
        else:
            self.spec = f"mm2:container:{image}"
            self.label = f"MirrorMaker 2 ({image})"
        if base is not None:
            if base.kind == "mm2.properties":
                self.spec += PROPERTIES_SUFFIX + str(base.path)
            self.label = f"{self.label[:-1]}, your {base.kind} {base.path})"
            for line in describe_based(rendered, base):
                log.info("%s: %s", self.label, line)
        self.config_dir = self.workdir / "mm2-config"
        self.properties_path = self.config_dir / "mm2.properties"

    #: whether each connector has a config of its own (``MirrorSourceConnector.X`` keys): on a Connect cluster
    connectors_apart = False

    def node(self, workdir: str | os.PathLike[str], *, heap: str | None = None) -> MirrorMaker2:
        """Another node of this MM2 cluster (KIP-710, Kafka's ``DedicatedMirrorIntegrationTest``):
        the same mm2.properties, so the same Connect groups and internal topics, in a process
        of its own (``workdir``; ``heap`` or this one's).  Several nodes need
        ``dedicated.mode.enable.internal.rest=true`` and their own REST ports
        (``listeners=http://127.0.0.1:0``): a follower forwards its task configs to the
        leader through it.  The caller starts and stops it like any replicator."""
        release = self.release if self.image is None else None
        sibling = MirrorMaker2(
            self.source, self.target, workdir, topic_prefix=self.topic_prefix, image=self.image, release=release,
            overrides=self.overrides, naming=self.naming, startup_timeout=self.startup_timeout,
            heap=heap or self.heap, instance=self.instance, aliases=(self.source_alias, self.target_alias),
            topics=self.topics, origins=self.origins, base=self.base,
        )
        sibling.properties = dict(self.properties)  # e.g. the record size limits: one cluster, one config
        sibling.settings = self.settings
        sibling.probe_topic = self.probe_topic
        sibling.warm_up_records = 0  # a node joins a group that is warm, or measures its own cold start
        sibling.label = f"{self.label} node {Path(workdir).name}"
        return sibling

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

    @property
    def detects_cycles(self) -> bool:
        """Whether it keeps a record from going back to the cluster it came from (a loop of
        flows, e.g. active-active): under DefaultReplicationPolicy, yes (``isCycle``: the
        alias in the name); under IdentityReplicationPolicy it cannot (names are kept)."""
        return self.properties.get("replication.policy.class", DEFAULT_POLICY).strip() in (DEFAULT_POLICY,
                                                                                           "DefaultReplicationPolicy")

    @property
    def commit_interval_s(self) -> float:
        """How often the copying herder commits its source offsets (``offset.flush.interval.ms``
        of the target's worker; Connect's default 60 s): a stop that cannot commit repeats
        at most what was copied since."""
        return int(self._commit_interval()[1]) / 1000

    @property
    def commit_interval_setting(self) -> str:
        """Where :attr:`commit_interval_s` comes from, as in effect: ``KEY=VALUE``."""
        key, ms = self._commit_interval()
        return f"{key}={ms}" if key else f"offset.flush.interval.ms={ms}, Connect's default"

    def _commit_interval(self) -> tuple[str, str]:
        """The key of ``offset.flush.interval.ms`` in effect for the target's worker ('' for
        Connect's default) and its value."""
        for key in (f"{self.target_alias}.offset.flush.interval.ms", "offset.flush.interval.ms"):
            if key in self.properties:
                return key, self.properties[key]
        return "", "60000"

    def effective_settings(self) -> EffectiveSettings:
        """Its mm2.properties as MM2 applies them to its flow, each with where it came from."""
        return self.settings

    def status(self) -> str:
        """The connectors' and tasks' states from the status topic on the target (one
        line, see :func:`~.connect_status.describe_status_topic`); never raises."""
        from .connect_status import describe_status_topic

        try:
            text = describe_status_topic(self.target.client_config(), self.status_topic,
                                         to_end_offsets=self._status_to_end_offsets())
        except Exception as exc:
            text = f"cannot read it: {type(exc).__name__}: {exc}"
        else:
            if "MirrorSourceConnector" not in text:
                # MM2 leaves a connector whose config it refuses out of Connect altogether
                text += ("; no MirrorSourceConnector in it: MM2 has not started one (a refused configuration? its log "
                         "says why, e.g. \"can't\")")
        return f"MirrorMaker 2's Connect status ({self.status_topic}): {text}"

    def _status_to_end_offsets(self) -> bool:
        """Whether the status topic is read to its end offsets (the target's watermarks are
        right) rather than until a quiet moment, which a loaded machine cuts short."""
        try:
            return self.target.capabilities().accurate_watermarks is True
        except Exception:  # an unprobeable target: read until quiet, as on the embedded broker
            return False

    def health(self) -> str:
        """The base check (the process runs), then the FAILED connectors and tasks this
        process's worker wrote to its status topic (Connect never restarts a FAILED task
        by itself: "will not recover until manually restarted")."""
        problem = super().health()
        if problem or self.runner is None:
            return problem
        from .connect_status import describe, failed, latest_statuses, read_status_topic

        try:
            records = read_status_topic(self.target.client_config(), self.status_topic, timeout=5.0, quiet=0.3,
                                        settle=1.0, to_end_offsets=self._status_to_end_offsets())
        except Exception as exc:
            return f"its Connect status ({self.status_topic}) cannot be read: {type(exc).__name__}: {exc}"
        since_ms = int(getattr(self.runner, "started_at", 0) * 1000)  # a container has no start time
        broken = failed(latest_statuses(records or []), since_ms)
        return f"MirrorMaker 2's Connect status ({self.status_topic}): {describe(broken)}" if broken else ""

    def render(self) -> Path:
        """Write mm2.properties: readable by the container's non-root user, or only by this
        user (mode 0600) when it holds a secret (a cluster's password or key)."""
        self.config_dir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.config_dir, 0o755)
        secret = any(is_secret(k) and v for k, v in self.properties.items())
        text = format_properties(self.properties, "MirrorMaker 2, rendered by pytest-kafka-mirror")
        if self.base is not None:
            notes = "".join(f"# {line}\n" for line in describe_based(self.based, self.base))
            text = f"# MirrorMaker 2: your {self.base.path}, changed by pytest-kafka-mirror where it must:\n{notes}{text}"
        write_private(self.properties_path, text, 0o600 if secret else 0o644)
        return self.properties_path

    def _launch(self) -> Any:
        self.render()
        if self.release is not None:
            log_config = self.release.write_log_config(self.config_dir, QUIET_LOGGERS)
            proc = ManagedProcess(
                self.label,
                self.release.java_argv(MAIN_CLASS, [str(self.properties_path)], heap=self.heap, log_config=log_config),
                self.workdir / f"mm2-{self.starts}.log",
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
