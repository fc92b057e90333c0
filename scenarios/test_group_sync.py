"""Consumer-group offset sync on the target (``sync.group.offsets.enabled``).

MirrorMaker 2 (2.7+) can commit the translated offsets of a source group to the same group
on the target, so consumers started there resume without translating anything themselves.
It does so only for a group with no active member on the target: it must never move the
offsets of consumers that are running there.

What it expects (MM2 with group sync on, its checkpoints and sync every 5 s as the plugin
renders them; MM2's defaults are 60 s each):

* an **idle** group (it committed at the end of the run on the source, nobody consumes it
  on the target) is moved to its translated offsets: the figure ``group_sync_s`` is the
  time from its commit on the source until its offsets on the target cover every
  partition, and failing over through those offsets skips nothing (``mirror_failover``
  checks the synced offsets as well as the checkpoints);
* an **active** group (a consumer on the target subscribed to the remote topic, not
  committing; then its source group commits the idle group's offsets) is checkpointed at
  those offsets (within SYNC_TIMEOUT_S: a new group waits for the replicator's next group
  discovery), and keeps no committed offset on the target through a sync round after that
  (proven by a canary: a new idle group committed after the checkpoint, synced).

Why: a consumer-group sync that silently stopped working across an upgrade (reported
against 3.6 / 3.7 behind a Connect deployment) turns a failover into a replay from
``auto.offset.reset``; a sync that moves an active group makes running consumers skip
or re-read.
"""

from __future__ import annotations

import threading
import time

import pytest

from pytest_kafka_mirror import explain, witness
from pytest_kafka_mirror.processes.managed import wait_until
from pytest_kafka_mirror.verify.failover import TargetReader

RATE = 200
SYNC = {"sync.group.offsets.enabled": "true"}
SYNC_TIMEOUT_S = 60


class _ActiveMember:
    """A consumer of ``group`` on the target, polling (never committing) until closed."""

    def __init__(self, cluster, group: str, topic: str) -> None:
        from confluent_kafka import Consumer

        # client_config(): the cluster's address and client properties (credentials of a secured cluster)
        self.consumer = Consumer({**cluster.client_config(), "group.id": group, "enable.auto.commit": False,
                                  "auto.offset.reset": "earliest", "session.timeout.ms": 30000})
        self.consumer.subscribe([topic])
        self.stop = threading.Event()
        try:
            wait_until(self.consumer.assignment, 30, f"partitions of {topic} for {group}", interval=0.1,
                       pause=self.consumer.poll)
        except TimeoutError:
            pytest.fail(f"the active member of {group} got no partitions of {topic} on the target in 30 s")
        self.thread = threading.Thread(target=self._poll, daemon=True)
        self.thread.start()

    def _poll(self) -> None:
        while not self.stop.is_set():
            self.consumer.poll(0.2)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)
        self.consumer.close()


def _sync_settings(rep, leave_out):
    """The replicator's checkpoint settings.  A skip with the reason where the check is left
    out on purpose (``--kafka-mirror-leave-out group-sync``) or the replicator has no such
    feature (the legacy MirrorMaker); a failure naming the setting where it could sync groups
    and does not: this scenario asks for it, a replicator that gives nothing to check fails."""
    if "group sync" in leave_out:
        pytest.skip(f"group offset sync: {leave_out['group sync']}")
    settings = rep.checkpoints
    if settings is None:
        pytest.skip(f"group offset sync: {rep.no_translation or f'{rep.spec} does not say'}")
    why = settings.no_group_sync()
    if why:
        pytest.fail(f"group offset sync: nothing to check: {why}; this scenario asks for it "
                    f"(sync.group.offsets.enabled=true): a consumer failing over finds no group offset on the "
                    f"target and falls back to auto.offset.reset", pytrace=False)
    return settings


def _commit_on_source(cluster, group: str, offsets: dict[tuple[str, int], int]) -> None:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({**cluster.client_config(), "group.id": group, "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=False)
    finally:
        c.close()


@pytest.mark.kafka_mirror(replicator_properties=SYNC)
def test_group_sync_moves_idle_groups_only(mirror_env, mirror_topics, mirror_producer, mirror_verifier,
                                           mirror_failover, mirror_leave_out):
    rep = mirror_env.replicator
    settings = _sync_settings(rep, mirror_leave_out)
    [topic] = mirror_topics(1, partitions=3)
    remote = rep.target_topic(topic)
    run = mirror_producer([topic], rate=RATE, duration=6, witnesses=[witness("idle")])  # commits at the end
    [idle] = run.witness_logs()
    end = idle.commits[-1]
    offsets = {(topic, int(p)): o for p, o in end["offsets"][topic].items()}
    active_group = f"{idle.group}-active"
    reader = TargetReader(mirror_env.target.bootstrap_servers, settings, [idle.group, active_group],
                          rep.heartbeat_emitter)
    try:
        synced_at = _await_sync(reader, idle.group, remote, len(offsets))
        run.record_figure("group_sync_s", None if synced_at is None else synced_at - end["time_us"] / 1e6,
                          f"{idle.group}: commit on the source -> committed on every partition of {remote}")
        assert synced_at is not None, (f"the idle group {idle.group} was not synced to the target in "
                                       f"{SYNC_TIMEOUT_S} s: {explain(rep, 'group sync')}")
        member = _ActiveMember(mirror_env.target, active_group, remote)
        try:
            _commit_on_source(mirror_env.source, active_group, offsets)
            # A new group: MM2 finds it within refresh.groups.interval.seconds (10 s as rendered),
            # reconfigures its checkpoint tasks (a rebalance), then checkpoints it; the sync that
            # must leave it alone runs from then on.
            upstream = {p: o for (_, p), o in offsets.items()}
            checkpointed_at, seen = _await_checkpoints(reader, active_group, remote, upstream)
            assert checkpointed_at is not None, (
                f"no checkpoint of {active_group} at its committed offsets {upstream} in {SYNC_TIMEOUT_S} s "
                f"(newest seen, partition -> (upstream, downstream): {seen}): the active group's check proves nothing; "
                f"{explain(rep, 'checkpoints')}")
            # not moved by a sync round that saw its checkpoint: proven by a canary synced after it
            round_at = _await_a_sync_round(mirror_env.source, reader, f"{idle.group}-canary", remote, offsets)
            assert round_at is not None, (
                f"no sync round after the active group's checkpoint: a new idle group committed then was not synced "
                f"in {SYNC_TIMEOUT_S + SYNC_TIMEOUT_S} s: {explain(rep, 'group sync')}")
            moved = reader.committed(active_group)
        finally:
            member.close()
    finally:
        reader.close()
    assert not moved, f"the replicator moved the offsets of {active_group}, which has an active member: {moved}"
    mirror_verifier(run).assert_ok()
    mirror_failover(run).assert_ok()  # the idle group's synced offsets and checkpoints skip nothing


def _await_sync(reader: TargetReader, group: str, remote: str, partitions: int) -> float | None:
    """When ``group`` had a committed offset on every partition of ``remote`` (epoch s)."""
    try:
        wait_until(lambda: len([tp for tp in reader.committed(group) if tp[0] == remote]) >= partitions,
                   SYNC_TIMEOUT_S, f"{group}'s offsets on {remote}", interval=0.5)
    except TimeoutError:
        return None
    return time.time()


def _await_a_sync_round(source, reader: TargetReader, canary: str, remote: str,
                        offsets: dict[tuple[str, int], int]) -> float | None:
    """When a group sync round ran that saw every checkpoint written before this call (epoch
    s), or None: a new group ``canary`` committed at ``offsets`` on the source now is
    discovered, checkpointed and then synced to the target; the round that synced it ran
    over the checkpoints of every group of the flow (MirrorMaker 2's ``syncGroupOffset``, the
    reference mirror's sync), older ones included.  What a fixed sleep of "a sync interval
    or two" only hoped for."""
    _commit_on_source(source, canary, offsets)
    reader.groups.append(canary)
    upstream = {p: o for (_, p), o in offsets.items()}
    if _await_checkpoints(reader, canary, remote, upstream)[0] is None:
        return None
    return _await_sync(reader, canary, remote, len(offsets))


def _latest_checkpoints(reader: TargetReader, group: str, remote: str) -> dict[int, tuple[int, int]]:
    """partition -> (upstream, downstream) of the newest checkpoint of ``group`` on ``remote``."""
    state = reader.read()
    return {c.partition: (c.upstream, c.downstream)
            for c in state.checkpoints if c.group == group and c.topic == remote}


def _await_checkpoints(reader: TargetReader, group: str, remote: str, upstream: dict[int, int]):
    """The newest checkpoints once each partition's is at ``upstream``; (when, them) or (None, last seen)."""
    seen: dict[int, tuple[int, int]] = {}

    def there() -> bool:
        seen.clear()
        seen.update(_latest_checkpoints(reader, group, remote))
        return all(seen.get(p, (None,))[0] == o for p, o in upstream.items())

    try:
        wait_until(there, SYNC_TIMEOUT_S, f"{group}'s checkpoints on {remote}", interval=0.5)
    except TimeoutError:
        return None, seen
    return time.time(), seen


@pytest.mark.nightly  # an MM2 of its own: 51 s on Apache Kafka 4.3.1 + MM2 4.3.1
@pytest.mark.kafka_mirror(replicator_properties=SYNC)
def test_group_sync_after_a_rewind(mirror_env, mirror_topics, mirror_producer, mirror_verifier, mirror_leave_out):
    """A group reset back on the source (a replay): the checkpoints follow it back, the group's
    synced offsets on the target do not (Kafka's ``testOffsetTranslationBehindReplicationFlow``).

    After the run the group (nobody consumes it on the target) is at the end of every
    partition, checkpointed and synced there; then it is committed at a tenth of that on the
    source.  Expects: a checkpoint of the rewound offset on every partition, translated below
    the one before (MM2 3.5+'s offset-sync store keeps older syncs for this: before, the
    rewound offset could not be translated); the group's committed offsets on the target stay
    where they were through a sync round after the rewound checkpoint (proven by a canary
    group synced after it; MM2's ``syncGroupOffset`` only moves
    a group forward: a consumer failing over through them does not replay; one failing over
    through the checkpoint does).
    """
    rep = mirror_env.replicator
    settings = _sync_settings(rep, mirror_leave_out)
    [topic] = mirror_topics(1, partitions=3)
    remote = rep.target_topic(topic)
    run = mirror_producer([topic], rate=RATE, duration=6, witnesses=[witness("replay")])  # commits at the end
    [group] = run.witness_logs()
    end = {int(p): o for p, o in group.commits[-1]["offsets"][topic].items()}
    reader = TargetReader(mirror_env.target.bootstrap_servers, settings, [group.group],
                          rep.heartbeat_emitter)
    try:
        at_end, before = _await_checkpoints(reader, group.group, remote, end)
        assert at_end is not None, (f"{group.group} at the end {end} was not checkpointed in {SYNC_TIMEOUT_S} s: "
                                    f"{before}; {explain(rep, 'checkpoints')}")
        assert _await_sync(reader, group.group, remote, len(end)) is not None, (
            f"{group.group} was not synced to the target in {SYNC_TIMEOUT_S} s: {explain(rep, 'group sync')}")
        synced = reader.committed(group.group)
        rewound = {p: o // 10 for p, o in end.items()}
        _commit_on_source(mirror_env.source, group.group, {(topic, p): o for p, o in rewound.items()})
        rewound_at = time.time()
        back_at, after = _await_checkpoints(reader, group.group, remote, rewound)
        # a sync round after the rewound checkpoint, proven by a canary synced after it
        round_at = _await_a_sync_round(mirror_env.source, reader, f"{group.group}-canary", remote,
                                       {(topic, p): o for p, o in end.items()})
        still = reader.committed(group.group)
    finally:
        reader.close()
    report = mirror_verifier(run)

    report.assert_ok()
    assert back_at is not None, (
        f"{group.group} committed back at {rewound} on the source: no checkpoint of it in {SYNC_TIMEOUT_S} s "
        f"(the newest: {after}); failing over would skip the replay")
    not_back = {p: (before[p], after[p]) for p in end if after[p][1] >= before[p][1]}
    assert not not_back, f"checkpoints of the rewound group not translated below the ones before: {not_back}"
    moved = {tp: (synced.get(tp), o) for tp, o in still.items() if o < synced.get(tp, -1)}
    assert round_at is not None, (f"no sync round after the rewound checkpoint: a new idle group committed then was "
                                  f"not synced in {SYNC_TIMEOUT_S + SYNC_TIMEOUT_S} s: {explain(rep, 'group sync')}")
    assert not moved, f"the group's synced offsets on the target went back (before, now): {moved}"
    print(f"{group.group}: checkpoints followed the rewind in {back_at - rewound_at:.2f} s "
          f"(before {before}, after {after}); synced offsets kept {still}")
