"""Apache Kafka releases from Maven Central, cached per version, run with ``java -cp``.

Apache Kafka publishes every release's jars on Maven Central: the broker
(``org.apache.kafka:kafka_2.13``), the Connect runtime and MirrorMaker 2
(``connect-runtime``, ``connect-mirror``, ``connect-mirror-client``).  :func:`install`
resolves them with the machine's own Maven client: it writes a POM naming those artifacts
and runs ``mvn dependency:copy-dependencies`` into ``CACHE/VERSION/libs`` (then, when the
release brings no SLF4J binding of its own, ``dependency:copy`` of the one that fits its
logging backend: ``log4j-slf4j-impl`` for the log4j2 of Kafka 4, ``slf4j-reload4j`` for the
reload4j of Kafka 3).  No hand-written downloader: proxies, mirrors and credentials are
Maven's (``~/.m2/settings.xml``), and so is its local repository, which every version
shares.  A finished install is a directory with ``libs/`` and ``kafka-mirror.json``; it is
used offline from then on.  Installs are serialised by a lock file in the cache, so two
xdist workers asking at once install once; a half-done install is never seen (it is
renamed into place when complete).

A :class:`KafkaRelease` is any directory with Kafka's ``libs/``: a cache entry, or an
unpacked distribution (``kafka-home:PATH``).  :meth:`KafkaRelease.java_argv` builds the
``java`` command line the distribution's ``bin/kafka-run-class.sh`` would, without the
scripts: heap (``KAFKA_HEAP_OPTS`` when set), JVM settings (:data:`PERFORMANCE_OPTS`, or
``KAFKA_JVM_PERFORMANCE_OPTS``), a log configuration the plugin writes (console only: the
process's output is its log), ``KAFKA_OPTS``.

Measured on this project's 2-core machine (Maven 3.8.7, a warm ``~/.m2``): 4.3.1 resolves
in ~6 s into 92 jars, 54 MB.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from filelock import FileLock

__all__ = [
    "CACHE_ENV",
    "KafkaInstallError",
    "KafkaRelease",
    "cache_dir",
    "cached_releases",
    "format_version",
    "install",
    "parse_version",
    "release",
    "release_at",
]

CACHE_ENV = "KAFKA_MIRROR_KAFKA_CACHE"
MANIFEST = "kafka-mirror.json"
SCALA = "2.13"
GROUP = "org.apache.kafka"
#: the broker, and what MirrorMaker 2 needs on top of it
BROKER_ARTIFACTS = (f"kafka_{SCALA}",)
MM2_ARTIFACTS = ("connect-runtime", "connect-mirror", "connect-mirror-client")
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"
#: the legacy MirrorMaker (``kafka.tools.MirrorMaker``) was removed in Kafka 4.0
MM1_UNTIL = (4, 0)
#: KRaft without ZooKeeper, production-ready from 3.3: the oldest broker ``kafka:`` runs
KRAFT_SINCE = (3, 3)
_VERSION = re.compile(r"^(\d+)\.(\d+)\.(\d+)$")
_JAR = re.compile(r"^(?P<name>.+?)-(?P<version>\d+(?:\.\d+)*(?:[.-][A-Za-z0-9]+)*)\.jar$")
_CORE_JAR = re.compile(r"^kafka(?:-clients|_[0-9.]+)-(\d+)\.(\d+)\.(\d+)(?:[.-].*)?\.jar$")
_SLF4J_BINDINGS = ("slf4j-reload4j", "slf4j-log4j12", "log4j-slf4j-impl", "log4j-slf4j2-impl", "logback-classic")
Version = tuple[int, int, int]
#: JVM settings of every broker and replicator the plugin starts, in place of
#: kafka-run-class.sh's KAFKA_JVM_PERFORMANCE_OPTS (G1, C2): the serial collector for heaps
#: of a few hundred MB, and only the C1 compiler.  A scenario session runs two to six Kafka
#: and Connect JVMs, each starting afresh, beside a Spark driver on two cores; C2 compiling
#: them took the cores the tests measure.  The gate's selection (4 scenarios on Kafka 4.3.1 +
#: MM2 4.3.1, -n 2) with one core kept busy by a hog, two runs each: 198-201 s with the
#: scripts' settings (steady-state headers p50 364-954 ms), 129-143 s with these (52-61 ms);
#: without the hog 139 s against 133 s.
#: Throughput benchmarks of a replicator want the scripts' settings back: the
#: KAFKA_JVM_PERFORMANCE_OPTS environment variable replaces these, as for the scripts.
PERFORMANCE_OPTS = ("-server", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true")


class KafkaInstallError(RuntimeError):
    """A Kafka release could not be resolved, installed or found; the message is one line."""


def parse_version(text: str) -> Version:
    """``"4.3.1"`` -> ``(4, 3, 1)``; ValueError for anything else."""
    m = _VERSION.match(text.strip())
    if not m:
        raise ValueError(f"{text!r} is not an Apache Kafka release version (MAJOR.MINOR.PATCH, e.g. 4.3.1)")
    return int(m.group(1)), int(m.group(2)), int(m.group(3))


def format_version(version: Version | None) -> str:
    return ".".join(map(str, version)) if version else "unknown version"


def cache_dir(explicit: str | os.PathLike[str] | None = None) -> Path:
    """Where releases are cached: ``explicit``, else ``$KAFKA_MIRROR_KAFKA_CACHE``, else
    ``$XDG_CACHE_HOME/pytest-kafka-mirror/kafka`` (``~/.cache/...``)."""
    text = os.fspath(explicit) if explicit else os.environ.get(CACHE_ENV, "")
    if text:
        return Path(text).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "pytest-kafka-mirror" / "kafka"


# -- an installed release ------------------------------------------------------------------


@dataclass(frozen=True)
class KafkaRelease:
    """Apache Kafka's jars in ``home/libs`` (a cache entry or an unpacked distribution)."""

    home: Path
    version: Version | None
    #: from the cache's manifest: component -> True, or why it is missing
    components: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def libs(self) -> Path:
        return self.home / "libs"

    @property
    def version_text(self) -> str:
        return format_version(self.version)

    def _names(self) -> list[str]:
        try:
            return sorted(p.name for p in self.libs.iterdir() if p.suffix == ".jar")
        except OSError:
            return []

    def jar_version(self, artifact: str) -> str | None:
        """The version of ``artifact`` in libs (``log4j-core`` -> ``2.25.4``), or None."""
        for name in self._names():
            m = _JAR.match(name)
            if m and m.group("name") == artifact:
                return m.group("version")
        return None

    def has(self, component: str) -> bool:
        """``broker``, ``mm2`` (Connect and the mirror connectors) or ``mm1`` (the legacy MirrorMaker)."""
        names = self._names()
        if component == "broker":
            return any(n.startswith("kafka_") and _CORE_JAR.match(n) for n in names)
        if component == "mm2":
            return any(n.startswith("connect-mirror-") and not n.startswith("connect-mirror-client") for n in names) \
                and any(n.startswith("connect-runtime-") for n in names)
        if component == "mm1":
            return self.has("broker") and self.version is not None and self.version < MM1_UNTIL
        raise ValueError(f"unknown component {component!r}; known: broker, mm2, mm1")

    def why_missing(self, component: str) -> str:
        """Why ``component`` is not in this release (for error messages)."""
        recorded = self.components.get(component)
        if isinstance(recorded, str) and recorded:
            return recorded
        if component == "mm1" and self.version is not None and self.version >= MM1_UNTIL:
            return f"Kafka {self.version_text} has no legacy MirrorMaker (kafka.tools.MirrorMaker was removed in 4.0)"
        return f"{self.libs} has no {'MirrorMaker 2 (connect-mirror, connect-runtime)' if component == 'mm2' else component} jars"

    @property
    def log4j2(self) -> bool:
        """Kafka 4's logging backend (log4j2) rather than Kafka 3's (reload4j / log4j 1)."""
        return self.jar_version("log4j-core") is not None

    def write_log_config(self, directory: Path, quiet: Sequence[str] = ()) -> Path:
        """A console-only log configuration for this release's backend, in ``directory``:
        INFO, and WARN for the loggers in ``quiet``."""
        directory.mkdir(parents=True, exist_ok=True)
        if self.log4j2:
            path = directory / "log4j2.properties"
            lines = [
                "# rendered by pytest-kafka-mirror: the process's output is its log",
                "appender.out.type = Console", "appender.out.name = OUT",
                "appender.out.layout.type = PatternLayout",
                "appender.out.layout.pattern = [%d] %p %m (%c)%n",
                "rootLogger.level = INFO", "rootLogger.appenderRef.out.ref = OUT",
            ]
            for i, name in enumerate(quiet):
                lines += [f"logger.q{i}.name = {name}", f"logger.q{i}.level = WARN"]
        else:
            path = directory / "log4j.properties"
            lines = [
                "# rendered by pytest-kafka-mirror: the process's output is its log",
                "log4j.rootLogger=INFO, out",
                "log4j.appender.out=org.apache.log4j.ConsoleAppender",
                "log4j.appender.out.layout=org.apache.log4j.PatternLayout",
                "log4j.appender.out.layout.ConversionPattern=[%d] %p %m (%c)%n",
            ]
            lines += [f"log4j.logger.{name}=WARN" for name in quiet]
        path.write_text("\n".join(lines) + "\n")
        return path

    def java_argv(
        self,
        main_class: str,
        args: Sequence[str],
        *,
        heap: str,
        log_config: Path,
        jvm: Sequence[str] = (),
    ) -> list[str]:
        """``java HEAP GC LOG -cp libs/* KAFKA_OPTS MAIN ARGS``, as ``kafka-run-class.sh`` runs it.

        ``KAFKA_HEAP_OPTS`` and ``KAFKA_OPTS`` from the environment apply as they do for
        the scripts (the heap setting replaces ``heap``).
        """
        log_opt = (f"-Dlog4j2.configurationFile={log_config}" if self.log4j2
                   else f"-Dlog4j.configuration=file:{log_config}")
        return [
            java_executable(),
            *(os.environ.get("KAFKA_HEAP_OPTS") or heap).split(),
            *(os.environ.get("KAFKA_JVM_PERFORMANCE_OPTS") or " ".join(PERFORMANCE_OPTS)).split(),
            *jvm,
            log_opt,
            "-cp", f"{self.libs}/*",
            *os.environ.get("KAFKA_OPTS", "").split(),
            main_class,
            *args,
        ]

    def describe(self) -> str:
        parts = [c for c in ("broker", "mm2", "mm1") if self.has(c)]
        return f"Apache Kafka {self.version_text} at {self.home} ({', '.join(parts) or 'no components'})"


def java_executable() -> str:
    """``$JAVA_HOME/bin/java`` when JAVA_HOME is set, else ``java`` on PATH."""
    home = os.environ.get("JAVA_HOME")
    if home and os.access(os.path.join(home, "bin", "java"), os.X_OK):
        return os.path.join(home, "bin", "java")
    return shutil.which("java") or "java"


def _version_of(libs: Path) -> Version | None:
    try:
        names = sorted(p.name for p in libs.iterdir())
    except OSError:
        return None
    for name in names:
        m = _CORE_JAR.match(name)
        if m:
            return int(m.group(1)), int(m.group(2)), int(m.group(3))
    return None


def release_at(path: str | os.PathLike[str], *, need: str = "broker") -> KafkaRelease:
    """The release in ``path`` (an unpacked distribution or a cache entry), checked to
    have ``need``; ValueError naming what is missing."""
    home = Path(path).expanduser()
    # the absolute path tried; a relative one also as given, read from the current directory
    shown = repr(str(home.absolute())) + ("" if home.is_absolute() else
                                          f" ({os.fspath(path)!r} read from the current directory)")
    if not home.is_dir():
        raise ValueError(f"{shown} is not a directory (expected an unpacked Apache Kafka distribution)")
    if not (home / "libs").is_dir():
        raise ValueError(f"{shown} has no libs/: not an unpacked Apache Kafka distribution")
    home = home.resolve()
    rel = KafkaRelease(home, _version_of(home / "libs"), _manifest(home).get("components", {}))
    if not rel.has(need):
        raise ValueError(f"{os.fspath(path)!r}: {rel.why_missing(need)}")
    return rel


def _manifest(home: Path) -> dict[str, Any]:
    try:
        data = json.loads((home / MANIFEST).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def cached_releases(cache: Path) -> list[tuple[KafkaRelease, dict[str, Any]]]:
    """Every complete install in ``cache``, oldest version first, with its manifest."""
    out = []
    try:
        entries = list(cache.iterdir())
    except OSError:
        return []
    for entry in entries:
        if not _VERSION.match(entry.name):
            continue
        manifest = _manifest(entry)
        if manifest.get("version") == entry.name:
            out.append((KafkaRelease(entry, parse_version(entry.name), manifest.get("components", {})), manifest))
    return sorted(out, key=lambda r: r[0].version or (0, 0, 0))


# -- installing ------------------------------------------------------------------------------


def _install_lock(cache: Path) -> FileLock:
    """One process at a time installs into ``cache`` (xdist workers, parallel sessions)."""
    cache.mkdir(parents=True, exist_ok=True)
    return FileLock(cache / ".install.lock")


def release(
    version: str | Version,
    cache: Path,
    *,
    need: str = "broker",
    log: Callable[[str], None] | None = None,
) -> KafkaRelease:
    """The cached release ``version``, installed first when it is not cached; checked to
    have ``need`` (``broker``, ``mm2`` or ``mm1``).  KafkaInstallError, one line, otherwise."""
    text = version if isinstance(version, str) else format_version(version)
    parse_version(text)
    home = cache / text
    if _manifest(home).get("version") != text:
        with _install_lock(cache):
            if _manifest(home).get("version") != text:  # not installed meanwhile by another process
                install(text, cache, log=log, locked=True)
    rel = KafkaRelease(home, parse_version(text), _manifest(home).get("components", {}))
    if not rel.has(need):
        raise KafkaInstallError(f"Apache Kafka {text} (cached in {home}): {rel.why_missing(need)}")
    return rel


def _pom(version: str, artifacts: Sequence[str], project: str = "kafka-mirror-release") -> str:
    deps = "\n".join(
        f"    <dependency><groupId>{GROUP}</groupId><artifactId>{a}</artifactId><version>{version}</version></dependency>"
        for a in artifacts
    )
    return (
        '<project xmlns="http://maven.apache.org/POM/4.0.0">\n'
        "  <!-- generated by pytest-kafka-mirror: the jars of one Apache Kafka release -->\n"
        "  <modelVersion>4.0.0</modelVersion>\n"
        f"  <groupId>io.kafka-mirror</groupId><artifactId>{project}</artifactId><version>{version}</version>\n"
        "  <packaging>pom</packaging>\n"
        f"  <dependencies>\n{deps}\n  </dependencies>\n"
        "</project>\n"
    )


def _mvn() -> str:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise KafkaInstallError(
            "Maven (mvn) is not installed, and it resolves Apache Kafka releases from Maven Central: install it "
            "(apt-get install maven), or give an unpacked Apache Kafka distribution instead: kafka-home:PATH "
            "(and mm2:PATH)"
        )
    return mvn


def _run_mvn(argv: list[str], cwd: Path) -> tuple[int, str]:
    try:
        out = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL,
                             check=False)
    except subprocess.TimeoutExpired:
        return 1, "[ERROR] mvn did not finish within 900 s"
    except OSError as exc:
        raise KafkaInstallError(f"cannot run Maven ({argv[0]}): {exc}") from None
    return out.returncode, out.stdout + out.stderr


_UNREACHABLE = ("Could not transfer", "Unknown host", "UnknownHostException", "Connection refused", "Connect to ",
                "timed out", "Network is unreachable", "No route to host", "Temporary failure in name resolution")


def _mvn_error(output: str) -> str:
    """The first useful ``[ERROR]`` line of Maven's output, without its boilerplate."""
    for line in output.splitlines():
        line = re.sub(r"\x1b\[[0-9;]*m", "", line)
        text = line[len("[ERROR]"):].strip() if line.startswith("[ERROR]") else ""
        if text and not text.startswith(("[Help", "To see the full", "Re-run Maven", "For more information")):
            text = re.sub(r"^Failed to execute goal .*?on project [^:]+: ", "", text)
            text = re.sub(r"^Could not resolve dependencies for project [^:]+:[^:]+:[^:]+:[^:]+: ", "", text)
            return text.split(" -> [Help")[0][:400]
    return (output.strip().splitlines() or ["no output"])[-1][:400]


def _resolve(version: str, artifacts: Sequence[str], staging: Path) -> tuple[int, str]:
    staging.mkdir(parents=True, exist_ok=True)
    (staging / "pom.xml").write_text(_pom(version, artifacts))
    return _run_mvn([_mvn(), "-B", "-ntp", "-U", "-f", str(staging / "pom.xml"),
                     f"{DEPENDENCY_PLUGIN}:copy-dependencies", f"-DoutputDirectory={staging / 'libs'}",
                     "-DincludeScope=runtime"], staging)


def _failure(version: str, output: str) -> KafkaInstallError:
    first = _mvn_error(output)
    if any(marker in output for marker in _UNREACHABLE):
        return KafkaInstallError(
            f"Maven Central is unreachable from here, so Apache Kafka {version} cannot be installed ({first}); "
            f"give an unpacked Apache Kafka distribution instead: kafka-home:PATH (and mm2:PATH)"
        )
    if "could not be resolved" in first or "was not found" in first or "Could not find artifact" in first:
        return KafkaInstallError(
            f"Apache Kafka {version} is not on Maven Central ({first}); give a released version, or an unpacked "
            f"Apache Kafka distribution: kafka-home:PATH (and mm2:PATH)"
        )
    return KafkaInstallError(f"Maven failed to resolve Apache Kafka {version}: {first}")


def _add_slf4j_binding(rel: KafkaRelease, staging: Path) -> None:
    """Copy the SLF4J binding of the release's logging backend when it brings none."""
    names = rel._names()
    if any(n.startswith(b + "-") for n in names for b in _SLF4J_BINDINGS):
        return
    slf4j = rel.jar_version("slf4j-api") or "1.7.36"
    if rel.jar_version("log4j-core"):
        impl = "log4j-slf4j2-impl" if slf4j.startswith("2.") else "log4j-slf4j-impl"
        artifact = f"org.apache.logging.log4j:{impl}:{rel.jar_version('log4j-core')}"
    elif rel.jar_version("reload4j"):
        artifact = f"org.slf4j:slf4j-reload4j:{slf4j}"
    else:
        return
    rc, output = _run_mvn([_mvn(), "-B", "-ntp", "-f", str(staging / "pom.xml"), f"{DEPENDENCY_PLUGIN}:copy",
                           f"-Dartifact={artifact}", f"-DoutputDirectory={rel.libs}"], staging)
    if rc != 0:
        raise KafkaInstallError(f"Maven could not resolve the logging binding {artifact}: {_mvn_error(output)}")


def install(
    version: str, cache: Path, *, log: Callable[[str], None] | None = None, locked: bool = False
) -> KafkaRelease:
    """Resolve release ``version`` with Maven into ``cache/VERSION`` (replacing an
    incomplete one); the broker always, MirrorMaker 2 when the registry has it (else the
    manifest says why not).  Holds the cache's install lock unless ``locked``."""
    if not locked:
        with _install_lock(cache):
            return install(version, cache, log=log, locked=True)
    parse_version(version)
    say = log or (lambda text: None)
    t0 = time.monotonic()
    staging = Path(tempfile.mkdtemp(prefix=f".{version}.partial-", dir=cache))
    try:
        say(f"resolving Apache Kafka {version} (broker, Connect, MirrorMaker 2) from Maven Central with mvn")
        components: dict[str, Any] = {"broker": True, "mm2": True}
        rc, output = _resolve(version, BROKER_ARTIFACTS + MM2_ARTIFACTS, staging)
        if rc != 0:
            first = _mvn_error(output)
            shutil.rmtree(staging / "libs", ignore_errors=True)
            rc, broker_output = _resolve(version, BROKER_ARTIFACTS, staging)
            if rc != 0:
                raise _failure(version, broker_output)
            components["mm2"] = f"MirrorMaker 2 of Apache Kafka {version} could not be resolved from Maven Central ({first})"
            say(f"Apache Kafka {version}: the broker only: {components['mm2']}")
        rel = KafkaRelease(staging, parse_version(version))
        _add_slf4j_binding(rel, staging)
        components["mm1"] = rel.has("mm1") or rel.why_missing("mm1")
        jars = rel._names()
        size = sum((rel.libs / n).stat().st_size for n in jars)
        manifest = {
            "version": version, "installed": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "seconds": round(time.monotonic() - t0, 1), "jars": len(jars), "bytes": size, "components": components,
        }
        (staging / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
        home = cache / version
        if home.exists():  # an incomplete earlier install
            shutil.rmtree(home)
        os.rename(staging, home)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    say(f"Apache Kafka {version}: {len(jars)} jars, {size / 1e6:.0f} MB in {home} ({manifest['seconds']:g} s)")
    return KafkaRelease(home, parse_version(version), components)
