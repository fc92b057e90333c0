"""Several producer processes that share one schedule: rates one core cannot reach.

One Python process hands a Kafka client a few hundred thousand records a second at best
(see docs/performance.md); a replicator carrying more than that needs a
load generator that is not the bottleneck.  :class:`ProducerGroup` runs N
:class:`~pytest_kafka_mirror.produce.producer.MirrorProducer` processes:

* each has its own producer id, so its lanes, sequences and manifest are its own and the
  verifier needs nothing new: a run with N producer processes is a run with N producers;
* the rate is split between them: each produces every topic at ``rate / N`` (a rate
  profile's steps scaled likewise), and a count is split to the record;
* they share one schedule: every process connects and warms up first, then all start at
  the same wall-clock instant, which is the origin of every record's due time;
* each reports its counts once a second (live metrics), and an error in any of them stops
  the others and is raised here with the process's own message.

The processes talk to this controller through small files in a work directory (the run
directory's ``producers/``), like the capture: ``spec.json``, then per process
``ready-I.json``, ``counts-I.json``, ``result-I.json`` or ``error-I.txt``; and from the
controller ``start.json`` and ``stop``.  Every process is a
:class:`~pytest_kafka_mirror.processes.managed.ManagedProcess`: stopped on failure, on Ctrl-C and
when this process dies.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
import traceback
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from .._warnings import PytestKafkaMirrorWarning
from ..processes.managed import Launcher, launch_local, wait_until
from ..processes.spark_tasks import EngineError
from ..rundir import Manifest, write_json_atomic
from .producer import (
    PROGRESS_EVERY,
    CountsCallback,
    MirrorProducer,
    ProducerError,
    RateProfile,
    TopicLanes,
    new_producer_id,
    validate_run,
)
from .records import MAX_PRODUCER_ID

__all__ = ["ProducerGroup"]

SPEC = "spec.json"
START = "start.json"
STOP = "stop"
#: Seconds between the last process being ready and the shared start: time for every
#: process to see the start file before its first record is due.
START_LEAD = 0.1


def _split(total: int, parts: int, index: int) -> int:
    return total // parts + (1 if index < total % parts else 0)


class ProducerGroup:
    """N producer processes, one shared schedule (see the module docstring).

    >>> group = ProducerGroup("127.0.0.1:9092", processes=4, work_dir="run/producers")  # doctest: +SKIP
    >>> manifests = group.run([TopicLanes("orders", 8)], rate=200_000, duration=60)  # doctest: +SKIP
    """

    def __init__(
        self,
        bootstrap_servers: str,
        *,
        processes: int,
        work_dir: str | os.PathLike[str],
        format: str = "headers",
        message_size: int = 200,
        producer_id: str | None = None,
        config: dict[str, Any] | None = None,
        flush_timeout: float = 30.0,
        startup_timeout: float = 60.0,
        launcher: Launcher | None = None,
    ) -> None:
        if isinstance(processes, bool) or not isinstance(processes, int) or processes < 1:
            raise ProducerError(f"processes must be a whole number >= 1, got {processes!r}")
        if producer_id is not None and len(f"{producer_id}-{processes - 1}") > MAX_PRODUCER_ID:
            raise ProducerError(
                f"producer_id {producer_id!r} is too long for {processes} processes: each gets the id "
                f"'{producer_id}-N', at most {MAX_PRODUCER_ID} characters"
            )
        self.bootstrap_servers = bootstrap_servers
        self.processes = processes
        self.work_dir = Path(work_dir)
        self.format = format
        self.message_size = message_size
        self.producer_ids = [f"{producer_id}-{i}" if producer_id else new_producer_id() for i in range(processes)]
        self.config = dict(config or {})
        self.flush_timeout = flush_timeout
        self.startup_timeout = startup_timeout
        #: what starts the processes (the engine): here, or as Spark tasks
        self.launcher = launcher or launch_local
        #: where each process ran (a Spark task's host, executor and clock; empty here)
        self.placement: list[dict[str, Any]] = []
        #: after a Ctrl-C: the manifests of what the source acknowledged until then, one per
        #: process that stopped in time (stats ``interrupted``), for the caller to write
        self.interrupted: list[Manifest] | None = None
        # Argument errors (format, size) here, before any process starts.
        self._producers = [
            MirrorProducer(bootstrap_servers, format=format, message_size=message_size, producer_id=pid,
                           config=config, flush_timeout=flush_timeout)
            for pid in self.producer_ids
        ]

    def check_size(self, topics: Sequence[TopicLanes]) -> None:
        for p in self._producers:
            p.check_size(topics)

    def run(
        self,
        topics: Sequence[TopicLanes],
        *,
        rate: float | Sequence[tuple[float, float]] | RateProfile | None,
        duration: float | None = None,
        count: int | None = None,
        target_names: dict[str, str] | None = None,
        progress: Callable[[dict[str, Any]], None] | None = None,
        should_stop: Callable[[], bool] | None = None,
        warmup_topic: str | None = None,
        on_start: Callable[[], None] | None = None,
        on_counts: CountsCallback | None = None,
    ) -> list[Manifest]:
        """:meth:`MirrorProducer.run` over N processes; one manifest per process (not yet
        written to the run directory), in process order."""
        profile, count = validate_run(topics, rate, duration, count)
        self.check_size(topics)
        n = self.processes
        self.work_dir.mkdir(parents=True, exist_ok=True)
        for stale in (START, STOP):
            (self.work_dir / stale).unlink(missing_ok=True)
        write_json_atomic(self.work_dir / SPEC, {
            "bootstrap_servers": self.bootstrap_servers,
            "format": self.format,
            "message_size": self.message_size,
            "config": self.config,
            "flush_timeout": self.flush_timeout,
            "startup_timeout": self.startup_timeout,
            "topics": [asdict(t) for t in topics],
            "target_names": target_names or {},
            "warmup_topic": warmup_topic,
            "duration": duration,
            "workers": [
                {
                    "producer_id": pid,
                    "count": _split(count, n, i) if count is not None else None,
                    "rate": [[t, r / n] for t, r in profile.steps] if profile is not None else None,
                }
                for i, pid in enumerate(self.producer_ids)
            ],
        })
        children = [(f"producer {pid}", [sys.executable, "-m", "pytest_kafka_mirror.produce.group", str(self.work_dir),
                                          str(i)], self.work_dir / f"producer-{i}.log")
                    for i, pid in enumerate(self.producer_ids)]
        try:
            procs = self.launcher(children)
        except EngineError as exc:
            raise ProducerError(f"cannot start the producers: {exc}") from None
        try:
            self._wait_ready(procs)
            start_at = time.time() + START_LEAD
            write_json_atomic(self.work_dir / START, {"start_at": start_at})
            time.sleep(max(0.0, start_at - time.time()))
            if on_start is not None:
                on_start()
            self._watch(procs, progress, should_stop, on_counts)
        except BaseException as exc:
            (self.work_dir / STOP).touch()
            try:
                if isinstance(exc, KeyboardInterrupt):
                    self.interrupted = self._results_after_stop(procs)
            finally:
                for proc in procs:
                    proc.stop(timeout=min(self.flush_timeout, 10.0))
            raise
        manifests = [Manifest.from_dict(json.loads((self.work_dir / f"result-{i}.json").read_text()))
                     for i in range(n)]
        self.placement = [dict(proc.info()) if hasattr(proc, "info") else {} for proc in procs]
        for manifest, where in zip(manifests, self.placement, strict=True):
            if where:
                manifest.stats["task"] = {k: where.get(k) for k in ("host", "executor", "pid", "offset_ms",
                                                                      "uncertainty_ms")}
        behind = [m for m in manifests if m.stats.get("rate_warning")]
        if behind:
            lags = ", ".join(f"{m.stats.get('max_lag_s')} s" for m in behind)
            warnings.warn(
                PytestKafkaMirrorWarning(
                    f"{len(behind)} of {n} producer processes could not keep to their share of the rate "
                    f"(largest lag behind the schedule: {lags}). "
                    "Lower the rate, use fewer/larger messages, or more processes if cores are free."
                ),
                stacklevel=2,
            )
        return manifests

    def _results_after_stop(self, procs: Sequence[Any]) -> list[Manifest]:
        """The processes told to stop (the stop file) flush and write their manifests: the
        ones written within the flush timeout (10 s at most), marked interrupted."""
        with contextlib.suppress(TimeoutError):  # then take the manifests that were written
            wait_until(lambda: not any(proc.running for proc in procs), min(self.flush_timeout, 10.0),
                       "the stopped producer processes to exit")
        out = []
        for i in range(len(procs)):
            path = self.work_dir / f"result-{i}.json"
            if path.is_file():
                manifest = Manifest.from_dict(json.loads(path.read_text()))
                manifest.stats["interrupted"] = True
                out.append(manifest)
        return out

    def _failure(self, procs: Sequence[Any], i: int) -> ProducerError:
        err = self.work_dir / f"error-{i}.txt"
        what = err.read_text().strip() if err.exists() else procs[i].describe_exit()
        return ProducerError(f"producer process {i} ({self.producer_ids[i]}) failed: {what}")

    def _wait_ready(self, procs: Sequence[Any]) -> None:
        ready = [0]

        def all_ready() -> bool:
            ready[0] = 0
            for i, proc in enumerate(procs):
                if (self.work_dir / f"ready-{i}.json").exists():
                    ready[0] += 1
                elif not proc.running:
                    raise self._failure(procs, i)
            return ready[0] == len(procs)

        try:
            wait_until(all_ready, self.startup_timeout, "the producer processes to connect", interval=0.01)
        except TimeoutError:
            raise ProducerError(
                f"{len(procs) - ready[0]} of {len(procs)} producer processes were not connected to "
                f"{self.bootstrap_servers} within {self.startup_timeout:g} s; logs in {self.work_dir}"
            ) from None

    def _watch(self, procs: Sequence[Any], progress: Callable[[dict[str, Any]], None] | None,
               should_stop: Callable[[], bool] | None, on_counts: CountsCallback | None) -> None:
        seen: dict[int, float] = {}
        t0 = time.monotonic()
        next_progress = t0 + PROGRESS_EVERY
        stopped = False
        while True:
            running = 0
            for i, proc in enumerate(procs):
                if proc.running:
                    running += 1
                elif proc.returncode != 0 or not (self.work_dir / f"result-{i}.json").exists():
                    raise self._failure(procs, i)
            if on_counts is not None:
                for i in range(len(procs)):
                    path = self.work_dir / f"counts-{i}.json"
                    try:
                        mtime = path.stat().st_mtime
                        if seen.get(i) != mtime:
                            seen[i] = mtime
                            on_counts(self.producer_ids[i], json.loads(path.read_text()))
                    except (OSError, ValueError):
                        pass  # not written yet, or being replaced: next round
            if not running:
                return
            now = time.monotonic()
            if progress is not None and now >= next_progress:
                progress({"producers": self.producer_ids, "running": running, "elapsed": now - t0})
                next_progress = now + PROGRESS_EVERY
            if not stopped and should_stop is not None and should_stop():
                (self.work_dir / STOP).touch()
                stopped = True
            time.sleep(0.05)


# --------------------------------------------------------------------------- process side
def _worker(work_dir: Path, index: int) -> int:
    spec = json.loads((work_dir / SPEC).read_text())
    me = spec["workers"][index]
    stop_file = work_dir / STOP
    producer = MirrorProducer(
        spec["bootstrap_servers"], format=spec["format"], message_size=spec["message_size"],
        producer_id=me["producer_id"], config=spec["config"], flush_timeout=spec["flush_timeout"],
    )
    topics = [TopicLanes(**t) for t in spec["topics"]]
    client = producer.connect(spec["warmup_topic"])
    write_json_atomic(work_dir / f"ready-{index}.json", {"warmup_seconds": client[1]})
    try:
        wait_until(lambda: (work_dir / START).exists() or stop_file.exists(), spec["startup_timeout"],
                   "the start signal", interval=0.002)
    except TimeoutError:
        raise ProducerError(f"no start signal within {spec['startup_timeout']:g} s") from None
    if not (work_dir / START).exists():
        return 0  # stopped before the start
    start_at = json.loads((work_dir / START).read_text())["start_at"]
    checked = [0.0]

    def should_stop() -> bool:
        now = time.monotonic()
        if now - checked[0] < 0.1:
            return False
        checked[0] = now
        return stop_file.exists()

    def on_counts(producer_id: str, counts: dict[str, dict[str, float]]) -> None:
        write_json_atomic(work_dir / f"counts-{index}.json", counts)

    manifest = producer.run(
        topics, rate=me["rate"], duration=spec["duration"], count=me["count"], target_names=spec["target_names"],
        should_stop=should_stop, on_counts=on_counts, start_at=start_at, client=client,
    )
    write_json_atomic(work_dir / f"result-{index}.json", manifest.to_dict())
    return 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    work_dir, index = Path(args[0]), int(args[1])
    from .._kafkalog import log_to

    log_to(sys.stdout, f"producer-{index}")
    try:
        with warnings.catch_warnings():
            # The controller reports a process that fell behind once for all of them.
            warnings.simplefilter("ignore", PytestKafkaMirrorWarning)
            return _worker(work_dir, index)
    except ProducerError as exc:
        (work_dir / f"error-{index}.txt").write_text(str(exc))
        return 1
    except Exception:
        (work_dir / f"error-{index}.txt").write_text(traceback.format_exc(limit=8))
        return 1


if __name__ == "__main__":
    sys.exit(main())
