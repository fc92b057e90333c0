"""The Spark driver's class-data sharing archive, written once: ``kafka-mirror spark prepare``.

A session's Spark driver spends its start and its first verification loading classes and
running Spark's SQL engine for the first time: on the project's 2-core machine 4.4 s to
start and 5.5 s for a first 2,000-record verification, against 1.3 s for the next one.
Started from an archive of the classes a verification loads (``processes/jvm_cds.py``), a
driver starts in 2.6-2.9 s and verifies first in 4.2 s; the first test of a session, which
waits for both, took 11.6 -> 9.3 s (median of three sessions of the overhead benchmark).

Writing the archive takes a driver that verifies a run and exits: :func:`prepare` makes a
small run directory of its own (one producer, a few lanes, every record arrived once),
starts a local session whose JVM writes the archive at its exit, verifies the run twice,
stops it and publishes the archive (~30 s, 175 MB).  Every later driver of this Java and
this pyspark, local or a shared Spark Connect server, starts from it; another Java or
pyspark (or ``KAFKA_MIRROR_JVM_CDS=0``) starts without it.  It never changes a result.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..processes.jvm_cds import write_anew
from ..rundir import CAPTURE_DIR, CAPTURE_STATUS, LaneManifest, Manifest, write_json_atomic
from .connect import JAVA_OPTS_ENV, SPARK_ARCHIVE, _spark_home, spark_java

__all__ = ["Prepared", "prepare", "write_run"]

#: the synthetic run: lanes (one per partition) of this many records each
LANES, RECORDS = 4, 250
_BASE_US = 1_700_000_000_000_000


@dataclass(frozen=True)
class Prepared:
    """What :func:`prepare` wrote: the archive, its size and how long it took."""

    path: Path
    size: int
    seconds: float


def write_run(run_dir: Path) -> Path:
    """A small run directory as a passing run leaves it: a manifest, a capture segment
    written by the capture's own writer and its status.  Returns ``run_dir``."""
    from ..capture.segments import SegmentWriter

    topic, pid = "km-prepare", "pprepare"
    lanes = [LaneManifest(topic, lane, lane, sent=RECORDS, acked=[[0, RECORDS - 1]]) for lane in range(LANES)]
    run_dir.mkdir(parents=True, exist_ok=True)
    Manifest(pid, "headers", 200, 1000.0, _BASE_US, _BASE_US + RECORDS * 1000, {topic: topic}, lanes,
             stats={"sent": LANES * RECORDS, "acked": LANES * RECORDS}).write(run_dir)
    writer = SegmentWriter(run_dir / CAPTURE_DIR)
    for seq in range(RECORDS):
        for lane in range(LANES):
            produced = _BASE_US + seq * 1000
            writer.rows.append((topic, topic, lane, seq, "headers", pid, lane, seq, produced, produced + 5_000,
                                produced // 1000, 200, True, None, None))
    writer.close()
    write_json_atomic(run_dir / CAPTURE_STATUS, {"reason": "satisfied", "records": LANES * RECORDS,
                                                 "ours": LANES * RECORDS, "foreign": 0, "headerless": 0,
                                                 "damaged": 0, "warmup": 0, "duplicates_seen": 0})
    return run_dir


def prepare(log: Callable[[str], None] = print) -> Prepared:
    """Write the Spark driver's archive anew (module docstring); raises RuntimeError when it
    cannot (pyspark missing, archives off, another process writing one, the JVM wrote none)."""
    from . import spark as sessions
    from .job import verify_run

    home = _spark_home()
    if home is None:
        raise RuntimeError("pyspark is not installed")
    use = write_anew(SPARK_ARCHIVE, spark_java(), [home / "jars"])
    if not use.writes or use.final is None:
        raise RuntimeError("no archive written: KAFKA_MIRROR_JVM_CDS=0 turns archives off, or another process "
                           "is writing this one (its claim is next to it, in the archive directory)")
    t0 = time.monotonic()
    previous = os.environ.get(JAVA_OPTS_ENV)
    os.environ[JAVA_OPTS_ENV] = " ".join([*(previous or "").split(), *use.options])
    code = None
    try:
        with tempfile.TemporaryDirectory(prefix="kafka-mirror-prepare-") as work:
            run = write_run(Path(work) / "run")
            spark = sessions.get_spark("local[2]")
            jvm = sessions._jvm
            for _ in range(2):
                verify_run(run, spark=spark, write_report=False)
            log(f"kafka-mirror: verified a {LANES * RECORDS}-record run twice; the JVM writes its archive as it exits")
            sessions.stop_spark(jvm_timeout=600.0)  # written at the JVM's exit: minutes on a loaded machine
            code = jvm.returncode if jvm is not None else None  # killed (negative): a partial archive
    finally:
        if previous is None:
            os.environ.pop(JAVA_OPTS_ENV, None)
        else:
            os.environ[JAVA_OPTS_ENV] = previous
        use.settle(code)
    if not use.final.is_file():
        raise RuntimeError(f"the Spark JVM wrote no archive at {use.final} (its exit was cut short?)")
    return Prepared(use.final, use.final.stat().st_size, round(time.monotonic() - t0, 1))
