"""Producer figures: records/s of ``MirrorProducer`` against a bare confluent-kafka loop with
the same client configuration, and throttle precision against a bare paced loop."""

from __future__ import annotations

import time
import uuid
from typing import Any

from benchmarks._common import Figure, Section, broker, median
from pytest_kafka_mirror.produce.group import ProducerGroup
from pytest_kafka_mirror.produce.producer import MirrorProducer, TopicLanes
from pytest_kafka_mirror.produce.records import HDR_LANE, HDR_PRODUCER, HDR_SEQ, HDR_TS
from pytest_kafka_mirror.produce.slip import SlipHistogram

PARTITIONS = 4
WARMUP = "kafka-mirror-warmup"


def _topic(cluster: Any, name: str, partitions: int = PARTITIONS) -> str:
    topic = f"bench-{name}-{uuid.uuid4().hex[:6]}"
    cluster.create_topic(topic, partitions)
    return topic


def _bare_client(config: dict[str, Any]) -> Any:
    """A client with the producer's configuration; its failure callback only counts."""
    from confluent_kafka import Producer

    failed = [0]

    def on_failure(err: Any, msg: Any) -> None:
        if err is not None:
            failed[0] += 1

    cfg = {k: v for k, v in config.items() if k != "on_delivery"}
    cfg["on_delivery"] = on_failure
    p = Producer(cfg)
    p.produce(WARMUP, b"warm-up")
    p.flush(30)
    return p


def bare_loop(bootstrap: str, topic: str, n: int, size: int, fmt: str, started: list[float] | None = None) -> float:
    """The client's own ceiling: records of ``size`` bytes (key, value and, for ``headers``,
    four headers of the same shape as ours, all built once) produced in a tight loop; records/s
    from the first produce call to the end of the flush (its wall-clock time appended to
    ``started`` when given)."""
    config = MirrorProducer(bootstrap, format=fmt, message_size=size).config
    p = _bare_client(config)
    keys = [str(i).encode() for i in range(PARTITIONS)]
    headers = None
    if fmt == "headers":
        headers = [(HDR_PRODUCER, b"pbare000"), (HDR_LANE, b"0"), (HDR_SEQ, b"0" * 10), (HDR_TS, b"0" * 16)]
        value = b"x" * (size - 1 - sum(len(k) + len(v) for k, v in headers))
    else:
        value = b"x" * (size - 1)
    produce, poll = p.produce, p.poll
    if started is not None:
        started.append(time.time())
    t0 = time.monotonic()
    for k in range(n):
        part = k % PARTITIONS
        while True:
            try:
                if headers is None:
                    produce(topic, value, keys[part], partition=part)
                else:
                    produce(topic, value, keys[part], partition=part, headers=headers)
                break
            except BufferError:
                poll(0.05)
        if not k % 2000:
            poll(0)
    p.flush(60)
    return n / (time.monotonic() - t0)


def ours(bootstrap: str, topic: str, n: int, size: int, fmt: str, processes: int = 1) -> tuple[float, list[Any]]:
    """MirrorProducer (or N processes), unthrottled: records/s from the schedule's start to
    the end of the flush (after the warm-up, like the bare loop)."""
    topics = [TopicLanes(topic, PARTITIONS)]
    if processes == 1:
        manifests = [MirrorProducer(bootstrap, format=fmt, message_size=size).run(
            topics, rate=None, count=n, warmup_topic=WARMUP)]
    else:
        import tempfile

        with tempfile.TemporaryDirectory(prefix="bench-producers-") as work:
            manifests = ProducerGroup(bootstrap, processes=processes, work_dir=work, format=fmt,
                                      message_size=size).run(topics, rate=None, count=n, warmup_topic=WARMUP)
    sent = sum(m.stats["sent"] for m in manifests)
    span = (max(m.finished_us for m in manifests) - min(m.started_us for m in manifests)) / 1e6
    return sent / span, manifests


def rates(mode: Section, work: Any, log: Any) -> list[Figure]:
    figures: list[Figure] = []
    n = mode.producer_records
    with broker(work / "producer") as cluster:
        bootstrap = cluster.bootstrap_servers
        for size, fmt, processes in mode.producer_cases:
            bare, got = [], []
            for _ in range(mode.repeats):  # alternately, so both see the same machine
                bare.append(bare_loop(bootstrap, _topic(cluster, "bare"), n, size, fmt))
                got.append(ours(bootstrap, _topic(cluster, "ours"), n, size, fmt, processes)[0])
            name = f"rate[{fmt},{size}B]" if processes == 1 else f"rate[{fmt},{size}B,processes={processes}]"
            log(f"producer {name}: {median(got):,.0f} records/s (runs: {', '.join(f'{g:,.0f}' for g in got)}), "
                f"bare loop {median(bare):,.0f} (runs: {', '.join(f'{b:,.0f}' for b in bare)})")
            figures.append(Figure(
                "producer", name, round(median(got)), "records/s",
                "bare confluent-kafka loop, same config" + (", one process" if processes > 1 else ""),
                round(median(bare)),
                params={"records": n, "partitions": PARTITIONS, "size": size, "format": fmt, "processes": processes,
                        "runs": [round(g) for g in got], "reference_runs": [round(b) for b in bare]}))
    return figures


def bare_paced(bootstrap: str, topics: list[str], rate: float, seconds: float, size: int) -> dict[str, Any]:
    """The same schedule kept by the simplest loop (send what is due, sleep in the client's
    poll until the next record is due), with every record's slip measured exactly."""
    config = MirrorProducer(bootstrap, format="body", message_size=size).config
    p = _bare_client(config)
    value = b"x" * (size - 1)
    keys = [str(i).encode() for i in range(PARTITIONS)]
    total = round(rate * seconds)
    slips: list[float] = []
    sent = [0] * len(topics)
    t0 = time.monotonic()
    while min(sent) < total:
        elapsed = time.monotonic() - t0
        for i, topic in enumerate(topics):
            while sent[i] < total and sent[i] / rate <= elapsed:
                k = sent[i]
                p.produce(topic, value, keys[k % PARTITIONS], partition=k % PARTITIONS)
                slips.append(elapsed - k / rate)
                sent[i] += 1
        nxt = min(s / rate for s in sent if s < total) if min(sent) < total else 0
        wait = nxt - (time.monotonic() - t0)
        p.poll(wait if wait > 0.0005 else 0)
    produce_seconds = time.monotonic() - t0
    p.flush(60)
    # Counted with the producer's own histogram, so both figures share its bucket edges.
    hist = SlipHistogram()
    for slip in slips:
        hist.add_even(slip * 1e6, 0.0, 1)
    stats = hist.to_stats() or {}
    return {"achieved": total / produce_seconds, **stats}


def throttle(mode: Section, work: Any, log: Any) -> list[Figure]:
    with broker(work / "throttle") as cluster:
        return _throttle(cluster, mode, log)


def _throttle(cluster: Any, mode: Section, log: Any) -> list[Figure]:
    rate, seconds, size = mode.throttle_rate, mode.throttle_seconds, 200
    bootstrap = cluster.bootstrap_servers
    bare = bare_paced(bootstrap, [_topic(cluster, "paced"), _topic(cluster, "paced")], rate, seconds, size)
    topics = [TopicLanes(_topic(cluster, "thr"), PARTITIONS), TopicLanes(_topic(cluster, "thr"), PARTITIONS)]
    m = MirrorProducer(bootstrap, format="headers", message_size=size).run(
        topics, rate=rate, duration=seconds, warmup_topic=WARMUP)
    slip = m.stats["schedule_slip_ms"]
    achieved = m.stats["achieved_rate_per_topic"]
    log(f"throttle at {rate:g} msg/s x 2 topics: achieved {achieved:,.1f}, slip p50 {slip['p50']} ms p99 "
        f"{slip['p99']} ms max {slip['max']} ms (bare paced loop: p50 {bare['p50']} ms p99 {bare['p99']} ms max "
        f"{bare['max']} ms)")
    params = {"rate": rate, "topics": 2, "seconds": seconds, "size": size, "format": "headers"}
    return [
        Figure("throttle", "achieved_rate", achieved, "msg/s per topic", "requested rate", rate, params=params),
        Figure("throttle", "slip_p50", slip["p50"], "ms", "bare paced loop", bare["p50"], better="lower",
               params=params, note="upper edge of a 10 µs bucket (below 1 ms), for both"),
        Figure("throttle", "slip_p99", slip["p99"], "ms", "bare paced loop", bare["p99"], better="lower",
               params=params),
        Figure("throttle", "slip_max", slip["max"], "ms", "bare paced loop", bare["max"], better="lower",
               params=params),
    ]


