"""The run directory: the contract between producer, capture and verifier.

Every stage reads and writes plain files in one directory, so the stages can run in
different processes (or on different hosts sharing the directory)::

    RUN_DIR/
      manifest-<producer-id>.json   one per producer: what the source acknowledged, per lane
      capture/part-NNNNN.parquet    target records as the capture saw them (CAPTURE_SCHEMA)
      capture-status.json           how the capture ended (reason, counts)
      source/capture/…, source/capture-status.json
                                    optional: the *source* topics, captured the same way, for
                                    three-log reconciliation (manifest / source / target)
      readiness.json                warm-up rounds: when each topic was created and when a
                                    warm-up record of every partition crossed the replicator
      scenario.json                 figures the scenario measured itself (an upgrade's
                                    resume time, a config's sync time, ...): name ->
                                    {"value", "note"}
      report.json                   the verifier's MirrorReport
      store.json                    {"uri": ...}: the run is kept at this URI (--kafka-mirror-run-store);
                                    its capture segments are read there, not here

The manifest stores acknowledged sequence numbers as inclusive ranges, so its size grows
with the number of gaps, not with the number of records.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "DEFAULT_BOUNDS",
    "WRITTEN_LIST",
    "WRITTEN_LOCK",
    "CAPTURE_DIR",
    "CAPTURE_SCHEMA_FIELDS",
    "CAPTURE_STATUS",
    "READINESS_FILE",
    "SCENARIO_FILE",
    "SOURCE_DIR",
    "STORE_FILE",
    "LaneManifest",
    "Manifest",
    "capture_schema",
    "load_capture_status",
    "ENGINE_FILE",
    "load_discovery",
    "load_engine",
    "load_manifests",
    "load_scenario_figures",
    "store_uri_of",
    "note_report_files",
    "record_scenario_figure",
    "write_json_atomic",
    "write_readiness",
]

MANIFEST_VERSION = 1
CAPTURE_DIR = "capture"
CAPTURE_STATUS = "capture-status.json"
REPORT_FILE = "report.json"
READINESS_FILE = "readiness.json"
#: where the run's producers and captures ran, and the clocks' offsets (``run.py``)
ENGINE_FILE = "engine.json"
SCENARIO_FILE = "scenario.json"
#: ``{"uri": URI}`` when the run is kept in a run store (processes/store.py)
STORE_FILE = "store.json"
#: Subdirectory of a run directory holding the capture of the source topics, when taken.
SOURCE_DIR = "source"
#: Upper bounds (ms, inclusive) of the latency histogram buckets; a last bucket counts
#: everything above the last bound (+inf).  The capture's live figures and the verifier
#: share them.
DEFAULT_BOUNDS: tuple[float, ...] = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 30000, 60000)
#: In the report directory: the session that wrote its reports, then every file it wrote
#: there, one name a line (index.html links only these; see :func:`note_report_files`).
WRITTEN_LIST = ".kafka-mirror-written"
#: Beside it: the lock of the processes of a session that write to the report directory.
WRITTEN_LOCK = ".kafka-mirror-written.lock"

#: Columns of every capture segment, in order.  ``topic`` is the *source* topic name
#: (the capture maps target names back); identification columns are null for records
#: that are not ours (``kind == "foreign"``) or whose metadata was stripped
#: (``kind == "headerless"``: only ``lane`` is known, from the key), and each is null
#: when that part of a record's metadata was damaged (``damage``).
CAPTURE_SCHEMA_FIELDS: list[tuple[str, str]] = [
    ("topic", "string"),  # source topic
    ("target_topic", "string"),
    ("partition", "int32"),  # target partition
    ("offset", "int64"),  # target offset
    ("kind", "string"),  # records.Kind value: headers | body | headerless | foreign
    ("producer_id", "string"),
    ("lane", "int32"),
    ("seq", "int64"),
    ("produce_ts_us", "int64"),  # producer wall clock, microseconds since epoch
    ("arrival_ts_us", "int64"),  # capture wall clock when the record was consumed
    ("record_ts_ms", "int64"),  # Kafka record timestamp on the target
    ("size", "int32"),  # key + value + headers bytes as received
    ("checksum_ok", "bool"),  # payload CRC matches (null when unknown)
    ("evidence", "string"),  # foreign records: a short repr of key/value, else null
    # records of ours whose metadata a replicator damaged: what is missing or altered,
    # "key=missing,km.t=altered" (records.damage_names), else null.  The last column, added
    # later: a segment written before it reads as null there, and a reader that does not
    # know it reads the segment as before (damaged records then count as intact ones).
    ("damage", "string"),
]


def capture_schema() -> Any:
    """The Arrow schema of capture segments (imports pyarrow lazily)."""
    import pyarrow as pa

    types = {"string": pa.string(), "int32": pa.int32(), "int64": pa.int64(), "bool": pa.bool_()}
    return pa.schema([(name, types[t]) for name, t in CAPTURE_SCHEMA_FIELDS])


@dataclass
class LaneManifest:
    """What one producer sent to one lane of one topic, and what the source acknowledged.

    ``sent`` sequences ``0 .. sent-1`` were handed to the client; ``acked`` are the inclusive
    ranges the source broker confirmed; ``failed`` the ranges whose delivery report was an
    error.  Sequences neither acked nor failed were never reported (the producer was killed).
    ``aborted``: ranges the broker took in a transaction that was then aborted
    (``produce/transactions.py``): never expected, and a ``read_committed`` reader must not
    see them.
    """

    topic: str
    lane: int
    partition: int
    sent: int = 0
    acked: list[list[int]] = field(default_factory=list)
    failed: list[list[int]] = field(default_factory=list)
    aborted: list[list[int]] = field(default_factory=list)

    @property
    def acked_count(self) -> int:
        return sum(b - a + 1 for a, b in self.acked)


@dataclass
class Manifest:
    producer_id: str
    format: str  # "headers" | "body"
    message_size: int
    rate: float | list[list[float]] | None  # messages/s per topic, a profile of [seconds, rate] steps, or None = unthrottled
    started_us: int
    finished_us: int
    #: source topic -> target topic, as mapped by the replicator's naming policy
    topics: dict[str, str]
    lanes: list[LaneManifest]
    version: int = MANIFEST_VERSION
    #: free-form figures of the producer run (achieved rate, schedule slip, errors)
    stats: dict[str, Any] = field(default_factory=dict)
    #: source topics with ``cleanup.policy=compact``: a lane is a key, and only its latest
    #: acknowledged record must arrive (the older ones may be compacted away)
    compacted: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Manifest:
        d = dict(d)
        if d.get("version") != MANIFEST_VERSION:
            raise ValueError(f"unsupported manifest version {d.get('version')!r} (expected {MANIFEST_VERSION})")
        d["lanes"] = [LaneManifest(**lane) for lane in d["lanes"]]
        return cls(**d)

    def write(self, run_dir: str | os.PathLike[str]) -> Path:
        path = Path(run_dir) / f"manifest-{self.producer_id}.json"
        write_json_atomic(path, self.to_dict())
        return path


def load_manifests(run_dir: str | os.PathLike[str]) -> list[Manifest]:
    """All manifests of a run, sorted by producer id."""
    return [
        Manifest.from_dict(json.loads(p.read_text()))
        for p in sorted(Path(run_dir).glob("manifest-*.json"))
    ]


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON so a concurrent reader never sees a half-written file."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=False))
    os.replace(tmp, path)


def store_uri_of(path: str | os.PathLike[str]) -> str | None:
    """The run-store URI of ``path`` (a run directory or a directory in one), None when its
    run is kept only here."""
    path = Path(path)
    for up, run in enumerate([path, *list(path.parents)[:2]]):
        marker = run / STORE_FILE
        if marker.is_file():
            uri = str(json.loads(marker.read_text())["uri"]).rstrip("/")
            rel = path.relative_to(run).as_posix() if up else ""
            return f"{uri}/{rel}" if rel and rel != "." else uri
    return None


def write_readiness(run_dir: str | os.PathLike[str], rounds: list[Any]) -> None:
    """Every readiness round of a run (``TopicReadiness`` objects), in order."""
    write_json_atomic(Path(run_dir) / READINESS_FILE, [r.to_dict() for r in rounds])


def record_scenario_figure(run_dir: str | os.PathLike[str], name: str, value: float | int | None,
                           note: str = "") -> None:
    """Add (or replace) one figure of ``scenario.json``; the caller checks the name."""
    path = Path(run_dir) / SCENARIO_FILE
    figures = load_scenario_figures(run_dir)
    figures[name] = {"value": value, "note": note}
    write_json_atomic(path, figures)


def load_scenario_figures(run_dir: str | os.PathLike[str]) -> dict[str, dict[str, Any]]:
    """``scenario.json``: name -> ``{"value", "note"}``; ``{}`` when the scenario measured none."""
    try:
        return dict(json.loads((Path(run_dir) / SCENARIO_FILE).read_text()))
    except (OSError, ValueError):
        return {}


def load_capture_status(run_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """The run's (merged) capture status: {} when the capture wrote none, ``{"error": ...}``
    when it is unreadable (the report shows it; nothing in it counts then)."""
    path = Path(run_dir) / CAPTURE_STATUS
    if not path.is_file():
        return {}
    try:
        status = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        return {"error": f"unreadable {CAPTURE_STATUS}: {exc}"}
    return status if isinstance(status, dict) else {"status": status}


def load_engine(run_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """``engine.json``: the engine, its tasks and the largest clock offset; a run written
    before it (or by the CLI's separate commands) ran on one host: clock 0."""
    try:
        return dict(json.loads((Path(run_dir) / ENGINE_FILE).read_text()))
    except (OSError, ValueError):
        return {"engine": "local", "clock": {"max_offset_ms": 0.0, "uncertainty_ms": 0.0}}


def load_discovery(run_dir: str | os.PathLike[str]) -> dict[str, dict[str, Any]]:
    """Per source topic, from ``readiness.json``: the replicator's discovery of it (its
    first round: ``discovery_s``, ``created_us``, ``ready_us``, ``provisioned``) and what
    readiness cost this run (``warmup_s`` of its first own round, ``rounds``, ``sent``).
    ``{}`` when the run has no readiness rounds."""
    path = Path(run_dir) / READINESS_FILE
    try:
        rounds = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    out: dict[str, dict[str, Any]] = {}
    for r in sorted(rounds, key=lambda r: r["started_us"]):
        entry = out.get(r["topic"])
        if entry is None:
            entry = out[r["topic"]] = {
                "discovery_s": r.get("discovery_s"), "created_us": r.get("created_us"), "ready_us": r.get("ready_us"),
                "provisioned": r.get("provisioned", "test"), "partitions": r.get("partitions"), "warmup_s": None,
                "rounds": 0, "sent": 0,
            }
        if r.get("provisioned") != "session":
            entry["rounds"] += 1
            entry["sent"] += int(r.get("sent", 0))
            if entry["warmup_s"] is None:
                entry["warmup_s"] = r.get("warmup_s")
    return out


def note_report_files(report_dir: Path, session_id: str, paths: Iterable[Path] = ()) -> list[Path]:
    """Note ``paths`` as written in ``report_dir`` by session ``session_id``; the first call
    of a session first removes the files an earlier session noted there.  Returns them.

    So the report directory holds the reports of one session, the latest that wrote any,
    and ``index.html`` links nothing else.  Only files listed in :data:`WRITTEN_LIST` are
    removed, never others.  xdist workers share the session id (the run's
    ``testrunuid``): the first of them to write clears, under a lock on the list, and the
    others only add their names.  Call it before writing (it may remove a file of the
    same name) and again with the paths written.
    """
    from filelock import FileLock

    report_dir.mkdir(parents=True, exist_ok=True)
    header = f"session {session_id}"
    removed: list[Path] = []
    with FileLock(report_dir / WRITTEN_LOCK), open(report_dir / WRITTEN_LIST, "a+", encoding="utf-8") as f:
        f.seek(0)
        lines = f.read().splitlines()
        if lines[:1] != [header]:
            root = report_dir.resolve()
            for name in dict.fromkeys(lines[1:]):
                old = report_dir / name
                if name and old.resolve().parent == root and old.is_file() and not old.is_symlink():
                    old.unlink()
                    removed.append(old)
            f.truncate(0)
            f.write(header + "\n")
            lines = [header]
        known = set(lines[1:])
        for path in paths:
            name = os.path.relpath(path, report_dir)
            if name not in known and os.sep not in name:
                f.write(name + "\n")
                known.add(name)
    return removed
