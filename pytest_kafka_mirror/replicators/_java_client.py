"""A cluster's librdkafka client properties in the Java clients' names (MirrorMaker 2 and 1).

The plugin's own clients are librdkafka (confluent-kafka); MirrorMaker runs Java clients.
The security settings a user gives once per cluster (``--kafka-mirror-source-config``)
are translated here:

==========================================  ===================================================
librdkafka                                  Java
==========================================  ===================================================
``security.protocol``                       the same
``sasl.mechanisms`` / ``sasl.mechanism``    ``sasl.mechanism``
``sasl.username`` + ``sasl.password``       ``sasl.jaas.config`` (PLAIN: PlainLoginModule,
                                            SCRAM-SHA-256/512: ScramLoginModule)
``ssl.ca.location``                         ``ssl.truststore.location`` + ``ssl.truststore.type=PEM``
``ssl.certificate.location`` +              ``ssl.keystore.type=PEM`` with the files' contents as
``ssl.key.location``                        ``ssl.keystore.certificate.chain`` / ``ssl.keystore.key``
``ssl.key.password``                        the same (an encrypted PEM key)
``ssl.keystore.location`` (PKCS#12)         the same + ``ssl.keystore.type=PKCS12``;
                                            ``ssl.keystore.password`` the same
``enable.ssl.certificate.verification``     ``ssl.endpoint.identification.algorithm=`` (Java then
``=false``                                  skips the host name check; it still checks the chain)
``ssl.endpoint.identification.algorithm``   the same (``none`` -> empty)
==========================================  ===================================================

and a few keys with the same meaning in both (``client.id``, timeouts).  Anything else is
returned as *untranslated*: the caller warns, naming the keys (never their values), and
Java-only settings go to ``--kafka-mirror-replicator-properties``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..clusters.base import Cluster

__all__ = ["SAME_NAME", "client_properties_of", "jaas_config", "java_client_properties", "warn_untranslated"]

#: librdkafka keys whose Java client has the same name and meaning
SAME_NAME = frozenset({
    "security.protocol", "ssl.key.password", "ssl.keystore.location", "ssl.keystore.password",
    "sasl.kerberos.service.name", "client.id", "request.timeout.ms", "metadata.max.age.ms",
    "socket.connection.setup.timeout.ms", "connections.max.idle.ms", "reconnect.backoff.ms",
    "reconnect.backoff.max.ms", "retry.backoff.ms", "client.rack", "ssl.cipher.suites",
})
#: keys the plugin sets itself, or that mean nothing to a Java client
IGNORED = frozenset({"bootstrap.servers", "logger", "error_cb"})

_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


def _quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def jaas_config(mechanism: str, username: str, password: str) -> str:
    """``sasl.jaas.config`` of a Java client logging in as ``username`` (PLAIN or SCRAM)."""
    module = _LOGIN_MODULES.get(mechanism.upper())
    if module is None:
        raise ValueError(f"no JAAS login module for SASL mechanism {mechanism!r}; known: {', '.join(_LOGIN_MODULES)}")
    return f"{module} required username={_quoted(username)} password={_quoted(password)};"


def java_client_properties(props: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """(the Java client properties of ``props``, the librdkafka keys not translated)."""
    java: dict[str, str] = {}
    untranslated: list[str] = []
    p = dict(props)
    mechanism = p.pop("sasl.mechanisms", None) or p.pop("sasl.mechanism", None)
    p.pop("sasl.mechanism", None)
    username, password = p.pop("sasl.username", None), p.pop("sasl.password", None)
    if mechanism:
        java["sasl.mechanism"] = mechanism.upper()
    if username is not None or password is not None:
        mech = (mechanism or "GSSAPI").upper()  # librdkafka's default mechanism: GSSAPI (Kerberos), no user
        if mech in _LOGIN_MODULES:
            java["sasl.jaas.config"] = jaas_config(mech, username or "", password or "")
        else:
            untranslated += [k for k, v in (("sasl.username", username), ("sasl.password", password)) if v is not None]
    ca = p.pop("ssl.ca.location", None)
    if ca:
        java.update({"ssl.truststore.location": ca, "ssl.truststore.type": "PEM"})
    cert, key = p.pop("ssl.certificate.location", None), p.pop("ssl.key.location", None)
    if cert and key:
        # a PEM keystore from two files: Java wants one location holding both, or the contents inline
        java.update({"ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": Path(cert).read_text().strip(),
                     "ssl.keystore.key": Path(key).read_text().strip()})
    else:
        untranslated += [k for k, v in (("ssl.certificate.location", cert), ("ssl.key.location", key)) if v]
    if "ssl.keystore.location" in p:
        java["ssl.keystore.type"] = "PKCS12"  # librdkafka's keystore is always PKCS#12
    verify = p.pop("enable.ssl.certificate.verification", None)
    if verify is not None and verify.strip().lower() in ("false", "0"):
        java["ssl.endpoint.identification.algorithm"] = ""
    algorithm = p.pop("ssl.endpoint.identification.algorithm", None)
    if algorithm is not None:
        java["ssl.endpoint.identification.algorithm"] = "" if algorithm.strip().lower() == "none" else algorithm
    for key_, value in p.items():
        if key_ in IGNORED:
            continue
        if key_ in SAME_NAME:
            java[key_] = value.upper() if key_ == "security.protocol" else value
        else:
            untranslated.append(key_)
    return java, untranslated


def client_properties_of(cluster: Cluster) -> dict[str, str]:
    """The librdkafka client properties of ``cluster`` (a cluster, a ViaLink; {} when none)."""
    return dict(cluster.client_properties or {})


def warn_untranslated(replicator: str, clusters: Mapping[str, Cluster]) -> list[str]:
    """Warn (:class:`PytestKafkaMirrorWarning`) about each cluster's client properties that
    have no Java equivalent here: named, never their values.  Returns the warnings' text."""
    import warnings

    from .._warnings import PytestKafkaMirrorWarning

    texts = []
    for role, cluster in clusters.items():
        left = java_client_properties(client_properties_of(cluster))[1]
        if left:
            texts.append(f"{replicator}: the {role} cluster's client properties {', '.join(sorted(left))} have no "
                         f"Java client equivalent the plugin knows and are not given to it; set what it needs with "
                         f"--kafka-mirror-replicator-properties {role}.KEY=VALUE (docs/secured-clusters.md)")
    for text in texts:
        warnings.warn(text, PytestKafkaMirrorWarning, stacklevel=3)
    return texts

