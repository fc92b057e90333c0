"""The run directory on any file system: a working copy here, the run itself at a URI.

``--kafka-mirror-run-store URI`` keeps every run directory under ``URI`` (``s3a://`` /
``s3://``, ``gs://``, ``hdfs://``, ``file://`` or a plain shared path: whatever
``pyarrow.fs.FileSystem.from_uri`` opens, and Spark reads through Hadoop's file systems).
Each stage still reads and writes plain files in a local directory, so the run-directory
protocol (rundir.py) is unchanged; a :class:`DirMirror` per participant keeps its local
directory and the URI in step:

* the driver mirrors its run directory (the working copy under pytest's basetemp): it
  pushes what it writes (the producers' specs, start and stop files, readiness, the
  report) and pulls what the tasks write (manifests, progress and status files, logs),
  every :data:`INTERVAL` seconds and once more, completely, when the capture ended;
* a task of the spark engine (processes/spark_tasks.py) pulls the run directory into a
  fresh directory of its executor before it starts its child, pushes what the child
  writes, and pushes everything once more before it reports its end;
* capture segments (``*.parquet``) are pushed, never pulled: the verification reads them
  where they are (``s3a://…/capture/part-*.parquet``), not through this host.

A file has one writer (the protocol's rule): a file this side wrote is pushed when its
size or modification time changed, a file another side wrote is pulled when the store's
listing says it changed (or, for a small file modified within the last
:data:`RECENT` seconds, when its bytes differ: object stores date files to the second).
Temporary files (``*.tmp``, dot-files) are never copied.  Imports nothing above
:mod:`.processes`.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["DirMirror", "StoreError", "arrow_uri", "join_uri", "list_files", "open_store", "spark_uri"]

#: seconds between two rounds of a mirror
INTERVAL = 0.25
#: a pulled file modified this recently (seconds, by the store's clock) is compared byte for byte
RECENT = 2.0
#: files larger than this (bytes) are re-pushed at most every :data:`SLOW_PUSH` seconds (logs)
LARGE = 256 * 1024
SLOW_PUSH = 2.0
#: pyarrow's file systems where a write is one atomic PUT (no directories, no rename needed)
_OBJECT_STORES = ("s3", "gcs")
#: Hadoop's names of S3 that pyarrow calls ``s3``
_S3_ALIASES = ("s3a://", "s3n://")


class StoreError(RuntimeError):
    """The run store cannot be opened, read or written (the URI, the error)."""


def arrow_uri(uri: str) -> str:
    """``uri`` as pyarrow names it (``s3a://b/p`` -> ``s3://b/p``)."""
    for alias in _S3_ALIASES:
        if uri.startswith(alias):
            return "s3://" + uri[len(alias):]
    return uri


def spark_uri(uri: str) -> str:
    """``uri`` as Spark (Hadoop) reads it: ``s3://`` is ``s3a://`` there; a plain path as is."""
    return "s3a://" + uri[len("s3://"):] if uri.startswith("s3://") else uri


def join_uri(uri: str, *parts: str) -> str:
    return "/".join([uri.rstrip("/"), *(p.strip("/") for p in parts if p)])


def open_store(uri: str) -> tuple[Any, str]:
    """(pyarrow file system, path in it) of ``uri``; a plain path is the local file system."""
    import pyarrow.fs as pafs

    try:
        if "://" not in uri:
            return pafs.LocalFileSystem(), str(Path(uri).absolute())
        return pafs.FileSystem.from_uri(arrow_uri(uri))
    except Exception as exc:  # noqa: BLE001 - pyarrow raises ArrowInvalid, OSError, ...
        raise StoreError(f"cannot open the run store {uri}: {exc}") from None


def list_files(uri: str, suffix: str = "") -> list[str]:
    """URIs (in ``uri``'s own scheme) of the files under ``uri`` whose names end with ``suffix``."""
    fs, base = open_store(uri)
    return [join_uri(uri, rel) for rel, _ in _remote_files(fs, base) if rel.endswith(suffix)]


def _remote_files(fs: Any, base: str) -> Iterator[tuple[str, Any]]:
    """(path relative to ``base``, FileInfo) of every file under ``base``."""
    import pyarrow.fs as pafs

    selector = pafs.FileSelector(base, recursive=True, allow_not_found=True)
    for info in fs.get_file_info(selector):
        if info.type == pafs.FileType.File:
            yield info.path[len(base):].lstrip("/"), info


def _copied(rel: str) -> bool:
    name = rel.rsplit("/", 1)[-1]
    return not (name.startswith(".") or name.endswith(".tmp"))


class DirMirror:
    """Keeps local directory ``local`` and ``uri`` in step (see the module docstring).

    ``pull_segments``: pull ``*.parquet`` files too (a task never needs them; the driver reads
    them at the URI).  ``sync()`` runs one round; ``start()`` runs rounds in a thread until
    ``close()``, which runs a last round and raises the first error a round met."""

    def __init__(self, local: str | os.PathLike[str], uri: str, *, interval: float = INTERVAL,
                 pull_segments: bool = False) -> None:
        self.local = Path(local)
        self.uri = uri
        self.interval = interval
        self.pull_segments = pull_segments
        self.fs, self.base = open_store(uri)
        #: rel -> (size, mtime_ns) of the local file when it was last pushed or pulled
        self._local_sig: dict[str, tuple[int, int]] = {}
        #: rel -> (size, mtime_ns) of the store's copy when it was last pulled (files another side writes)
        self._pulled: dict[str, tuple[int, int]] = {}
        self._pushed_at: dict[str, float] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None
        self.rounds = 0

    # -- one round ---------------------------------------------------------------------------
    def sync(self, *, final: bool = False) -> None:
        with self._lock:
            try:
                self._push(final)
                self._pull()
            except Exception as exc:
                raise StoreError(f"the run directory {self.local} could not be kept in step with {self.uri}: "
                                 f"{type(exc).__name__}: {exc}") from exc
            self.rounds += 1

    def _local_files(self) -> Iterator[tuple[str, Path]]:
        for root, _dirs, files in os.walk(self.local):
            for name in files:
                path = Path(root) / name
                rel = path.relative_to(self.local).as_posix()
                if _copied(rel):
                    yield rel, path

    def _push(self, final: bool) -> None:
        now = time.monotonic()
        seen = set()
        for rel, path in self._local_files():
            try:
                st = path.stat()
            except FileNotFoundError:
                continue
            seen.add(rel)
            sig = (st.st_size, st.st_mtime_ns)
            if self._local_sig.get(rel) == sig:
                continue
            if st.st_size > LARGE and not final and now - self._pushed_at.get(rel, 0.0) < SLOW_PUSH:
                continue
            try:
                data = path.read_bytes()
            except FileNotFoundError:
                continue
            self._put(rel, data)
            self._local_sig[rel] = sig
            self._pulled.pop(rel, None)
            self._pushed_at[rel] = now
        for rel in [r for r in self._local_sig if r not in seen and r not in self._pulled]:
            self.fs.delete_file(f"{self.base}/{rel}")  # removed by its writer: removed there too
            del self._local_sig[rel]

    def _put(self, rel: str, data: bytes) -> None:
        target = f"{self.base}/{rel}"
        parent = target.rsplit("/", 1)[0]
        if self.fs.type_name not in _OBJECT_STORES:
            self.fs.create_dir(parent, recursive=True)
            tmp = f"{parent}/.{rel.rsplit('/', 1)[-1]}.tmp"
            with self.fs.open_output_stream(tmp) as out:
                out.write(data)
            self.fs.move(tmp, target)  # a shared path, HDFS: atomic, as the local protocol is
        else:
            with self.fs.open_output_stream(target) as out:  # an object store: a PUT is atomic
                out.write(data)

    def _pull(self) -> None:
        recent = time.time() - RECENT
        for rel, info in _remote_files(self.fs, self.base):
            if not _copied(rel) or (rel.endswith(".parquet") and not self.pull_segments):
                continue
            if rel in self._local_sig and rel not in self._pulled:
                continue  # this side writes it
            sig = (int(info.size or 0), int(info.mtime_ns or 0))
            changed = self._pulled.get(rel) != sig
            if not changed and (sig[0] > LARGE or sig[1] / 1e9 < recent):
                continue
            path = self.local / rel
            if rel in self._pulled and path.exists() and self._local_sig.get(rel) != _sig(path):
                continue  # changed here since it was pulled: pushed next round
            with self.fs.open_input_stream(info.path) as src:
                data = src.read()
            if path.exists() and not changed and path.read_bytes() == data:
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.pull.tmp")
            tmp.write_bytes(data)
            os.replace(tmp, path)
            self._pulled[rel] = sig
            self._local_sig[rel] = _sig(path)

    # -- in the background -------------------------------------------------------------------
    def start(self) -> DirMirror:
        self.local.mkdir(parents=True, exist_ok=True)
        self._thread = threading.Thread(target=self._loop, name=f"kafka-mirror-store-{self.local.name}", daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.sync()
            except StoreError as exc:
                self.error = self.error or exc

    def flush(self) -> None:
        """A complete round now (every changed file, logs included), raising what it met."""
        self.sync(final=True)
        if self.error is not None:
            raise self.error

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)
            self._thread = None
        self.flush()


def _sig(path: Path) -> tuple[int, int]:
    try:
        st = path.stat()
    except FileNotFoundError:
        return (-1, -1)
    return (st.st_size, st.st_mtime_ns)
