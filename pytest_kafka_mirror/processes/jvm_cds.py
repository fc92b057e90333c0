"""Class-data sharing archives for the Kafka JVMs the plugin runs as the test's infrastructure.

A JVM spends most of its start loading and verifying classes, a Kafka broker about 5 s of
CPU.  A dynamic class-data sharing (CDS) archive (JDK 13+: ``-XX:ArchiveClassesAtExit``
writes the classes a JVM loaded when it exits, ``-XX:SharedArchiveFile`` maps them into the
next one) cuts that, measured on the project's 2-core machine: a Kafka 4.3.1 broker's
start with its log-dir format 4.4 -> 1.95 s wall, 4.8 -> 2.9 s CPU.

One archive per JVM kind (``kafka-broker``, ``kafka-storage-tool``), Java installation and
class path (jar names and sizes), kept in ``$XDG_CACHE_HOME/pytest-kafka-mirror/jvm-cds``.
Nobody has to prepare it: the first JVM of a kind on a machine (or after an upgrade of Java
or of the Kafka release) claims it and writes it at its exit, once (a broker: ~3 s more to
stop, 50 MB); every later one starts from it.  The claim is a file holding the claimant's
pid: one JVM at a time writes; a claim whose process died, or older than five minutes (its
JVM may live as long as an xdist worker), is taken over.  A JVM killed before its exit
writes nothing, and the next one claims again.  The JVM checks an archive itself (its
version, the class path) and starts without one it cannot use, so a stale archive costs
only the time it would have saved; CDS never changes what a program does.  Its log lines
are off (``-Xlog:cds*=off``: a JVM's stdout can be the user's terminal).

Spark's driver (a local session's, the shared Spark Connect server's) starts from an archive
too, but nothing writes it on the way: its archive is 175 MB, and writing it took 18 s at the
end of a session on an idle machine and over a minute under load (one Ctrl-C test waited
110 s for it).  ``kafka-mirror spark prepare`` writes it once (:func:`write_anew`, ~30 s),
and every later driver uses it when it is there (:func:`use_only`): on the project's 2-core
machine a session's start 4.4 -> 2.6-2.9 s and its first verification 5.5 -> 4.2 s.  Not
for MirrorMaker 2 and the legacy MirrorMaker:
the replicators under test start as their users start them (their cold start is what the
restart scenarios measure).  ``KAFKA_MIRROR_JVM_CDS=0`` turns archives off;
``KAFKA_MIRROR_JVM_CDS=DIR`` keeps them in ``DIR`` (the plugin's own tests point their
pytest runs, which get a HOME of their own, at the machine's).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ENV", "ArchiveUse", "archive_dir", "archive_for", "use_only", "write_anew"]

#: ``0`` turns the archives off (no option, no claim, nothing written); a path: where they are kept
ENV = "KAFKA_MIRROR_JVM_CDS"
#: the JVM's CDS log lines off: a missing or mismatched archive says so on stdout otherwise
QUIET = "-Xlog:cds*=off"


def archive_dir() -> Path:
    """``$KAFKA_MIRROR_JVM_CDS`` when it is a path, else
    ``$XDG_CACHE_HOME/pytest-kafka-mirror/jvm-cds`` (``~/.cache/...``)."""
    given = os.environ.get(ENV, "").strip()
    if given and given not in ("0", "1"):
        return Path(given).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "pytest-kafka-mirror" / "jvm-cds"


@dataclass(frozen=True)
class ArchiveUse:
    """The options of one JVM launch, and what to do once it exited (:meth:`settle`)."""

    options: tuple[str, ...] = ()
    #: where this JVM writes the archive at its exit, the archive's name, the claim
    dump: Path | None = None
    final: Path | None = None
    claim: Path | None = None

    @property
    def writes(self) -> bool:
        """This JVM writes the archive at its exit (its stop takes that much longer)."""
        return self.dump is not None

    def settle(self, returncode: int | None) -> None:
        """After the JVM exited with ``returncode``: publish the archive it wrote at its exit
        (renamed into place whole), or give the claim up.  A JVM ended by a signal it could
        not handle (SIGKILL: a negative code) may have been cut in the middle of writing, so
        what it left is removed, not published.  Idempotent."""
        if self.dump is None or self.final is None or self.claim is None:
            return
        try:
            whole = returncode is not None and returncode >= 0
            if whole and self.dump.is_file() and self.dump.stat().st_size > 0:
                os.replace(self.dump, self.final)
        except OSError:
            pass
        with contextlib.suppress(OSError):
            self.dump.unlink()
        with contextlib.suppress(OSError, ValueError):
            if int(self.claim.read_text().strip() or "0") == os.getpid():  # not taken over meanwhile
                self.claim.unlink()


def _identity(java: str, classpath: Iterable[str | os.PathLike[str]]) -> str:
    """A digest of the Java installation and the jars: an archive is only for those."""
    parts: list[str] = []
    try:
        real = os.path.realpath(java)
        st = os.stat(real)
        parts.append(f"{real}:{st.st_size}:{int(st.st_mtime)}")
    except OSError:
        parts.append(java)
    for entry in classpath:
        path = Path(entry)
        jars = sorted(path.glob("*.jar")) if path.is_dir() else [path]
        for jar in jars:
            try:
                parts.append(f"{jar.name}:{jar.stat().st_size}")
            except OSError:
                parts.append(jar.name)
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:20]


#: a claim older than this is given up by waiting JVMs: its JVM may run for a whole session
#: (an xdist worker's, which writes only when the worker ends), so another one writes too
CLAIM_S = 300.0


def _claim(claim: Path) -> bool:
    """Take the claim (a file holding this pid): free, or left by a process that is gone,
    or older than :data:`CLAIM_S`."""
    import psutil

    for _ in range(2):
        try:
            fd = os.open(claim, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            try:
                owner = int(claim.read_text().strip() or "0")
                age = time.time() - claim.stat().st_mtime
            except (OSError, ValueError):
                owner, age = 0, 0.0
            if owner and psutil.pid_exists(owner) and age < CLAIM_S:  # this process too: one JVM at a time
                return False
            with contextlib.suppress(OSError):
                claim.unlink()  # its owner died, or has held it too long: take it over
            continue
        with os.fdopen(fd, "w") as out:
            out.write(str(os.getpid()))
        return True
    return False


def archive_for(kind: str, java: str, classpath: Iterable[str | os.PathLike[str]]) -> ArchiveUse:
    """The CDS options of a JVM of ``kind`` run by ``java`` with ``classpath`` (directories
    of jars, or jars): start from the archive when there is one, else write it at exit when
    this launch takes the claim, else nothing.  Never raises: no archive is only slower."""
    if os.environ.get(ENV, "1").strip() == "0":
        return ArchiveUse()
    try:
        root = archive_dir()
        name = f"{kind}-{_identity(java, classpath)}"
        final = root / f"{name}.jsa"
        if final.is_file():
            return ArchiveUse((f"-XX:SharedArchiveFile={final}", QUIET))
        root.mkdir(parents=True, exist_ok=True)
        claim = root / f"{name}.claim"
        if not _claim(claim):
            return ArchiveUse()
        dump = root / f"{name}.{os.getpid()}.{time.time_ns()}.part"
        return ArchiveUse((f"-XX:ArchiveClassesAtExit={dump}", QUIET), dump, final, claim)
    except OSError:
        return ArchiveUse()


def _named(kind: str, java: str, classpath: Iterable[str | os.PathLike[str]]) -> Path:
    return archive_dir() / f"{kind}-{_identity(java, classpath)}.jsa"


def use_only(kind: str, java: str, classpath: Iterable[str | os.PathLike[str]]) -> tuple[str, ...]:
    """The options that start a JVM of ``kind`` from its archive when one was written (by
    :func:`write_anew`), else none: such a JVM never writes one itself."""
    if os.environ.get(ENV, "1").strip() == "0":
        return ()
    try:
        final = _named(kind, java, classpath)
        return (f"-XX:SharedArchiveFile={final}", QUIET) if final.is_file() else ()
    except OSError:
        return ()


def write_anew(kind: str, java: str, classpath: Iterable[str | os.PathLike[str]]) -> ArchiveUse:
    """The options of a JVM that writes the archive of ``kind`` at its exit, replacing the one
    there (:meth:`ArchiveUse.settle` publishes it); no options when another process holds the
    claim or archives are off (``KAFKA_MIRROR_JVM_CDS=0``)."""
    if os.environ.get(ENV, "1").strip() == "0":
        return ArchiveUse()
    final = _named(kind, java, classpath)
    final.parent.mkdir(parents=True, exist_ok=True)
    claim = final.with_suffix(".claim")
    if not _claim(claim):
        return ArchiveUse()
    dump = final.with_name(f"{final.stem}.{os.getpid()}.{time.time_ns()}.part")
    return ArchiveUse((f"-XX:ArchiveClassesAtExit={dump}", QUIET), dump, final, claim)
