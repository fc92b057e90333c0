"""A replicator's settings as it applies them, for failure messages that name a cause.

When a scenario fails, the setting behind the failure is often known to the plugin: it
rendered MirrorMaker 2's properties, or the reference mirror's, and knows which of them the
test's marker or the user gave.  :class:`EffectiveSettings` resolves a property the way
MirrorMaker 2 does for one flow (``SOURCE->TARGET.KEY`` over ``KEY``, then MM2's documented
default) and quotes it with where it came from::

    emit.checkpoints.enabled=false (--kafka-mirror-replicator-properties)
    refresh.topics.interval.seconds=2 (rendered by the plugin)
    exactly.once.source.support=disabled (MM2's default)

A key may name the flow's clusters with ``{source}`` / ``{target}`` (the aliases), e.g.
``{target}.offset.flush.interval.ms``, MM2's key for the target herder's offset commits.

:data:`FEATURE_SETTINGS` lists, per feature a scenario checks, the settings that decide it:
what a failure of that feature quotes (``replicator.effective_settings(feature)``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["FEATURE_SETTINGS", "MM2_PROPERTY_DEFAULTS", "EffectiveSettings", "explain", "readiness_hint",
           "settings_of"]

#: MirrorMaker 2's documented defaults of the properties failure messages quote (Kafka 3.x-4.x;
#: ``MirrorConnectorConfig`` and its subclasses, Connect's worker and client defaults).
MM2_PROPERTY_DEFAULTS: dict[str, str] = {
    "topics": ".*",
    "topics.exclude": r".*[\-\.]internal, .*\.replica, __.*",
    "groups": ".*",
    "groups.exclude": "console-consumer-.*, connect-.*, __.*",
    "refresh.topics.interval.seconds": "600",
    "refresh.groups.interval.seconds": "600",
    "sync.topic.configs.enabled": "true",
    "sync.topic.configs.interval.seconds": "600",
    "config.properties.exclude": ("follower\\.replication\\.throttled\\.replicas, "
                                  "leader\\.replication\\.throttled\\.replicas, "
                                  "message\\.timestamp\\.difference\\.max\\.ms, message\\.timestamp\\.type, "
                                  "unclean\\.leader\\.election\\.enable, min\\.insync\\.replicas"),
    "use.defaults.from": "target",
    "emit.checkpoints.enabled": "true",
    "emit.checkpoints.interval.seconds": "60",
    "sync.group.offsets.enabled": "false",
    "sync.group.offsets.interval.seconds": "60",
    "emit.heartbeats.enabled": "true",
    "emit.heartbeats.interval.seconds": "1",
    "emit.offset-syncs.enabled": "true",
    "offset.lag.max": "100",
    "offset-syncs.topic.location": "source",
    "replication.policy.class": "org.apache.kafka.connect.mirror.DefaultReplicationPolicy",
    "replication.policy.separator": ".",
    "exactly.once.source.support": "disabled",
    "{target}.offset.flush.interval.ms": "60000",
    "{source}.consumer.isolation.level": "read_uncommitted",
    "{source}.consumer.auto.offset.reset": "earliest",
    "{target}.producer.max.request.size": "1048576",
    "{source}.consumer.max.partition.fetch.bytes": "1048576",
    "tasks.max": "1",
    "header.converter": "org.apache.kafka.connect.converters.ByteArrayConverter",
}

#: Per feature a scenario checks: the settings that decide it (MM2's names; the reference
#: mirror reads the same), quoted by a failure of that feature.
FEATURE_SETTINGS: dict[str, tuple[str, ...]] = {
    "discovery": ("topics", "topics.exclude", "refresh.topics.interval.seconds"),
    "config sync": ("sync.topic.configs.enabled", "sync.topic.configs.interval.seconds", "config.properties.exclude",
                    "use.defaults.from", "refresh.topics.interval.seconds"),
    "checkpoints": ("emit.checkpoints.enabled", "emit.checkpoints.interval.seconds", "emit.offset-syncs.enabled",
                    "groups", "groups.exclude", "refresh.groups.interval.seconds"),
    "group sync": ("sync.group.offsets.enabled", "sync.group.offsets.interval.seconds", "emit.checkpoints.enabled",
                   "emit.checkpoints.interval.seconds", "emit.offset-syncs.enabled", "groups", "groups.exclude",
                   "refresh.groups.interval.seconds"),
    "heartbeats": ("emit.heartbeats.enabled", "emit.heartbeats.interval.seconds"),
    "offset syncs": ("emit.offset-syncs.enabled", "offset.lag.max", "offset-syncs.topic.location",
                     "{target}.offset.flush.interval.ms"),
    "duplicates": ("exactly.once.source.support", "{target}.offset.flush.interval.ms"),
    "transactions": ("{source}.consumer.isolation.level",),
    "start position": ("{source}.consumer.auto.offset.reset",),
    "record size": ("{target}.producer.max.request.size", "{source}.consumer.max.partition.fetch.bytes"),
    "cycles": ("replication.policy.class", "replication.policy.separator"),
    "headers": ("header.converter",),
}


class EffectiveSettings:
    """The properties of one flow of a replicator, resolved and quoted as it applies them.

    ``properties``: every property it runs with (rendered and given); ``origins``: where a
    given one came from (the key as written -> ``"the test's marker"`` ...), the others are
    ``rendered``; a key it does not have is ``defaults`` (``defaults_from``) or unknown.
    """

    def __init__(self, properties: Mapping[str, str] | Iterable[tuple[str, str]], *,
                 origins: Mapping[str, str] | None = None, aliases: tuple[str, str] = ("source", "target"),
                 defaults: Mapping[str, str] = MM2_PROPERTY_DEFAULTS, defaults_from: str = "MM2's default",
                 rendered: str = "rendered by the plugin", name: str = "MirrorMaker 2",
                 only_defaults: bool = False, names: Mapping[str, str] | None = None) -> None:
        self.properties = dict(properties.items() if isinstance(properties, Mapping) else properties)
        self.origins = dict(origins or {})
        self.aliases = aliases
        self.flow = f"{aliases[0]}->{aliases[1]}"
        self.defaults = {self._named(k): v for k, v in defaults.items()}
        self.defaults_from = defaults_from
        self.rendered = rendered
        #: the replicator's name, and whether it has only the settings of ``defaults`` (the
        #: reference mirror implements a part of MM2's): another key is not one of its settings
        self.name = name
        self.only_defaults = only_defaults
        #: a replicator with other names than MM2's: MM2's key (``{source}``/``{target}``
        #: formatted) -> its own; a key missing here is not one of its settings
        self.names = None if names is None else {self._named(k): v for k, v in names.items()}

    def _named(self, key: str) -> str:
        return key.format(source=self.aliases[0], target=self.aliases[1])

    def lookup(self, key: str) -> tuple[str, str | None, str]:
        """``(key as it is set, value, where it came from)``: the flow's own key over the
        top-level one, then the default; value None when neither is known."""
        key = self._named(key)
        if self.names is not None:
            if key not in self.names:
                return key, None, "not set"
            key = self.names[key]
        for as_set in (f"{self.flow}.{key}", key):
            if as_set in self.properties:
                return as_set, self.properties[as_set], self.origins.get(as_set, self.rendered)
        if key in self.defaults:
            return key, self.defaults[key], self.defaults_from
        return key, None, "not set"

    def value(self, key: str) -> str | None:
        """The value in effect (None: not set and no known default)."""
        return self.lookup(key)[1]

    def quote(self, *keys: str) -> str:
        """``KEY=VALUE (where)``, comma-separated; the keys of a feature when ``keys`` is one
        name of :data:`FEATURE_SETTINGS`."""
        if len(keys) == 1 and keys[0] in FEATURE_SETTINGS:
            keys = FEATURE_SETTINGS[keys[0]]
        out = []
        for key in keys:
            as_set, value, where = self.lookup(key)
            if self.names is not None and self._named(key) not in self.names:
                out.append(f"{as_set} (not a setting of {self.name})")
            elif self.names is None and self.only_defaults and as_set not in self.defaults and self._named(key) not in self.defaults:
                out.append(f"{as_set} (not a setting of the {self.name})")
            else:
                out.append(f"{as_set} not set" if value is None else f"{as_set}={value} ({where})")
        return ", ".join(out)

    def given(self) -> dict[str, str]:
        """The properties the test or the user gave (not rendered), as written."""
        return {k: v for k, v in self.properties.items() if k in self.origins}


def settings_of(replicator: Any) -> EffectiveSettings | None:
    """``replicator``'s effective settings, or None for one the plugin does not configure
    (``command:``, ``external:``)."""
    fn = getattr(replicator, "effective_settings", None)
    return fn() if callable(fn) else None


def explain(replicator: Any, feature: str) -> str:
    """What a failed check of ``feature`` (a name of :data:`FEATURE_SETTINGS`) says about
    its cause: the settings behind it as the replicator applies them, and what the replicator
    says of itself (its health, MirrorMaker 2's connector and task states); for a replicator
    the plugin does not configure, what to check.  Never raises."""
    spec = str(getattr(replicator, "spec", "") or type(replicator).__name__)
    settings = settings_of(replicator)
    keys = FEATURE_SETTINGS.get(feature, ())
    if settings is not None:
        parts = [f"{spec} in effect: {settings.quote(feature)}"]
    else:
        named = ", ".join(k.format(source="SOURCE", target="TARGET") for k in keys)
        parts = [f"{spec} is not configured by the plugin: check its own settings of {feature}"
                 + (f" ({named} in MirrorMaker 2's names)" if named else "")]
    for what in ("health", "status"):
        fn = getattr(replicator, what, None)
        if callable(fn):
            try:
                said = str(fn() or "")
            except Exception as exc:  # a report must not fail for the replicator's state
                said = f"cannot tell: {type(exc).__name__}: {exc}"
            if said:
                parts.append(f"it says: {said}")
                break
    return "; ".join(parts)


def _takes(patterns: str | None, topic: str) -> bool:
    """Whether a comma-separated list of regexes takes ``topic`` (a full match, as MM2's
    ``DefaultTopicFilter`` does); an unreadable regex counts as taking it (the replicator
    judges, not this hint)."""
    for p in (x.strip() for x in (patterns or "").split(",")):
        if not p:
            continue
        try:
            if re.fullmatch(p, topic):
                return True
        except re.error:
            return True
    return False


def readiness_hint(replicator: Any, topics: Mapping[str, str], found: Mapping[str, int]) -> str:
    """The likely cause of a readiness timeout, from the evidence and the settings in effect:
    the topic filter does not take a topic; it does, but the remote topic was never created
    (discovery: ``refresh.topics.interval.seconds``); or it was, and nothing crossed (the
    replicator's tasks).  ``topics``: source -> target topic; ``found``: target topics that
    exist (-> partitions).  Only what the evidence does not rule out."""
    settings = settings_of(replicator)
    if settings is None:
        return _unconfigured_hint(replicator, topics, found)
    refused = [t for t in topics
               if not _takes(settings.value("topics"), t) or _takes(settings.value("topics.exclude"), t)]
    if refused:
        return (f"Hint: the replicator's topic filter does not take {', '.join(sorted(refused))}: "
                f"{settings.quote('topics', 'topics.exclude')}.")
    missing = sorted(target for target in topics.values() if target not in found)
    if missing:
        return (f"Hint: its topic filter takes these topics ({settings.quote('topics')}), yet {', '.join(missing)} "
                f"never appeared on the target: the replicator looks for new topics every "
                f"{settings.quote('refresh.topics.interval.seconds')}; a slow start (MirrorMaker 2 rebalances on every "
                "new topic) may need --kafka-mirror-startup-timeout or --kafka-mirror-topic-provisioning session.")
    return (f"Hint: the remote topics exist (the replicator discovered them: {settings.quote('topics')}), yet no "
            f"warm-up record crossed: the copying tasks are the suspect (what the replicator says below), or a record "
            f"size they refuse ({settings.quote('record size')}).")


_SLOW = ("A slow one (MirrorMaker 2 rebalances on every new topic) may need --kafka-mirror-startup-timeout or "
         "--kafka-mirror-topic-provisioning session.")


def _unconfigured_hint(replicator: Any, topics: Mapping[str, str], found: Mapping[str, int]) -> str:
    """The readiness hint for a replicator the plugin does not configure: ``external:POLICY``,
    whose naming is the spec's, and ``command:``, whose naming is --kafka-mirror-naming; each
    names where its own naming is given, never the other's."""
    spec = str(getattr(replicator, "spec", "") or "")
    missing = {source: target for source, target in topics.items() if target not in found}
    if not missing:
        return (f"Hint: the target topics exist ({', '.join(sorted(topics.values()))}), yet no warm-up record "
                f"crossed: is the replicator copying (its tasks, its log)? {_SLOW}")
    names = ", ".join(sorted(missing.values()))
    if not spec.startswith("external:"):
        naming = getattr(replicator, "naming", None)
        return (f"Hint: is the replicator running, and does its topic filter take these topics? {names} never "
                f"appeared on the target: is that the name it gives (--kafka-mirror-naming "
                f"{naming if naming is not None else 'identity'})? {_SLOW}")
    given = f"--kafka-mirror-replicator {spec}"
    copies = _copies_under_other_names(replicator, missing)
    if copies:
        source, other = min(copies.items())
        policy = "identity" if other == source else f"prefix:{other[: len(other) - len(source)]}"
        return (f"Hint: {names} never appeared on the target, but {other} did: the replicator names topics as "
                f"external:{policy} says; give --kafka-mirror-replicator external:{policy} (now {given}).")
    prefix = getattr(replicator, "session_prefix", None) or getattr(replicator, "topic_prefix", "km")
    take = (f"Is the replicator running, and does its topic filter take ^{prefix}-.* (every topic of the session "
            f"starts with {prefix}-: --kafka-mirror-topic-prefix)?")
    if copies is not None:  # the target was listed: no copy of these topics under any name yet
        return (f"Hint: {names} never appeared on the target, under the naming of {given} or any other (no target "
                f"topic ends with its source topic's name). {take} {_SLOW}")
    return (f"Hint: {names} never appeared on the target under the naming of {given}. {take} If it renames "
            "topics, the spec says how: external:prefix:ALIAS. for MirrorMaker 2's DefaultReplicationPolicy (e.g. "
            "external:prefix:primary. for a source cluster aliased primary), external:identity for one that keeps "
            f"names. {_SLOW}")


def _copies_under_other_names(replicator: Any, missing: Mapping[str, str]) -> dict[str, str] | None:
    """Source topic -> a target topic that is its copy under another prefix (or under its own
    name), for the ``missing`` ones (source -> the name awaited); None when the target
    cannot be listed."""
    target = getattr(replicator, "target", None)
    if target is None:
        return None
    try:
        existing = list(target.topics())
    except Exception:  # a hint must not fail the message it belongs to
        return None
    source_cluster = getattr(replicator, "source", None)
    # one cluster as source and target: a topic of the same name is the source topic itself
    same = source_cluster is not None and source_cluster.bootstrap_servers == target.bootstrap_servers
    out = {}
    for source, awaited in missing.items():
        others = sorted(t for t in existing if t.endswith(source) and t != awaited and not (same and t == source))
        if others:
            out[source] = others[0]
    return out
