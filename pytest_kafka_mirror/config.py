"""One settings object built from command-line options, ini keys and environment.

Precedence: ``--kafka-mirror-*`` option > ``kafka_mirror_*`` ini key > ``KAFKA_MIRROR_*``
environment variable > default.  Every value is validated by the same parser whatever its
source, and an error names the source it came from and the accepted forms.
"""

from __future__ import annotations

import argparse
import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .clusters import ClusterSpec, parse_cluster_spec
from .produce.records import FORMATS, metadata_size
from .replicators import NamingPolicy, ReplicatorSpec, parse_naming, parse_replicator_spec
from .report.compare import RegressionCheck, parse_compare_fail
from .report.metrics import ListenAddress, parse_listen_address, parse_pushgateway
from .report.progress import parse_progress as _progress

__all__ = ["CHECKS", "OPTIONS", "Option", "Settings", "SettingsError", "check_name", "min_message_size",
           "resolve_settings"]


class SettingsError(ValueError):
    """A setting has a value that cannot be used; the message names where it came from."""


def _positive_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a number") from None
    if not math.isfinite(v) or v <= 0:
        raise ValueError(f"{text!r} must be a positive number")
    return v


def _non_negative_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a number") from None
    if not math.isfinite(v) or v < 0:
        raise ValueError(f"{text!r} must be zero or a positive number")
    return v


def _positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a whole number") from None
    if v <= 0:
        raise ValueError(f"{text!r} must be a positive whole number")
    return v


def _format(text: str) -> str:
    if text not in FORMATS:
        raise ValueError(f"{text!r} is not a record format; accepted: {' | '.join(FORMATS)}")
    return text


#: The shape of the producer ids ``producer.new_producer_id()`` makes: "p" and 7 hex digits.
_GENERATED_PRODUCER_ID = "p0000000"


def min_message_size(fmt: str) -> int:
    """The smallest message size a record of ``fmt`` fits in: its metadata (key, producer
    id, lane, sequence, timestamp, checksum) with a generated producer id and under 11
    lanes.  More lanes or a longer producer id need a few bytes more; the producer checks
    those when it knows them."""
    return metadata_size(fmt, _GENERATED_PRODUCER_ID, 1)


def _check_message_size(values: dict[str, Any], sources: dict[str, str]) -> None:
    """The message size against the format's metadata: the two may come from different
    sources (a format given by flag, a size from the ini file), so the pair is checked once
    both are known, before anything starts."""
    fmt, size = values["kafka_mirror_format"], values["kafka_mirror_message_size"]
    need = min_message_size(fmt)
    if size >= need:
        return
    size_from = sources["message-size"]
    fmt_from = sources["format"]
    raise SettingsError(
        f"{size_from}: message size {size} B cannot hold a record of the {fmt} format"
        + ("" if fmt_from == "default" else f" (from {fmt_from})")
        + f": its metadata (key, producer id, lane, sequence, timestamp, checksum) takes {need} B; "
        f"give a message size of at least {need}"
        + (" or the body format (smaller metadata)" if fmt == "headers" else "")
    )


def _topic_prefix(text: str) -> str:
    if not text or not all(c.isalnum() or c in "._-" for c in text) or len(text) > 40:
        raise ValueError(f"{text!r} must be 1-40 characters of letters, digits, '.', '_' or '-'")
    return text


def _share(text: str) -> str:
    from .clusters.shared import SHARE_MODES

    if text not in SHARE_MODES:
        raise ValueError(f"{text!r} is not a sharing mode; accepted: {' | '.join(SHARE_MODES)}")
    return text


PROVISIONING_MODES = ("auto", "session", "test")


def _provisioning(text: str) -> str:
    if text not in PROVISIONING_MODES:
        raise ValueError(f"{text!r} is not a topic provisioning mode; accepted: {' | '.join(PROVISIONING_MODES)}")
    return text


def _spark_master(text: str) -> str:
    text = text.strip()
    if text.startswith("sc://"):
        raise ValueError(f"{text!r} is a Spark Connect URL: give it as --kafka-mirror-spark-remote {text}")
    if not (text.startswith(("local", "spark://", "yarn", "k8s://", "mesos://")) or text == "yarn"):
        raise ValueError(f"{text!r} is not a Spark master URL; e.g. local[2], spark://HOST:7077, yarn, k8s://URL")
    return text


ENGINES = ("local", "spark")


def _engine(text: str) -> str:
    text = text.strip()
    if text not in ENGINES:
        raise ValueError(f"{text!r} is not an engine; accepted: {' | '.join(ENGINES)}")
    return text


def _run_store(text: str) -> str:
    """A URI pyarrow opens (s3a://BUCKET/PREFIX, gs://, hdfs://, file://) or a plain path."""
    text = text.strip()
    if not text:
        raise ValueError("empty: give a URI (s3a://BUCKET/PREFIX, gs://..., hdfs://...) or a shared path")
    scheme = text.split("://", 1)[0] if "://" in text else ""
    if scheme and scheme not in ("s3", "s3a", "s3n", "gs", "gcs", "hdfs", "viewfs", "file", "abfs", "abfss"):
        raise ValueError(f"{text!r}: the scheme {scheme}:// is not one pyarrow and Spark both read (s3a, s3, gs, hdfs, "
                         "abfs, file)")
    return text.rstrip("/") if scheme else str(Path(text).absolute())


def _spark_remote(text: str) -> str:
    from .verify.connect import parse_connect_url

    parse_connect_url(text)  # ValueError naming the accepted form
    return text.strip()


def _check_spark(values: dict[str, Any], sources: dict[str, str]) -> None:
    """A Spark Connect endpoint runs the job with its own master: giving both is a mistake
    whichever sources they came from, and a remote needs the Spark Connect client."""
    remote = values["kafka_mirror_spark_remote"]
    if remote is not None and values["kafka_mirror_engine"] == "spark":
        raise SettingsError(
            f"{sources['engine']} (spark) and {sources['spark-remote']} ({remote}) exclude each other: the spark "
            "engine runs producers and captures as tasks of a Spark application of its own; give "
            "--kafka-mirror-spark-master (local[N], spark://HOST:PORT, yarn, k8s://...) instead")
    if remote is None:
        return
    if sources["spark-master"] != "default":
        raise SettingsError(
            f"{sources['spark-remote']} ({remote}) and {sources['spark-master']} "
            f"({values['kafka_mirror_spark_master']}) exclude each other: a Spark Connect server runs the "
            f"verification with its own master; give only one of --kafka-mirror-spark-remote and "
            f"--kafka-mirror-spark-master"
        )
    from .verify.connect import client_missing

    missing = client_missing()
    if missing:
        raise SettingsError(f"{sources['spark-remote']}: verifying through Spark Connect needs its client, and "
                            f"{', '.join(missing)} is not installed: pip install 'pyspark[connect]'")


def _kafka_home(text: str) -> str:
    text = text.strip()
    if not text:
        return ""
    from .clusters.kafka_home import check_kafka_home

    return str(check_kafka_home(text))


def _kafka_cache(text: str) -> str:
    text = text.strip()
    if not text:
        raise ValueError("an empty path; give a directory for the Kafka release cache")
    path = Path(text).expanduser()
    if path.exists() and not path.is_dir():
        raise ValueError(f"{str(path.absolute())!r} is not a directory")
    return str(path.absolute())


# -- relative paths of an ini key: from the ini file's directory -------------------------------
# (on the command line and in the environment a relative path is the current directory's, as
# the parsers read it; an ini file is read from wherever pytest runs, e.g. a subdirectory: its
# paths mean what they mean next to it, as pytest's own "paths" ini keys do)

#: client properties whose values are paths (librdkafka's ``ssl.ca.location``, ``sasl.kerberos.keytab``, ...)
PATH_PROPERTIES = (".location", ".keytab")


def _under(text: str, base: Path) -> str:
    """``text``, a path, joined to ``base`` when it is relative (``~`` expanded first)."""
    text = text.strip()
    path = Path(text).expanduser()
    return text if not text or path.is_absolute() else str(base / path)


def _storage_under(text: str, base: Path) -> str:
    text = text.strip()
    if "://" in text and not text.startswith("file://"):
        return text  # refused by _storage, as it is
    prefix = "file://" if text.startswith("file://") else ""
    return prefix + _under(text.removeprefix("file://"), base)


def _cluster_spec_under(text: str, base: Path) -> str:
    """``kafka-home:PATH``'s path (the other cluster specs hold none)."""
    kind, _, arg = text.strip().partition(":")
    return f"{kind}:{_under(arg, base)}" if kind == "kafka-home" and arg.strip() else text


def _replicator_spec_under(text: str, base: Path) -> str:
    """``mm2:KAFKA_HOME`` / ``mm1:KAFKA_HOME``'s path (a release version or a container is none)."""
    kind, _, arg = text.strip().partition(":")
    arg = arg.strip()
    if kind in ("mm2", "mm1") and arg and not arg[:1].isdigit() and not arg.startswith("container:"):
        return f"{kind}:{_under(arg, base)}"
    if kind == "mm2-connect" and arg and not arg[:1].isdigit():
        home, sep, options = arg.partition(",")
        return f"{kind}:{_under(home, base)}{sep}{options}"
    return text


def _client_property_under(text: str, base: Path) -> str:
    """The value of a ``KEY=VALUE`` client property that is a path (:data:`PATH_PROPERTIES`)."""
    key, sep, value = text.strip().partition("=")
    if sep and key.strip().endswith(PATH_PROPERTIES) and value.strip():
        return f"{key.strip()}={_under(value, base)}"
    return text


def _run_ref_under(text: str, base: Path) -> str:
    """A stored run given as ``PATH.json`` (a run number or a name is none)."""
    return _under(text, base) if text.strip().endswith(".json") else text


def _property(text: str) -> tuple[str, str]:
    """One ``KEY=VALUE`` replicator property."""
    key, sep, value = text.strip().partition("=")
    if not sep or not key.strip():
        raise ValueError(f"{text.strip()!r} is not KEY=VALUE (e.g. replication.policy.class=...IdentityReplicationPolicy)")
    return key.strip(), value.strip()


#: The checks a test or the user may leave out on purpose (``--kafka-mirror-leave-out``, the
#: marker's ``leave_out``): the parts of a failover check and the checks of the group-sync
#: and config-sync scenarios.  A check left out is reported "not checked", never passed.
CHECKS = ("checkpoints", "synced offsets", "heartbeats", "offset syncs", "group sync", "config sync")


def check_name(text: str) -> str:
    """One of :data:`CHECKS`, with dashes or spaces (``synced-offsets``)."""
    name = " ".join(text.strip().replace("-", " ").split())
    if name not in CHECKS:
        raise ValueError(f"{text.strip()!r} is not a check that can be left out; accepted: "
                         + " | ".join(c.replace(" ", "-") for c in CHECKS))
    return name


def _properties(text: str) -> tuple[tuple[str, str], ...]:
    """``KEY=VALUE`` entries, one per line (blank lines and ``#`` comments ignored)."""
    return tuple(_property(line) for line in text.splitlines() if line.strip() and not line.strip().startswith("#"))


def _replicator_command(text: str) -> tuple[str, str]:
    """``VERB=COMMAND``, VERB one of ``replicators.external.VERBS``."""
    from .replicators.external import VERBS

    verb, sep, command = text.strip().partition("=")
    verb = verb.strip()
    if not sep or verb not in VERBS or not command.strip():
        raise ValueError(f"{text.strip()!r} is not VERB=COMMAND with VERB one of {' | '.join(VERBS)}, e.g. "
                         f"stop={VERBS['stop']}")
    return verb, command.strip()


def _replicator_status(text: str) -> str:
    """A Connect status topic name, or a Connect REST URL."""
    text = text.strip()
    if text.startswith(("http://", "https://")):
        return text.rstrip("/")
    if not text or not all(c.isalnum() or c in "._-" for c in text):
        raise ValueError(f"{text!r} is neither a topic name nor a Connect REST URL (http://HOST:8083)")
    return text


def _check_external(values: dict[str, Any], sources: dict[str, str]) -> None:
    """The lifecycle commands and the status source are for an ``external:`` replicator only."""
    if values["kafka_mirror_replicator"].kind == "external":
        return
    for name in ("replicator-command", "replicator-status"):
        if sources[name] != "default":
            raise SettingsError(
                f"{sources[name]}: only an external: replicator takes it; {values['kafka_mirror_replicator']} is "
                "started by the plugin, which controls it and reads its status itself")


def _client_config_file(text: str) -> Any:
    """A Java-style ``.properties`` file of librdkafka client properties, read now."""
    from ._clientconf import read_properties_file

    text = text.strip()
    if not text:
        raise ValueError("an empty path; give a .properties file of librdkafka client properties")
    return read_properties_file(text)


def _client_property(text: str) -> tuple[str, str]:
    """One ``KEY=VALUE`` librdkafka client property (the value is never echoed: it may be a password)."""
    key, sep, value = text.strip().partition("=")
    key = key.strip()
    if not sep or not key or not all(c.isalnum() or c in "._-" for c in key):
        raise ValueError("a client property is KEY=VALUE with a librdkafka property name, e.g. "
                         "security.protocol=SASL_SSL or sasl.username=alice")
    return key, value.strip()


def _check_client_configs(values: dict[str, Any], sources: dict[str, str]) -> dict[str, Any]:
    """Each cluster's client properties: its file, then its KEY=VALUE settings over it,
    checked by librdkafka itself (unknown keys, refused values) before anything starts;
    and where each was given (``ROLE-origins``: key -> the file and the option or ini key
    that named it, or the ``-config-set`` option's source)."""
    from ._clientconf import ClientProperties, check_librdkafka_keys

    out: dict[str, Any] = {}
    for role in ("source", "target"):
        given = values[f"kafka_mirror_{role}_config"] or ClientProperties()
        settings = dict(values[f"kafka_mirror_{role}_config_set"])
        in_file = f"{getattr(given, 'origin', None) or 'the file'} via {sources[f'{role}-config']}"
        out[f"{role}-origins"] = {**dict.fromkeys(given, in_file),
                                  **dict.fromkeys(settings, sources[f"{role}-config-set"])}
        props = ClientProperties(given).merged(settings)
        # a relative file (ssl.ca.location=ca.pem) means the same in the child processes and in
        # MirrorMaker, which run in their own work directories: absolute from here
        props = props.merged({k: os.path.abspath(v) for k, v in props.items()
                              if k.endswith(PATH_PROPERTIES) and v and not os.path.isabs(v)})
        if props:
            try:
                check_librdkafka_keys(props)
            except ValueError as exc:
                given = [sources[n] for n in (f"{role}-config", f"{role}-config-set") if sources[n] != "default"]
                raise SettingsError(f"{' and '.join(given)}: {exc}") from None
        out[role] = props
    return out


def _bool(text: str) -> bool:
    value = text.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"{text!r} is not a boolean; accepted: true | false (also 1/0, yes/no, on/off)")


def _save_name(text: str) -> str:
    """A name for ``--kafka-mirror-save``: it becomes part of a file name (as in pytest-benchmark)."""
    text = text.strip()
    illegal = "".join(c for c in "\\/:*?<>|\"" if c in text)
    if not text or illegal or text == LATEST:
        raise ValueError(
            f"{text!r} cannot name a stored run: use a non-empty name without any of \\/:*?<>|\" "
            f"(and not {LATEST!r}, which means the newest run)"
        )
    return text


def _run_ref(text: str) -> str:
    text = text.strip()
    if not text:
        raise ValueError(f"an empty run; accepted: {LATEST} | NNNN (run number) | NAME (part of a file name) | PATH.json")
    return text


def _storage(text: str) -> str:
    text = text.strip()
    if "://" in text and not text.startswith("file://"):
        raise ValueError(f"{text!r}: only file storage is supported; accepted: PATH | file://PATH")
    path = text.removeprefix("file://")
    if not path:
        raise ValueError(f"{text!r} names no directory; accepted: PATH | file://PATH")
    return path


#: ``--kafka-mirror-compare`` without a value: the newest stored run of this machine.
LATEST = "latest"

#: Kinds of options (see :class:`Option`).
VALUE, FLAG, LIST, OPTIONAL_VALUE = "value", "flag", "list", "optional-value"


@dataclass(frozen=True)
class Option:
    """One setting: its flag, ini key and environment variable derive from ``name``.

    ``kind`` says how it is given:

    * ``value``: ``--flag VALUE``; ini key and environment variable hold the value.
    * ``flag``: ``--flag`` alone turns it on; ini / environment take ``true`` or ``false``.
    * ``list``: repeatable, each ``--flag VALUE`` adds one value; the ini key takes one
      value per line, the environment variable values separated by spaces or commas.
      Values given on the command line replace those of the ini key / environment.
    * ``optional-value``: ``--flag`` alone means ``const``, ``--flag=VALUE`` a value (write
      the ``=``: a separate word after the flag would be taken for its value).

    ``default`` None means "not set" (the setting is then None, or empty for a list).
    """

    name: str  # e.g. "source" -> --kafka-mirror-source, kafka_mirror_source, KAFKA_MIRROR_SOURCE
    metavar: str
    default: str | None
    help: str
    parse: Callable[[str], Any]
    kind: str = VALUE
    const: str | None = None  # the value of an optional-value option given alone
    #: how a list option's ini / environment text splits into items (a regex)
    separator: str = r"[\s,]+"
    #: for a value that holds a path: ``relocate(text, directory)`` joins its relative path
    #: to ``directory`` (an ini key's are read from the ini file's directory); None: no path
    relocate: Callable[[str, Path], str] | None = None

    @property
    def flag(self) -> str:
        return f"--kafka-mirror-{self.name}"

    @property
    def ini(self) -> str:
        return f"kafka_mirror_{self.name.replace('-', '_')}"

    @property
    def env(self) -> str:
        return f"KAFKA_MIRROR_{self.name.replace('-', '_').upper()}"

    @property
    def dest(self) -> str:
        return f"kafka_mirror_{self.name.replace('-', '_')}"

    def argparse_type(self, text: str) -> Any:
        """``type=`` for argparse: bad values fail while options are parsed."""
        try:
            return self.parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    def addoption_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of ``parser.addoption`` for this option.

        The default is always None (not given), so that the ini key, the environment and
        then :attr:`default` apply in :func:`resolve_settings`.
        """
        default = "" if self.default is None or self.kind == FLAG else f" Default: {self.default!r}"
        # argparse %-formats help strings: a literal % (as in "latency_p99:10%") must be doubled.
        help = f"{self.help} Also ini {self.ini}, env {self.env}.{default}".replace("%", "%%")
        kwargs: dict[str, Any] = {"dest": self.dest, "default": None, "help": help}
        if self.kind == FLAG:
            return {**kwargs, "action": "store_true"}
        kwargs.update(metavar=self.metavar, type=self.argparse_type)
        if self.kind == LIST:
            return {**kwargs, "action": "append"}
        if self.kind == OPTIONAL_VALUE:
            return {**kwargs, "nargs": "?", "const": self.const}
        return kwargs

    @property
    def ini_type(self) -> str:
        return "linelist" if self.kind == LIST else "string"

    def parse_text(self, text: str, base: Path | None = None) -> Any:
        """Parse a value from the ini file or the environment (a flag's true / false, a list's
        items); ``base``: the directory its relative paths are read from (the ini file's; None:
        the current directory's)."""
        if self.kind == FLAG:
            return _bool(text)
        if self.kind == LIST:
            return tuple(self.parse(self.moved(item, base)) for item in self._items(text))
        return self.parse(self.moved(text, base))

    def _items(self, text: str) -> list[str]:
        items = (item.strip() for item in re.split(self.separator, text.strip()))
        return [item for item in items if item and not item.startswith("#")]

    def moved(self, text: str, base: Path | None) -> str:
        """``text`` with its relative path read from ``base`` (as it is without one, or without a path)."""
        return self.relocate(text, base) if self.relocate is not None and base is not None else text

    def relocates(self, text: str, base: Path | None) -> bool:
        """Whether ``base`` changes what ``text`` means: it holds a relative path."""
        items = self._items(text) if self.kind == LIST else [text] if self.kind != FLAG else []
        return any(self.moved(item, base) != item for item in items)

    def unset(self) -> Any:
        """The value when nothing gives one."""
        if self.default is not None:
            return self.parse_text(self.default)
        return () if self.kind == LIST else None


OPTIONS: list[Option] = [
    Option("source", "SPEC", "tansu",
           "Source cluster: tansu (embedded broker) | container:IMAGE (Docker, host network; e.g. "
           "kafka-mirror/tansu:local, apache/kafka:3.9.1, redpandadata/redpanda) | kafka-home[:PATH] (KRaft Kafka "
           "from an unpacked distribution) | bootstrap:HOST:PORT[,...] (existing cluster).",
           parse_cluster_spec, relocate=_cluster_spec_under),
    Option("target", "SPEC", "tansu", "Target cluster, same forms as the source.", parse_cluster_spec,
           relocate=_cluster_spec_under),
    Option("replicator", "SPEC", "reference",
           "Replicator under test: reference (built-in mirror process) | reference:KNOBS (the same, injecting "
           "faults into every topic, e.g. reference:drop=0.01,seed=7) | mm2:VERSION (e.g. mm2:4.3.1, from Maven "
           "Central) | mm2[:KAFKA_HOME] | mm2:container:IMAGE (MirrorMaker 2), each with ,properties=FILE for your own "
           "mm2.properties as the base (e.g. mm2:/opt/kafka-4.3.1,properties=mm2.properties) | mm1:VERSION (the legacy MirrorMaker, "
           "Kafka <= 3.9) | command:TEMPLATE (placeholders {source} {target} {topics} {workdir}) | "
           "external:POLICY (already running; its naming identity | prefix:P).",
           parse_replicator_spec, relocate=_replicator_spec_under),
    Option("upgrade-from", "SPEC", None,
           "The release the in-place upgrade scenarios start on (and roll back to), e.g. mm2:3.9.1 when the "
           "replicator is mm2:4.3.1; same forms as --kafka-mirror-replicator. Default: the replicator itself "
           "(the switch is then a restart onto a new process with the same state).",
           parse_replicator_spec, relocate=_replicator_spec_under),
    Option("naming", "POLICY", "identity",
           "Target topic naming: identity | prefix:PREFIX (e.g. prefix:source. as MM2's default policy); "
           "MM2's is derived from its replication policy.",
           parse_naming),
    Option("spark-master", "MASTER", "local[2]",
           "Spark master for the verification job. Left at its default, the xdist workers of a run (-n N) share "
           "one Spark Connect server in local[2] mode, started at the first verification and stopped with the "
           "session (when pyspark ships Spark Connect and its client is installed, else each process runs its "
           "own); given (e.g. local[2] again), each process runs its own SparkSession with this master.",
           _spark_master),
    Option("engine", "local|spark", "local",
           "Where the producers and the captures run: local (processes on this host) or spark (tasks of the "
           "session's Spark application, on the executors --kafka-mirror-spark-master gives: each batch of them one "
           "barrier stage; the run directory is shared as a path by one host or a shared mount, or kept in a run "
           "store: --kafka-mirror-run-store).",
           _engine),
    Option("run-store", "URI", None,
           "Keep every run directory under this URI (s3a://BUCKET/PREFIX, gs://..., hdfs://..., or a shared path): "
           "the producers' manifests, the capture's segments and status files, the reports' inputs. Each stage "
           "works in a local copy kept in step with it; the verification reads the capture's segments there. "
           "pyarrow and Spark need the store's settings (for S3: AWS_ENDPOINT_URL, credentials, and "
           "spark.hadoop.fs.s3a.* with hadoop-aws on the classpath); see docs/running.md.",
           _run_store),
    Option("spark-remote", "URL", None,
           "Verify through this Spark Connect server, sc://HOST[:PORT][/;PARAM=VALUE...] (no Spark starts "
           "here; it must read the run directories at the same paths). Excludes --kafka-mirror-spark-master.",
           _spark_remote),
    Option("report-dir", "DIR", ".kafka-mirror/reports", "Directory for per-test JSON reports (relative to rootdir; in the ini file, to its directory).",
           str, relocate=_under),
    Option("drain-timeout", "SECONDS", "30",
           "After producing, stop capturing when no record arrived for this long.", _positive_float),
    Option("settle", "SECONDS", "0.5",
           "Keep capturing this long after every acknowledged record arrived (late duplicates).",
           _non_negative_float),
    Option("startup-timeout", "SECONDS", "60",
           "Limit for clusters and replicator to become ready and for target topics to appear.", _positive_float),
    Option("topic-prefix", "PREFIX", "km", "Prefix of every test topic; the replicator mirrors ^PREFIX-.*.",
           _topic_prefix),
    Option("format", "FORMAT", "headers", "Default record format of mirror_producer: headers | body.", _format),
    Option("message-size", "BYTES", "200",
           "Default record size of mirror_producer, metadata included.", _positive_int),
    Option("share", "MODE", "run",
           "Under xdist: run = the workers share one source and one target cluster (each worker runs its own "
           "replicator for its own topics) | worker = clusters per worker.", _share),
    Option("topic-provisioning", "MODE", "auto",
           "When test topics are created: session = the topics scenarios declare with "
           "@pytest.mark.kafka_mirror_topics are created before the replicator starts, so it discovers them once "
           "(for replicators that rebalance on every new topic, e.g. MirrorMaker 2) | test = each test creates its "
           "own | auto = session for mm2, command and external replicators and for a reference mirror that "
           "behaves like one (like=mm2), else test.", _provisioning),
    Option("keep-topics", "", "false",
           "Keep this session's test topics and failover witness groups on clusters the plugin did not start "
           "(bootstrap:): by default they are deleted at the session's end, on the source and their copies on the "
           "target (with a replicator the plugin does not stop, checked again and deleted again when they come "
           "back).", _bool, kind=FLAG),
    # -- backends (clusters/, replicators/) ------------------------------------------------
    Option("kafka-home", "PATH", "",
           "Unpacked Apache Kafka distribution used by the specs kafka-home and mm2 when they name no path (a "
           "relative PATH: from the ini file's directory when the ini file gives it, else the current directory).",
           _kafka_home, relocate=_under),
    Option("kafka-cache", "DIR", None,
           "Where the Apache Kafka releases of kafka:VERSION, mm2:VERSION and mm1:VERSION are cached (resolved from "
           "Maven Central with mvn on first use, offline afterwards). Default: ~/.cache/pytest-kafka-mirror/kafka "
           "($XDG_CACHE_HOME when set). A relative DIR of the ini file: from its directory.", _kafka_cache,
           relocate=_under),
    Option("replicator-properties", "KEY=VALUE", None,
           "Replicator settings that override the rendered ones (mm2: lines of mm2.properties); "
           "repeat the flag, one per line in ini, newline-separated in env.", _property, kind=LIST, separator=r"\n"),
    Option("replicator-command", "VERB=COMMAND", None,
           "How the plugin controls an external: replicator you run, for the scenarios that stop, crash, pause or "
           "restart it: VERB is stop | start | kill | pause | resume, COMMAND a shell command that returns once done "
           "(stop=systemctl stop mm2, kill=kubectl delete pod mm2-0 --grace-period=0, pause=docker pause mm2); a "
           "start is followed by the readiness probe. A scenario that needs a verb without a command skips, naming "
           "it. Repeat the flag; ini: one per line; env: newline-separated.", _replicator_command, kind=LIST,
           separator=r"\n"),
    Option("replicator-status", "TOPIC|URL", None,
           "Where an external: replicator's Kafka Connect states are read: its status topic on the target "
           "(MirrorMaker 2 in dedicated mode: mm2-status.SOURCE_ALIAS.internal; a Connect cluster: its "
           "status.storage.topic) or the Connect REST URL (http://HOST:8083). A FAILED connector or task is quoted "
           "in the failing test's report and checked between tests.", _replicator_status),
    Option("leave-out", "CHECK", None,
           "A check not to run, on purpose: checkpoints | synced-offsets | heartbeats | offset-syncs (parts of "
           "mirror_failover) | group-sync | config-sync (those scenarios skip); it is reported as not checked, "
           "with this option as the reason. Without it, a check the replicator gives nothing to check fails. "
           "Repeat the flag; ini: one per line; env: separated by spaces or commas.", check_name, kind=LIST),
    # -- client properties of the clusters (_clientconf.py; docs/secured-clusters.md) ------------
    Option("source-config", "FILE", None,
           "librdkafka client properties of every client of the source cluster (security.protocol, sasl.*, ssl.*, "
           "...): a Java-style .properties file (KEY=VALUE lines, # comments), read at start (a relative FILE: from "
           "the ini file's directory when the ini file gives it, else the current directory). Translated to Java "
           "names for MirrorMaker 2 / 1. Secrets are masked wherever shown.", _client_config_file, relocate=_under),
    Option("target-config", "FILE", None, "The same for the target cluster (and clusters added with add_cluster).",
           _client_config_file, relocate=_under),
    Option("source-config-set", "KEY=VALUE", None,
           "One librdkafka client property of the source cluster, over the file's; repeat the flag, one per line "
           "in ini, newline-separated in env.", _client_property, kind=LIST, separator=r"\n",
           relocate=_client_property_under),
    Option("target-config-set", "KEY=VALUE", None, "The same for the target cluster.", _client_property, kind=LIST,
           separator=r"\n", relocate=_client_property_under),
    # -- results across runs (storage.py, compare.py) --------------------------------
    Option("save", "NAME", None,
           "Save this session's results as STORAGE/MACHINE/NNNN_NAME.json, to compare later runs with.",
           _save_name),
    Option("autosave", "", "false",
           "Save this session's results as STORAGE/MACHINE/NNNN_COMMIT_UTCSTAMP[_uncommitted-changes].json.",
           _bool, kind=FLAG),
    Option("compare", "RUN", None,
           "Compare this session with a stored run: the newest of this machine when RUN is omitted, "
           "else NNNN (run number), part of a file name, or a PATH.json. Write --kafka-mirror-compare=RUN.",
           _run_ref, kind=OPTIONAL_VALUE, const=LATEST, relocate=_run_ref_under),
    Option("compare-fail", "EXPR", None,
           "Fail the session when a figure regressed against the compared run: FIGURE:N% (relative) or "
           "FIGURE:N (absolute), e.g. latency_p99:10% or missing:0. Repeatable.",
           parse_compare_fail, kind=LIST),
    Option("storage", "PATH", ".kafka-mirror",
           "Directory of stored runs (relative to rootdir; in the ini file, to its directory); also file://PATH.",
           _storage, relocate=_storage_under),
    # -- live progress (report/progress.py) -------------------------------------------
    Option("progress", "auto|live|off|SECONDS", "auto",
           "Progress of the running scenarios in the terminal (phase, sent / acked / arrived / missing, "
           "latency so far, ETA): auto = a line kept up to date on a TTY, else a line per running scenario every "
           "10 s; SECONDS = a line every SECONDS; off = none.", _progress),
    # -- Prometheus (metrics.py) --------------------------------------------------------
    Option("metrics-port", "[HOST:]PORT", None,
           "Serve live Prometheus metrics over HTTP on this port (host 127.0.0.1 unless given; 0 = a free port).",
           parse_listen_address),
    Option("pushgateway", "URL", None,
           "Push the metrics to this Prometheus push gateway while the session runs and at its end.",
           parse_pushgateway),
]

OPTIONS_BY_NAME = {o.name: o for o in OPTIONS}


@dataclass(frozen=True)
class Settings:
    source: ClusterSpec
    target: ClusterSpec
    replicator: ReplicatorSpec
    naming: NamingPolicy
    spark_master: str
    report_dir: Path
    drain_timeout: float
    settle: float
    startup_timeout: float
    topic_prefix: str
    format: str
    message_size: int
    #: option name -> where its value came from ("default", "--flag", "ini key", "env VAR")
    sources: dict[str, str] = field(default_factory=dict)
    kafka_home: str = ""
    #: the Kafka release cache given by option / ini / env ("" = kafka_dist.cache_dir's default)
    kafka_cache: str = ""
    replicator_properties: tuple[tuple[str, str], ...] = ()
    #: an external: replicator's lifecycle commands (verb, shell command) and where its Connect states are read
    replicator_commands: tuple[tuple[str, str], ...] = ()
    replicator_status: str | None = None
    #: checks left out on purpose (:data:`CHECKS`; ``--kafka-mirror-leave-out``)
    leave_out: tuple[str, ...] = ()
    #: what the in-place upgrade scenarios start on (None: the replicator itself)
    upgrade_from: ReplicatorSpec | None = None
    share: str = "run"
    topic_provisioning: str = "auto"
    #: keep the session's topics on bootstrap: clusters (else deleted at the session's end)
    keep_topics: bool = False
    # -- results across runs and Prometheus; defaults so older callers keep working
    save: str | None = None
    autosave: bool = False
    compare: str | None = None  # LATEST or a run reference
    compare_fail: tuple[RegressionCheck, ...] = ()
    storage: Path = Path(".kafka-mirror")
    metrics_port: ListenAddress | None = None
    pushgateway: str | None = None
    #: a Spark Connect server to verify through (``sc://...``), or None
    spark_remote: str | None = None
    #: where producers and captures run (:data:`ENGINES`)
    engine: str = "local"
    #: the URI every run directory is kept under (processes/store.py), None: only here
    run_store: str | None = None
    #: librdkafka properties of the source's / target's clients (``_clientconf.ClientProperties``,
    #: its repr masks the secrets): the ``-config`` file with the ``-config-set`` ones over it
    source_client: Mapping[str, str] = field(default_factory=dict)
    target_client: Mapping[str, str] = field(default_factory=dict)
    #: where each of them was given (key -> "FILE via ini key kafka_mirror_source_config",
    #: "--kafka-mirror-source-config-set", ...): what an authentication failure's hint names
    source_client_origins: Mapping[str, str] = field(default_factory=dict)
    target_client_origins: Mapping[str, str] = field(default_factory=dict)
    #: live progress: "auto", "live", "off" or seconds between two lines
    progress: str | float = "auto"

    @property
    def metrics_enabled(self) -> bool:
        return self.metrics_port is not None or self.pushgateway is not None

    def non_default(self) -> dict[str, str]:
        return {k: v for k, v in self.sources.items() if v != "default"}

    def stored(self) -> dict[str, Any]:
        """The specs and defaults that shape the figures (not where files go), as a stored
        run keeps them (``report.storage.build_run``)."""
        return {
            "source": str(self.source),
            "target": str(self.target),
            "replicator": str(self.replicator),
            "naming": str(self.naming),
            "spark_master": self.spark_master,
            "format": self.format,
            "message_size": self.message_size,
            "drain_timeout": self.drain_timeout,
            "settle": self.settle,
        }


def _given(opt: Option, cli: dict[str, Any], ini: Callable[[str], Any], env: Mapping[str, str],
           inipath: Path | None) -> tuple[Any, str]:
    """(value, where it came from) of ``opt``: the command line's (parsed already), the ini
    key's (its relative paths read from the ini file's directory), the environment's (from
    the current directory), else its default."""
    value = cli.get(opt.dest)
    if value is not None and value is not False:  # a flag not given is None (or False)
        return (tuple(value) if opt.kind == LIST else value), opt.flag
    for origin, raw, base in ((f"ini key {opt.ini}", ini(opt.ini), inipath.parent if inipath else None),
                              (f"env {opt.env}", env.get(opt.env), None)):
        if isinstance(raw, list):  # linelist ini keys
            raw = "\n".join(raw)
        if raw is None or str(raw).strip() == "":
            continue
        text = str(raw).strip()
        try:
            return opt.parse_text(text, base), origin
        except ValueError as exc:
            # a relative path of the ini file: say which file and that it was read from its directory
            where = (f" (in {inipath}, whose relative paths are read from its directory)"
                     if inipath is not None and opt.relocates(text, base) else "")
            raise SettingsError(f"{origin}{where}: {exc}") from None
    return opt.unset(), "default"


def resolve_settings(
    cli: dict[str, Any],
    ini: Callable[[str], str | None],
    env: Mapping[str, str] | None = None,
    rootdir: Path | None = None,
    inipath: Path | None = None,
) -> Settings:
    """Build Settings from parsed CLI values (already validated, None when absent), an ini
    getter (None/empty when absent) and the environment.  ``inipath``: the ini file (pytest's
    ``config.inipath``), whose relative paths are read from its directory; None: from the
    current directory."""
    env = os.environ if env is None else env
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for opt in OPTIONS:
        values[opt.dest], sources[opt.name] = _given(opt, cli, ini, env, inipath)

    _check_message_size(values, sources)
    _check_spark(values, sources)
    _check_external(values, sources)
    clients = _check_client_configs(values, sources)

    def under_root(text: str) -> Path:
        path = Path(text)
        return rootdir / path if rootdir is not None and not path.is_absolute() else path

    report_dir = under_root(values["kafka_mirror_report_dir"])
    return Settings(
        source=values["kafka_mirror_source"],
        target=values["kafka_mirror_target"],
        replicator=values["kafka_mirror_replicator"],
        naming=values["kafka_mirror_naming"],
        spark_master=values["kafka_mirror_spark_master"],
        engine=values["kafka_mirror_engine"],
        run_store=values["kafka_mirror_run_store"],
        report_dir=report_dir,
        drain_timeout=values["kafka_mirror_drain_timeout"],
        settle=values["kafka_mirror_settle"],
        startup_timeout=values["kafka_mirror_startup_timeout"],
        topic_prefix=values["kafka_mirror_topic_prefix"],
        format=values["kafka_mirror_format"],
        message_size=values["kafka_mirror_message_size"],
        sources=sources,
        kafka_home=values["kafka_mirror_kafka_home"],
        kafka_cache=values["kafka_mirror_kafka_cache"] or "",
        replicator_properties=values["kafka_mirror_replicator_properties"],
        replicator_commands=values["kafka_mirror_replicator_command"],
        replicator_status=values["kafka_mirror_replicator_status"],
        leave_out=values["kafka_mirror_leave_out"],
        upgrade_from=values["kafka_mirror_upgrade_from"],
        share=values["kafka_mirror_share"],
        topic_provisioning=values["kafka_mirror_topic_provisioning"],
        keep_topics=values["kafka_mirror_keep_topics"],
        save=values["kafka_mirror_save"],
        autosave=values["kafka_mirror_autosave"],
        compare=values["kafka_mirror_compare"],
        compare_fail=values["kafka_mirror_compare_fail"],
        storage=under_root(values["kafka_mirror_storage"]),
        metrics_port=values["kafka_mirror_metrics_port"],
        pushgateway=values["kafka_mirror_pushgateway"],
        spark_remote=values["kafka_mirror_spark_remote"],
        source_client=clients["source"],
        target_client=clients["target"],
        source_client_origins=clients["source-origins"],
        target_client_origins=clients["target-origins"],
        progress=values["kafka_mirror_progress"],
    )
