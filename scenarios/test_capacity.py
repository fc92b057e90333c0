"""What the replicator carries: its copy rate with a backlog, the highest rate it sustains,
over a long link with and without tuning, and with one task or four.

The verifier computes the capacity figures of every run (``report.capacity``, see
docs/how-it-works.md): ``copy_rate`` (the target's arrival rate while the replicator had
a backlog: acknowledged on the source, not arrived yet), ``backlog_max``, ``caught_up_s``
and, for a stepped rate profile, the steps and ``max_sustainable_rate``.  A figure the
instrument bounded (the producer behind its offered rate, the capture behind the
target's end offsets) is a lower bound with the reason.  These scenarios make the
replicator the bottleneck and check that the figures are there and agree with what the
same run measured otherwise (its per-second timeline, its fault markers, its record
counts): never an absolute rate, which depends on the machine.

* backlog drain: the replicator paused while the producer writes as fast as it can, then
  resumed: the copy rate of the backlog;
* ramp to the knee: the offered rate in steps, each higher; the highest step whose p99
  stayed under the SLO and whose backlog did not grow is ``max_sustainable_rate``;
* the long link (MirrorMaker 2): the same drain with 50 ms added each way on both of the
  replicator's links, first with MM2's defaults, then with its fetch and batching tuned
  (``TUNED``): both copy rates are figures, and the tuned one is higher (the defaults
  carry one 16 KB batch per partition per produce request, a round trip each);
* ``tasks.max`` 1 then 4 on an 8-partition topic (MirrorMaker 2): both copy rates are
  figures; which is higher depends on the cores the machine has, so neither is asserted.

Why: "how much does it carry" is the question asked most about a replicator, and the
answer changes with its settings and its release; the gate holds these figures
(``copy_rate``, ``max_sustainable_rate``) like any other.
"""

from __future__ import annotations

import pytest

from pytest_kafka_mirror.faults import at, pause, resume

#: A drain of a fixed count (the MirrorMaker 2 drains below): the replicator paused for
#: PAUSE_S while the producer writes the records as fast as it can, then resumed.
PAUSE_S = 3.0
#: The backlog drain on any replicator: the replicator paused while the producer writes as
#: fast as it can for DRAIN_S, resumed when it ends.  The capacity figures need at least
#: three seconds of backlog (a rate at 1 s resolution, less the partial first and last
#: second); a fixed count cannot promise that (the reference mirror copied 150,000 records
#: in under 2 s in CI, 17,000-40,000 records/s elsewhere), a fixed time can: the drain
#: lasts DRAIN_S x (the producer's rate / the copy rate), at least 3 s unless the
#: replicator copies twice as fast as one producer writes on the same machine.
DRAIN_S = 6.0
#: The ramp: messages/s per topic, each step STEP_S seconds; the top step above MM2's copy
#: rate on a 2-core machine (17,000-40,000 records/s measured), below the reference
#: mirror's (125,000 records/s in the drain above): on it every step may be sustained and
#: the figure is then a lower bound, which the test checks it says.
RAMP = (1000, 5000, 25000)
STEP_S = 3.0  # two whole seconds in each step (the figures take a step's whole seconds)

LONG_LINK_MS = 50
#: at most this many records per drain: with its defaults MM2 copies a few thousand
#: records/s over the long link, tuned several times more (sized for a drain of >= 5 s each)
LONG_LINK_RECORDS = {"defaults": 50_000, "tuned": 200_000}
#: MirrorMaker 2's clients tuned for a long round trip: fetches that wait for more data
#: and carry more per partition, and produce requests carrying large batches
TUNED = {
    "source.consumer.fetch.min.bytes": "262144",
    "source.consumer.fetch.max.wait.ms": "200",
    "source.consumer.max.partition.fetch.bytes": "4194304",
    "source.consumer.max.poll.records": "5000",
    "target.producer.batch.size": "524288",
    "target.producer.linger.ms": "20",
    "target.producer.buffer.memory": "67108864",
}
TASKS_PARTITIONS = 8
#: a drain's copy rate (its middle seconds) and its average (resume -> last arrival) agree
#: within this factor: the first second after SIGCONT and the last one are partial
DRAIN_AGREEMENT = 1.5


def _drain(mirror_producer, rep, topics, count: int | None = None):
    """A run that pauses ``rep`` (SIGSTOP) at the start and writes as fast as the producer
    goes: ``count`` records per topic, resuming ``rep`` PAUSE_S after the start (when the
    producer is slower than that, it goes on writing while the replicator copies: still a
    backlog), or, without a count, for DRAIN_S seconds, resuming ``rep`` when they end."""
    if count is None:
        return mirror_producer(topics, rate=None, duration=DRAIN_S,
                               faults=[at(0, pause(rep)), at(DRAIN_S, resume(rep))])
    return mirror_producer(topics, rate=None, count=count, faults=[at(0, pause(rep)), at(PAUSE_S, resume(rep))])


def _check_copy_rate(report, what: str) -> float:
    """The run's copy rate (records/s), checked against what the same run measured: the
    figure exists, a lower bound says why, and rate x the window's seconds are the arrivals
    the run's per-second timeline has in them.  Returns it."""
    __tracebackhide__ = True
    cap = report.capacity["all"]
    rate = cap["copy_rate"]
    assert rate is not None, f"{what}: no copy rate ({cap['why']}): {report.summary()}"
    assert not cap["lower_bound"] or cap["why"], f"{what}: a lower bound without the reason: {cap}"
    assert cap["backlog_max"] > 0, f"{what}: a copy rate without a backlog: {cap}"
    t0, t1 = cap["window"]
    seconds = cap.get("window_s", t1 - t0)
    assert 0 < seconds <= t1 - t0, f"{what}: a backlog window of {seconds} s in [{t0}, {t1}]: {cap}"
    timeline = sum(e["arrived"] for e in report.timeline if t0 <= e["t"] < t1)
    copied = rate * seconds
    assert copied <= timeline + seconds, (
        f"{what}: copy rate {rate:.1f}/s over {seconds} s of backlog is {copied:.0f} records, but the timeline has "
        f"{timeline} arrivals in [{t0}, {t1}): {cap}")
    if seconds == t1 - t0:  # one stretch of backlog: the same seconds
        assert copied >= timeline - seconds, (
            f"{what}: copy rate {rate:.1f}/s over {seconds} s is {copied:.0f} records, the timeline has {timeline} "
            f"arrivals in those seconds: {cap}")
    return float(rate)


def _check_drain(report, run, what: str) -> float:
    """A drain's figures: :func:`_check_copy_rate`; the window begins once the replicator was
    resumed (a paused replicator has no rate); and the copy rate agrees within a factor
    DRAIN_AGREEMENT with the drain's average, the records sent over the time from the
    resume to the last arrival (from the fault marker, the producer's end and ``caught_up_s``)."""
    __tracebackhide__ = True
    report.assert_ok()
    rate = _check_copy_rate(report, what)
    cap = report.capacity["all"]
    [resumed] = [m for m in run.markers if m.label.startswith("resume")]
    assert resumed.error is None, f"{what}: the resume failed: {resumed.error}"
    resumed_s = resumed.at_us / 1e6
    assert cap["window"][0] >= int(resumed_s), (
        f"{what}: the backlog window {cap['window']} begins before the replicator was resumed at {resumed_s:.2f}: {cap}")
    assert cap["backlog_max"] <= report.expected, f"{what}: a backlog above the {report.expected} records sent: {cap}"
    [producer] = report.producers
    produced_s = producer["started_us"] / 1e6 + producer["produce_seconds"]
    assert cap["caught_up_s"] is not None, f"{what}: no catch-up time: {cap}"
    drain_s = cap["caught_up_s"] - (resumed_s - produced_s)  # the resume -> the last arrival
    assert drain_s > 0, f"{what}: the last record arrived before the resume at {resumed_s:.2f}: {cap}"
    average = report.expected / drain_s
    assert average / DRAIN_AGREEMENT <= rate <= average * DRAIN_AGREEMENT, (
        f"{what}: copy rate {rate:.0f}/s, but the drain copied {report.expected} records in {drain_s:.2f} s after "
        f"the resume: {average:.0f}/s on average: {cap}")
    print(f"{what}: copy rate {rate:.0f} records/s ({cap['copy_rate_mb']} MB/s) over {cap.get('window_s')} s; the "
          f"drain's average {average:.0f}/s; backlog max {cap['backlog_max']}; caught up {cap['caught_up_s']} s after "
          "the last acknowledgement" + (f" (lower bound: {cap['why']})" if cap["lower_bound"] else ""))
    return rate


@pytest.mark.nightly  # on real Kafka a replicator of its own (CI's time budget); the embedded default runs it always
@pytest.mark.kafka_mirror(replicator_properties={})  # a replicator of its own: this test pauses it
def test_capacity_backlog_drain(mirror_env, mirror_topics, mirror_producer, mirror_verifier):
    topics = mirror_topics(1, partitions=4)
    run = _drain(mirror_producer, mirror_env.replicator, topics)

    report = mirror_verifier(run)

    _check_drain(report, run, "backlog drain")


@pytest.mark.kafka_mirror_topics(1, partitions=4)
# past the knee the producer may fall behind too: the figures say so (a lower bound), not a warning
@pytest.mark.filterwarnings("ignore:producer .* cannot reach")
def test_capacity_ramp_to_the_knee(mirror_topics, mirror_producer, mirror_verifier):
    topics = mirror_topics(1, partitions=4)
    profile = [(i * STEP_S, r) for i, r in enumerate(RAMP)]
    run = mirror_producer(topics, rate=profile, duration=len(RAMP) * STEP_S)

    report = mirror_verifier(run)

    report.assert_ok()
    cap = report.capacity
    slo, steps, best = cap["slo_p99_ms"], cap["steps"], cap["max_sustainable_rate"]
    assert [s["offered_rate"] for s in steps] == [float(r) for r in RAMP], f"not the steps offered {RAMP}: {steps}"
    for s in steps:
        if s["sustained"]:
            assert s["p99_ms"] is not None and s["p99_ms"] <= slo, f"a step sustained past the {slo} ms SLO: {s}"
            assert s["copy_rate"] >= s["offered_rate"] * 0.8, f"a step sustained that copied less than offered: {s}"
        else:
            assert s["why"], f"a step not sustained without the reason: {s}"
    sustained = [s["offered_rate"] for s in steps if s["sustained"]]
    assert cap["max_sustainable_why"], f"max_sustainable_rate {best} without saying what bounded it: {cap}"
    assert best == max(sustained, default=None), f"max_sustainable_rate {best}, the sustained steps {sustained}"
    # a lower bound when no step above the best one was offered and missed (the knee is higher)
    above = [s for s in steps if best is not None and s["offered_rate"] > best]
    no_knee = best is not None and all(s.get("producer_behind_s") for s in above)
    assert cap["max_sustainable_lower_bound"] == no_knee, f"lower bound {cap['max_sustainable_lower_bound']}: {cap}"
    print(f"ramp: max_sustainable_rate {best} ({cap['max_sustainable_why']}); steps: "
          + "; ".join(f"{s['offered_rate']:.0f}/s copied {s['copy_rate']:.0f}/s p99 {s['p99_ms']} ms "
                      f"{'ok' if s['sustained'] else 'no: ' + s['why']}" for s in steps))


@pytest.fixture
def mm2_only(request, kafka_mirror_settings):
    """Skip, before the test's environment starts, unless the replicator is MirrorMaker 2."""
    spec = kafka_mirror_settings.replicator
    if spec.kind not in ("mm2", "mm2-connect"):
        pytest.skip(f"{request.node.name}: MirrorMaker 2's settings, not {spec}'s (the reference mirror has one "
                    "copy loop and no client settings of its own)")


def _switch_for_the_next_drain(mirror_env, done, properties):
    """Delete the topics of the drain ``done`` on the source, then restart the replicator in
    place with ``properties`` (``switch_replicator``): the next drain, on topics of its own
    (created at the start, so the new replicator's first scan finds them), competes with no
    copy of the last one's records (measured with MM2 4.3.1: a restart with other client
    settings or another ``tasks.max`` copied the previous topic again from its start)."""
    admin = mirror_env.source.admin()
    for future in admin.delete_topics(list(done), operation_timeout=30).values():
        future.result(60)
    mirror_env.switch_replicator("current", properties)


@pytest.mark.nightly  # MirrorMaker 2 only, two of them over a delayed link on clusters of its own
def test_capacity_long_link_tuned(mm2_only, mirror_env, mirror_faults, mirror_topics, mirror_producer,
                                  mirror_verifier):
    first, second = mirror_topics(1, partitions=4), mirror_topics(1, partitions=4)
    for link in (mirror_faults.source_link, mirror_faults.target_link):
        link.set_delay(LONG_LINK_MS)
    # restarted as the tuned one will be: both drains start from a cold MM2 (no warm-up burst)
    mirror_env.switch_replicator("current")
    defaults = _drain(mirror_producer, mirror_env.replicator, first, LONG_LINK_RECORDS["defaults"])
    defaults_report = mirror_verifier(defaults)
    slow = _check_drain(defaults_report, defaults, f"MM2 defaults, {LONG_LINK_MS} ms each way")

    _switch_for_the_next_drain(mirror_env, first, TUNED)
    tuned = _drain(mirror_producer, mirror_env.replicator, second, LONG_LINK_RECORDS["tuned"])
    tuned.record_figure("long_link_defaults_copy_rate", slow,
                        f"the same drain before, MM2 with its defaults over the {LONG_LINK_MS} ms link")
    tuned_report = mirror_verifier(tuned)
    fast = _check_drain(tuned_report, tuned, f"MM2 tuned, {LONG_LINK_MS} ms each way")

    assert fast > slow, (f"tuned ({', '.join(f'{k}={v}' for k, v in TUNED.items())}) copied {fast:.0f} records/s "
                         f"over the {LONG_LINK_MS} ms link, the defaults {slow:.0f}: tuning did not help")
    print(f"long link: tuned / defaults = {fast / slow:.2f}")


@pytest.mark.nightly  # MirrorMaker 2 only, two of them on clusters of its own
@pytest.mark.kafka_mirror(private=True)
def test_capacity_tasks_max_1_vs_4(mm2_only, mirror_env, mirror_topics, mirror_producer, mirror_verifier):
    first, second = (mirror_topics(1, partitions=TASKS_PARTITIONS) for _ in range(2))
    mirror_env.switch_replicator("current", {"tasks.max": "1"})
    one = _drain(mirror_producer, mirror_env.replicator, first)
    rate_1 = _check_drain(mirror_verifier(one), one, "tasks.max=1")

    _switch_for_the_next_drain(mirror_env, first, {"tasks.max": "4"})
    four = _drain(mirror_producer, mirror_env.replicator, second)
    four.record_figure("tasks_max_1_copy_rate", rate_1,
                       f"the same drain before, tasks.max=1 on {TASKS_PARTITIONS} partitions")
    rate_4 = _check_drain(mirror_verifier(four), four, "tasks.max=4")
    print(f"tasks.max 4 / 1 = {rate_4 / rate_1:.2f} on {TASKS_PARTITIONS} partitions")
