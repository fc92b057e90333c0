"""Topics and consumer groups removed so that they stay removed: delete, wait, check again.

Kafka deletes a topic at once, but a consumer still assigned to one of its partitions asks
for its metadata again, and a broker with ``auto.create.topics.enable=true`` (Kafka's
default) then creates it anew for a consumer that allows it (``allow.auto.create.topics``,
true in the Java consumer).  Measured by a user with their own clusters and a MirrorMaker
2 the plugin does not run: within a second of the session's deletion the source broker
logged ``Sent auto-creation request for Set(km-…)``, MM2's consumer having asked, and MM2
copied the new, empty topics to the target again; after the sessions 43 ``km`` topics were
left on the source, 35 on the target.

So where nothing stops the flow first (an ``external:`` replicator), :func:`remove`
deletes, waits up to a few seconds for a name to come back (checking the cluster's list
every ``interval``), deletes what came back, for a bounded number of rounds, and keeps
what stayed; :func:`stayed_lines` says what stayed and why, with the broker's setting
read by a DescribeConfigs of a broker (:func:`auto_create_topics`; "unknown" where the
cluster does not tell).  ``kafka-mirror cleanup`` runs the same loop on whatever a prefix
left behind.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..processes.managed import wait_until

__all__ = ["AUTO_CREATE", "GROUPS", "ROUNDS", "TOPICS", "WAIT", "Kind", "Removal", "auto_create_topics", "names_text",
           "remove", "stayed_lines"]

#: the broker setting that makes a consumer's metadata request create a missing topic
AUTO_CREATE = "auto.create.topics.enable"
#: deletions of a name that keeps coming back, at most (the first included)
ROUNDS = 4
#: seconds a round waits for a deleted name to come back before it counts as removed: a
#: consumer still assigned recreates it within a second (the user's MM2 did)
WAIT = 3.0
#: seconds between two looks at the cluster's list while a round waits
INTERVAL = 0.5
#: names a line lists before it says how many more there are
SHOWN = 10


@dataclass(frozen=True)
class Kind:
    """Topics or consumer groups: how a cluster lists and deletes them, and the error code
    of a name that is not there (never created, or already gone)."""

    noun: str
    listing: Callable[[Any], set[str]]
    deleting: Callable[[Any, list[str]], Mapping[str, Any]]
    absent: str  # the name of the confluent_kafka.KafkaError code

    def absent_code(self) -> int:
        from confluent_kafka import KafkaError

        return int(getattr(KafkaError, self.absent))


def _list_topics(admin: Any) -> set[str]:
    # every topic (no name given): a metadata request naming a missing topic may create it
    return set(admin.list_topics(timeout=10).topics)


def _delete_topics(admin: Any, names: list[str]) -> Mapping[str, Any]:
    return admin.delete_topics(names, operation_timeout=10)  # type: ignore[no-any-return]


def _list_groups(admin: Any) -> set[str]:
    listed = admin.list_consumer_groups(request_timeout=10).result(timeout=15)
    return {g.group_id for g in listed.valid}


def _delete_groups(admin: Any, names: list[str]) -> Mapping[str, Any]:
    return admin.delete_consumer_groups(names, request_timeout=10)  # type: ignore[no-any-return]


TOPICS = Kind("topic", _list_topics, _delete_topics, "UNKNOWN_TOPIC_OR_PART")
# GROUP_ID_NOT_FOUND: never committed there (e.g. not synced to the target)
GROUPS = Kind("consumer group", _list_groups, _delete_groups, "GROUP_ID_NOT_FOUND")


@dataclass
class Removal:
    """Names of one kind to remove from one cluster, and what became of them.

    ``cluster`` has ``admin()`` (a confluent-kafka AdminClient or a fake of it); ``role``
    names the cluster in a reason (``the source``, ``127.0.0.1:9092``), ``where`` in the
    line of what was deleted (``the source (127.0.0.1:9092)``); ``noun`` is how that line
    calls the names (``test topic``).
    """

    cluster: Any
    names: list[str]
    kind: Kind = TOPICS
    role: str = "the cluster"
    where: str = ""
    noun: str = ""
    #: deleted at least once / deleted again after they came back
    deleted: set[str] = field(default_factory=set)
    again: set[str] = field(default_factory=set)
    #: NAME -> why its deletion failed (not "absent")
    failed: dict[str, str] = field(default_factory=dict)
    #: there when the last round's wait ended
    stayed: list[str] = field(default_factory=list)
    #: why the cluster's list could not be read while waiting (nothing was checked then)
    unchecked: str = ""

    def delete(self, names: Sequence[str]) -> None:
        """Delete ``names``; a name the cluster says is absent is neither deleted nor failed."""
        from confluent_kafka import KafkaException

        if not names:
            return
        try:
            futures = self.kind.deleting(self.cluster.admin(), list(names))
        except KafkaException as exc:
            for name in names:
                self.failed[name] = _why(exc)
            return
        absent = self.kind.absent_code()
        for name, future in futures.items():
            try:
                future.result(timeout=15)
            except KafkaException as exc:
                if exc.args and getattr(exc.args[0], "code", lambda: None)() == absent:
                    continue
                self.failed[name] = _why(exc)
                continue
            except Exception as exc:  # a timeout: the broker may still delete it
                self.failed[name] = str(exc) or type(exc).__name__
                continue
            self.failed.pop(name, None)
            (self.again if name in self.deleted else self.deleted).add(name)

    def present(self) -> set[str]:
        """The names (those whose deletion did not fail) the cluster lists now."""
        watched = set(self.names) - set(self.failed)
        if not watched:
            return set()
        try:
            listed = self.kind.listing(self.cluster.admin())
        except Exception as exc:
            self.unchecked = _why(exc)
            return set()
        self.unchecked = ""
        return watched & listed

    def said(self) -> str:
        """``deleted N test topic(s) from the source (…)``, what was deleted again, what failed;
        for consumer groups "" when there was nothing to delete there."""
        if not self.names or (self.kind is GROUPS and not self.deleted and not self.failed):
            return ""
        noun = self.noun or self.kind.noun
        line = f"deleted {len(self.deleted)} {noun}(s) from {self.where or self.role}"
        if self.again:
            line += f" ({len(self.again)} of them again after they came back)"
        if self.failed:
            shown = [f"{n} ({why})" for n, why in list(self.failed.items())[:5]]
            line += f"; could not delete {len(self.failed)}: {', '.join(shown)}"
        if self.unchecked:
            line += f"; could not check again whether they stayed away: {self.unchecked}"
        return line


def _why(exc: BaseException) -> str:
    """One line of what a Kafka client's exception says (its KafkaError's text)."""
    from confluent_kafka import KafkaError

    err = exc.args[0] if exc.args else None
    text = err.str() if isinstance(err, KafkaError) else str(exc)
    return " ".join(str(text).split()) or type(exc).__name__


def _came_back(removals: Sequence[Removal], seen: dict[int, set[str]]) -> bool:
    """Whether any removal's names are listed again (kept in ``seen`` by removal)."""
    seen.update({id(r): r.present() for r in removals})
    return any(seen.values())


def remove(removals: Sequence[Removal], *, rounds: int = 1, wait: float = 0.0, interval: float | None = None,
           pause: Callable[[float], object] | None = None) -> None:
    """Delete every removal's names; with ``wait`` > 0, wait up to ``wait`` s for any of
    them to come back (a look every ``interval`` s, the first after one interval: a
    deletion's metadata reaches every broker within milliseconds), delete what came
    back, and so on for at most ``rounds`` deletions.  What is there after the last
    round's wait is each removal's ``stayed``.  ``rounds`` 1 and ``wait`` 0: delete once,
    check nothing (nothing recreates them: the flow was stopped first).  ``interval``
    defaults to :data:`INTERVAL`, ``pause`` (how an interval is spent) to ``time.sleep``."""
    interval = INTERVAL if interval is None else interval
    pause = pause or time.sleep
    pending = {id(r): list(r.names) for r in removals}
    for done in range(1, max(1, rounds) + 1):
        for r in removals:
            r.delete(pending[id(r)])
        if wait <= 0:
            return
        pause(interval)
        seen: dict[int, set[str]] = {}
        try:
            wait_until(functools.partial(_came_back, removals, seen), max(0.0, wait - interval),
                       "deleted names to come back", interval=interval, pause=pause)
        except TimeoutError:
            return  # nothing came back
        if done == rounds:
            for r in removals:
                r.stayed = sorted(seen.get(id(r), ()))
            return
        pending = {k: sorted(v) for k, v in seen.items()}


def auto_create_topics(cluster: Any) -> tuple[bool | None, str]:
    """(``auto.create.topics.enable`` of the cluster's first broker, how it reads in a
    reason): ``(True, "auto.create.topics.enable=true")``, or ``(None, "auto.create.topics.enable
    unknown (why)")`` where DescribeConfigs of the broker is refused or does not say it."""
    from confluent_kafka.admin import ConfigResource, ResourceType  # type: ignore[attr-defined]

    admin = cluster.admin()
    try:
        brokers = sorted(admin.list_topics(timeout=10).brokers)
        if not brokers:
            return None, f"{AUTO_CREATE} unknown (no broker in the metadata)"
        resource = ConfigResource(ResourceType.BROKER, str(brokers[0]))
        (future,) = admin.describe_configs([resource], request_timeout=10).values()
        entries = future.result(timeout=15)
    except Exception as exc:
        return None, f"{AUTO_CREATE} unknown (DescribeConfigs of the broker: {_why(exc)})"
    entry = entries.get(AUTO_CREATE)
    value = getattr(entry, "value", None)
    if value is None:
        return None, f"{AUTO_CREATE} unknown (broker {brokers[0]} does not report it)"
    on = str(value).strip().lower() == "true"
    return on, f"{AUTO_CREATE}={'true' if on else 'false'}"


def _reason(r: Removal) -> str:
    """Why ``r.stayed`` came back, in words naming the cluster and what to do."""
    if r.kind is GROUPS:
        return (f"a client commits offsets for them again on {r.role} (a consumer of them still running, or a "
                "replicator's group offset sync; stop it)")
    on, setting = auto_create_topics(r.cluster)
    if on:
        return (f"{setting} on {r.role} (a consumer still assigned to them recreates them; stop the replicator's "
                "flow or set allow.auto.create.topics=false on its consumer)")
    if on is None:
        return (f"{setting} on {r.role}; if it is true, a consumer still assigned to them recreates them (stop the "
                "replicator's flow or set allow.auto.create.topics=false on its consumer)")
    return (f"{setting} on {r.role}, so a client creates them again (a replicator whose flow still runs, copying "
            "topics that came back on its source; stop that flow)")


def names_text(names: Sequence[str]) -> str:
    """``a, b, c``: at most :data:`SHOWN` of ``names``, then how many more."""
    return ", ".join(names[:SHOWN]) + (f" and {len(names) - SHOWN} more" if len(names) > SHOWN else "")


def stayed_lines(removals: Sequence[Removal]) -> list[str]:
    """One line per removal that kept something: ``N topic(s) came back after deletion: WHY: NAMES``."""
    lines = []
    for r in removals:
        if not r.stayed:
            continue
        lines.append(f"{len(r.stayed)} {r.kind.noun}(s) came back after deletion: {_reason(r)}: {names_text(r.stayed)}")
    return lines
