"""Readiness: a replicator copies a topic once a warm-up record of every partition crossed it.

A target topic that exists proves little: MirrorMaker 2 (and every Connect-based
replicator) creates it seconds before its tasks are assigned the partitions, and a
rebalance pauses every topic while it runs.  Measured with a real MM2 on the embedded
brokers, a schedule started at the target topic's creation put the discovery time
(5.8-10.8 s) into the latency figures, where MM2's replication latency is 0.24 s.

So before a run's schedule starts, :func:`await_ready` produces a *warm-up record*
(``records.warmup_value``: source partition, time and a nonce of this round; the key
``records.WARMUP_KEY``, which compacted topics need) to
every partition of every topic and waits until each one arrived on the target, read with
``assign()`` from offset 0.  A record is matched by its nonce and source partition, on
any target partition, so a replicator that re-partitions is ready too.  Unarrived ones
are produced again every ``resend`` seconds, for replicators that start a new topic at
its latest offset.  Every other reader (capture, witnesses, the reference mirror's fault
stages) recognises warm-up records and leaves them out (``Kind.WARMUP``).

:class:`TopicReadiness` keeps what a round measured: ``discovery_s``, from the topic's
creation until the last partition's warm-up arrived (the replicator's discovery time, a
figure of its own), and ``warmup_s``, the round itself.  A round that does not complete
raises :class:`ReadinessError` naming the partitions, with what the replicator says
about itself (its status and its log).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..produce.records import WARMUP_KEY, parse_warmup, warmup_value
from .base import Replicator, ReplicatorError

__all__ = ["ReadinessError", "TopicReadiness", "await_ready", "format_partitions", "replicator_hooks"]


class ReadinessError(ReplicatorError):
    """Some partition never carried a warm-up record within the limit."""


@dataclass
class TopicReadiness:
    """One readiness round of one topic (times: UTC epoch microseconds)."""

    topic: str
    target_topic: str
    partitions: int
    started_us: int
    created_us: int | None = None
    #: source partition -> when its warm-up record of this round arrived on the target
    arrived_us: dict[int, int] = field(default_factory=dict)
    sent: int = 0
    #: "session": provisioned at session start; "test": created by the test
    provisioned: str = "test"

    @property
    def ready_us(self) -> int | None:
        return max(self.arrived_us.values()) if len(self.arrived_us) >= self.partitions else None

    @property
    def discovery_s(self) -> float | None:
        """Topic creation -> the last partition's warm-up on the target (None: creation unknown)."""
        ready = self.ready_us
        if ready is None or self.created_us is None:
            return None
        return round(max(0, ready - self.created_us) / 1e6, 6)

    @property
    def warmup_s(self) -> float | None:
        """This round: first warm-up produced -> the last partition's on the target."""
        ready = self.ready_us
        return None if ready is None else round(max(0, ready - self.started_us) / 1e6, 6)

    def missing(self) -> list[int]:
        return [p for p in range(self.partitions) if p not in self.arrived_us]

    def to_dict(self) -> dict[str, Any]:
        return {
            "topic": self.topic, "target_topic": self.target_topic, "partitions": self.partitions,
            "started_us": self.started_us, "created_us": self.created_us, "ready_us": self.ready_us,
            "discovery_s": self.discovery_s, "warmup_s": self.warmup_s, "sent": self.sent,
            "provisioned": self.provisioned, "arrived_us": {str(p): t for p, t in sorted(self.arrived_us.items())},
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TopicReadiness:
        return cls(
            topic=d["topic"], target_topic=d["target_topic"], partitions=int(d["partitions"]),
            started_us=int(d["started_us"]), created_us=d.get("created_us"),
            arrived_us={int(p): int(t) for p, t in d.get("arrived_us", {}).items()},
            sent=int(d.get("sent", 0)), provisioned=d.get("provisioned", "test"),
        )


def format_partitions(partitions: list[int]) -> str:
    """``0-3, 7``: partition numbers as compact ranges."""
    out: list[str] = []
    for p in sorted(partitions):
        if out and out[-1].rsplit("-", 1)[-1] == str(p - 1):
            out[-1] = out[-1].split("-")[0] + f"-{p}"
        else:
            out.append(str(p))
    return ", ".join(out)


def _describe(rounds: Mapping[str, TopicReadiness], targets: Mapping[str, int], elapsed_from: int) -> list[str]:
    lines = []
    for r in rounds.values():
        missing = r.missing()
        if not missing:
            continue
        have = targets.get(r.target_topic)
        where = (f"the target topic {r.target_topic!r} was never created" if have is None
                 else f"the target topic {r.target_topic!r} has {have} partition(s)")
        arrived = ", ".join(f"{p} after {(t - elapsed_from) / 1e6:.1f} s" for p, t in sorted(r.arrived_us.items()))
        lines.append(f"  {r.topic}: partition(s) {format_partitions(missing)} of {r.partitions} never carried one"
                     f"{' (arrived: ' + arrived + ')' if arrived else ''}; {where}")
    return lines


def replicator_hooks(rep: Replicator | None) -> dict[str, Any]:
    """:func:`await_ready`'s ``what`` / ``alive`` / ``logs`` / ``status`` for a replicator
    object (None: only the clusters are known)."""
    if rep is None:
        return {"what": "the replicator"}
    return {"what": rep.label or rep.describe(), "alive": lambda: rep.running, "logs": lambda: rep.logs(40),
            "status": rep.status}


def await_ready(
    source_bootstrap: str,
    target_bootstrap: str,
    topics: Mapping[str, tuple[str, int]],
    *,
    timeout: float,
    what: str = "the replicator",
    created_us: Mapping[str, int | None] | None = None,
    provisioned: str = "test",
    alive: Callable[[], bool] = lambda: True,
    describe_exit: Callable[[], str] = lambda: "",
    logs: Callable[[], str] = lambda: "",
    status: Callable[[], str] = lambda: "",
    resend: float = 2.0,
    hint: str | Callable[[Mapping[str, int]], str] = "",
    during: str = "while its topics were warmed up",
) -> dict[str, TopicReadiness]:
    """Block until a warm-up record of every partition of ``topics`` crossed over.

    ``topics`` maps source topic -> (target topic, partitions); the source topics must
    exist.  Returns one :class:`TopicReadiness` per topic.  Raises :class:`ReadinessError`
    when ``alive()`` turns false (with ``describe_exit()``) or after ``timeout`` seconds
    (naming the partitions, with ``status()`` and ``logs()``, and ``hint``: a text, or a
    function of the target topics found (-> partitions) that says what the evidence points at).
    """
    from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

    from .._kafkalog import with_logger

    nonce = uuid.uuid4().hex[:12]
    started = time.time_ns() // 1000
    created = created_us or {}
    rounds = {t: TopicReadiness(t, target, n, started, created.get(t), provisioned=provisioned)
              for t, (target, n) in topics.items()}
    by_target = {r.target_topic: r for r in rounds.values()}
    try:
        producer = Producer(with_logger({"bootstrap.servers": source_bootstrap, "linger.ms": 0,
                                         "socket.connection.setup.timeout.ms": 5000}))
        consumer = Consumer(with_logger({
            "bootstrap.servers": target_bootstrap, "group.id": f"kafka-mirror-readiness-{nonce}",
            "enable.auto.commit": False, "auto.offset.reset": "earliest", "enable.partition.eof": False,
            "fetch.queue.backoff.ms": 1, "fetch.wait.max.ms": 10, "socket.connection.setup.timeout.ms": 5000,
        }))
    except KafkaException as exc:
        raise ReadinessError(f"cannot create the readiness clients: {exc}") from None
    assigned: dict[str, int] = {}
    target_partitions: dict[str, int] = {}
    deadline = time.monotonic() + timeout
    next_send = next_meta = 0.0
    try:
        while True:
            now = time.monotonic()
            if now >= next_send:
                ts = time.time_ns() // 1000
                for r in rounds.values():
                    for p in r.missing():
                        producer.produce(r.topic, warmup_value(p, nonce, ts), WARMUP_KEY, partition=p)
                        r.sent += 1
                producer.poll(0)
                next_send = now + resend
            # until every target topic shows the partitions of its source (a replicator
            # grows a target topic after the source grew: add_partitions mid-run)
            if now >= next_meta and any(assigned.get(t, 0) < r.partitions for t, r in by_target.items()):
                _assign_new(consumer, by_target, assigned, target_partitions, TopicPartition)
                next_meta = now + 0.1
            if assigned:
                for m in consumer.consume(500, 0.05):
                    if m.error():
                        continue
                    w = parse_warmup(m.value())
                    r = by_target.get(m.topic())
                    if w is not None and r is not None and w[2] == nonce and 0 <= w[0] < r.partitions:
                        r.arrived_us.setdefault(w[0], time.time_ns() // 1000)
                if all(not r.missing() for r in rounds.values()):
                    return rounds
            else:
                time.sleep(0.05)
            if not alive():
                raise ReadinessError(f"{what} exited {during}: {describe_exit()}")
            if time.monotonic() >= deadline:
                raise ReadinessError(_timeout_message(what, timeout, rounds, target_partitions, started, status(),
                                                      logs(), hint))
    finally:
        producer.flush(2)
        consumer.close()
        # a traceback kept by the caller keeps this frame: drop the clients, or librdkafka
        # goes on reconnecting (and logging) to a broker that may be gone
        producer = consumer = None


def _assign_new(consumer: Any, by_target: Mapping[str, TopicReadiness], assigned: dict[str, int],
                target_partitions: dict[str, int], tp: Any) -> None:
    """Assign (from offset 0) every target partition that exists and is not assigned yet."""
    # list all topics: a metadata request naming an unknown topic creates it on some brokers
    md = consumer.list_topics(timeout=5)
    new = []
    for name in by_target:
        t = md.topics.get(name)
        if t is None or t.error is not None or not t.partitions:
            continue
        n = len(t.partitions)
        target_partitions[name] = n
        have = assigned.get(name, 0)
        if n > have:
            new += [tp(name, p, 0) for p in range(have, n)]
            assigned[name] = n
    if new:
        consumer.incremental_assign(new)


def _timeout_message(what: str, timeout: float, rounds: Mapping[str, TopicReadiness], targets: Mapping[str, int],
                     started: int, status: str, logs: str, hint: str | Callable[[Mapping[str, int]], str]) -> str:
    sent = sum(r.sent for r in rounds.values())
    lines = [f"timed out after {timeout:g} s waiting for {what} to copy a warm-up record of every partition "
             f"({sent} sent):", *_describe(rounds, targets, started)]
    hint = hint(targets) if callable(hint) else hint
    if hint:
        lines.append(hint)
    if status:
        lines.append(f"what the replicator says about itself:\n{status}")
    if logs:
        lines.append(f"last log lines:\n{logs}")
    return "\n".join(lines)
