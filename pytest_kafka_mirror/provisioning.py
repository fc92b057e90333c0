"""Topic provisioning: the session's test topics created once, before the replicator starts.

MirrorMaker 2 (and every Connect-based replicator: Confluent Replicator, Brooklin,
uReplicator under Helix) reconfigures its tasks whenever it finds a new topic, and the
rebalance that follows stops the copy of *every* topic for seconds.  Measured with a real
MM2 on the embedded brokers and one shared replicator, ``pytest scenarios`` failed 9 of
15 tests: each test's new topics stalled the others' replication until their drain
timeouts.  So in ``session`` mode (``--kafka-mirror-topic-provisioning``):

1. every test that runs on the shared replicator declares its topics with
   ``@pytest.mark.kafka_mirror_topics(n, partitions=P, config={...})`` (repeatable);
2. the ``replicator`` fixture creates all declared topics of the session's tests
   (:meth:`TopicPool.provision`) *before* it starts the replicator, whose first scan
   finds them all: one discovery for the session, no rebalance in the middle of a test;
3. one readiness round over the pool (:meth:`TopicPool.await_ready`) proves every
   partition is copied, and is each topic's ``discovery_s``;
4. ``mirror_topics(...)`` hands a test the topics declared for it, each to one test
   only (never reused); an undeclared call warns and creates its topics on demand.

The trade-offs: every worker creates the topics of every selected test (under xdist a
worker does not know in advance which tests it will run), so the source holds up to
``workers`` times the topics and the session's start waits for one discovery of them
all; a test's topics exist (empty) from the session's start.  ``test`` mode keeps each
test's topics to itself and pays one discovery per test.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .clusters.base import Cluster
    from .replicators import Replicator
    from .replicators._readiness import TopicReadiness

__all__ = ["MARKER", "TopicDeclaration", "TopicPool", "auto_create_warning", "declarations", "delete_session_topics",
           "largest_record", "resolve_mode"]

log = logging.getLogger("pytest_kafka_mirror.provisioning")

MARKER = "kafka_mirror_topics"
MARKER_HELP = (f"{MARKER}(n=1, partitions=3, config={{KEY: VALUE}}, name=None): the topics this test creates with "
               "mirror_topics(...) (repeat the marker for several calls); in session topic provisioning they are "
               "created before the replicator starts, so it discovers them once.")


@dataclass(frozen=True)
class TopicDeclaration:
    """One ``mirror_topics(n, partitions=..., config=..., name=...)`` call a test will make."""

    n: int = 1
    partitions: int = 3
    config: tuple[tuple[str, str], ...] = ()
    name: str | None = None

    @classmethod
    def of(cls, n: int = 1, *, partitions: int = 3, config: Mapping[str, str] | None = None,
           name: str | None = None) -> TopicDeclaration:
        """ValueError naming the argument when a value is bad."""
        for arg, value in (("n", n), ("partitions", partitions)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{arg} must be an integer >= 1, got {value!r}")
        if config is not None and not isinstance(config, Mapping):
            raise ValueError(f"config must be a dict of topic configs, got {config!r}")
        return cls(n, partitions, tuple(sorted((str(k), str(v)) for k, v in (config or {}).items())), name)


def declarations(item: Any) -> list[TopicDeclaration]:
    """The topics an item declares (``@pytest.mark.kafka_mirror_topics``); ValueError naming the marker."""
    out = []
    for mark in item.iter_markers(MARKER):
        try:
            out.append(TopicDeclaration.of(*mark.args, **mark.kwargs))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"@pytest.mark.{MARKER}{_call(mark)} on {item.nodeid}: {exc}") from None
    return out


#: Kafka's default ``message.max.bytes``: what a topic without ``max.message.bytes`` accepts
KAFKA_MESSAGE_MAX_BYTES = 1048588


def largest_record(items: Iterable[Any], message_size: int) -> int:
    """The largest record the session's tests may produce: the default message size, and
    the ``max.message.bytes`` of every topic they declare (a source topic refuses anything
    larger; one without it takes Kafka's default).  Replicators size their clients for it
    (MirrorMaker 2's producer refuses a record over its ``max.request.size``, 1 MiB by
    default, and Connect then kills the task for the rest of the session)."""
    largest = max(message_size, KAFKA_MESSAGE_MAX_BYTES)
    for item in items:
        try:
            decls = declarations(item)
        except ValueError:
            continue  # reported when the test runs
        for d in decls:
            value = dict(d.config).get("max.message.bytes", "")
            if value.isdigit():
                largest = max(largest, int(value))
    return largest


def _call(mark: Any) -> str:
    args = [repr(a) for a in mark.args] + [f"{k}={v!r}" for k, v in mark.kwargs.items()]
    return f"({', '.join(args)})"


def resolve_mode(setting: str, replicator: Replicator) -> str:
    """``session`` or ``test``: ``auto`` is ``session`` for a replicator that rebalances on
    new topics (``rebalances_on_new_topics``; by default a replicator is assumed to)."""
    if setting != "auto":
        return setting
    return "session" if replicator.rebalances_on_new_topics else "test"


class TopicPool:
    """The topics declared by the session's tests, created ahead and handed out once each.

    ``names(test_name, n, name)`` gives the unique names of a call (the ``mirror_topics``
    scheme: prefix, worker, test, uuid).
    """

    def __init__(self, source: Cluster, names: Callable[[str, int, str | None], list[str]]) -> None:
        self.source = source
        self.names = names
        #: (nodeid, declaration) -> topic groups not handed out yet, in declaration order
        self.free: dict[tuple[str, TopicDeclaration], list[list[str]]] = {}
        self.partitions: dict[str, int] = {}
        #: topic -> its session readiness round (its ``discovery_s``)
        self.readiness: dict[str, TopicReadiness] = {}
        self.handed_out = 0

    def provision(self, items: Iterable[tuple[str, str, list[TopicDeclaration]]]) -> int:
        """Create the topics of ``(nodeid, test name, declarations)``; the count created."""
        created = 0
        for nodeid, test_name, decls in items:
            for d in decls:
                group = self.names(test_name, d.n, d.name)
                for t in group:
                    self.source.create_topic(t, d.partitions, config=dict(d.config) or None)
                    self.partitions[t] = d.partitions
                created += len(group)
                self.free.setdefault((nodeid, d), []).append(group)
        return created

    def await_ready(self, replicator: Replicator, target_bootstrap: str, timeout: float) -> dict[str, TopicReadiness]:
        """One readiness round over every pool topic (``provisioned="session"``)."""
        from .clusters.base import topic_created_us
        from .replicators._readiness import await_ready, replicator_hooks
        from .replicators.settings import readiness_hint

        if not self.partitions:
            return {}
        names = {t: replicator.target_topic(t) for t in self.partitions}
        rounds = await_ready(
            self.source.bootstrap_servers, target_bootstrap, {t: (names[t], n) for t, n in self.partitions.items()},
            timeout=timeout, created_us={t: topic_created_us(t) for t in self.partitions}, provisioned="session",
            **replicator_hooks(replicator),
            hint=lambda found: readiness_hint(replicator, names, found) + (
                f" These {len(self.partitions)} topics were provisioned for the session's tests "
                "(--kafka-mirror-topic-provisioning session); a replicator slow to discover many topics may "
                "need a larger --kafka-mirror-startup-timeout."),
            during="while the session's topics were warmed up",
        )
        self.readiness.update(rounds)
        return rounds

    def take(self, nodeid: str, decl: TopicDeclaration) -> list[str] | None:
        """The next unused topics declared by ``nodeid`` like ``decl``; None when there are none."""
        groups = self.free.get((nodeid, decl))
        if not groups:
            return None
        self.handed_out += 1
        return groups.pop(0)

    def describe(self) -> str:
        ready = [r.discovery_s for r in self.readiness.values() if r.discovery_s is not None]
        slowest = f", slowest discovery {max(ready):.2f} s" if ready else ""
        return f"{len(self.partitions)} topics provisioned for the session{slowest}"


def delete_session_topics(source: Cluster, target: Cluster, replicator: Replicator, *, source_kind: str, target_kind: str,
                          groups: Sequence[str] = (), wait: float | None = None,
                          pause: Callable[[float], object] | None = None) -> str:
    """At the session's end, on clusters the plugin did not start (``bootstrap:``): delete
    the topics this process created on the source (its tests' topics, the session pool's,
    the replicator probe's) and their copies on the target, under the replicator's naming;
    and ``groups``, the failover witnesses' consumer groups, on the source and (synced there
    by the replicator under the same name) on the target.  Clusters the plugin started go
    away with their data, so nothing is deleted there.

    A replicator the plugin stopped first copies nothing more: one deletion.  One it does
    not control (``external:``) still runs its flow, and its consumer, still assigned to
    the deleted partitions, makes a broker with ``auto.create.topics.enable=true`` create
    them again, which it then copies: there each name is deleted, checked for ``wait``
    seconds (default :data:`~.clusters.removal.WAIT`) and deleted again when it came
    back, up to :data:`~.clusters.removal.ROUNDS` times, and what stayed is named with
    the reason (``clusters/removal.py``).

    Only what this process created is touched (never a pattern: another session may run
    with the same prefix).  Returns a line saying what was deleted (or not) for the log.
    """
    from .clusters.removal import GROUPS, ROUNDS, TOPICS, WAIT, Removal, names_text, remove, stayed_lines

    created = list(source.created_topics or ())
    if replicator.probe_topic:
        created.append(replicator.probe_topic)
    removals = []
    for role, cluster, kind, names in (("source", source, source_kind, created),
                                       ("target", target, target_kind, [replicator.target_topic(t) for t in created])):
        if kind != "bootstrap":
            continue
        if names:
            removals.append(Removal(cluster, names, TOPICS, f"the {role}", f"the {role} ({cluster.bootstrap_servers})",
                                    "test topic"))
        if groups:
            removals.append(Removal(cluster, list(groups), GROUPS, f"the {role}", f"the {role}", "witness consumer group"))
    again = not replicator.controllable
    remove(removals, rounds=ROUNDS if again else 1, wait=(WAIT if wait is None else wait) if again else 0.0,
           pause=pause)
    stayed = stayed_lines(removals)
    back = [t for r in removals if r.kind is TOPICS and r.cluster is source for t in r.stayed]
    if back and target_kind == "bootstrap":
        # the replicator copies a topic that came back at its next look for new topics, after the
        # last check here (MM2: refresh.topics.interval.seconds): measured, every copy came back
        copies = [replicator.target_topic(t) for t in back]
        stayed.append(f"the replicator copies them to the target again: {names_text(copies)}")
    if stayed:
        stayed.append("once nothing recreates them, kafka-mirror cleanup --bootstrap HOST:PORT --yes removes them")
    return "; ".join(s for s in [*(r.said() for r in removals), *stayed] if s)


def auto_create_warning(source: Cluster, target: Cluster, replicator: Replicator, *, source_kind: str,
                        target_kind: str) -> str | None:
    """At the session's start: what a ``bootstrap:`` cluster that auto-creates topics
    (``auto.create.topics.enable=true``, read with DescribeConfigs of a broker) means for
    the deletion at its end, or None when it means nothing: the replicator is the
    plugin's (its flow stops before the deletion), or the broker does not auto-create
    (or does not say)."""
    from .clusters.removal import auto_create_topics

    if replicator.controllable:
        return None
    on = [role for role, cluster, kind in (("source", source, source_kind), ("target", target, target_kind))
          if kind == "bootstrap" and auto_create_topics(cluster)[0]]
    if not on:
        return None
    where = " and the ".join(on)
    return (f"auto.create.topics.enable=true on the {where}: a consumer still assigned to a topic this session "
            f"deletes at its end (the replicator's, {replicator.spec}, which the plugin does not stop) recreates it, "
            "and the replicator copies it again. The session deletes, checks again and deletes what came back a few "
            "times, then names what stayed; to leave nothing behind, set allow.auto.create.topics=false on the "
            "replicator's consumer (or auto.create.topics.enable=false on the broker), or stop its flow of the "
            "plugin's topics before the session ends and remove what stayed with kafka-mirror cleanup "
            "(docs/your-clusters.md, What stays on your clusters)")
