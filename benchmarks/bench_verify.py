"""Verification figures: records/s of the Spark job against a single-pass numpy implementation
of the same checks, on synthetic run directories, with peak memory.

The run directories are written column-wise with numpy and pyarrow (one Parquet file per
lane), with anomalies of every counted kind: dropped records (lost), a cut tail (unseen),
duplicates, swapped neighbours (reordered), a failed range delivered anyway (phantom) and
bad checksums.  Each implementation runs in its own process, so its peak memory is its
own; the numpy figures are checked against the Spark report (they must agree).

Each Spark figure is timed in a JVM that verified a small run first (the JIT's warm-up),
and large runs after a warm-up of the job's large-capture way too (code generation on: its
generated classes are compiled once per JVM, and a small run does not generate them).

Small runs are timed too: a 10k-record run verified in a warm session (JVM up, one
verification done), against the plain-Python oracle on the same run: there the fixed cost
of a Spark action, not the rows, is what counts.

    python -m benchmarks.bench_verify generate RUN_DIR RECORDS
    python -m benchmarks.bench_verify spark RUN_DIR [WARMUP_DIR [SMALL_DIR [LARGE_WARMUP_DIR]]]   (- for none)
    python -m benchmarks.bench_verify numpy RUN_DIR
    python -m benchmarks.bench_verify oracle RUN_DIR
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks._common import Figure, Section, env_with_worktree, peak_rss_mb

TOPICS = 4
LANES = 4  # per topic, one per partition
PID = "pbench01"
BASE_US = 1_700_000_000_000_000
#: what the generator injects, per lane (seq % period == residue)
DROP = (997, 500)
DUPLICATE = (1009, 3)
SWAP = (2003, 10)
BAD = (50021, 7)
TAIL_CUT = 7  # unseen: the last seqs of lane 0 of the last topic never arrive
FAILED = (100, 109)  # lane 0 of the first topic: a failed range that arrives (phantoms)
#: records of the small run timed warm, and how many times (the median counts)
SMALL_RECORDS = 10_000
SMALL_REPEATS = 5
#: Records of the warm-up before a large run's figure: enough for the job to take the large
#: captures' way (code generation on), whose generated classes a small run does not warm up.
LARGE_WARMUP_RECORDS = 400_000
COUNTED = ("expected", "received", "distinct", "lost", "unseen", "duplicated", "reordered", "phantom", "corrupted",
           "never_acked")


def generate(run_dir: Path, records: int, seed: int = 7) -> dict[str, Any]:
    """A run of about ``records`` captured rows (see the module docstring)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from pytest_kafka_mirror.rundir import CAPTURE_DIR, LaneManifest, Manifest, capture_schema

    rng = np.random.default_rng(seed)
    per_lane = max(records // (TOPICS * LANES), 200)
    capture = run_dir / CAPTURE_DIR
    capture.mkdir(parents=True, exist_ok=True)
    schema = capture_schema()
    lanes: list[LaneManifest] = []
    topics = {}
    rows = 0
    for t in range(TOPICS):
        topic = f"orders-{t}"
        topics[topic] = f"src.{topic}"
        for lane in range(LANES):
            seq = np.arange(per_lane, dtype=np.int64)
            order = seq[seq % DROP[0] != DROP[1]]
            swap = np.nonzero(order % SWAP[0] == SWAP[1])[0]
            swap = swap[swap + 1 < len(order)]
            order[swap], order[swap + 1] = order[swap + 1].copy(), order[swap].copy()
            dup = np.nonzero(order % DUPLICATE[0] == DUPLICATE[1])[0]
            copies = np.insert(np.zeros(len(order), dtype=bool), dup + 1, True)
            order = np.insert(order, dup + 1, order[dup])
            if (t, lane) == (TOPICS - 1, 0):
                keep = order < per_lane - TAIL_CUT
                order, copies = order[keep], copies[keep]
            n = len(order)
            produce = BASE_US + order * 250
            latency = rng.lognormal(np.log(5000.0), 0.5, n).astype(np.int64) + copies * 10_000
            arrival = produce + latency
            acked = [[0, per_lane - 1]]
            failed: list[list[int]] = []
            if (t, lane) == (0, 0):
                acked = [[0, FAILED[0] - 1], [FAILED[1] + 1, per_lane - 1]]
                failed = [list(FAILED)]
            lanes.append(LaneManifest(topic, lane, lane, sent=per_lane, acked=acked, failed=failed))
            cols = {
                "topic": pa.array([topic] * 1).take(pa.array(np.zeros(n, dtype=np.int32))),
                "target_topic": pa.array([topics[topic]]).take(pa.array(np.zeros(n, dtype=np.int32))),
                "partition": pa.array(np.full(n, lane, dtype=np.int32)),
                "offset": pa.array(np.arange(n, dtype=np.int64)),
                "kind": pa.array(["headers"]).take(pa.array(np.zeros(n, dtype=np.int32))),
                "producer_id": pa.array([PID]).take(pa.array(np.zeros(n, dtype=np.int32))),
                "lane": pa.array(np.full(n, lane, dtype=np.int32)),
                "seq": pa.array(order),
                "produce_ts_us": pa.array(produce),
                "arrival_ts_us": pa.array(arrival),
                "record_ts_ms": pa.array(arrival // 1000),
                "size": pa.array(np.full(n, 100, dtype=np.int32)),
                "checksum_ok": pa.array(order % BAD[0] != BAD[1]),
                "evidence": pa.nulls(n, pa.string()),
                "damage": pa.nulls(n, pa.string()),
            }
            table = pa.Table.from_arrays([cols[f.name].cast(f.type) for f in schema], schema=schema)
            pq.write_table(table, capture / f"part-{t}-{lane}.parquet", compression="zstd")
            rows += n
    Manifest(producer_id=PID, format="headers", message_size=100, rate=None, started_us=BASE_US,
             finished_us=BASE_US + per_lane * 250, topics=topics, lanes=lanes, stats={}).write(run_dir)
    return {"rows": rows, "lanes": TOPICS * LANES, "per_lane": per_lane}


def numpy_verify(run_dir: Path) -> dict[str, Any]:
    """The verifier's counts and latency percentiles in one read and a few sorts."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from pytest_kafka_mirror.rundir import CAPTURE_DIR
    from pytest_kafka_mirror.verify.job import manifest_lanes

    meta, _ = manifest_lanes(run_dir)
    cols = ["topic", "producer_id", "lane", "seq", "partition", "offset", "kind", "checksum_ok", "produce_ts_us",
            "arrival_ts_us"]
    table = pq.read_table(sorted(str(p) for p in (run_dir / CAPTURE_DIR).glob("*.parquet")), columns=cols)
    ident = pc.and_(pc.is_in(table["kind"], value_set=pa.array(["headers", "body"])),
                    pc.and_(pc.is_valid(table["producer_id"]), pc.and_(pc.is_valid(table["lane"]),
                                                                       pc.is_valid(table["seq"]))))
    table = table.filter(ident)
    # one integer per lane: (topic, producer) codes and the lane number
    pair = pc.binary_join_element_wise(table["topic"], table["producer_id"], "\x00")
    enc = pc.dictionary_encode(pair).combine_chunks()
    names = [s.split("\x00") for s in enc.dictionary.to_pylist()]
    lane_no = table["lane"].to_numpy().astype(np.int64)
    key = enc.indices.to_numpy().astype(np.int64) * 100_000 + lane_no
    seq = table["seq"].to_numpy()
    part = table["partition"].to_numpy().astype(np.int64)
    offset = table["offset"].to_numpy()
    arrival = table["arrival_ts_us"].to_numpy()
    produce = table["produce_ts_us"].to_numpy()
    bad = int((~table["checksum_ok"].to_numpy(zero_copy_only=False).astype(bool)).sum())
    n = len(seq)

    # first copies: by lane, seq, then arrival (ties: partition, offset)
    order = np.lexsort((offset, part, arrival, seq, key))
    k, s = key[order], seq[order]
    first = np.ones(n, dtype=bool)
    first[1:] = (k[1:] != k[:-1]) | (s[1:] != s[:-1])
    fk, fs = k[first], s[first]
    latency_all = (arrival[order] - produce[order])[first]

    # acknowledged: per lane, its ranges against its (sorted, distinct) seqs
    acked_mask = np.zeros(len(fs), dtype=bool)
    copies = np.diff(np.append(np.nonzero(first)[0], n))
    counts = dict.fromkeys(COUNTED, 0)
    counts["received"], counts["distinct"], counts["corrupted"] = n, int(first.sum()), bad
    keys = {(names[c // 100_000][0], names[c // 100_000][1], int(c % 100_000)): c for c in np.unique(fk)}
    for lane_key, m in meta.items():
        counts["expected"] += sum(b - a + 1 for a, b in m.acked)
        code = keys.get(lane_key)
        lo, hi = (np.searchsorted(fk, code, "left"), np.searchsorted(fk, code, "right")) if code is not None else (0, 0)
        seqs = fs[lo:hi]
        top = int(seqs[-1]) if hi > lo else -1
        for a, b in m.acked:
            i, j = np.searchsorted(seqs, a, "left"), np.searchsorted(seqs, b, "right")
            acked_mask[lo + i : lo + j] = True
            missing = (b - a + 1) - (j - i)
            unseen = max(0, b - max(a - 1, top))  # acked seqs above the lane's highest arrival
            counts["unseen"] += unseen
            counts["lost"] += missing - unseen
        for a, b in m.unacked:
            i, j = np.searchsorted(seqs, a, "left"), np.searchsorted(seqs, b, "right")
            counts["never_acked"] += (b - a + 1) - (j - i)
    counts["duplicated"] = n - counts["distinct"]
    counts["phantom"] = int(copies[~acked_mask].sum())

    # reordered: first copy per (lane, partition, seq), in offset order per (lane, partition),
    # behind a higher seq seen earlier in that partition
    o2 = np.lexsort((offset, seq, part, key))
    k2, p2, s2, off2 = key[o2], part[o2], seq[o2], offset[o2]
    keep = np.ones(n, dtype=bool)
    keep[1:] = (k2[1:] != k2[:-1]) | (p2[1:] != p2[:-1]) | (s2[1:] != s2[:-1])
    k2, p2, s2, off2 = k2[keep], p2[keep], s2[keep], off2[keep]
    o3 = np.lexsort((off2, p2, k2))
    k3, p3, s3 = k2[o3], p2[o3], s2[o3]
    group = np.ones(len(s3), dtype=bool)
    group[1:] = (k3[1:] != k3[:-1]) | (p3[1:] != p3[:-1])
    gid = np.cumsum(group)
    running = np.maximum.accumulate(gid * (1 << 40) + s3) - gid * (1 << 40)  # max seq so far, per group
    before = np.empty_like(running)
    before[0] = -1
    before[1:] = running[:-1]
    before[group] = -1
    counts["reordered"] = int((s3 < before).sum())

    lat = np.sort(latency_all[acked_mask])
    latency = {}
    for q, name in ((0.5, "p50_ms"), (0.9, "p90_ms"), (0.99, "p99_ms"), (0.999, "p999_ms")):
        rank = max(1, int(np.ceil(q * len(lat) - 1e-9)))
        latency[name] = float(lat[rank - 1]) / 1000.0 if len(lat) else None
    latency["max_ms"] = float(lat[-1]) / 1000.0 if len(lat) else None
    return {"counts": {name: int(v) for name, v in counts.items()}, "latency": latency}


def spark_figures(spark: Any, run_dir: Path, warm_dir: Path | None, small_dir: Path | None = None,
                  large_warm_dir: Path | None = None) -> dict[str, Any]:
    """The Spark job on ``run_dir`` with ``spark``: after a warm-up verification of
    ``warm_dir``, if given, then timing the warm verification of ``small_dir``, if given,
    then a warm-up verification of ``large_warm_dir``, if given (a large capture's job
    generates code, which a small one does not: see ``verify/job.py``).  Seconds, counts,
    percentiles, the driver JVM's peak memory."""
    import statistics

    from pyspark import SparkContext

    from pytest_kafka_mirror.verify import verify_run

    def timed(run: Path) -> float:
        t = time.monotonic()
        verify_run(run, spark=spark, write_report=False)
        return time.monotonic() - t

    warm = timed(warm_dir) if warm_dir is not None else 0.0  # the JIT's warm-up
    small = [timed(small_dir) for _ in range(SMALL_REPEATS)] if small_dir is not None else []
    large_warm = timed(large_warm_dir) if large_warm_dir is not None else None  # and code generation's
    t2 = time.monotonic()
    report = verify_run(run_dir, spark=spark, write_report=False)
    seconds = time.monotonic() - t2
    gateway = SparkContext._gateway
    proc = getattr(gateway, "proc", None)
    lat = report.latency
    return {
        "seconds": seconds, "warmup_seconds": warm, "large_warmup_seconds": large_warm,
        "small_seconds": statistics.median(small) if small else None, "small_runs": small,
        "jvm_peak_mb": peak_rss_mb(proc.pid) if proc is not None else None,
        "python_peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
        "counts": {name: getattr(report, name) for name in COUNTED},
        "latency": {"p50_ms": lat.p50_ms, "p90_ms": lat.p90_ms, "p99_ms": lat.p99_ms, "p999_ms": lat.p999_ms,
                    "max_ms": lat.max_ms},
    }


def _spark_main(run_dir: Path, warm_dir: Path | None, small_dir: Path | None = None,
                large_warm_dir: Path | None = None) -> dict[str, Any]:
    from pytest_kafka_mirror.verify import get_spark, stop_spark
    from pytest_kafka_mirror.verify.job import large_capture

    t0 = time.monotonic()
    spark = get_spark("local[2]", large=large_capture(run_dir))  # the compilers the plugin would choose
    session = time.monotonic() - t0
    try:
        return {**spark_figures(spark, run_dir, warm_dir, small_dir, large_warm_dir), "session_seconds": session}
    finally:
        stop_spark()


def _numpy_main(run_dir: Path) -> dict[str, Any]:
    t0 = time.monotonic()
    result = numpy_verify(run_dir)
    result["seconds"] = time.monotonic() - t0
    result["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    return result


def _oracle_main(run_dir: Path) -> dict[str, Any]:
    """The plain-Python oracle's seconds on ``run_dir`` (median of a few; imports excluded)."""
    import statistics

    from pytest_kafka_mirror.verify.oracle import oracle_report

    times = []
    for _ in range(SMALL_REPEATS):
        t = time.monotonic()
        oracle_report(run_dir)
        times.append(time.monotonic() - t)
    return {"seconds": statistics.median(times)}


def small_figure(rows: int, spark_seconds: float, oracle_seconds: float) -> Figure:
    return Figure("verify", "warm[10k]", round(spark_seconds, 3), "s", "plain-Python oracle, same run",
                  round(oracle_seconds, 3), better="lower",
                  params={"rows": rows, "master": "local[2]", "repeats": SMALL_REPEATS},
                  note="one verification in a warm session (JVM up, one verification done): the fixed cost of the job")


def _child(*args: str) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, "-m", "benchmarks.bench_verify", *args], capture_output=True, text=True, check=False,
                          env=env_with_worktree(), timeout=3600)
    if proc.returncode != 0:
        raise RuntimeError(f"bench_verify {args[0]} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def agree(spark: dict[str, Any], ref: dict[str, Any]) -> bool:
    """The numpy reference found the Spark report's counts and percentiles."""
    return bool(spark["counts"] == ref["counts"] and all(
        abs((spark["latency"][q] or 0) - (ref["latency"][q] or 0)) < 1e-6 for q in ref["latency"]))


def figures(records: int, rows: int, lanes: int, spark: dict[str, Any], ref: dict[str, Any]) -> list[Figure]:
    same = agree(spark, ref)
    label = f"{records // 1_000_000}M" if records >= 1_000_000 else f"{records // 1000}k"
    params = {"rows": rows, "lanes": lanes, "master": "local[2]", "agree": same,
              "large_warmup_seconds": spark.get("large_warmup_seconds"),
              "session_seconds": round(spark.get("session_seconds", 0.0), 2), "counts": spark["counts"]}
    jvm = spark["jvm_peak_mb"] or 0.0
    return [
        Figure("verify", f"rate[{label}]", round(rows / spark["seconds"]), "rows/s", "single-pass numpy, same checks",
               round(rows / ref["seconds"]), params=params,
               note="" if same else "the numpy figures disagree with the Spark report"),
        Figure("verify", f"peak_memory[{label}]", round(jvm + spark["python_peak_mb"]), "MB", "numpy process peak",
               round(ref["peak_mb"]), better="lower",
               params={"jvm_peak_mb": round(jvm), "python_peak_mb": round(spark["python_peak_mb"])},
               note="Spark driver JVM (local mode: executors inside) + its Python process"),
    ]


def _large(run_dir: Path) -> bool:
    """Whether the job verifies ``run_dir`` as a large capture (code generation on)."""
    from pytest_kafka_mirror.verify.job import _SMALL_CAPTURE_ROWS, capture_rows

    return capture_rows(run_dir) >= _SMALL_CAPTURE_ROWS


def _large_warmup(work: Path) -> Path:
    """A run the job verifies as a large capture, for the warm-up of large runs."""
    run_dir = work / "verify-warmup-large"
    generate(run_dir, LARGE_WARMUP_RECORDS, seed=2)
    if not _large(run_dir):
        raise RuntimeError(f"the large warm-up run {run_dir} is verified as a small capture: raise LARGE_WARMUP_RECORDS")
    return run_dir


def run(mode: Section, work: Path, log: Any) -> list[Figure]:
    out: list[Figure] = []
    # A small verification first in the same JVM: the figure is the job's, not the JIT's.
    warm = work / "verify-warmup"
    generate(warm, 20_000, seed=1)
    small = work / "verify-small"
    small_rows = generate(small, SMALL_RECORDS, seed=3)["rows"]
    large_warm: Path | None = None
    for i, records in enumerate(mode.verify_records):
        run_dir = work / f"verify-{records}"
        t0 = time.monotonic()
        shape = _child("generate", str(run_dir), str(records))
        generated = time.monotonic() - t0
        large = _large(run_dir)
        if large and large_warm is None:
            large_warm = _large_warmup(work)
        spark = _child("spark", str(run_dir), str(warm), str(small) if i == 0 else "-",
                       str(large_warm) if large else "-")
        ref = _child("numpy", str(run_dir))
        rows = shape["rows"]
        warmed = (f"; after warming up the large-capture job on {LARGE_WARMUP_RECORDS:,} records in "
                  f"{spark['large_warmup_seconds']:.1f} s" if spark.get("large_warmup_seconds") is not None else "")
        log(f"verify {rows:,} rows (generated in {generated:.1f} s): Spark {rows / spark['seconds']:,.0f} rows/s "
            f"({spark['seconds']:.1f} s, JVM peak {spark['jvm_peak_mb']:.0f} MB{warmed}), numpy "
            f"{rows / ref['seconds']:,.0f} rows/s ({ref['seconds']:.1f} s, peak {ref['peak_mb']:.0f} MB), Spark "
            f"{spark['seconds'] / ref['seconds']:.1f}x numpy's time; reports agree: {agree(spark, ref)}")
        if not agree(spark, ref):
            log(f"  DISAGREEMENT: spark {spark['counts']} {spark['latency']}\n  numpy {ref['counts']} {ref['latency']}")
        out += figures(records, rows, shape["lanes"], spark, ref)
        if spark.get("small_seconds") is not None:
            oracle = _child("oracle", str(small))["seconds"]
            runs = ", ".join(f"{t:.2f}" for t in spark.get("small_runs", []))
            log(f"verify {small_rows:,} rows, warm session: Spark {spark['small_seconds']:.2f} s (runs in order: {runs}; "
                f"the JIT is still warming up), plain-Python oracle {oracle:.2f} s ({spark['small_seconds'] / oracle:.1f}x)")
            out.append(small_figure(small_rows, spark["small_seconds"], oracle))
    return out


if __name__ == "__main__":
    cmd, rest = sys.argv[1], sys.argv[2:]
    if cmd == "generate":
        out = generate(Path(rest[0]), int(rest[1]))
    elif cmd == "spark":
        out = _spark_main(*(Path(arg) if arg != "-" else None for arg in rest))  # type: ignore[arg-type]
    elif cmd == "numpy":
        out = _numpy_main(Path(rest[0]))
    elif cmd == "oracle":
        out = _oracle_main(Path(rest[0]))
    else:
        raise SystemExit(f"unknown command {cmd!r}: generate | spark | numpy | oracle")
    print(json.dumps(out))
