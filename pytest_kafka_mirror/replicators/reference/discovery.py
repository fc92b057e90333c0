"""Topic discovery: which source topics the mirror copies, and when it starts copying them.

The mirror polls the source's metadata every ``discovery_interval`` seconds (no consumer
group: Tansu's group join is slow, and a mirror does not need one), creates each new
matching topic on the target with the same partition count and the source topic's configs
(those MM2 copies: ``configs.py``; a 4 MB ``max.message.bytes`` must hold on the target
too), and assigns its partitions from their committed positions (a restart), else from
offset 0.  Added partitions of a known topic grow the target topic and are assigned the
same way.

The :class:`~.behaviour.Behaviour` knobs make it discover like a real replicator: a topic
found after the first scan is assigned ``discovery_delay`` seconds after its target topic
was created, and the copy of every topic stops for ``rebalance_pause`` seconds
(:meth:`Discovery.paused`).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

from .behaviour import Behaviour

__all__ = ["Discovery", "create_topic", "grow_topic"]


def grow_topic(admin: Any, name: str, partitions: int) -> bool:
    """Give ``name`` ``partitions`` partitions (as MM2 grows a remote topic after its source
    grew); False when it already had them."""
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import NewPartitions

    return _done(admin.create_partitions([NewPartitions(name, partitions)], operation_timeout=10)[name],
                 KafkaError.INVALID_PARTITIONS)


def _done(future: Any, already: int) -> bool:
    """Whether an admin request changed something: False when it failed with ``already``
    (the change was there already), its other errors raised."""
    from confluent_kafka import KafkaException

    try:
        future.result(timeout=15)
        return True
    except KafkaException as exc:
        if exc.args[0].code() != already:
            raise
        return False


def create_topic(admin: Any, name: str, partitions: int, config: dict[str, str] | None = None) -> bool:
    """Create ``name`` with the broker's default replication factor (-1: a multi-broker
    target replicates it, and its ``min.insync.replicas`` can be met) and ``config``; False
    when it already existed."""
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import NewTopic

    return _done(admin.create_topics([NewTopic(name, partitions, -1, config=config or {})], operation_timeout=10)[name],
                 KafkaError.TOPIC_ALREADY_EXISTS)


class Discovery:
    """The mirrored topics (``assigned``: topic -> partitions) and pending assignments."""

    def __init__(self, *, consumer: Any, gaps: Any, src_admin: Any, dst_admin: Any, topics: str, prefix: str,
                 internal: Callable[[str], bool], start_offset: Callable[[str, int], int],
                 on_partitions: Callable[[str, int], None], behaviour: Behaviour, log: Callable[[str], None],
                 topic_config: Callable[[str], dict[str, str]] = lambda topic: {},
                 cycle: Callable[[str], bool] = lambda topic: False) -> None:
        self.consumer = consumer
        self.gaps = gaps
        self.src_admin = src_admin
        self.dst_admin = dst_admin
        self.pattern = re.compile(topics)
        self.prefix = prefix
        self.internal = internal
        self.start_offset = start_offset
        self.on_partitions = on_partitions
        self.behaviour = behaviour
        self.log = log
        self.topic_config = topic_config
        #: MM2's cycle detection (``policy.AliasPolicy.is_cycle``): such a topic is never copied
        self.cycle = cycle
        #: topics the filter matched that were left alone as cycles (logged once each)
        self.cycles: set[str] = set()
        self.assigned: dict[str, int] = {}
        #: (when, partitions): assignments waiting for their discovery delay
        self.pending: list[tuple[float, list[Any]]] = []
        self.paused_until = 0.0
        self.scans = 0
        self.next_scan = 0.0

    def mirrors(self, topic: str) -> bool:
        if not self.pattern.search(topic) or self.internal(topic):
            return False
        if self.cycle(topic):
            if topic not in self.cycles:
                self.cycles.add(topic)
                self.log(f"not copying {topic}: it came from this flow's target (a cycle)")
            return False
        return True

    def scan(self) -> None:
        """Look for new topics and partitions; the first scan assigns at once."""
        from confluent_kafka import TopicPartition

        md = self.src_admin.list_topics(timeout=5)
        first = self.scans == 0
        self.scans += 1
        new: list[Any] = []
        found: list[str] = []
        for name, t in md.topics.items():
            if t.error is not None or not self.mirrors(name):
                continue
            n = len(t.partitions)
            have = self.assigned.get(name, 0)
            if n <= have:
                continue
            target = self.prefix + name
            if have == 0:
                found.append(name)
                config = self.topic_config(name)
                if create_topic(self.dst_admin, target, n, config):
                    self.log(f"created target topic {target} with {n} partitions"
                             + (f" and {', '.join(f'{k}={v}' for k, v in sorted(config.items()))}" if config else ""))
            elif grow_topic(self.dst_admin, target, n):
                self.log(f"grew target topic {target} to {n} partitions")
            new += [TopicPartition(name, p, self.start_offset(name, p)) for p in range(have, n)]
            self.assigned[name] = n
            self.on_partitions(name, n)
            self.log(f"mirroring {name} partitions {have}..{n - 1} -> {target}")
        if not new:
            return
        now = time.monotonic()
        b = self.behaviour
        if not first and found and b.rebalance_pause > 0:
            self.paused_until = max(self.paused_until, now + b.rebalance_pause)
            self.log(f"rebalance: {len(found)} new topic(s), every topic paused for {b.rebalance_pause:g} s")
        delay = 0.0 if first or not found else b.discovery_delay
        if delay > 0:
            self.log(f"copying {', '.join(found)} in {delay:g} s (discovery delay)")
        self.pending.append((now + delay, new))
        self.assign_due(now)

    def assign_due(self, now: float) -> None:
        """Assign the partitions whose discovery delay is over."""
        due = [tps for when, tps in self.pending if when <= now]
        if not due:
            return
        self.pending = [(when, tps) for when, tps in self.pending if when > now]
        tps = [tp for batch in due for tp in batch]
        for tp in tps:
            self.gaps.start(tp.topic, tp.partition, tp.offset)
        self.consumer.incremental_assign(tps)

    def paused(self, now: float) -> bool:
        """Whether a rebalance stops every topic right now."""
        return now < self.paused_until

    def tick(self, now: float) -> None:
        """A scan when one is due (failures are retried at the next), then due assignments."""
        from confluent_kafka import KafkaException

        if now >= self.next_scan:
            try:
                self.scan()
            except KafkaException as exc:
                self.log(f"topic discovery failed (will retry): {exc}")
            self.next_scan = now + self.behaviour.discovery_interval
        if self.pending:
            self.assign_due(now)
