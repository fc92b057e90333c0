"""Witness consumer groups: consumers on the source that consume and commit at chosen points.

A failover moves consumers to the target, where they resume from their group's offsets
translated by the replicator.  To check that translation against the data, a run needs
consumer groups whose exact progress is known: *witnesses*.  Each witness is one consumer
group on the source that reads its partitions from the start while the producers run and
commits its position at the points it is given:

* a number — that many seconds after production starts (mid-stream: the group is as far
  as it got by then);
* ``"end"`` — once it has read every record the source acknowledged on its partitions
  (after the producers finished);

so with the right topics and partitions a witness sits mid-stream, at the end, on an
idle (low-throughput) partition or on an empty one (it commits position 0 there, as a
Java consumer's ``commitSync()`` does for an assigned partition it has read nothing from).

The witness never joins its group (``assign()`` + ``commit(offsets=...)``: an offset
commit for a group without members, which Kafka and Tansu accept; Tansu's group join
takes half a session timeout).  It remembers what it consumed as runs of consecutive
source offsets of one lane with consecutive sequence numbers, so for any committed
offset U the records the group had consumed — those at source offsets below U — are
known exactly.  Each witness writes ``RUN_DIR/witness-<group>.json`` (:class:`WitnessLog`),
which :mod:`pytest_kafka_mirror.verify.failover` reads.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..rundir import Manifest, write_json_atomic
from .gaps import GapGuard

__all__ = ["END", "Witness", "WitnessError", "WitnessLog", "WitnessMonitor", "load_witness_logs", "witness"]

log = logging.getLogger("pytest_kafka_mirror.witness")

#: The commit point "after everything acknowledged on the witness's partitions was read".
END = "end"
WITNESS_PREFIX = "witness-"


class WitnessError(RuntimeError):
    """A witness could not consume or commit."""


@dataclass(frozen=True)
class Witness:
    """One consumer group on the source: what it reads and when it commits (see the module doc).

    ``topics`` / ``partitions``: default every topic of the run / every partition.  The
    group id is given when the run starts (test-unique, see ``mirror_producer``).
    """

    name: str
    at: tuple[float | str, ...] = (END,)
    topics: tuple[str, ...] | None = None
    partitions: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[A-Za-z0-9._-]{1,40}", self.name or ""):
            raise ValueError(f"witness name {self.name!r}: 1-40 letters, digits, '.', '_' or '-'")
        points = (self.at,) if isinstance(self.at, (str, int, float)) else tuple(self.at)
        if not points:
            raise ValueError(f"witness {self.name!r}: at=... needs at least one commit point (SECONDS or 'end')")
        for p in points:
            if p != END and (isinstance(p, bool) or not isinstance(p, (int, float)) or p < 0):
                raise ValueError(f"witness {self.name!r}: commit point {p!r} is neither seconds >= 0 nor 'end'")
        timed = sorted(float(p) for p in points if p != END)
        object.__setattr__(self, "at", (*timed, *([END] if END in points else [])))
        if self.topics is not None:
            object.__setattr__(self, "topics", tuple([self.topics] if isinstance(self.topics, str) else self.topics))
        if self.partitions is not None:
            parts = tuple(self.partitions)
            if any(isinstance(p, bool) or not isinstance(p, int) or p < 0 for p in parts):
                raise ValueError(f"witness {self.name!r}: partitions must be numbers >= 0, got {self.partitions!r}")
            object.__setattr__(self, "partitions", parts)


def witness(name: str, at: float | str | Sequence[float | str] = END, *, topics: str | Sequence[str] | None = None,
            partitions: Sequence[int] | None = None) -> Witness:
    """``witness("mid", at=4)``, ``witness("both", at=[4, "end"])``, ``witness("idle", topics=[t], partitions=[2])``."""
    points = (at,) if isinstance(at, (str, int, float)) else tuple(at)
    return Witness(name, points, None if topics is None else tuple([topics] if isinstance(topics, str) else topics),
                   None if partitions is None else tuple(partitions))


@dataclass
class WitnessLog:
    """What one witness consumed and committed (``RUN_DIR/witness-<group>.json``).

    ``runs[(topic, partition)]`` are ``[first source offset, producer id, lane, first seq,
    count]``: consecutive offsets holding consecutive sequences of one lane.  ``commits``
    are ``{"label", "time_us", "offsets": {topic: {partition: offset}}, "error"}`` in order.
    """

    name: str
    group: str
    partitions: dict[str, list[int]]
    runs: dict[tuple[str, int], list[list[Any]]] = field(default_factory=dict)
    commits: list[dict[str, Any]] = field(default_factory=list)
    consumed: dict[tuple[str, int], int] = field(default_factory=dict)  # records of ours read
    foreign: int = 0
    complete: bool = True  # every "end" commit came after all acknowledged records were read
    note: str = ""

    def consumed_ranges(self, topic: str, partition: int, upstream: int) -> dict[tuple[str, int], list[tuple[int, int]]]:
        """(producer, lane) -> inclusive seq ranges the group had consumed at committed offset ``upstream``."""
        out: dict[tuple[str, int], list[tuple[int, int]]] = {}
        for first, pid, lane, seq, count in self.runs.get((topic, partition), []):
            if first >= upstream:
                break
            n = min(count, upstream - first)
            out.setdefault((pid, lane), []).append((seq, seq + n - 1))
        for key, ranges in out.items():
            ranges.sort()
            merged: list[tuple[int, int]] = []
            for a, b in ranges:
                if merged and a <= merged[-1][1] + 1:
                    merged[-1] = (merged[-1][0], max(merged[-1][1], b))
                else:
                    merged.append((a, b))
            out[key] = merged
        return out

    def last_consumed(self, topic: str, partition: int, upstream: int) -> str:
        """The record at ``upstream - 1`` (what the group consumed last), for messages."""
        for first, pid, lane, seq, count in self.runs.get((topic, partition), []):
            if first <= upstream - 1 < first + count:
                return f"{pid}/lane {lane} seq {seq + upstream - 1 - first}"
        return "nothing of ours" if upstream <= 0 else f"source offset {upstream - 1} (not one of ours)"

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "group": self.group, "partitions": self.partitions,
            "runs": {f"{t}\x00{p}": r for (t, p), r in self.runs.items()},
            "commits": self.commits,
            "consumed": {f"{t}\x00{p}": n for (t, p), n in self.consumed.items()},
            "foreign": self.foreign, "complete": self.complete, "note": self.note,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> WitnessLog:
        def key(k: str) -> tuple[str, int]:
            t, _, p = k.partition("\x00")
            return t, int(p)

        return cls(d["name"], d["group"], {t: list(p) for t, p in d["partitions"].items()},
                   {key(k): [list(r) for r in v] for k, v in d.get("runs", {}).items()},
                   list(d.get("commits", [])), {key(k): int(n) for k, n in d.get("consumed", {}).items()},
                   int(d.get("foreign", 0)), bool(d.get("complete", True)), str(d.get("note", "")))

    def write(self, run_dir: str | Path) -> Path:
        path = Path(run_dir) / f"{WITNESS_PREFIX}{self.group}.json"
        write_json_atomic(path, self.to_dict())
        return path


def load_witness_logs(run_dir: str | Path) -> list[WitnessLog]:
    return [WitnessLog.from_dict(json.loads(p.read_text())) for p in sorted(Path(run_dir).glob(f"{WITNESS_PREFIX}*.json"))]


class _Reader:
    """One witness: its consumer, bookkeeping and pending commit points."""

    def __init__(self, spec: Witness, group: str, partitions: dict[str, list[int]], bootstrap: str) -> None:
        from confluent_kafka import Consumer, TopicPartition

        from .._kafkalog import with_logger

        self.spec = spec
        self.log = WitnessLog(spec.name, group, partitions)
        self.pending = list(spec.at)
        self.position = {(t, p): 0 for t, parts in partitions.items() for p in parts}
        self.consumer = Consumer(with_logger({
            "bootstrap.servers": bootstrap,
            "group.id": group,  # never joined: offsets are committed for the group without members
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "fetch.queue.backoff.ms": 1,
            "fetch.wait.max.ms": 10,
            "fetch.error.backoff.ms": 10,
        }))
        # Several producers on one source partition can make a broker show a later record
        # first (Tansu): the witness must not skip one it then counts as unconsumed.
        self.gaps = GapGuard(self.consumer)
        for t, p in self.position:
            self.gaps.start(t, p, 0)
        self.consumer.assign([TopicPartition(t, p, 0) for (t, p) in self.position])

    def read(self, timeout: float) -> int:
        from ..produce.records import Kind, decode

        msgs: Sequence[Any] = self.gaps.filter(self.consumer.consume(500, timeout))
        for m in msgs:
            if m.error():
                continue
            key = (m.topic(), m.partition())
            off = m.offset()
            self.position[key] = off + 1
            d = decode(m.key(), m.value(), m.headers())
            if d.kind not in (Kind.HEADERS, Kind.BODY) or d.seq is None or d.lane is None:
                self.log.foreign += 1
                continue
            self.log.consumed[key] = self.log.consumed.get(key, 0) + 1
            runs = self.log.runs.setdefault(key, [])
            if runs:
                last = runs[-1]
                if last[0] + last[4] == off and last[1] == d.producer_id and last[2] == d.lane and last[3] + last[4] == d.seq:
                    last[4] += 1
                    continue
            runs.append([off, d.producer_id, d.lane, d.seq, 1])
        return len(msgs)

    def commit(self, label: str) -> None:
        from confluent_kafka import KafkaException, TopicPartition

        offsets = [TopicPartition(t, p, off) for (t, p), off in sorted(self.position.items())]
        entry: dict[str, Any] = {"label": label, "time_us": time.time_ns() // 1000, "offsets": {}}
        for (t, p), off in sorted(self.position.items()):
            entry["offsets"].setdefault(t, {})[str(p)] = off
        try:
            result = self.consumer.commit(offsets=offsets, asynchronous=False) or []
            bad = [f"{tp.topic}[{tp.partition}]: {tp.error}" for tp in result if tp.error is not None]
            if bad:
                entry["error"] = "; ".join(bad)
        except KafkaException as exc:
            entry["error"] = str(exc)
        self.log.commits.append(entry)

    def close(self) -> None:
        self.consumer.close()


class WitnessMonitor:
    """Runs the witnesses of one produce call in a background thread (see the module doc).

    ``start()`` before producing (they read from offset 0 as records come),
    ``start_clock()`` when the producer's schedule starts (commit points count from
    there), ``production_done(manifests)`` when it ended, ``finish()`` to wait for the
    ``"end"`` commits and write the logs.
    """

    def __init__(self, bootstrap: str, run_dir: str | Path, witnesses: Iterable[tuple[Witness, str]],
                 partitions: Mapping[str, int], *, end_timeout: float = 30.0) -> None:
        self.bootstrap = bootstrap
        self.run_dir = Path(run_dir)
        self.specs = list(witnesses)
        self.partitions = dict(partitions)
        self.end_timeout = end_timeout
        self._readers: list[_Reader] = []
        self._t0: float | None = None
        self._acked: dict[tuple[str, int], int] | None = None
        self._done_at: float | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None
        self.logs: list[WitnessLog] = []

    def _chosen(self, spec: Witness) -> dict[str, list[int]]:
        topics = spec.topics or tuple(self.partitions)
        unknown = [t for t in topics if t not in self.partitions]
        if unknown:
            raise ValueError(f"witness {spec.name!r}: topics {unknown} are not topics of this run ({sorted(self.partitions)})")
        out = {}
        for t in topics:
            parts = list(range(self.partitions[t])) if spec.partitions is None else list(spec.partitions)
            if any(p >= self.partitions[t] for p in parts):
                raise ValueError(f"witness {spec.name!r}: {t!r} has {self.partitions[t]} partitions, not {parts}")
            out[t] = parts
        return out

    def start(self) -> WitnessMonitor:
        chosen = [(spec, group, self._chosen(spec)) for spec, group in self.specs]  # errors before any consumer
        groups = [g for _, g in self.specs]
        if len(set(groups)) != len(groups):
            raise ValueError(f"witness names must be unique in a run: {sorted(s.name for s, _ in self.specs)}")
        for spec, group, parts in chosen:
            self._readers.append(_Reader(spec, group, parts, self.bootstrap))
        self._thread = threading.Thread(target=self._run, name="kafka-mirror-witnesses", daemon=True)
        self._thread.start()
        return self

    def start_clock(self) -> None:
        if self._t0 is None:
            self._t0 = time.monotonic()

    def production_done(self, manifests: Iterable[Manifest]) -> None:
        acked: dict[tuple[str, int], int] = {}
        for m in manifests:
            for lane in m.lanes:
                key = (lane.topic, lane.partition)
                acked[key] = acked.get(key, 0) + lane.acked_count
        self.start_clock()
        self._acked = acked
        self._done_at = time.monotonic()

    def _run(self) -> None:
        active = list(self._readers)
        try:
            while active and not self._stop.is_set():
                for r in active:
                    r.read(0.005 if len(active) > 1 else 0.02)
                now = time.monotonic()
                for r in list(active):
                    self._commit_due(r, now)
                    if not r.pending:
                        r.close()
                        active.remove(r)
        except BaseException as exc:
            self.error = exc
        finally:
            for r in active:
                r.close()

    def _commit_due(self, r: _Reader, now: float) -> None:
        while r.pending and r.pending[0] != END and self._t0 is not None and now - self._t0 >= float(r.pending[0]):
            r.commit(f"{float(r.pending.pop(0)):g} s")
        if r.pending and r.pending[0] == END and self._acked is not None:
            behind = {key: n - r.log.consumed.get(key, 0) for key, n in self._acked.items()
                      if key in r.position and n > r.log.consumed.get(key, 0)}
            if behind and now - (self._done_at or now) < self.end_timeout:
                return
            if behind:
                r.log.complete = False
                r.log.note = (f"committed 'end' after {self.end_timeout:g} s with records not yet read: "
                              + ", ".join(f"{t}[{p}]: {n}" for (t, p), n in sorted(behind.items())))
            r.commit(str(r.pending.pop(0)))

    def finish(self, timeout: float | None = None) -> list[WitnessLog]:
        """Wait for the remaining commits (``"end"`` ones need :meth:`production_done`), write the logs."""
        if self._thread is not None:
            if self._acked is None:
                self.production_done([])
            self._thread.join(timeout if timeout is not None else self.end_timeout + 30.0)
            if self._thread.is_alive():
                self._stop.set()
                self._thread.join(10)
            self._thread = None
            for r in self._readers:
                if r.pending:
                    r.log.note = (r.log.note + "; " if r.log.note else "") + f"never committed at {r.pending}"
                self.logs.append(r.log)
                r.log.write(self.run_dir)
        if self.error is not None:
            raise WitnessError(f"witnesses failed: {self.error!r}")
        return self.logs

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
