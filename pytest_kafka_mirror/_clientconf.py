"""The client configuration of each cluster: librdkafka properties beside ``bootstrap.servers``.

A secured cluster (SASL, TLS) needs more than its address: ``security.protocol``,
``sasl.mechanisms``, ``sasl.username`` / ``sasl.password``, ``ssl.ca.location`` ...  They
are given once per cluster (``--kafka-mirror-source-config FILE``,
``--kafka-mirror-source-config-set KEY=VALUE``, the same for the target; a backend such
as ``kafka:VERSION,security=sasl_ssl`` brings its own) and every client the package makes
gets them, in this process and in its child processes:

* a cluster registers its properties under each of its bootstrap addresses
  (:func:`register`, done by ``cluster.client_config()``);
* :func:`~._kafkalog.with_logger`, which every client configuration already goes
  through, adds the properties of the cluster whose address is its ``bootstrap.servers``
  (:func:`properties_for`), so no call site has to know about security;
* child processes (capture, producer processes, the reference mirror) find the same
  registry through a JSON file with mode 0600 in a private directory, named by the
  environment variable :data:`ENV` they inherit: secrets never go on a command line.

Secrets (:func:`is_secret`) are masked wherever a configuration is shown:
:class:`ClientProperties` repr, :func:`masked`, and :func:`redact` for any text that might
quote a value (an error message of a child process, a command line).

The ``.properties`` files the plugin renders (``server.properties``, MM2's, MM1's, the
reference mirror's) and the client-config files it reads are java.util.Properties text.
Reading is ``javaproperties``' parser (:func:`properties_entries`): it reads as
``Properties.load`` does, measured against Java itself in ``tests/unit/test_properties.py``
(lines end at LF, CR or CR LF only, continuations, ``\\uXXXX`` with surrogate pairs).
Writing is this module's :func:`format_properties`, not ``javaproperties.dumps``:
javaproperties 0.8.2 escapes ``:``, ``=``, ``#`` and ``!`` anywhere in a value, as
``Properties.store`` does, which Java reads back alike but which turns every address of a
rendered file into ``127.0.0.1\\:9092`` (4 of 22 lines of a KRaft ``server.properties``,
``listeners = PLAINTEXT\\://127.0.0.1\\:41001,...``; the bootstrap servers of
``mm2.properties``): the files people read when a broker or MM2 misbehaves, and which
``tests/unit/test_backend_config.py`` pins as written.  Ours escapes what Java needs (see
:func:`_escape`), and Java reads back every key and value exactly (the same test).
"""

from __future__ import annotations

import atexit
import json
import os
import re
import shutil
import tempfile
import threading
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

__all__ = [
    "ENV",
    "MASK",
    "ClientProperties",
    "check_librdkafka_keys",
    "format_properties",
    "is_secret",
    "masked",
    "parse_properties",
    "parse_properties_text",
    "properties_entries",
    "properties_for",
    "read_properties_file",
    "redact",
    "register",
    "write_private",
]

#: The environment variable naming the registry file of a process tree.
ENV = "KAFKA_MIRROR_CLIENT_REGISTRY"
MASK = "******"

#: Keys whose values are secrets, in librdkafka's and in Java's spelling.
SECRET_KEYS = frozenset({
    "sasl.password", "sasl.jaas.config", "sasl.oauthbearer.client.secret", "sasl.oauthbearer.config",
    "ssl.key.password", "ssl.keystore.password", "ssl.truststore.password", "ssl.key.pem", "ssl_key",
    "ssl.keystore.key", "ssl.certificate.pem",
})
_SECRET_WORDS = re.compile(r"password|secret|jaas|credential|private", re.IGNORECASE)


def is_secret(key: str) -> bool:
    """Whether the value of ``key`` (librdkafka or Java name, with or without a prefix such
    as MM2's ``source.``) must never be shown."""
    last = key.rsplit(".", 3)
    return key in SECRET_KEYS or ".".join(last[-3:]) in SECRET_KEYS or ".".join(last[-2:]) in SECRET_KEYS \
        or bool(_SECRET_WORDS.search(key))


def masked(props: Mapping[str, Any]) -> dict[str, Any]:
    """``props`` with every secret value replaced by :data:`MASK`."""
    return {k: (MASK if is_secret(k) and v not in (None, "") else v) for k, v in props.items()}


class ClientProperties(Mapping[str, str]):
    """Immutable librdkafka properties whose repr and str mask the secrets."""

    def __init__(self, items: Iterable[tuple[str, str]] | Mapping[str, str] = (), *, origin: str | None = None) -> None:
        pairs = items.items() if isinstance(items, Mapping) else items
        self._data: dict[str, str] = {str(k): str(v) for k, v in pairs}
        #: the file they were read from (:func:`read_properties_file`), or None
        self.origin = origin

    def __getitem__(self, key: str) -> str:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Mapping) and dict(self._data) == dict(other)

    def __hash__(self) -> int:
        return hash(tuple(sorted(self._data.items())))

    def __repr__(self) -> str:
        return f"ClientProperties({masked(self._data)!r})"

    __str__ = __repr__

    def merged(self, *others: Mapping[str, str] | None) -> ClientProperties:
        """These properties, then each of ``others`` over them (later ones win)."""
        out = dict(self._data)
        for other in others:
            out.update(other or {})
        return ClientProperties(out)

    def secrets(self) -> list[str]:
        return [v for k, v in self._data.items() if is_secret(k) and v]


_LINE_BREAK = re.compile(r"\r\n|\r|\n")  # the only line ends of java.util.Properties


def properties_entries(text: str) -> Iterator[tuple[int, str, str, bool]]:
    """(line number, key, value, whether a separator was written) for each entry of
    java.util.Properties text, escapes resolved; the value keeps its trailing blanks, as
    Java's does.  The one reader of .properties text (client configs, MM2's files):
    ``javaproperties``' parser, which reads as ``Properties.load`` does (lines end at LF, CR
    or CR LF only; continuations; ``\\uXXXX`` and surrogate pairs); a malformed
    ``\\uXXXX`` is a ValueError, as it is an error for Java."""
    import javaproperties

    line = 1
    try:
        for element in javaproperties.parse(text):
            if isinstance(element, javaproperties.KeyValue):
                yield line, element.key, element.value, bool(element.value) or _separated(element.source)
            line += len(_LINE_BREAK.findall(element.source))
    except javaproperties.InvalidUEscapeError:
        raise ValueError(f"line {line} has a malformed \\uXXXX escape") from None


def _separated(source: str) -> bool:
    """Whether an entry with an empty value was written with a separator (``key=``, ``key:``,
    ``key `` ) rather than as a key alone: a character put after it lands in the value only then."""
    import javaproperties

    probe = next(javaproperties.parse(source.rstrip("\r\n") + "X"), None)
    return isinstance(probe, javaproperties.KeyValue) and probe.value == "X"


def _escape(text: str, *, key: bool) -> str:
    """java.util.Properties escaping: backslash first, then line ends, separators in a key,
    a value's leading blank, a leading comment sign; every character outside printable
    ASCII as ``\\uXXXX`` (Kafka's tools read .properties files as ISO 8859-1)."""
    out = text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    out = out.replace("\f", "\\f")
    if key:
        out = out.replace("=", "\\=").replace(":", "\\:").replace(" ", "\\ ")
    elif out.startswith(" "):
        out = "\\" + out
    if out[:1] in ("#", "!"):
        out = "\\" + out
    return "".join(ch if " " <= ch <= "~" else "".join(f"\\u{unit:04x}" for unit in _utf16(ch)) for ch in out)


def _utf16(ch: str) -> tuple[int, ...]:
    code = ord(ch)
    if code < 0x10000:
        return (code,)
    code -= 0x10000
    return 0xD800 + (code >> 10), 0xDC00 + (code & 0x3FF)


def format_properties(props: Mapping[str, str], header: str = "rendered by pytest-kafka-mirror") -> str:
    """``props`` as java.util.Properties text that Java reads back exactly (see :func:`_escape`)."""
    lines = [f"# {header}"] + [f"{_escape(k, key=True)} = {_escape(v, key=False)}" for k, v in props.items()]
    return "\n".join(lines) + "\n"


def parse_properties(text: str) -> dict[str, str]:
    """java.util.Properties text (``key = value``, ``key: value``, ``key value``, escapes,
    comments, continuations) -> dict: the inverse of :func:`format_properties`.  Lenient,
    as MM2 is: a key alone has the empty value, any key is kept (MM2's, MM1's and the
    reference mirror's files; client properties are read strictly by
    :func:`parse_properties_text`)."""
    return {key: value for _, key, value, _ in properties_entries(text)}


def parse_properties_text(text: str, origin: str) -> ClientProperties:
    """Java-style ``.properties`` text (``key=value``, ``key: value`` or ``key value``;
    ``#`` / ``!`` comments; ``\\`` continuations) as :class:`ClientProperties`.

    A line without a key or a value raises ValueError naming ``origin`` and the line
    number, never its text (it may hold a password)."""
    try:
        entries = list(properties_entries(text))
    except ValueError as exc:
        raise ValueError(f"{origin} {exc}") from None
    out: dict[str, str] = {}
    for number, key, value, separated in entries:
        if not key or not separated:
            raise ValueError(f"{origin} line {number} is not KEY=VALUE")
        value = value.strip()
        if not re.fullmatch(r"[A-Za-z0-9_.\-]+", key):
            raise ValueError(f"{origin} line {number}: {key[:60]!r} is not a property name (letters, digits, . _ -)")
        out[key] = value
    return ClientProperties(out)


def read_properties_file(path: str | os.PathLike[str]) -> ClientProperties:
    """The properties of a file (a relative path: from the current directory); ValueError
    (no traceback) naming the absolute path tried when it cannot be read or parsed."""
    p = Path(path).expanduser()
    tried = str(p.absolute())
    # a relative path: where it was read from, which the absolute path alone does not say was assumed
    relative = "" if p.is_absolute() else f" ({os.fspath(path)!r} read from the current directory)"
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ValueError(f"{tried!r}: no such file{relative}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{tried!r} cannot be read{relative}: {exc}") from None
    return ClientProperties(parse_properties_text(text, tried), origin=tried)


def check_librdkafka_keys(props: Mapping[str, str]) -> None:
    """ValueError naming the first key librdkafka does not know (or a value it refuses).

    Asks librdkafka itself: a producer is built with the properties and no bootstrap
    servers (it connects to nothing) and closed at once.  Values are never echoed."""
    from confluent_kafka import KafkaException, Producer

    # "No such configuration property: \"KEY\"" / "Invalid value \"V\" for configuration property \"KEY\""
    try:
        Producer({**props, "logger": _Silent()})
    except KafkaException as exc:
        text = str(exc.args[0].str() if exc.args and hasattr(exc.args[0], "str") else exc)
        key = re.search(r'property:?\s*"?([A-Za-z0-9_.\-]+)', text)
        if "No such configuration property" in text and key:
            raise ValueError(f"{key.group(1)!r} is not a librdkafka client property (see librdkafka's "
                             "CONFIGURATION.md; Java-only settings of MM2 go to --kafka-mirror-replicator-properties)") \
                from None
        what = f"the value of {key.group(1)}" if key else "these properties"
        raise ValueError(f"librdkafka refuses {what}: {redact(text, props.values())}") from None
    except (TypeError, ValueError) as exc:
        raise ValueError(f"librdkafka refuses the properties: {redact(str(exc), props.values())}") from None


class _Silent:
    def log(self, *args: Any, **kwargs: Any) -> None:
        pass


# -- the registry of a process tree -------------------------------------------------------
_lock = threading.Lock()
_registry: dict[str, dict[str, str]] = {}
_loaded = False
_private_dir: Path | None = None


def _addresses(bootstrap: str) -> list[str]:
    return [s.strip() for s in str(bootstrap).split(",") if s.strip()]


def _load_inherited() -> None:
    """The registry of the parent process (a child of the plugin), once."""
    global _loaded
    if _loaded:
        return
    _loaded = True
    path = os.environ.get(ENV)
    if path:
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, ValueError):
            return
        for address, props in data.items():
            _registry.setdefault(address, {str(k): str(v) for k, v in props.items()})


def register(bootstrap: str, props: Mapping[str, str]) -> None:
    """Every client of ``bootstrap`` (any of its addresses) gets ``props`` from now on,
    in this process and in the child processes it starts afterwards."""
    with _lock:
        _load_inherited()
        changed = False
        for address in _addresses(bootstrap):
            new = dict(props)
            if not new and address not in _registry:
                continue  # nothing to give (a plain cluster): no file, no environment variable
            if _registry.get(address) != new:
                _registry[address] = new
                changed = True
        if changed:
            _export()


def _export() -> None:
    """Write the registry to a 0600 file in a private 0700 directory and name it in the
    environment children inherit."""
    global _private_dir
    if _private_dir is None:
        _private_dir = Path(tempfile.mkdtemp(prefix="kafka-mirror-clients-"))
        os.chmod(_private_dir, 0o700)
        atexit.register(shutil.rmtree, _private_dir, True)
    path = _private_dir / "clients.json"
    tmp = _private_dir / "clients.json.tmp"
    write_private(tmp, json.dumps(_registry))
    os.replace(tmp, path)
    os.environ[ENV] = str(path)


def write_private(path: str | os.PathLike[str], data: str | bytes, mode: int = 0o600) -> None:
    """Write ``data`` to ``path``, created with ``mode`` (0600 for a file holding secrets:
    never readable by others, not even for an instant; an existing file is replaced)."""
    Path(path).unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)
    os.chmod(path, mode)  # whatever the umask took away


def properties_for(bootstrap: str | None) -> dict[str, str]:
    """The registered properties of the cluster at ``bootstrap`` ({} when none)."""
    if not bootstrap:
        return {}
    with _lock:
        _load_inherited()
        for address in _addresses(bootstrap):
            if address in _registry:
                return dict(_registry[address])
    return {}


def known_secrets() -> list[str]:
    """Every secret value registered in this process tree."""
    with _lock:
        _load_inherited()
        return sorted({v for props in _registry.values() for k, v in props.items() if is_secret(k) and v},
                      key=len, reverse=True)


def redact(text: str, secrets: Iterable[str] | None = None) -> str:
    """``text`` with every secret value (``secrets``, else every registered one) masked."""
    for secret in sorted(set(known_secrets() if secrets is None else secrets), key=len, reverse=True):
        if secret and len(secret) >= 3:
            text = text.replace(secret, MASK)
    return text
