"""Capture figures: records/s of the capture process(es) against a bare consume loop on the
same backlog, and its resident memory over a long live run (it must stay flat)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks._common import Figure, RssSampler, Section, broker, direct_run, median, slope
from pytest_kafka_mirror.capture.target import CONSUMER_CONFIG, PRODUCE_DONE, Capture
from pytest_kafka_mirror.produce.producer import MirrorProducer, TopicLanes

PARTITIONS = 4
WARMUP = "kafka-mirror-warmup"

#: The capture's consumer settings, for the bare loops.
CONSUMER = CONSUMER_CONFIG


def prefill(cluster: Any, n: int, fmt: str, size: int = 100) -> tuple[str, Any]:
    topic = f"bench-cap-{uuid.uuid4().hex[:6]}"
    cluster.create_topic(topic, PARTITIONS)
    m = MirrorProducer(cluster.bootstrap_servers, format=fmt, message_size=size).run(
        [TopicLanes(topic, PARTITIONS)], rate=None, count=n, warmup_topic=WARMUP)
    return topic, m


def touch(msgs: list[Any]) -> int:
    """What a bare consume loop does with a batch: each record's key, value and headers
    read; returns the records (errors left out)."""
    got = 0
    for m in msgs:
        if m.error():
            continue
        m.key()
        m.value()
        m.headers()
        got += 1
    return got


def batches(c: Any, n: int, seconds: float = 300.0) -> Iterator[int]:
    """Batches of 500 from consumer ``c``, each :func:`touch`-ed, until ``n`` records or
    ``seconds``: yields the records so far after each batch."""
    got, deadline = 0, time.monotonic() + seconds
    while got < n and time.monotonic() < deadline:
        msgs = c.consume(500, 0.01)
        if msgs:
            got += touch(msgs)
            yield got


def bare_consume(bootstrap: str, topic: str, n: int) -> float:
    """A bare consume loop with the capture's consumer settings: assign every partition from
    offset 0, consume in batches of 500, touch each record's key, value and headers."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex[:6]}", **CONSUMER})
    c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    got, first, last = 0, None, 0.0
    try:
        for got in batches(c, n):
            last = time.monotonic()
            if first is None:
                first = last
    finally:
        c.close()
    return got / (last - first) if first is not None and last > first else 0.0


def ours(cluster: Any, topic: str, manifest: Any, run_dir: Path, processes: int) -> float:
    """The capture process(es) on the same backlog: records / (last - first arrival stamp)."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    run_dir.mkdir(parents=True)
    manifest.write(run_dir)
    (run_dir / PRODUCE_DONE).write_text(str(time.time()))
    cap = Capture(cluster.bootstrap_servers, run_dir, {topic: topic}, drain_timeout=10, settle=0.0,
                  processes=processes)
    cap.start()
    status = cap.wait(timeout=600)
    arrival = pq.read_table(run_dir / "capture", columns=["arrival_ts_us"]).column(0)
    span = (pc.max(arrival).as_py() - pc.min(arrival).as_py()) / 1e6
    return status["records"] / span if span > 0 else 0.0


def rates(mode: Section, work: Path, log: Any) -> list[Figure]:
    figures: list[Figure] = []
    n = mode.capture_records
    with broker(work / "capture") as cluster:
        for fmt, processes in mode.capture_cases:
            topic, manifest = prefill(cluster, n, fmt)
            bare, got = [], []
            for i in range(mode.repeats):  # alternately, on the same backlog
                bare.append(bare_consume(cluster.bootstrap_servers, topic, n))
                got.append(ours(cluster, topic, manifest, work / f"capture-{fmt}-{processes}-{i}", processes))
            name = f"rate[{fmt},100B]" if processes == 1 else f"rate[{fmt},100B,processes={processes}]"
            log(f"capture {name}: {median(got):,.0f} records/s (runs: {', '.join(f'{g:,.0f}' for g in got)}), "
                f"bare consume loop {median(bare):,.0f} (runs: {', '.join(f'{b:,.0f}' for b in bare)})")
            figures.append(Figure("capture", name, round(median(got)), "records/s",
                                  "bare consume loop, same consumer config", round(median(bare)),
                                  params={"records": n, "partitions": PARTITIONS, "processes": processes,
                                          "runs": [round(g) for g in got], "reference_runs": [round(b) for b in bare]}))
    return figures


def memory(mode: Section, work: Path, log: Any) -> list[Figure]:
    with broker(work / "memory") as cluster:
        return _memory(cluster, mode, work, log)


def _memory(cluster: Any, mode: Section, work: Path, log: Any) -> list[Figure]:
    """A live run of ``rss_seconds`` at ``rss_rate``: the capture's RSS sampled every 0.5 s."""
    run = direct_run(cluster, work / "capture-rss", "rss", PARTITIONS)
    with run:
        run.start_capture()
        with RssSampler(run.capture.process.pid, every=0.5) as sampler:
            run.produce(rate=mode.rss_rate, duration=mode.rss_seconds, format="headers", message_size=200)
            status = run.finish(timeout=600)
    samples = sampler.samples
    seconds = samples[-1][0] if samples else 0.0
    peak = max((mb for _, mb in samples), default=None)
    half = [(t / 60.0, mb) for t, mb in samples if t >= seconds / 2]
    per_minute = slope(half)
    q2 = [mb for t, mb in samples if seconds / 4 <= t < seconds / 2]
    q4 = [mb for t, mb in samples if t >= 3 * seconds / 4]
    early = sum(q2) / len(q2) if q2 else None
    late = sum(q4) / len(q4) if q4 else None
    log(f"capture memory over {seconds:.0f} s ({status['records']:,} records at {mode.rss_rate:g}/s): peak "
        f"{peak:.1f} MB, slope over the second half {per_minute if per_minute is not None else float('nan'):+.2f} "
        f"MB/min, last quarter / second quarter {(late or 0) / (early or 1):.3f}")
    params = {"rate": mode.rss_rate, "seconds": mode.rss_seconds, "records": status["records"],
              "samples": len(samples)}
    (work / "capture-rss" / "rss-samples.json").write_text(json.dumps(samples))
    return [
        Figure("capture", "rss_peak", round(peak, 1) if peak else None, "MB", "", None, better="lower", params=params),
        Figure("capture", "rss_late_vs_early", round(late, 1) if late else None, "MB",
               "RSS in the second quarter of the run", round(early, 1) if early else None, better="lower",
               params=params, note="flat memory: ratio ~1"),
        Figure("capture", "rss_slope", round(per_minute, 3) if per_minute is not None else None, "MB/min", "", None,
               better="lower", params=params, note="least squares over the second half; flat: ~0"),
    ]
