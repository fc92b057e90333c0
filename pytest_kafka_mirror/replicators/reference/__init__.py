"""``reference``: the built-in consume/produce mirror, run as its own process.

It is also the fault injector that proves the verifier right: :meth:`ReferenceReplicator.set_faults`
turns :class:`~pytest_kafka_mirror.replicators.Knobs` on per source topic while it runs,
and :meth:`~ReferenceReplicator.ledger` tells exactly what it injected.

It handles consumer groups as MirrorMaker 2 does (offset syncs, checkpoints, group offset
sync, heartbeats; see ``_checkpoints.py``), configured by MM2's property names
(``properties``, from ``--kafka-mirror-replicator-properties`` or the marker), so the
failover checks run against it and against a real MM2 alike.
"""

from __future__ import annotations

import json
import os
import sys
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

from ...processes.managed import ManagedProcess, wait_until
from ...rundir import write_json_atomic
from .._checkpoints import REFERENCE_DEFAULTS, CheckpointSettings
from ..base import NamingPolicy, ReplicatorBase, ReplicatorError
from ..settings import MM2_PROPERTY_DEFAULTS, EffectiveSettings
from .behaviour import Behaviour
from .knobs import FaultLedger, Knobs
from .policy import AliasPolicy, policy_kind

__all__ = ["Behaviour", "ReferenceReplicator"]

#: The MM2 settings the reference mirror implements, with its defaults (MM2's, at test speed
#: where it has its own); the others are not settings of it.
REFERENCE_PROPERTY_DEFAULTS = {
    **{k: v for k, v in MM2_PROPERTY_DEFAULTS.items() if k in (
        "topics", "groups", "groups.exclude", "refresh.topics.interval.seconds", "sync.topic.configs.enabled",
        "sync.topic.configs.interval.seconds", "config.properties.exclude", "use.defaults.from",
        "emit.checkpoints.enabled", "sync.group.offsets.enabled", "emit.heartbeats.enabled",
        "emit.heartbeats.interval.seconds", "emit.offset-syncs.enabled", "offset.lag.max",
        "offset-syncs.topic.location", "replication.policy.class", "replication.policy.separator", "{source}.consumer.isolation.level",
        "{source}.consumer.auto.offset.reset")},
    "emit.checkpoints.interval.seconds": "1", "sync.group.offsets.interval.seconds": "1",
    "{target}.offset.flush.interval.ms": "1000",
    # without a policy it names topics by --kafka-mirror-naming and detects no cycle
    "replication.policy.class": "none",
}

FAULTS_FILE = "faults.json"
LEDGER_FILE = "fault-ledger.json"
#: committed source positions (see _reference_main): a restart resumes from them
OFFSETS_FILE = "committed-offsets.json"
#: MM2-style properties of its consumer-group handling (see _checkpoints.CheckpointSettings)
PROPERTIES_FILE = "mirror.properties"


def _policy(props: dict[str, str], aliases: tuple[str, str]) -> AliasPolicy:
    """The MM2 replication policy ``properties`` ask for (``none`` without one)."""
    try:
        kind = policy_kind(props.get("replication.policy.class"))
    except ValueError as exc:
        raise ReplicatorError(f"reference mirror: {exc}") from None
    return AliasPolicy(kind, aliases[0], aliases[1], props.get("replication.policy.separator", "."),
                       props.get("heartbeats.topic.name", "heartbeats"))


def _naming(policy: AliasPolicy, explicit: NamingPolicy | None) -> NamingPolicy:
    """Target topic names: the policy's when one is set (a contradicting ``explicit`` is an
    error, as for MM2), else ``explicit`` or identity."""
    if policy.kind == "none":
        return explicit or NamingPolicy()
    derived = NamingPolicy(policy.remote_prefix())
    if explicit is not None and explicit != derived:
        raise ReplicatorError(f"--kafka-mirror-naming {explicit} contradicts replication.policy.class ({policy.kind} "
                              f"policy), which names target topics {derived}; drop one of them")
    return derived


class ReferenceReplicator(ReplicatorBase):
    """Controls one reference-mirror process between two clusters.

    ``topics`` is a regex over source topic names; topics created later that match it are
    discovered as ``behaviour`` says (default: within a quarter second, without pauses;
    ``Behaviour(...)`` or ``PRESETS["mm2"]`` make it discover, rebalance and restart like a
    real replicator, see ``behaviour.py``).  ``faults`` are the fault knobs of
    every topic without knobs of its own (default: none; see :meth:`set_faults`).
    ``properties`` are MM2 property names for its consumer-group handling
    (``emit.checkpoints.interval.seconds``, ``sync.group.offsets.enabled``,
    ``offset.lag.max``, ...; :attr:`checkpoints` is the result); a bad value raises
    ReplicatorError naming the property.

    Naming: ``naming`` (a fixed prefix, no cycle detection: the legacy MirrorMaker's way,
    identity by default), unless ``properties`` set MM2's ``replication.policy.class``:
    then it names and skips topics as that policy does between the flow's ``aliases``
    (``policy.py``): ``DefaultReplicationPolicy`` copies ``orders`` as ``SOURCE_ALIAS.orders``
    and never copies a topic that came from the flow's target; ``IdentityReplicationPolicy``
    keeps names and, like MM2, cannot tell a copy from an original.
    """

    #: how often it writes its committed positions (process.py's --commit-interval)
    commit_interval_s = 1.0
    #: where commit_interval_s comes from (see replicators/commits.py)
    commit_interval_setting = f"--commit-interval {commit_interval_s:g}"
    #: the id in its heartbeats' header (set per instance)
    heartbeat_emitter: str

    def __init__(
        self,
        source_bootstrap: str,
        target_bootstrap: str,
        workdir: str | os.PathLike[str],
        *,
        topics: str,
        naming: NamingPolicy | None = None,
        startup_timeout: float = 30.0,
        behaviour: Behaviour | None = None,
        warmup_topic: str = "kafka-mirror-warmup",
        faults: Knobs | None = None,
        control_timeout: float = 15.0,
        properties: Sequence[tuple[str, str]] = (),
        aliases: tuple[str, str] = ("source", "target"),
        origins: Mapping[str, str] | None = None,
    ) -> None:
        self.spec = "reference"
        self.source_bootstrap = source_bootstrap
        self.target_bootstrap = target_bootstrap
        self.workdir = Path(workdir)
        self.topics = topics
        self.source_alias, self.target_alias = aliases
        self.policy = _policy(dict(properties), aliases)
        self.naming = _naming(self.policy, naming)
        self.startup_timeout = startup_timeout
        self.behaviour = behaviour or Behaviour()
        self.warmup_topic = warmup_topic
        self.process: ManagedProcess | None = None
        self.starts = 0
        self.default_faults = faults or Knobs()
        self.topic_faults: dict[str, Knobs] = {}
        self.control_timeout = control_timeout
        self._generation = 0
        self.properties = tuple(properties)
        #: its MM2-style properties as it applies them, each with where it came from
        flow = f"{aliases[0]}->{aliases[1]}"
        # its topic filter is searched from the start (^PREFIX-), MM2's matched in full: quoted as MM2 reads it
        knobs = {f"{flow}.topics": topics if topics.endswith(".*") else topics + ".*",
                 f"{flow}.refresh.topics.interval.seconds": f"{self.behaviour.discovery_interval:g}"}
        self.settings = EffectiveSettings({**dict(self.properties), **knobs},
                                          origins={**dict(origins or {}), **dict.fromkeys(
                                              knobs, "the reference mirror's topics and discovery_interval knobs")},
                                          aliases=aliases,
                                          defaults=REFERENCE_PROPERTY_DEFAULTS,
                                          defaults_from="the reference mirror's default", rendered="set by the plugin",
                                          name="reference mirror", only_defaults=True)
        try:
            #: what it does about consumer groups (the failover checks read it)
            self.checkpoints: CheckpointSettings = REFERENCE_DEFAULTS.for_aliases(*aliases).with_properties(
                self.properties, f"{aliases[0]}->{aliases[1]}",
                origins={k: self.settings.lookup(k)[2] for k, _ in self.properties})[0]
        except ValueError as exc:
            raise ReplicatorError(f"reference mirror: {exc}") from None
        #: the id in its heartbeats' header: it copies only its own (see _checkpoints.EMITTER_HEADER)
        self.heartbeat_emitter = f"reference-mirror-{uuid.uuid4().hex[:12]}"

    # -- fault knobs -------------------------------------------------------------------

    @property
    def faults_path(self) -> Path:
        return self.workdir / FAULTS_FILE

    def _write_faults(self) -> int:
        self._generation += 1
        self.workdir.mkdir(parents=True, exist_ok=True)
        write_json_atomic(self.faults_path, {
            "generation": self._generation,
            "default": self.default_faults.to_dict(),
            "topics": {t: k.to_dict() for t, k in sorted(self.topic_faults.items())},
        })
        return self._generation

    def _await_generation(self, generation: int, what: str) -> None:
        """Wait until the running mirror applied ``generation`` (a stopped one applies it at start)."""
        if not self.running:
            return
        ack = self.faults_path.with_name(self.faults_path.name + ".ack")

        def applied() -> bool:
            try:
                return int(json.loads(ack.read_text())) >= generation
            except (OSError, ValueError):
                return False

        proc = self.process
        try:
            wait_until(lambda: applied() or not self.running, self.control_timeout, what,
                       on_timeout=lambda: f"\nlast log lines:\n{proc.log_tail() if proc else ''}")
        except TimeoutError as exc:
            raise ReplicatorError(str(exc)) from None
        if not applied():
            raise ReplicatorError(f"the reference mirror exited before applying its fault knobs: "
                                  f"{self.process.describe_exit() if self.process else ''}")

    def set_faults(self, topics: str | Sequence[str] | None, knobs: Knobs | None) -> None:
        """Inject ``knobs`` into the given source topics (``None`` topics: the default of all).

        ``knobs=None`` returns the topics to the default.  Returns once the running mirror
        applied them, so records produced afterwards meet the new knobs; records it already
        buffered under old knobs of a topic are sent as they are.  Set knobs before
        producing to a topic: the mirror reads every topic from offset 0.
        """
        if topics is None:
            self.default_faults = knobs or Knobs()
        else:
            for topic in [topics] if isinstance(topics, str) else topics:
                if knobs is None:
                    self.topic_faults.pop(topic, None)
                else:
                    self.topic_faults[topic] = knobs
        generation = self._write_faults()
        self._await_generation(generation, f"the reference mirror to apply fault knobs generation {generation}")

    def faults(self, topic: str) -> Knobs:
        """The knobs in force for ``topic``."""
        return self.topic_faults.get(topic, self.default_faults)

    def ledger(self) -> FaultLedger:
        """What the mirror injected so far, per source topic and knob (fresh from the process)."""
        if self.running:
            generation = self._write_faults()
            self._await_generation(generation, "the reference mirror to write its fault ledger")
        return FaultLedger.load(self.workdir / LEDGER_FILE)

    def target_topic(self, source_topic: str) -> str:
        return self.naming.target(source_topic)

    def start(self) -> None:
        if self.process is not None and self.process.running:
            raise ReplicatorError("the reference mirror is already running")
        self.workdir.mkdir(parents=True, exist_ok=True)
        ready = self.workdir / f"reference-mirror.ready.{self.starts}"
        ready.unlink(missing_ok=True)
        argv = [
            sys.executable, "-m", "pytest_kafka_mirror.replicators.reference",
            "--source", self.source_bootstrap,
            "--target", self.target_bootstrap,
            "--topics", self.topics,
            "--prefix", self.naming.prefix,
            "--policy", self.policy.kind, "--source-alias", self.source_alias, "--target-alias", self.target_alias,
            *self.behaviour.argv(),
            "--ready-file", str(ready),
            "--warmup-topic", self.warmup_topic,
            "--faults", str(self.faults_path),
            "--ledger", str(self.workdir / LEDGER_FILE),
            # committed positions survive restarts of this replicator (not of its workdir)
            "--offsets", str(self.workdir / OFFSETS_FILE),
            "--properties", str(self.workdir / PROPERTIES_FILE),
            "--emitter-id", self.heartbeat_emitter,
            "--commit-interval", f"{self.commit_interval_s:g}",
        ]
        from ..._clientconf import format_properties

        (self.workdir / PROPERTIES_FILE).write_text(format_properties(dict(self.properties), "reference mirror"))
        self.faults_path.with_name(self.faults_path.name + ".ack").unlink(missing_ok=True)
        self._write_faults()
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

    @property
    def detects_cycles(self) -> bool:
        """Whether it keeps a record from going back where it came from: under MM2's
        DefaultReplicationPolicy only, as MM2 (``policy.py``)."""
        return self.policy.kind == "default"

    @property
    def rebalances_on_new_topics(self) -> bool:
        """Whether a new topic delays or pauses copying (its behaviour knobs): provision ahead."""
        return self.behaviour.rebalances_on_new_topics

    def effective_settings(self) -> EffectiveSettings:
        """Its MM2-style properties as it applies them, each with where it came from."""
        return self.settings

    def status(self) -> str:
        """What the mirror says about itself (its last status line), for timeout errors."""
        if self.process is None:
            return "never started"
        lines = [line for line in self.process.log_tail(200).splitlines() if " records, produced " in line or "ready:" in line]
        return lines[-1].strip() if lines else ("running, no status line yet" if self.running else "stopped")

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

    @property
    def paused(self) -> bool:
        return self.process is not None and self.process.paused

    def logs(self, lines: int = 50) -> str:
        return self.process.log_tail(lines) if self.process else ""

    def describe(self) -> str:
        state = f"pid {self.process.pid}" if self.running and self.process else "stopped"
        faults = f"; faults {self.default_faults}" if self.default_faults.active else ""
        faults += f"; behaves {self.behaviour}" if self.behaviour != Behaviour() else ""
        policy = f"; {self.policy.kind} policy {self.source_alias} -> {self.target_alias}" if self.policy.kind != "none" else ""
        return (f"reference mirror {self.source_bootstrap} -> {self.target_bootstrap} ({self.naming}{policy}{faults}; "
                f"{state})")

    def __enter__(self) -> ReferenceReplicator:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
