"""Stored runs: one self-describing JSON document per session, to compare later sessions with.

The layout and names follow pytest-benchmark's file storage, which CI users already know::

    STORAGE/                                   --kafka-mirror-storage (default: ROOTDIR/.kafka-mirror)
      Linux-CPython-3.11-64bit/                machine id: system, Python implementation and version, bits
        0001_release-2.4.json                  --kafka-mirror-save release-2.4
        0002_<commit>_<utcstamp>.json          --kafka-mirror-autosave
        0003_<commit>_<utcstamp>_uncommitted-changes.json

Runs are numbered per machine directory; a run is referred to by number (``3`` or
``0003``), by part of its file name (``release-2.4``), by ``MACHINE/NNNN``, or by path.
Results are not compared across machine ids unless asked by name or path: figures from
another machine (or Python) are not a baseline.

A document holds (see ``tests/golden/stored_run.json``)::

    version        STORED_RUN_VERSION
    datetime       UTC, ISO 8601
    machine_info   node, system, release, machine, Python, CPU count, machine id
    commit_info    id, dirty, branch, time, project (git; "unversioned" outside a repository)
    plugin         versions of pytest-kafka-mirror and of the libraries that shape the figures
    settings       cluster, replicator and naming specs, Spark master, record defaults
    metadata       what pytest_kafka_mirror_run_metadata hooks added (e.g. the replicator version)
    results        per verified run and per failover check, keyed by pytest node id (see
                   :meth:`TestResult.key_of`): node id, index, kind, params, outcome, every
                   figure, the whole report (MirrorReport or FailoverReport), and where its
                   report and plots were written
"""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from filelock import FileLock

__all__ = [
    "FAILOVER",
    "KINDS",
    "STORED_RUN_VERSION",
    "VERIFICATION",
    "FileStorage",
    "StorageError",
    "TestResult",
    "build_run",
    "count_results",
    "get_commit_info",
    "get_machine_id",
    "get_machine_info",
    "kind_of",
    "load_run",
    "run_label",
]

STORED_RUN_VERSION = 1
#: Kinds of result: a verified run (``mirror_verifier``), a failover check (``mirror_failover``).
VERIFICATION, FAILOVER = "verification", "failover"
KINDS = (VERIFICATION, FAILOVER)
LATEST = "latest"
_RUN_FILE = re.compile(r"^(?P<number>\d{4,})_(?P<name>.+)\.json$")
#: Libraries whose versions change the figures; recorded in every stored run.
_LIBRARIES = ("pytest", "pytest-xdist", "pyspark", "confluent-kafka", "pyarrow")


class StorageError(ValueError):
    """A stored run cannot be found, read or written; the message says which and what exists."""


@dataclass
class TestResult:
    """One verified run or one failover check of one test, as the controller receives it
    from a worker."""

    __test__ = False  # not a test class

    key: str  # see key_of
    nodeid: str
    index: int  # 0 for the test's first result of its kind, N for its N-th further one
    kind: str = VERIFICATION  # VERIFICATION | FAILOVER (documents without it are verifications)
    params: dict[str, Any] = field(default_factory=dict)
    outcome: str = "passed"
    figures: dict[str, Any] = field(default_factory=dict)
    report: dict[str, Any] = field(default_factory=dict)  # MirrorReport.to_dict() / FailoverReport.to_dict()
    report_path: str | None = None
    plots: dict[str, str] = field(default_factory=dict)  # plot kind -> path of the SVG

    @staticmethod
    def key_of(nodeid: str, index: int, kind: str = VERIFICATION) -> str:
        """``NODEID`` and ``NODEID#N`` for a test's first and N-th further verification;
        ``NODEID#failover`` and ``NODEID#failover#N`` for its failover checks, so a failover
        check is never compared with a verification."""
        base = nodeid if kind == VERIFICATION else f"{nodeid}#{kind}"
        return base if index == 0 else f"{base}#{index}"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        del d["key"]
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TestResult:
        d = dict(d)
        d.setdefault("key", cls.key_of(d["nodeid"], d.get("index", 0), d.get("kind", VERIFICATION)))
        return cls(**d)


_NOUNS = {VERIFICATION: ("verified run", "verified runs"), FAILOVER: ("failover check", "failover checks")}


def kind_of(result: Mapping[str, Any]) -> str:
    """The kind of a stored result (a ``TestResult.to_dict()``)."""
    return str(result.get("kind", VERIFICATION))


def count_results(kinds: Iterable[str], *, plural: bool = False) -> str:
    """``1 verified run``, ``2 verified runs and 1 failover check``: results counted by kind
    (``0 verified runs`` for none); ``plural`` for "none of the 1 verified runs"."""
    counts = Counter(kinds)
    parts = [f"{counts[k]} {_NOUNS[k][plural or counts[k] != 1]}" for k in KINDS if counts[k]]
    return " and ".join(parts) or f"0 {_NOUNS[VERIFICATION][1]}"


# -- what the document says about where it ran -----------------------------------------------


def get_machine_id() -> str:
    """``Linux-CPython-3.11-64bit``: figures are only comparable within one of these."""
    return "-".join((
        platform.system(),
        platform.python_implementation(),
        ".".join(platform.python_version_tuple()[:2]),
        platform.architecture()[0],
    ))


def get_machine_info() -> dict[str, Any]:
    return {
        "machine_id": get_machine_id(),
        "node": platform.node(),
        "system": platform.system(),
        "release": platform.release(),
        "machine": platform.machine(),
        "python_implementation": platform.python_implementation(),
        "python_version": platform.python_version(),
        "cpu_count": os.cpu_count(),
    }


def _git(args: list[str], cwd: Path) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, check=True, timeout=10
    ).stdout.strip()


def get_commit_info(path: Path | None = None) -> dict[str, Any]:
    """``{id, dirty, branch, time, project}`` of the git work tree at ``path``.

    Outside a repository (or without git) the id is ``unversioned``.  Untracked files do
    not make a tree dirty (as ``git describe --dirty``).
    """
    cwd = Path(path or Path.cwd())
    info: dict[str, Any] = {"id": "unversioned", "dirty": False, "branch": None, "time": None, "project": cwd.name}
    try:
        top = _git(["rev-parse", "--show-toplevel"], cwd)
        info["id"] = _git(["rev-parse", "HEAD"], cwd)
        info["dirty"] = bool(_git(["status", "--porcelain", "--untracked-files=no"], cwd))
        branch = _git(["rev-parse", "--abbrev-ref", "HEAD"], cwd)
        info["branch"] = "(detached head)" if branch == "HEAD" else branch
        info["time"] = _git(["show", "-s", "--format=%cI", "HEAD"], cwd)
        info["project"] = Path(top).name
    except (OSError, subprocess.SubprocessError):
        pass  # not a repository, no commit yet, or no git: the run is "unversioned"
    return info


def _library_versions() -> dict[str, str | None]:
    from importlib.metadata import PackageNotFoundError, version

    out: dict[str, str | None] = {}
    for name in ("pytest-kafka-mirror", *_LIBRARIES):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    return out


def build_run(
    results: Iterable[TestResult],
    *,
    settings: Mapping[str, Any] | None = None,
    metadata: Mapping[str, Any] | None = None,
    now: datetime | None = None,
    machine_info: Mapping[str, Any] | None = None,
    commit_info: Mapping[str, Any] | None = None,
    plugin: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The stored-run document of a session.  The keyword arguments exist for tests and
    tools that rebuild a document; a session passes only results, settings and metadata.
    ``settings``: the specs and defaults that shape the figures (``config.Settings.stored()``)."""
    when = (now or datetime.now(timezone.utc)).astimezone(timezone.utc)
    return {
        "version": STORED_RUN_VERSION,
        "datetime": when.isoformat(),
        "machine_info": dict(machine_info if machine_info is not None else get_machine_info()),
        "commit_info": dict(commit_info if commit_info is not None else get_commit_info()),
        "plugin": dict(plugin if plugin is not None else _library_versions()),
        "settings": dict(settings or {}),
        "metadata": dict(metadata or {}),
        "results": {r.key: r.to_dict() for r in results},
    }


def load_run(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read and check a stored-run document; StorageError says what is wrong with it."""
    p = Path(path)
    try:
        data = json.loads(p.read_text())
    except OSError as exc:
        raise StorageError(f"cannot read stored run {p}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise StorageError(f"{p} is not a stored run: not JSON ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("results"), dict):
        raise StorageError(f"{p} is not a stored run: no 'results' object (a report.json is not a stored run)")
    if data.get("version") != STORED_RUN_VERSION:
        raise StorageError(
            f"{p} has stored-run version {data.get('version')!r}; this pytest-kafka-mirror reads version "
            f"{STORED_RUN_VERSION}"
        )
    return data


def run_label(data: Mapping[str, Any], name: str) -> str:
    """``0001_base (2025-01-02 10:00:00 UTC, commit 0123456789ab, uncommitted changes)``."""
    parts = []
    stamp = data.get("datetime")
    if stamp:
        try:
            parts.append(datetime.fromisoformat(stamp).astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"))
        except ValueError:
            parts.append(str(stamp))
    commit = data.get("commit_info") or {}
    if commit.get("id"):
        parts.append(f"commit {str(commit['id'])[:12]}" + (", uncommitted changes" if commit.get("dirty") else ""))
    return f"{name} ({', '.join(parts)})" if parts else name


def autosave_name(commit_info: Mapping[str, Any], now: datetime | None = None) -> str:
    """``<commit>_<utcstamp>[_uncommitted-changes]`` (pytest-benchmark's tag)."""
    stamp = (now or datetime.now(timezone.utc)).astimezone(timezone.utc).strftime("%Y%m%d_%H%M%S")
    parts = [str(commit_info.get("id") or "unversioned"), stamp]
    if commit_info.get("dirty"):
        parts.append("uncommitted-changes")
    return "_".join(parts)


# -- the directory ------------------------------------------------------------------------------


def _locked(path: Path) -> FileLock:
    """An exclusive lock on ``path`` (created if missing), across processes and threads."""
    return FileLock(path)


class FileStorage:
    """Stored runs under ``root``/``machine_id``/."""

    def __init__(self, root: str | os.PathLike[str], machine_id: str | None = None) -> None:
        self.root = Path(root)
        self.machine_id = machine_id or get_machine_id()

    @property
    def machine_dir(self) -> Path:
        return self.root / self.machine_id

    def __str__(self) -> str:
        return str(self.machine_dir)

    def runs(self, machine: str | None = None) -> list[Path]:
        """Stored runs of one machine directory (default: this machine's), oldest first."""
        d = self.root / (machine or self.machine_id)
        if not d.is_dir():
            return []
        found = [(int(m["number"]), p) for p in d.iterdir() if (m := _RUN_FILE.match(p.name)) and p.is_file()]
        return [p for _, p in sorted(found)]

    def other_machines(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir() if p.is_dir() and p.name != self.machine_id and self.runs(p.name))

    def save(self, data: Mapping[str, Any], name: str) -> Path:
        """Write ``data`` as the next ``NNNN_name.json``.

        Sessions that save at the same moment (parallel CI jobs sharing the storage) get
        distinct numbers: the number is chosen and its file created under a lock on the
        machine directory (``.lock``).
        """
        self.machine_dir.mkdir(parents=True, exist_ok=True)
        text = json.dumps(data, indent=1, sort_keys=False)
        with _locked(self.machine_dir / ".lock"):
            existing = self.runs()
            number = int(_RUN_FILE.match(existing[-1].name)["number"]) + 1 if existing else 1  # type: ignore[index]
            path = self.machine_dir / f"{number:04d}_{name}.json"
            with path.open("x") as fh:  # never overwrite a run, whatever happens to the lock
                fh.write(text)
        return path

    def resolve(self, ref: str) -> Path:
        """The stored run ``ref`` names: ``latest``, ``NNNN``, ``MACHINE/NNNN``, part of a name, or a path.

        StorageError lists what exists, so the message alone tells how to fix the reference.
        """
        ref = ref.strip()
        if ref == LATEST:
            runs = self.runs()
            if runs:
                return runs[-1]
            hint = "save one first with --kafka-mirror-save NAME or --kafka-mirror-autosave"
            others = self.other_machines()
            if others:
                hint += f"; runs of other machines exist ({', '.join(others)}): name one as MACHINE/NNNN"
            raise StorageError(f"no stored run in {self.machine_dir} to compare with; {hint}")
        path = Path(ref)
        if path.suffix == ".json" and path.is_file():
            return path
        machine, _, what = ref.rpartition("/")
        candidates = self.runs(machine or None)
        if what.isdigit():
            hits = [p for p in candidates if int(_RUN_FILE.match(p.name)["number"]) == int(what)]  # type: ignore[index]
        else:
            hits = [p for p in candidates if what in p.name]
            if not hits and not machine:
                hits = [p for m in self.other_machines() for p in self.runs(m) if what in p.name]
        if len(hits) == 1:
            return hits[0]
        where = self.root / machine if machine else self.machine_dir
        if not hits:
            listing = ", ".join(p.name for p in candidates[-10:]) or "none"
            raise StorageError(f"no stored run matches {ref!r} in {where}; stored runs (newest last): {listing}")
        raise StorageError(
            f"{ref!r} matches {len(hits)} stored runs: {', '.join(str(p.relative_to(self.root)) for p in hits[:10])}; "
            "give the run number or more of the name"
        )
