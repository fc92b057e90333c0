"""Capture: read the target topics into columnar segments, stamping arrival time.

The capture runs as its own process (:mod:`.process`, ``python -m pytest_kafka_mirror.capture``)
so that its arrival timestamps do not wait on the producer for the GIL.  It:

* assigns every partition of the (mapped) target topics from the beginning as soon as
  they appear in the target's metadata (the replicator creates them), re-checking for
  added partitions;
* decodes each record (:mod:`.rows`, the hot loop), stamps the wall-clock arrival time
  once per consumed batch, and keeps a row per record; a thread writes the rows to a
  Parquet segment every ``SEGMENT_ROWS`` rows or ``SEGMENT_SECONDS`` seconds
  (:mod:`.segments`), so the consume loop never waits on the disk and memory stays flat
  whatever the run length;
* keeps, per (topic, producer, lane), a sparse bitmap of the sequences seen, and stops
  ``settle`` seconds after the manifests (written when every producer of the run is done)
  are satisfied, or when ``drain_timeout`` seconds pass with no new record after the
  producers finished.  Records that are not ours are counted and kept as evidence.

**Several processes** (``Capture(processes=N)``, ``kafka-mirror capture --processes N``)
split the partitions: process I reads partition P of every topic when ``P % N == I`` and
writes its own segments (``part-gI-NNNNN.parquet``) and files (``capture-gI.ready``,
``capture-progress-gI.json``, ``capture-status-gI.json``, ``capture-state-gI.json``).
Each process checks the lanes whose source partition is in its group, and they stop
together: when every process reports its lanes complete (then ``settle``), or when no
process received anything for ``drain_timeout`` seconds.  A replicator that moves records
to partitions of another group leaves that lane incomplete for its process, so such a run
ends by the drain timeout, with every record captured.  The controller merges the
statuses into ``capture-status.json``.

:class:`Capture` (this module) is the controller used by the plugin; it starts the
processes, waits for them to report ready, and waits for them to finish.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from ..processes.managed import Launcher, launch_local
from ..processes.spark_tasks import EngineError
from ..rundir import CAPTURE_STATUS, write_json_atomic
from .rows import CHUNK_BITS, LiveFigures, SeenBitmap, merge_progress  # noqa: F401 - importable here as before the split

__all__ = ["PRODUCE_DONE", "Capture", "CaptureError", "SeenBitmap", "group_file", "merge_progress"]

PRODUCE_DONE = "produce-done"
#: Written by each ``kafka-mirror produce`` when its manifests are in the run directory
#: (``produced-<producer id>.json``): a capture on another host counts them (``--producers``).
PRODUCED_GLOB = "produced-*.json"
READY = "capture.ready"
PROGRESS = "capture-progress.json"
#: Per process of a multi-process capture: its view of the shared stop decision.
STATE = "capture-state.json"
#: A capture process that fails says why on one line of its log starting with this.
ERROR_PREFIX = "capture: error: "

#: The capture's consumer settings (besides servers and group id); the benchmarks' bare
#: consume loop uses them too, so that it measures the same client work.
CONSUMER_CONFIG: dict[str, Any] = {
    "enable.auto.commit": False,
    "fetch.queue.backoff.ms": 1,
    "fetch.wait.max.ms": 10,
    "fetch.error.backoff.ms": 10,
    # Partitions are assigned at offset 0 rather than OFFSET_BEGINNING: resolving
    # BEGINNING costs ~0.5 s on Tansu, which would show up as latency of the first
    # records.  A log whose start moved past 0 is caught by the reset to earliest.
    "auto.offset.reset": "earliest",
    "enable.partition.eof": False,
    "socket.connection.setup.timeout.ms": 5000,
}


def group_file(name: str, group: int, groups: int) -> str:
    """File ``name`` of capture process ``group`` of ``groups``: unchanged for a single
    process, else with ``-gI`` before the extension (``capture-progress-g1.json``)."""
    if groups <= 1:
        return name
    stem, _, ext = name.partition(".")
    return f"{stem}-g{group}.{ext}"


class CaptureError(RuntimeError):
    """The capture process failed or did not finish in time."""


def _why(proc: Any) -> str:
    """How a capture process ended: its own error line first (a segment it could not
    write, say), then the exit code and the log's last lines."""
    errors = [line[len(ERROR_PREFIX):] for line in proc.log_tail().splitlines() if line.startswith(ERROR_PREFIX)]
    return f"{errors[-1]} ({proc.describe_exit()})" if errors else proc.describe_exit()


def _merge_end_offsets(statuses: list[dict[str, Any]]) -> dict[str, Any]:
    """The processes' end-offset samples (``process._EndOffsets``), one list per process:
    each samples its own partitions at its own instants."""
    parts = [st.get("end_offsets") or {} for st in statuses]
    measured = bool(parts) and all(p.get("measured") for p in parts)
    # a single process's status file is the merged one: merged again, it has groups already
    groups = [g for p in parts for g in (p["groups"] if "groups" in p else [p.get("samples") or []])]
    return {"measured": measured, "why": next((p.get("why") for p in parts if p.get("why")), ""),
            "topics": {k: v for p in parts for k, v in (p.get("topics") or {}).items()}, "groups": groups}


# --------------------------------------------------------------------------- controller side
class Capture:
    """Starts the capture process(es) for one run and waits for their end.

    ``processes=N`` splits the partitions between N processes (see the module docstring),
    for a target that one process cannot keep up with.  ``producers``: production is done
    once that many ``kafka-mirror produce`` commands have finished writing to the run
    directory (a capture on another host than the producers); by default the controller
    says so (:meth:`producers_done`).
    """

    def __init__(
        self,
        bootstrap_servers: str,
        run_dir: str | os.PathLike[str],
        topics: dict[str, str],
        *,
        drain_timeout: float = 30.0,
        settle: float = 0.5,
        startup_timeout: float = 30.0,
        manifest_dir: str | os.PathLike[str] | None = None,
        processes: int = 1,
        producers: int = 0,
        end_offsets: tuple[bool | None, str] = (None, ""),
        launcher: Launcher | None = None,
    ) -> None:
        if isinstance(processes, bool) or not isinstance(processes, int) or processes < 1:
            raise CaptureError(f"capture processes must be a whole number >= 1, got {processes!r}")
        self.bootstrap_servers = bootstrap_servers
        self.run_dir = Path(run_dir)
        # The source capture of a run writes into RUN_DIR/source but reads RUN_DIR's manifests.
        self.manifest_dir = Path(manifest_dir) if manifest_dir is not None else None
        self.topics = topics  # source -> target
        self.drain_timeout = drain_timeout
        self.settle = settle
        self.startup_timeout = startup_timeout
        self.processes_wanted = processes
        self.producers = producers
        #: whether the target reports accurate end offsets (None: not known, sampled all the
        #: same) and what says so: the capture samples them for its own lag, or says it cannot
        self.end_offsets = end_offsets
        #: what starts the capture processes (the engine): here, or as Spark tasks
        self.launcher = launcher or launch_local
        self.procs: list[Any] = []

    @property
    def process(self) -> Any:
        """The (first) capture process, None before :meth:`start`."""
        return self.procs[0] if self.procs else None

    def _file(self, name: str, group: int) -> Path:
        return self.run_dir / group_file(name, group, self.processes_wanted)

    def start(self) -> Capture:
        from ..processes.managed import wait_until

        self.run_dir.mkdir(parents=True, exist_ok=True)
        n = self.processes_wanted
        children = []
        for g in range(n):
            argv = [
                sys.executable, "-m", "pytest_kafka_mirror.capture.process",
                "--bootstrap", self.bootstrap_servers,
                "--run-dir", str(self.run_dir),
                "--topics", json.dumps({t: s for s, t in self.topics.items()}),
                "--drain-timeout", str(self.drain_timeout),
                "--settle", str(self.settle),
                "--producers", str(self.producers),
                "--group", str(g), "--groups", str(n),
            ]
            if self.manifest_dir is not None:
                argv += ["--manifest-dir", str(self.manifest_dir)]
            accurate, why = self.end_offsets
            argv += ["--end-offsets", "skip" if accurate is False else "sample",
                     "--end-offsets-why", why or ("" if accurate else "not probed: taken as accurate")]
            name = "capture" if n == 1 else f"capture {g}/{n}"
            children.append((name, argv, self._file("capture.log", g)))
        try:
            self.procs = self.launcher(children)
        except EngineError as exc:
            raise CaptureError(f"cannot start the capture: {exc}") from None

        def started() -> bool:
            return all(self._file(READY, g).exists() or not proc.running for g, proc in enumerate(self.procs))

        try:
            wait_until(started, self.startup_timeout, "the capture process to start",
                       on_timeout=lambda: "".join(f"\n{proc.log_tail()}" for proc in self.procs))
        except TimeoutError as exc:
            for proc in self.procs:
                proc.kill()
            raise CaptureError(str(exc)) from None
        for g, proc in enumerate(self.procs):
            if not proc.running and not self._file(CAPTURE_STATUS, g).exists():
                self.stop()
                raise CaptureError(f"the capture process died during start-up: {_why(proc)}")
        return self

    def producers_done(self) -> None:
        """Tell the capture every manifest is written: it may now decide it is complete."""
        (self.run_dir / PRODUCE_DONE).write_text(str(time.time()))

    def progress(self) -> dict[str, Any]:
        parts = []
        for g in range(self.processes_wanted):
            try:
                parts.append(dict(json.loads(self._file(PROGRESS, g).read_text())))
            except (OSError, ValueError):
                parts.append({})
        return merge_progress(parts)

    def wait(self, timeout: float | None = None) -> dict[str, Any]:
        """Wait for the capture to end by itself; returns capture-status.json."""
        import subprocess

        if not self.procs:
            raise CaptureError("the capture was never started")
        # The capture ends at the latest drain_timeout after its last record; allow for a
        # slow shutdown on top.  A capture that keeps receiving records runs on.
        limit = timeout if timeout is not None else None
        t0 = time.monotonic()
        for proc in self.procs:
            while True:
                try:
                    proc.wait(timeout=1.0)
                    break
                except subprocess.TimeoutExpired:
                    if limit is not None and time.monotonic() - t0 > limit:
                        self.stop()
                        raise CaptureError(
                            f"the capture did not finish within {limit:g} s (progress: {self.progress()}); "
                            "it was stopped. Hint: raise --kafka-mirror-drain-timeout or check the replicator."
                        ) from None
        if self.processes_wanted > 1:
            self._merge_status()
        return self.status()

    def _merge_status(self) -> None:
        statuses = []
        for g, proc in enumerate(self.procs):
            path = self._file(CAPTURE_STATUS, g)
            if not path.exists():
                raise CaptureError(f"capture process {g} ended without writing {path.name}: {_why(proc)}")
            statuses.append(json.loads(path.read_text()))
        reasons = sorted({st["reason"] for st in statuses})
        merged = merge_progress(statuses)
        merged.pop("by_topic", None)
        merged.pop("latency", None)
        merged.update(
            reason="satisfied" if reasons == ["satisfied"] else next(r for r in reasons if r != "satisfied"),
            segments=sum(st["segments"] for st in statuses),
            rows=sum(st["rows"] for st in statuses),
            idle_seconds=min(st["idle_seconds"] for st in statuses),
            settle=self.settle,
            drain_timeout=self.drain_timeout,
            processes=[{"reason": st["reason"], "records": st["records"], "elapsed": st["elapsed"]}
                       for st in statuses],
            offset_gaps={k: sum(st.get("offset_gaps", {}).get(k, 0) for st in statuses)
                         for k in ("refetched", "accepted", "accepted_offsets", "open")},
            columnar_chunks=sum(int(st.get("columnar_chunks", 0)) for st in statuses),
            consumer_restarts=sorted((dict(r, group=g) for g, st in enumerate(statuses)
                                      for r in st.get("consumer_restarts") or []), key=lambda r: r["at"]),
            warmup_ends={k: max(int(st.get("warmup_ends", {}).get(k, 0)) for st in statuses)
                         for k in {k for st in statuses for k in st.get("warmup_ends", {})}},
            end_offsets=_merge_end_offsets(statuses),
        )
        write_json_atomic(self.run_dir / CAPTURE_STATUS, merged)

    def wait_assigned(self, partitions: dict[str, int], timeout: float, hint: str = "") -> float:
        """Wait until the capture reads every partition of the target topics; returns seconds waited.

        ``partitions`` maps target topic -> expected partition count.
        """
        from ..processes.managed import wait_until

        t0 = time.monotonic()

        def ready() -> bool:
            for proc in self.procs:
                if not proc.running:
                    raise CaptureError(f"the capture process died: {_why(proc)}")
            have = self.progress().get("partitions", {})
            return all(have.get(t, 0) >= n for t, n in partitions.items())

        try:
            wait_until(ready, timeout, f"target topics {sorted(partitions)} to appear on the target", interval=0.02)
        except TimeoutError as exc:
            have = self.progress().get("partitions", {})
            raise CaptureError(f"{exc} (the capture sees {have}). {hint}") from None
        return time.monotonic() - t0

    def status(self) -> dict[str, Any]:
        path = self.run_dir / CAPTURE_STATUS
        if not path.exists():
            raise CaptureError(
                f"the capture ended without writing {CAPTURE_STATUS}: "
                f"{_why(self.process) if self.process else 'never started'}"
            )
        return dict(json.loads(path.read_text()))

    def stop(self) -> None:
        """SIGTERM: the capture writes what it has, and its status, then exits."""
        for proc in self.procs:
            proc.stop(timeout=10.0)
        if self.processes_wanted > 1 and all(self._file(CAPTURE_STATUS, g).exists()
                                             for g in range(self.processes_wanted)):
            self._merge_status()

