"""Remote topic names and cycle detection, as MirrorMaker 2's replication policies do them.

MM2 names the cluster at each end of a flow by an alias (``clusters = source, target``).
Under ``DefaultReplicationPolicy`` a topic ``orders`` of ``source`` is ``source.orders`` on
``target``; the reverse flow (``target -> source``) then sees ``source.orders`` on its own
source and must not copy it back.  MM2 decides that per topic in
``MirrorSourceConnector.isCycle``: the topic's source alias (``topicSource``: the part
before the first separator) equal to the flow's *target* alias is a cycle; otherwise it
recurses on the upstream topic (``source.orders`` -> ``orders``) until a topic has no
source alias.  ``IdentityReplicationPolicy`` keeps the names, so ``topicSource`` is null
for every topic but heartbeats (unless its ``source.cluster.alias`` is set, which
this model does not take): MM2 "is not able to prevent cycles when using this replication
policy" (its Javadoc), and neither is this mirror.

``none`` is the legacy MirrorMaker's way (the reference mirror's own default, and
``--kafka-mirror-naming``): a fixed prefix, no cycle detection at all.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["POLICIES", "AliasPolicy", "policy_kind"]

#: ``replication.policy.class`` (its short name) -> the kind modelled here
POLICIES = {"DefaultReplicationPolicy": "default", "IdentityReplicationPolicy": "identity"}


def policy_kind(policy_class: str | None) -> str:
    """``default`` / ``identity`` for MM2's two policies (full or short class name), ``none``
    without one; ValueError for any other class."""
    if policy_class is None or not policy_class.strip():
        return "none"
    short = policy_class.strip().rsplit(".", 1)[-1]
    if short not in POLICIES:
        raise ValueError(f"replication.policy.class={policy_class.strip()}: the reference mirror models "
                         f"{' and '.join(POLICIES)} only")
    return POLICIES[short]


@dataclass(frozen=True)
class AliasPolicy:
    """One flow's replication policy: ``source_alias -> target_alias``."""

    kind: str = "none"  # default | identity | none
    source_alias: str = "source"
    target_alias: str = "target"
    separator: str = "."
    heartbeats: str = "heartbeats"

    def remote_prefix(self, legacy_prefix: str = "") -> str:
        """What goes before a source topic's name on the target (``source.`` under the
        default policy, nothing under identity, ``legacy_prefix`` without a policy)."""
        if self.kind == "default":
            return self.source_alias + self.separator
        return "" if self.kind == "identity" else legacy_prefix

    def topic_source(self, topic: str) -> str | None:
        """The alias of the cluster ``topic`` was copied from (None: a local topic)."""
        if self.kind == "none" or (self.kind == "identity" and not topic.endswith(self.heartbeats)):
            return None
        parts = topic.split(self.separator)
        while parts and parts[-1] == "":  # Java's String.split drops trailing empty strings
            parts.pop()
        return parts[0] if len(parts) >= 2 else None

    def upstream_topic(self, topic: str) -> str | None:
        """``topic``'s name on the cluster it was copied from (identity: itself)."""
        if self.kind == "identity" and not topic.endswith(self.heartbeats):
            return topic
        source = self.topic_source(topic)
        return None if source is None else topic[len(source) + len(self.separator):]

    def is_cycle(self, topic: str) -> bool:
        """Whether copying ``topic`` would bring records back to where they came from
        (``MirrorSourceConnector.isCycle``)."""
        while True:
            source = self.topic_source(topic)
            if source is None:
                return False
            if source == self.target_alias:
                return True
            upstream = self.upstream_topic(topic)
            if upstream is None or upstream == topic:
                return False
            topic = upstream
