"""The tester's floor: end-to-end latency with no replicator at all (the capture reads the
source topic itself), against a bare produce -> consume round trip on the same broker.

Whatever a replicator adds is measured on top of this floor; if the floor is high, the
tester (not the replicator) limits what a latency SLO can prove.  Measured on the embedded
Tansu broker and on real Apache Kafka (:data:`KAFKA`, from the plugin's release cache; its
figures are left out, with the reason in the log, when the release cannot be had), each
against the bare round trip on the same broker.

    python -m benchmarks.bench_floor consume BOOTSTRAP TOPIC RECORDS OUT.json   (the bare consumer)
"""

from __future__ import annotations

import json
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from benchmarks._common import Figure, Section, broker, consumer_process, direct_run, percentile
from benchmarks.bench_capture import CONSUMER
from pytest_kafka_mirror.produce.producer import MirrorProducer

PARTITIONS = 4
WARMUP = "kafka-mirror-warmup"
SIZE = 200
#: the Apache Kafka release of the floor's second broker (KAFKA_MIRROR_BENCH_KAFKA picks another)
KAFKA = os.environ.get("KAFKA_MIRROR_BENCH_KAFKA", "4.3.1")


def ours(cluster: Any, mode: Section, work: Path) -> dict[str, Any]:
    """A whole pass of the tester with the capture reading the source topic (no replicator),
    verified by the oracle (the Spark job's figures, in plain Python)."""
    from pytest_kafka_mirror.verify.oracle import oracle_report

    run = direct_run(cluster, work / "floor", "floor", PARTITIONS)
    with run:
        run.produce(rate=mode.floor_rate, duration=mode.floor_seconds, format="headers", message_size=SIZE)
        run.finish(timeout=300)
    report = oracle_report(work / "floor")
    lat = report.latency
    return {"p50": lat.p50_ms, "p99": lat.p99_ms, "records": report.received, "lost": report.lost + report.unseen}


def bare(cluster: Any, mode: Section, work: Path) -> dict[str, Any]:
    """A paced confluent-kafka producer (same config as ours) stamping the send time in the
    value, and a consumer process (the capture's consumer settings) stamping arrival per batch."""
    topic = f"bench-rtt-{uuid.uuid4().hex[:6]}"
    cluster.create_topic(topic, PARTITIONS)
    bootstrap = cluster.bootstrap_servers
    total = round(mode.floor_rate * mode.floor_seconds)
    out = work / "rtt.json"
    with consumer_process("benchmarks.bench_floor", bootstrap, topic, total, out):
        from confluent_kafka import Producer

        config = {k: v for k, v in MirrorProducer(bootstrap, format="body", message_size=SIZE).config.items()
                  if k != "on_delivery"}
        p = Producer(config)
        p.produce(WARMUP, b"warm-up")
        p.flush(30)
        pad = b"x" * (SIZE - 1 - 17)
        keys = [str(i).encode() for i in range(PARTITIONS)]
        t0 = time.monotonic()
        sent = 0
        while sent < total:
            elapsed = time.monotonic() - t0
            while sent < total and sent / mode.floor_rate <= elapsed:
                p.produce(topic, b"%016d;%s" % (time.time_ns() // 1000, pad), keys[sent % PARTITIONS],
                          partition=sent % PARTITIONS)
                sent += 1
            wait = sent / mode.floor_rate - (time.monotonic() - t0)
            p.poll(wait if wait > 0.0005 else 0)
        p.flush(60)
    return dict(json.loads(out.read_text()))


def _consume(bootstrap: str, topic: str, total: int, out: Path) -> None:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex[:6]}", **CONSUMER})
    c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    Path(str(out) + ".ready").write_text("")
    latencies: list[int] = []
    deadline = time.monotonic() + 300
    while len(latencies) < total and time.monotonic() < deadline:
        msgs = c.consume(500, 0.01)
        if not msgs:
            continue
        arrival = time.time_ns() // 1000
        latencies += [arrival - int(m.value()[:16]) for m in msgs if not m.error()]
    c.close()
    latencies.sort()
    ms = [v / 1000.0 for v in latencies]
    out.write_text(json.dumps({"p50": percentile(ms, 0.5), "p99": percentile(ms, 0.99), "records": len(ms)}))


def _floor(spec: str, prefix: str, mode: Section, work: Path, log: Any) -> list[Figure]:
    """The floor's two figures on one broker (``prefix`` names them: '' for Tansu)."""
    sub = work / spec.replace(":", "-")
    sub.mkdir(parents=True, exist_ok=True)
    with broker(work / f"floor-broker{prefix}", spec=spec) as cluster:
        reference = bare(cluster, mode, sub)
        got = ours(cluster, mode, sub)
    log(f"tester floor on {spec} (no replicator) at {mode.floor_rate:g} msg/s: p50 {got['p50']} ms, p99 "
        f"{got['p99']} ms; bare round trip p50 {reference['p50']:.3f} ms, p99 {reference['p99']:.3f} ms")
    params = {"rate": mode.floor_rate, "seconds": mode.floor_seconds, "size": SIZE, "partitions": PARTITIONS,
              "records": got["records"], "missing": got["lost"], "broker": spec}
    return [
        Figure("floor", f"{prefix}latency_p50", got["p50"], "ms", f"bare produce -> consume round trip on {spec}",
               round(reference["p50"], 3), better="lower", params=params),
        Figure("floor", f"{prefix}latency_p99", got["p99"], "ms", f"bare produce -> consume round trip on {spec}",
               round(reference["p99"], 3), better="lower", params=params),
    ]


def run(mode: Section, work: Path, log: Any) -> list[Figure]:
    from pytest_kafka_mirror.clusters.kafka_dist import KafkaInstallError, cache_dir, release

    figures = _floor("tansu", "", mode, work, log)
    try:
        release(KAFKA, cache_dir(), log=log)
    except KafkaInstallError as exc:
        log(f"tester floor on kafka:{KAFKA}: left out ({exc})")
        return figures
    return figures + _floor(f"kafka:{KAFKA}", "kafka_", mode, work, log)


if __name__ == "__main__":
    if sys.argv[1] != "consume":
        raise SystemExit("usage: python -m benchmarks.bench_floor consume BOOTSTRAP TOPIC RECORDS OUT.json")
    _consume(sys.argv[2], sys.argv[3], int(sys.argv[4]), Path(sys.argv[5]))
