"""What every benchmark section shares: a broker per section, figures, memory sampling."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psutil

__all__ = ["Figure", "RssSampler", "Section", "broker", "direct_run", "loadavg", "peak_rss_mb", "rss_mb", "slope"]


@dataclass
class Figure:
    """One measured figure and the reference it is compared with, measured in the same run."""

    section: str
    name: str
    value: float | None
    unit: str
    reference: str = ""  # what the reference is
    reference_value: float | None = None
    #: value / reference_value (None without a reference); for rates higher is better, for
    #: latencies and memory lower is better: ``better`` says which
    better: str = "higher"
    params: dict[str, Any] = field(default_factory=dict)
    note: str = ""

    @property
    def key(self) -> str:
        return f"{self.section}.{self.name}"

    @property
    def ratio(self) -> float | None:
        if self.value is None or not self.reference_value:
            return None
        return self.value / self.reference_value

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["ratio"] = None if self.ratio is None else round(self.ratio, 4)
        return d


@dataclass
class Section:
    """Sizes of one benchmark mode (``--quick``, ``--smoke`` or the full run)."""

    name: str
    producer_records: int
    throttle_rate: float
    throttle_seconds: float
    capture_records: int
    rss_seconds: float
    rss_rate: float
    verify_records: tuple[int, ...]
    floor_rate: float
    floor_seconds: float
    #: rate measurements are repeated, figure and reference alternately; the median counts
    repeats: int = 3
    #: (record size, format, processes) of the producer rates
    producer_cases: tuple[tuple[int, str, int], ...] = (
        (100, "headers", 1), (100, "body", 1), (1024, "headers", 1), (1024, "body", 1), (100, "headers", 2),
        (100, "body", 2))
    #: (format, processes) of the capture rates
    capture_cases: tuple[tuple[str, int], ...] = (("headers", 1), ("body", 1), ("headers", 2))
    #: formats of the pipeline rates (100 B records, capture_records of them)
    pipeline_cases: tuple[str, ...] = ("headers", "body")


MODES = {
    "full": Section("full", 500_000, 20_000, 10.0, 1_000_000, 60.0, 20_000, (1_000_000, 10_000_000), 2_000, 10.0),
    "quick": Section("quick", 100_000, 20_000, 4.0, 200_000, 20.0, 20_000, (1_000_000,), 2_000, 4.0),
    # one case of each code path: single and multi-process, both formats
    "smoke": Section("smoke", 2_000, 1_000, 1.0, 3_000, 2.0, 1_000, (20_000,), 500, 1.0, repeats=1,
                     producer_cases=((100, "headers", 1), (100, "body", 2)), capture_cases=(("body", 2),),
                     pipeline_cases=("headers",)),
}


def median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


@contextlib.contextmanager
def broker(workdir: Path, name: str = "bench", spec: str = "tansu") -> Iterator[Any]:
    """A fresh broker: the embedded Tansu (memory storage: a section's records go with it),
    or any cluster spec (e.g. ``kafka:4.3.1``, a real Apache Kafka from the plugin's cache)."""
    from pytest_kafka_mirror.clusters import make_cluster

    cluster = make_cluster(name, spec, workdir)
    cluster.start()
    try:
        cluster.ensure_topic("kafka-mirror-warmup")  # type: ignore[attr-defined]
        yield cluster
    finally:
        cluster.stop()


def direct_run(cluster: Any, run_dir: Path, name: str, partitions: int) -> Any:
    """A run over a new topic whose capture reads that topic on the same cluster: the whole
    tester with no replicator in between."""
    import uuid

    from pytest_kafka_mirror.run import MirrorRun

    topic = f"bench-{name}-{uuid.uuid4().hex[:6]}"
    cluster.create_topic(topic, partitions)
    servers = cluster.bootstrap_servers
    return MirrorRun(run_dir, servers, servers, {topic: topic}, partitions={topic: partitions}, drain_timeout=10,
                     settle=0.0, warmup_topic="kafka-mirror-warmup")


def loadavg() -> list[float]:
    try:
        return [float(x) for x in psutil.getloadavg()]
    except OSError:
        return []


def rss_mb(pid: int) -> float | None:
    try:
        return psutil.Process(pid).memory_info().rss / 2**20
    except psutil.Error:
        return None


def peak_rss_mb(pid: int) -> float | None:
    """Peak resident memory of a live process (VmHWM).  Read from /proc: psutil has no peak
    resident size on Linux (its memory_info is the current RSS only)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    except (OSError, ValueError):
        return None
    return None


class RssSampler:
    """Samples a process's resident memory in a thread: ``(seconds, MB)`` pairs."""

    def __init__(self, pid: int, every: float = 0.5) -> None:
        self.pid = pid
        self.every = every
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="rss-sampler", daemon=True)
        self._t0 = time.monotonic()

    def _loop(self) -> None:
        while not self._stop.is_set():
            mb = rss_mb(self.pid)
            if mb is None:
                return
            self.samples.append((time.monotonic() - self._t0, mb))
            self._stop.wait(self.every)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def slope(points: list[tuple[float, float]]) -> float | None:
    """Least-squares slope of ``(x, y)`` points (None for fewer than two)."""
    n = len(points)
    if n < 2:
        return None
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    if sxx == 0:
        return None
    return sum((x - mx) * (y - my) for x, y in points) / sxx


def percentile(sorted_values: list[float], q: float) -> float | None:
    """Nearest-rank percentile of sorted values."""
    if not sorted_values:
        return None
    import math

    return sorted_values[max(1, math.ceil(q * len(sorted_values) - 1e-9)) - 1]


def env_with_worktree() -> dict[str, str]:
    """The environment for benchmark subprocesses: this checkout first on the path."""
    root = str(Path(__file__).resolve().parent.parent)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    return env


@contextlib.contextmanager
def consumer_process(module: str, bootstrap: str, topic: str, records: int, out: Path,
                     timeout: float = 120.0) -> Iterator[Any]:
    """``python -m MODULE consume BOOTSTRAP TOPIC RECORDS OUT`` (a bare consumer of a
    benchmark), started and ready (it writes ``OUT.ready`` once assigned); on leaving, waited
    for up to ``timeout`` when the block went through, killed when it is still running."""
    import subprocess
    import sys

    from pytest_kafka_mirror.processes.managed import wait_until

    consumer = subprocess.Popen([sys.executable, "-m", module, "consume", bootstrap, topic, str(records), str(out)],
                                env=env_with_worktree())
    try:
        ready = Path(str(out) + ".ready")
        with contextlib.suppress(TimeoutError):
            wait_until(lambda: ready.exists() or consumer.poll() is not None, 60, "the bare consumer", interval=0.02)
        if not ready.exists():
            raise RuntimeError("the bare consumer did not start")
        yield consumer
        consumer.wait(timeout=timeout)
    finally:
        if consumer.poll() is None:
            consumer.kill()
            consumer.wait()
