"""``mm1:VERSION`` / ``mm1:KAFKA_HOME``: the legacy MirrorMaker (``kafka.tools.MirrorMaker``, Kafka <= 3.9).

A second real replicator, with other semantics than MirrorMaker 2:

* a consumer group on the source, subscribed to ``^PREFIX-.*``; its committed offsets are
  its position (``--offset.commit.interval.ms``, and at a graceful stop), so a restart
  resumes there and a crash copies again what followed the last commit;
* one producer on the target; a record keeps its key, value, timestamp and headers, but
  not its partition: the producer's partitioner places it by key (a lane stays in one
  partition, possibly another number than on the source; keyless records go anywhere);
* identity topic names, no offset translation (no offset syncs, checkpoints or
  heartbeats: the failover scenarios skip, saying so);
* it never creates topics.  Operators pre-create them or let the target broker
  auto-create them with its default partition count; here :class:`TopicFollower` creates
  each target topic as it appears on the source (same partitions, the source's
  non-default configs, grown when the source grows), as an operator's script would.

Runs as ``java -cp libs/* kafka.tools.MirrorMaker --consumer.config ... --producer.config
... --include REGEX`` from a release the plugin resolved from Maven Central or an
unpacked distribution.  ``--kafka-mirror-replicator-properties``: ``consumer.KEY=VALUE`` and
``producer.KEY=VALUE`` go into the client configurations, ``num.streams`` and
``offset.commit.interval.ms`` are MirrorMaker's own options.
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._clientconf import format_properties, is_secret, write_private
from ..processes.managed import ManagedProcess
from ._java_client import client_properties_of, java_client_properties, warn_untranslated
from ._periodic import Periodic
from ._runner import RunnerReplicator
from .base import NamingPolicy, ReplicatorError
from .settings import EffectiveSettings
from .mm2 import JAVA_MAX_REQUEST_SIZE, RECORD_OVERHEAD, is_tansu, topics_regex

if TYPE_CHECKING:
    from ..clusters.base import Cluster
    from ..clusters.kafka_dist import KafkaRelease

__all__ = ["MAIN_CLASS", "MM1_NAMES", "LegacyMirrorMaker", "TopicFollower", "render_mm1"]

log = logging.getLogger("pytest_kafka_mirror.mm1")

MAIN_CLASS = "kafka.tools.MirrorMaker"
#: MirrorMaker's own options that --kafka-mirror-replicator-properties may set
OPTIONS = {"num.streams": "1", "offset.commit.interval.ms": "1000"}
#: why the failover checks skip (MirrorFailover reads it)
#: MM2's names of the settings failure messages quote (:data:`.settings.FEATURE_SETTINGS`)
#: -> MirrorMaker 1's: its client configurations' keys as ``consumer.KEY`` / ``producer.KEY``
#: (how --kafka-mirror-replicator-properties sets them), its own options, ``--include``.
#: An MM2 setting missing here (checkpoints, heartbeats, exactly-once, header converters ...)
#: is no setting of MirrorMaker 1: quoted as such.
MM1_NAMES = {
    "topics": "--include",
    # a new topic is found by the regex subscription at a metadata refresh
    "refresh.topics.interval.seconds": "consumer.metadata.max.age.ms",
    "{target}.offset.flush.interval.ms": "offset.commit.interval.ms",
    "{source}.consumer.isolation.level": "consumer.isolation.level",
    "{source}.consumer.auto.offset.reset": "consumer.auto.offset.reset",
    "{target}.producer.max.request.size": "producer.max.request.size",
    "{source}.consumer.max.partition.fetch.bytes": "consumer.max.partition.fetch.bytes",
}
#: the defaults of those (the Java clients' and MirrorMaker's own)
MM1_DEFAULTS = {
    "consumer.metadata.max.age.ms": "300000",
    "offset.commit.interval.ms": "60000",
    "consumer.isolation.level": "read_uncommitted",
    "consumer.auto.offset.reset": "latest",
    "producer.max.request.size": "1048576",
    "consumer.max.partition.fetch.bytes": "1048576",
}
NO_TRANSLATION = ("the legacy MirrorMaker (mm1) translates no consumer-group offsets: it writes no offset syncs, "
                  "checkpoints or heartbeats, so a failing-over consumer has nothing to resume from")


def render_mm1(
    *,
    source_bootstrap: str,
    target_bootstrap: str,
    group_id: str,
    source_is_tansu: bool = False,
    max_record_bytes: int | None = None,
    overrides: tuple[tuple[str, str], ...] = (),
    source_client: Mapping[str, str] | None = None,
    target_client: Mapping[str, str] | None = None,
) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
    """(consumer properties, producer properties, MirrorMaker options); ValueError for an
    override that is none of ``consumer.*``, ``producer.*`` or a known option.
    ``source_client`` / ``target_client``: the clusters' librdkafka client properties,
    given to the consumer / producer in the Java clients' names (:mod:`._java_client`)."""
    fits = str(max(JAVA_MAX_REQUEST_SIZE, (max_record_bytes or 0) + RECORD_OVERHEAD))
    consumer = {
        "bootstrap.servers": source_bootstrap,
        "group.id": group_id,
        "auto.offset.reset": "earliest",
        # the regex subscription finds a new topic at a metadata refresh (default: 5 min)
        "metadata.max.age.ms": "2000",
        "max.partition.fetch.bytes": fits,
    }
    if source_is_tansu:
        consumer["fetch.max.wait.ms"] = "50"  # Tansu does not wake a waiting fetch
    producer = {"bootstrap.servers": target_bootstrap, "acks": "all", "max.request.size": fits}
    consumer.update(java_client_properties(source_client or {})[0])
    producer.update(java_client_properties(target_client or {})[0])
    options = dict(OPTIONS)
    for key, value in overrides:
        if key.startswith("consumer."):
            consumer[key[len("consumer."):]] = value
        elif key.startswith("producer."):
            producer[key[len("producer."):]] = value
        elif key in OPTIONS:
            options[key] = value
        else:
            raise ValueError(f"mm1 takes consumer.KEY=VALUE, producer.KEY=VALUE, {' or '.join(OPTIONS)}; "
                             f"not {key}={value}")
    return consumer, producer, options


class TopicFollower:
    """Creates each source topic matching ``topics`` on the target (same name and
    partition count, the source's non-default configs) and grows it when the source
    grows: what an operator of a legacy MirrorMaker does.  A thread, every ``interval`` s."""

    def __init__(self, source: Cluster, target: Cluster, topics: str, *, interval: float = 0.5) -> None:
        import re

        self.source, self.target = source, target
        self.pattern = re.compile(topics)
        self.interval = interval
        self.created: list[str] = []
        # a broker restarting: try again next round
        self._thread = Periodic("kafka-mirror-mm1-topics", interval, self.follow,
                                lambda exc: log.debug("mm1 topic follower: %s", exc))

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._thread.stop()

    def follow(self) -> None:
        """One round: create or grow what the target lacks."""
        src = self.source.admin().list_topics(timeout=5).topics  # type: ignore[attr-defined]
        dst = self.target.admin().list_topics(timeout=5).topics  # type: ignore[attr-defined]
        for name, meta in src.items():
            if not self.pattern.match(name) or meta.error is not None:
                continue
            have = dst.get(name)
            if have is None or have.error is not None:
                self.target.create_topic(name, len(meta.partitions), config=self._configs(name))
                self.created.append(name)
            elif len(have.partitions) < len(meta.partitions):
                self.target.add_partitions(name, len(meta.partitions))  # type: ignore[attr-defined]

    def _configs(self, topic: str) -> dict[str, str]:
        from confluent_kafka.admin import ConfigResource, ConfigSource

        res = ConfigResource(ConfigResource.Type.TOPIC, topic)
        try:
            entries = self.source.admin().describe_configs([res])[res].result(timeout=5)  # type: ignore[attr-defined]
        except Exception:
            return {}
        return {k: e.value for k, e in entries.items()
                if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value and e.value is not None}


class LegacyMirrorMaker(RunnerReplicator):
    """``kafka.tools.MirrorMaker`` from ``release`` (see the module docstring)."""

    release: KafkaRelease
    #: the failover checks skip with this reason (no offset syncs, no checkpoints)
    no_translation = NO_TRANSLATION
    #: why the topic-config sync scenario skips it
    no_config_sync = ("the legacy MirrorMaker (mm1) copies records only: it creates no remote topics and "
                      "copies no topic configs")

    def __init__(
        self,
        source: Cluster,
        target: Cluster,
        workdir: str | os.PathLike[str],
        release: KafkaRelease,
        *,
        topic_prefix: str,
        overrides: tuple[tuple[str, str], ...] = (),
        naming: NamingPolicy | None = None,
        startup_timeout: float = 60.0,
        max_record_bytes: int | None = None,
        heap: str = "-Xms64M -Xmx384M",
        instance: str | None = None,
        origins: Mapping[str, str] | None = None,
    ) -> None:
        if naming is not None and naming != NamingPolicy():
            raise ReplicatorError(f"--kafka-mirror-naming {naming}: the legacy MirrorMaker keeps topic names "
                                  f"(identity); drop the option")
        super().__init__(source, target, workdir, topic_prefix=topic_prefix, naming=NamingPolicy(),
                         startup_timeout=startup_timeout)
        self.release = release
        self.heap = heap
        #: its consumer group on the source: its state, the same over its restarts (and for a
        #: replacement given ``instance``: an in-place upgrade)
        self.instance = self.group_id = instance or f"{topic_prefix}-kafka-mirror-mm1-{uuid.uuid4().hex[:8]}"
        try:
            self.consumer, self.producer, self.options = render_mm1(
                source_bootstrap=source.bootstrap_servers, target_bootstrap=target.bootstrap_servers,
                group_id=self.group_id, source_is_tansu=is_tansu(source), max_record_bytes=max_record_bytes,
                overrides=overrides, source_client=client_properties_of(source),
                target_client=client_properties_of(target))
        except ValueError as exc:
            raise ReplicatorError(f"--kafka-mirror-replicator-properties: {exc}") from None
        warn_untranslated("MirrorMaker 1", {"source": source, "target": target})
        self.topics = topics_regex(topic_prefix)
        self.follower = TopicFollower(source, target, self.topics)
        self.spec = f"mm1:{release.version_text}" if release.components.get("mm1") is True else f"mm1:{release.home}"
        self.label = f"MirrorMaker 1 ({release.version_text})"
        self.config_dir = self.workdir / "mm1-config"
        self.origins = dict(origins or {})

    def effective_settings(self) -> EffectiveSettings:
        """Its client configurations and options as it runs with them, each with where it
        came from, under MM2's names for what a failure quotes (:data:`MM1_NAMES`)."""
        props = {"--include": self.topics, **{f"consumer.{k}": v for k, v in self.consumer.items()},
                 **{f"producer.{k}": v for k, v in self.producer.items()}, **self.options}
        return EffectiveSettings(props, origins=self.origins, defaults=MM1_DEFAULTS,
                                 defaults_from="the client's or MirrorMaker's default", name="MirrorMaker 1",
                                 only_defaults=True, names=MM1_NAMES)

    @property
    def commit_interval_s(self) -> float:
        """How often it commits its consumer offsets (``--offset.commit.interval.ms``)."""
        return int(self.options.get("offset.commit.interval.ms", "60000")) / 1000

    @property
    def commit_interval_setting(self) -> str:
        """Where :attr:`commit_interval_s` comes from, as in effect."""
        ms = self.options.get("offset.commit.interval.ms")
        return f"--offset.commit.interval.ms {ms}" if ms else "offset.commit.interval.ms=60000, MirrorMaker's default"

    def argv(self) -> list[str]:
        """Write the client configurations; the command line."""
        self.config_dir.mkdir(parents=True, exist_ok=True)
        consumer, producer = self.config_dir / "consumer.properties", self.config_dir / "producer.properties"
        for path, props, what in ((consumer, self.consumer, "consumer"), (producer, self.producer, "producer")):
            secret = any(is_secret(k) and v for k, v in props.items())
            write_private(path, format_properties(props, f"MirrorMaker 1 {what}, rendered by pytest-kafka-mirror"),
                          0o600 if secret else 0o644)
        args = ["--consumer.config", str(consumer), "--producer.config", str(producer), "--include", self.topics,
                "--abort.on.send.failure", "true"]
        for key, value in self.options.items():
            args += [f"--{key}", value]
        log_config = self.release.write_log_config(self.config_dir, ("org.apache.kafka.clients.consumer.ConsumerConfig",
                                                                     "org.apache.kafka.clients.producer.ProducerConfig"))
        return self.release.java_argv(MAIN_CLASS, args, heap=self.heap, log_config=log_config)

    def _launch(self) -> Any:
        self.follower.start()
        return ManagedProcess(self.label, self.argv(), self.workdir / f"mm1-{self.starts}.log", cwd=self.workdir).start()

    def stop(self) -> None:
        super().stop()
        self.follower.stop()

    def kill(self) -> None:
        super().kill()
        self.follower.stop()

    @property
    def process(self) -> ManagedProcess | None:
        return self.runner  # type: ignore[no-any-return]

    @property
    def config_files(self) -> list[Path]:
        return [self.config_dir / "consumer.properties", self.config_dir / "producer.properties"]
