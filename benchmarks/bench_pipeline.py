"""The whole tester with no replicator, at full speed: the producer writing as fast as it
goes while the capture reads the same topic live (producer -> broker -> capture), against a
bare confluent-kafka producer loop and a bare consumer process doing the same at the same
time on the same broker.

Its figure, records / (last arrival - first send), is the largest copy rate this host can
measure: the producer, the broker and the capture share the host's cores with the
replicator under test, and a replicator copying faster than this would be measured as a
lower bound (the capture behind the target's end offsets, see ``report.capacity``).

    python -m benchmarks.bench_pipeline consume BOOTSTRAP TOPIC RECORDS OUT.json   (the bare consumer)
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from benchmarks._common import Figure, Section, broker, consumer_process, direct_run, median
from benchmarks.bench_capture import CONSUMER, batches
from benchmarks.bench_producer import bare_loop

PARTITIONS = 4
SIZE = 100


def ours(cluster: Any, n: int, fmt: str, run_dir: Path) -> dict[str, float]:
    """``n`` records through the tester, the capture live from the start: records arrived /
    (last arrival stamp - the producer's start)."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    run = direct_run(cluster, run_dir, "pipe", PARTITIONS)
    with run:
        run.start_capture()
        manifest = run.produce(rate=None, count=n, format=fmt, message_size=SIZE)
        status = run.finish(timeout=600)
    arrival = pq.read_table(run_dir / "capture", columns=["arrival_ts_us"]).column(0)
    span = (pc.max(arrival).as_py() - manifest.started_us) / 1e6
    # "ours": the records of this run that arrived (not the warm-up records before the start)
    return {"rate": n / span if span > 0 else 0.0, "records": int(status.get("ours", 0)),
            "produce_rate": manifest.stats["sent"] / ((manifest.finished_us - manifest.started_us) / 1e6)}


def bare(cluster: Any, n: int, fmt: str, out: Path) -> dict[str, float]:
    """A bare consumer process reading the topic live while a bare producer loop
    (:func:`benchmarks.bench_producer.bare_loop`) writes ``n`` records to it: records
    consumed / (last arrival - the first send)."""
    topic = f"bench-pipe-bare-{uuid.uuid4().hex[:6]}"
    cluster.create_topic(topic, PARTITIONS)
    bootstrap = cluster.bootstrap_servers
    started: list[float] = []
    with consumer_process("benchmarks.bench_pipeline", bootstrap, topic, n, out, timeout=300):
        produce_rate = bare_loop(bootstrap, topic, n, SIZE, fmt, started)
    got = json.loads(out.read_text())
    span = got["last"] - started[0]
    return {"rate": got["records"] / span if span > 0 else 0.0, "records": got["records"],
            "produce_rate": produce_rate}


def _consume(bootstrap: str, topic: str, total: int, out: Path) -> None:
    """The bare consumer: the capture's consumer settings, batches of 500, each record's
    key, value and headers touched; the wall-clock time of the last batch."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex[:6]}", **CONSUMER})
    c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    Path(str(out) + ".ready").write_text("")
    got, last = 0, 0.0
    for got in batches(c, total):
        last = time.time()
    c.close()
    out.write_text(json.dumps({"records": got, "last": last}))


def _list(runs: list[dict[str, float]], key: str) -> str:
    return ", ".join(f"{r[key]:,.0f}" for r in runs)


def run(mode: Section, work: Path, log: Any) -> list[Figure]:
    figures: list[Figure] = []
    n = mode.capture_records
    with broker(work / "pipeline") as cluster:
        for fmt in mode.pipeline_cases:
            refs, got = [], []
            for i in range(mode.repeats):  # alternately, so both see the same machine
                refs.append(bare(cluster, n, fmt, work / f"pipeline-bare-{fmt}-{i}.json"))
                got.append(ours(cluster, n, fmt, work / f"pipeline-{fmt}-{i}"))
            lost = [g for g in got if g["records"] != n] + [r for r in refs if r["records"] != n]
            if lost:
                raise RuntimeError(f"pipeline[{fmt}]: runs that did not carry all {n} records: {lost}")
            rate, ref = median([g["rate"] for g in got]), median([r["rate"] for r in refs])
            log(f"pipeline rate[{fmt},{SIZE}B]: {rate:,.0f} records/s (runs: {_list(got, 'rate')}; the producer "
                f"alone {_list(got, 'produce_rate')}), bare producer + consumer {ref:,.0f} "
                f"(runs: {_list(refs, 'rate')})")
            figures.append(Figure(
                "pipeline", f"rate[{fmt},{SIZE}B]", round(rate), "records/s",
                "bare producer loop + bare consumer process, live, same broker", round(ref),
                params={"records": n, "partitions": PARTITIONS, "runs": [round(g["rate"]) for g in got],
                        "reference_runs": [round(r["rate"]) for r in refs],
                        "producer_runs": [round(g["produce_rate"]) for g in got]},
                note="the largest copy rate this host can measure (records / (last arrival - first send))"))
    return figures


if __name__ == "__main__":
    if sys.argv[1] != "consume":
        raise SystemExit("usage: python -m benchmarks.bench_pipeline consume BOOTSTRAP TOPIC RECORDS OUT.json")
    _consume(sys.argv[2], sys.argv[3], int(sys.argv[4]), Path(sys.argv[5]))
