"""A client that cannot authenticate: which kind of failure it is, and the one line that says so.

librdkafka reports every failure of a connection to its ``error_cb``; the ones no retry
cures are a failed SASL authentication (a wrong password, user or mechanism: code
``_AUTHENTICATION``) and a failed TLS handshake (a broker certificate the CA of
``ssl.ca.location`` did not sign: code ``_SSL``, or ``certificate verify failed``;
librdkafka prefixes every handshake failure with ``SSL handshake failed``).  A third
kind is librdkafka's own guess that ``security.protocol`` does not match the listener
("connecting to a PLAINTEXT broker listener?" of TLS to a plaintext listener; "might be
caused by incorrect security.protocol configuration" of older releases): a guess, so it
words the message but never ends a start-up early (a broker going down mid-request is
disconnected alike).  A client without TLS at a TLS listener gets no such error from
librdkafka 2.x (against Kafka 4.3.1: only the log line "connection closed by peer ... in
state APIVERSION_QUERY" and "brokers are down"): that one keeps the address hint.

:func:`failure_line` words each kind with the client properties that decide it, each
with where it was given (``client_origins`` of the cluster: a file and the option or ini
key that named it, a ``-config-set`` option, the backend that generated it), so the hint
points at what to check instead of at the address, which answered.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

__all__ = ["DEFINITE", "failure_kind", "failure_line", "rank"]

#: The kinds no retry cures (a start-up may end at once on them).
DEFINITE = ("sasl", "tls")

#: Per kind, the properties that decide it, in the order the hint names them.
_KEYS = {
    "sasl": ("sasl.mechanisms", "sasl.username", "sasl.password", "security.protocol"),
    "tls": ("ssl.ca.location", "security.protocol", "ssl.certificate.location", "ssl.key.location",
            "ssl.endpoint.identification.algorithm"),
    "protocol": ("security.protocol",),
}
#: What an unset property means to librdkafka (named in the hint: "not set" alone would not say it).
_UNSET = {
    "security.protocol": "not set: PLAINTEXT",
    "sasl.mechanisms": "not set: GSSAPI",
    "sasl.username": "not set",
    "sasl.password": "not set",
    "ssl.ca.location": "not set: the system's CA certificates",
}
_WHAT = {"sasl": "SASL", "tls": "TLS", "protocol": "security"}


def failure_kind(code: int, text: str) -> str | None:
    """``sasl``, ``tls``, ``protocol`` (a guess, see the module docstring) or None for a
    librdkafka error of ``code`` with ``text``."""
    from confluent_kafka import KafkaError

    if code in (KafkaError._AUTHENTICATION, getattr(KafkaError, "SASL_AUTHENTICATION_FAILED", -999)):
        return "sasl"
    if "incorrect security.protocol" in text or "PLAINTEXT broker listener" in text:
        return "protocol"
    if code == KafkaError._SSL or "SSL handshake failed" in text or "certificate verify failed" in text:
        return "tls"
    return None


def rank(kind: str, code: int) -> int:
    """Which of two failures a cluster keeps (the higher): SASL (the handshake passed), then
    librdkafka's own TLS error (``_SSL``, the most detailed), then its guesses."""
    from confluent_kafka import KafkaError

    if kind == "sasl":
        return 4
    if kind == "tls":
        return 3 if code == KafkaError._SSL else 1
    return 2


def _message(text: str) -> str:
    """librdkafka's ``sasl_ssl://127.0.0.1:P/bootstrap: ... (after 312ms in state AUTH_REQ)``: the message alone."""
    text = " ".join(text.split())
    return re.sub(r"^\S+://\S+: |^\S+/bootstrap: ", "", re.sub(r" \(after \d+ms in state \w+\)$", "", text))


def failure_line(kind: str, text: str, *, name: str, address: str, props: Mapping[str, str],
                 origins: Mapping[str, str], options: str) -> str:
    """One line: the cluster, the failure, and a hint naming the properties behind it with
    where each came from (``options``: the options that set them, named when some property's
    origin is unknown).  ``text`` must already be redacted; secrets are never shown."""
    from .._clientconf import MASK, is_secret

    head = {"sasl": f"authentication failed at {address}", "tls": f"TLS handshake failed at {address}",
            "protocol": f"{address} closed the connection before answering"}[kind]
    keys = list(_KEYS[kind])
    if kind == "sasl" and "sasl.mechanism" in props and "sasl.mechanisms" not in props:
        keys[0] = "sasl.mechanism"  # librdkafka's alias, as the user wrote it
    groups: dict[str, list[str]] = {}  # where they were given ("": not known, "-": not set) -> the properties
    for key in keys:
        if key in props:
            value = MASK if is_secret(key) and props[key] else props[key]
            groups.setdefault(origins.get(key, ""), []).append(f"{key}={value}")
        elif key in _UNSET:
            groups.setdefault("-", []).append(f"{key} {_UNSET[key]}")
    named = [", ".join(texts) + (f" (from {origin})" if origin not in ("", "-") else "")
             for origin, texts in groups.items()]
    hint = f"check the {name} cluster's {_WHAT[kind]} client properties: {'; '.join(named)}"
    if "" in groups or not any(k in props for k in keys):
        hint += f" (given with {options})"
    if kind == "tls" and "certificate" in text:
        hint += "; ssl.ca.location must hold the CA that signed the broker's certificate"
    said = _message(text)
    return f"{name}: {head}: {said}{'' if said.endswith(('.', '?', '!')) else '.'} Hint: {hint}"
