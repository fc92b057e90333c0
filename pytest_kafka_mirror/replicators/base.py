"""The replicator protocol and topic naming policies."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from ..clusters.kafka_dist import KafkaRelease
    from ._checkpoints import CheckpointSettings
    from .settings import EffectiveSettings

__all__ = ["NamingPolicy", "Replicator", "ReplicatorBase", "ReplicatorError", "parse_naming"]

NAMING_ACCEPTED = "identity | prefix:PREFIX (e.g. prefix:source.)"


class ReplicatorError(RuntimeError):
    """A replicator could not be started or controlled."""


@dataclass(frozen=True)
class NamingPolicy:
    """How a source topic is named on the target (MM2's ReplicationPolicy, in short)."""

    prefix: str = ""

    def target(self, source_topic: str) -> str:
        return self.prefix + source_topic

    def __str__(self) -> str:
        return f"prefix:{self.prefix}" if self.prefix else "identity"


def parse_naming(text: str) -> NamingPolicy:
    text = text.strip()
    if text == "identity":
        return NamingPolicy()
    kind, sep, prefix = text.partition(":")
    if kind == "prefix" and sep and prefix and all(c.isalnum() or c in "._-" for c in prefix):
        return NamingPolicy(prefix)
    raise ValueError(f"unknown topic naming policy {text!r}; accepted: {NAMING_ACCEPTED}")


@runtime_checkable
class Replicator(Protocol):
    """Something that copies topics from the source cluster to the target cluster.

    Lifecycle verbs are uniform across backends: ``stop`` is SIGTERM (graceful), ``kill``
    SIGKILL, ``pause`` / ``resume`` SIGSTOP / SIGCONT (a container: ``docker pause``).

    What a backend can do is declared by its *capabilities*, the properties and methods
    under "capabilities" below, each saying what it means and its default.  Every backend
    inherits :class:`ReplicatorBase`, which gives the defaults, and states only where it
    differs; the plugin reads them directly, never by probing for an attribute.  A new
    capability is one property here and its default in :class:`ReplicatorBase`.
    """

    spec: str
    naming: NamingPolicy
    #: records of a warm-up burst after its first start (default 0: none; process replicators
    #: 10,000, see ``_probe.warm_up``); whoever starts one mid-stream sets it to 0
    warm_up_records: int

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def kill(self) -> None: ...

    def pause(self) -> None: ...

    def resume(self) -> None: ...

    def restart(self) -> None: ...

    def target_topic(self, source_topic: str) -> str: ...

    def logs(self, lines: int = 50) -> str: ...

    def describe(self) -> str: ...

    # -- capabilities (defaults: ReplicatorBase) ------------------------------------------

    @property
    def label(self) -> str:
        """What messages call it ("MirrorMaker 2 (4.3.1)"); default ``""``: its :meth:`describe`."""
        ...

    @property
    def running(self) -> bool:
        """Whether its process runs, as far as the plugin knows; default True."""
        ...

    @property
    def paused(self) -> bool:
        """Whether it is paused (SIGSTOP) and must be resumed before anything else; default False."""
        ...

    @property
    def controllable(self) -> bool:
        """Whether the plugin starts and stops it; default True.  False (``external:``): its
        verbs raise ReplicatorError, and the fixtures leave it running at teardown."""
        ...

    @property
    def rebalances_on_new_topics(self) -> bool:
        """Whether a new topic pauses or delays its copying (MM2 and every Connect-based
        replicator rebalance), so the session's topics are provisioned before it starts;
        default True (a replicator that does not say is assumed to)."""
        ...

    @property
    def detects_cycles(self) -> bool:
        """Whether it keeps a record from going back to the cluster it came from (a loop of
        flows, e.g. active-active); default False."""
        ...

    @property
    def checkpoints(self) -> CheckpointSettings | None:
        """What it does about consumer groups (offset syncs, checkpoints, group offset sync,
        heartbeats), for the failover checks; default None: it does not say."""
        ...

    @property
    def no_translation(self) -> str | None:
        """Why it translates no consumer-group offsets at all (the failover checks skip with
        it); default None."""
        ...

    @property
    def no_config_sync(self) -> str | None:
        """Why it copies no topic configs (the config-sync scenarios skip with it); default None."""
        ...

    @property
    def heartbeat_emitter(self) -> str | None:
        """The emitter id in the header of its heartbeats (the reference mirror's; see
        ``_checkpoints.EMITTER_HEADER``); default None: its heartbeats carry none."""
        ...

    @property
    def probe_topic(self) -> str | None:
        """The source topic of its readiness probe (deleted with the session's topics on
        ``bootstrap:`` clusters); default None: it has none."""
        ...

    @property
    def instance(self) -> str | None:
        """The id of its state (MM2's Connect group and internal topics, MM1's consumer
        group), which a replacement of another release takes over in an in-place upgrade;
        default None: nothing to take over."""
        ...

    @property
    def release(self) -> KafkaRelease | None:
        """The Apache Kafka release it runs (``mm2:VERSION``, ``mm1:VERSION``, a
        ``KAFKA_HOME``), e.g. for a scenario that needs a feature of a later one; default
        None: no Kafka release (or a container image)."""
        ...

    @property
    def startup_seconds(self) -> float | None:
        """How long its last start took until it copied; default None: not started yet."""
        ...

    @property
    def commit_interval_s(self) -> float | None:
        """How often it commits its source positions (s): a restart repeats at most what it
        copied since; default None: unknown."""
        ...

    @property
    def commit_interval_setting(self) -> str | None:
        """Where :attr:`commit_interval_s` comes from, as in effect (``KEY=VALUE`` and who set
        it), quoted with a bound derived from it; default None."""
        ...

    def effective_settings(self) -> EffectiveSettings | None:
        """Its settings as it applies them, each with where it came from (the test's marker,
        the user's option, rendered by the plugin, a default): what a failed check quotes as
        its cause (``settings.py``); default None: the plugin does not configure it."""
        ...

    def missing(self, verb: str) -> str | None:
        """Why it cannot ``verb`` (stop, start, kill, pause, resume, restart), None when it
        can; default None.  The fault verbs skip a test with it before anything runs."""
        ...

    def status(self) -> str:
        """What it says about itself (MirrorMaker 2: its connectors and tasks), quoted when
        it does not copy in time; default ``""``: nothing to say."""
        ...

    def health(self) -> str:
        """``""`` while it runs as it should, else what is wrong (it exited, a task FAILED);
        the plugin asks after every test on the shared replicator; default ``""``."""
        ...


class ReplicatorBase:
    """The default of every capability of :class:`Replicator` (see there what each means).

    Backends inherit it and override what they can do; the lifecycle verbs and naming
    are theirs to write.
    """

    spec: str = ""
    naming: NamingPolicy = NamingPolicy()
    label: str = ""
    controllable: bool = True
    checkpoints: CheckpointSettings | None = None
    no_translation: str | None = None
    no_config_sync: str | None = None
    heartbeat_emitter: str | None = None
    probe_topic: str | None = None
    instance: str | None = None
    release: KafkaRelease | None = None
    startup_seconds: float | None = None
    #: records of a warm-up burst after its first start (process replicators: ``_runner``); 0: none
    warm_up_records: int = 0

    # read-only here, so that a backend may compute them (a property) or state them (a class attribute)
    @property
    def rebalances_on_new_topics(self) -> bool:
        return True

    @property
    def detects_cycles(self) -> bool:
        return False

    @property
    def commit_interval_s(self) -> float | None:
        return None

    @property
    def commit_interval_setting(self) -> str | None:
        return None

    def effective_settings(self) -> EffectiveSettings | None:
        return None

    def missing(self, verb: str) -> str | None:
        return None

    @property
    def running(self) -> bool:
        return True

    @property
    def paused(self) -> bool:
        return False

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def restart(self) -> None:
        """Stop, then start again (a rolling restart)."""
        self.stop()
        self.start()

    def recover(self) -> str:
        """Bring a broken replicator back (after a test broke it): stop, then start again;
        a Connect cluster restarts its failed tasks instead (``mm2_connect``).  Returns
        what it did."""
        self.stop()
        self.start()
        return "stopped and started again"

    def status(self) -> str:
        return ""

    def health(self) -> str:
        return ""
