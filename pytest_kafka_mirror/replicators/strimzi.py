"""A Strimzi ``KafkaMirrorMaker2`` resource as written (``mm2-connect:VERSION,strimzi=FILE``).

Strimzi's operator (and Red Hat's Streams for Apache Kafka) turns a ``KafkaMirrorMaker2``
resource into a Kafka Connect cluster of ``spec.replicas`` workers and MM2's connectors
created through its REST API.  :func:`read_strimzi` reads the resource and states it in the
terms :mod:`.mm2_user` already runs a user's mm2.properties by: one flow ``S->T`` and its
lines, each with the line of the YAML it came from, so that every setting the plugin keeps
is quoted as ``your KafkaMirrorMaker2 resource (FILE)`` and every one it changes is said
with the reason (the session's clusters, its topics, its own Connect group ...):

==================================================  =======================================
the resource (``kafka.strimzi.io/v1``; ``v1beta2``)  the flow's line
==================================================  =======================================
``target.alias``, ``mirrors[0].source.alias``       ``clusters = S, T``, ``S->T.enabled``
  (v1beta2: ``connectCluster``, ``clusters[]``,
  ``mirrors[].sourceCluster`` / ``targetCluster``)
``bootstrapServers``, ``tls``, ``authentication``   ``S.bootstrap.servers``,
                                                    ``S.security.protocol``, ``S.sasl.mechanism``
a cluster's ``config``                              ``S.X`` / ``T.X`` (the target's: the workers')
``target.groupId``, ``*StorageTopic``               ``T.group.id``, ``T.config.storage.topic`` ...
``sourceConnector.tasksMax`` / ``.config``          ``MirrorSourceConnector.tasks.max`` / ``.X``
``checkpointConnector`` (v1beta2:                   ``MirrorCheckpointConnector.X``
  ``heartbeatConnector``)                           (``MirrorHeartbeatConnector.X``)
``topicsPattern``, ``groupsPattern``, ``*Exclude*``  ``S->T.topics``, ``S->T.groups``, ``.exclude``
==================================================  =======================================

Only the connectors the resource declares are created (Strimzi's v1 API has no heartbeat
connector), named as Strimzi names them (``S->T.MirrorSourceConnector``); a connector key
(``MirrorSourceConnector.X``) reaches that connector alone.  A cluster's ``config`` key the
operator forbids (``group.id``, ``ssl.``, ``sasl.``, ``security.``, ``bootstrap.servers``,
``listeners``, ``rest.`` ...) is ignored, as Strimzi ignores it.  Kubernetes' part of the
resource (``resources``, ``template``, ``jvmOptions``, ``logging``, ``metricsConfig``,
``rack``, ``tracing``, ``image`` ...) is said not applied.

Refused, with the reason: a resource that is not a ``KafkaMirrorMaker2``, mirrors from more
than one source cluster or to a cluster other than the Connect cluster's (a third cluster:
the plugin runs one flow), a connector declared ``paused`` or ``stopped``, a value the
operator's config providers would fill in (``${strimzisecrets:...}``: they exist only in
Strimzi's pods) on a line the plugin keeps.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Callable
from typing import Any

from .mm2_user import UserProperties

__all__ = ["STRIMZI_OPTION", "StrimziResource", "read_strimzi"]

#: the spec option that names the resource: ``mm2-connect:4.3.1,strimzi=mm2.yaml``
STRIMZI_OPTION = "strimzi"
#: what a setting quoted from a resource says it came from
KIND = "KafkaMirrorMaker2 resource"
#: the resource's connectors (the v1 API has no heartbeat connector), by their spec field
CONNECTOR_FIELDS = {"sourceConnector": "MirrorSourceConnector", "checkpointConnector": "MirrorCheckpointConnector",
                    "heartbeatConnector": "MirrorHeartbeatConnector"}
#: KafkaMirrorMaker2ClusterSpec.FORBIDDEN_PREFIXES and its exceptions (Strimzi ignores these keys of a cluster's config)
FORBIDDEN = ("group.id", "config.storage.topic", "offset.storage.topic", "status.storage.topic", "ssl.", "sasl.",
             "security.", "listeners", "plugin.path", "rest.", "bootstrap.servers", "consumer.interceptor.classes",
             "producer.interceptor.classes")
FORBIDDEN_EXCEPTIONS = ("ssl.endpoint.identification.algorithm", "ssl.cipher.suites", "ssl.protocol",
                        "ssl.enabled.protocols")
#: the parts of a resource that are about its pods, not about what MM2 does
KUBERNETES = ("image", "resources", "livenessProbe", "readinessProbe", "jvmOptions", "jmxOptions", "logging",
              "clientRackInitImage", "rack", "tracing", "template", "metricsConfig", "externalConfiguration",
              "build", "plugins")
_PROVIDER = re.compile(r"\$\{(strimzi\w*|env|file|directory|secrets?|configmaps?):")
_SASL = {"scram-sha-512": "SCRAM-SHA-512", "scram-sha-256": "SCRAM-SHA-256", "plain": "PLAIN", "oauth": "OAUTHBEARER"}


@dataclass(frozen=True)
class StrimziResource:
    """A ``KafkaMirrorMaker2`` resource as the flow the plugin runs (see the module docstring)."""

    #: its settings as a flow's lines (line = the YAML's), the base of the rendered MM2, and
    #: the connectors it declares (``user.connectors``)
    user: UserProperties
    name: str = ""
    api: str = "v1"
    #: ``spec.replicas``: the workers of its Connect cluster (None: not given; Strimzi's default is 3)
    replicas: int | None = None
    #: ``spec.version``: the Kafka release it asks for (the spec's VERSION runs)
    version: str | None = None
    #: what is not applied here (its Kubernetes part, keys Strimzi ignores), one line each
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def connectors(self) -> tuple[str, ...]:
        """The connectors it declares, by class (simple name), in Strimzi's order."""
        return self.user.connectors

    def connector_names(self, source_alias: str, target_alias: str) -> dict[str, str]:
        """Class -> connector name, as Strimzi names them (``S->T.MirrorSourceConnector``)."""
        return {cls: f"{source_alias}->{target_alias}.{cls}" for cls in self.connectors}


class _Reader:
    """The resource's tree, with the line of each key; errors name the file and the field."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lines: list[tuple[int, str, str]] = []
        self.notes: list[str] = []

    def fail(self, why: str) -> ValueError:
        return ValueError(f"your {KIND} {self.path}: {why}")

    def add(self, line: int, key: str, value: Any, where: str) -> None:
        if isinstance(value, (dict, list)):
            raise self.fail(f"line {line} {where}: a {type(value).__name__} where a setting's value belongs")
        self.lines.append((line, key, _java(value)))


def _java(value: Any) -> str:
    """A YAML scalar as a Java properties value (``true``, ``-1``, ``""`` for null)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def _tree(node: Any) -> Any:
    """A YAML node as (value, line) pairs: mappings as dicts, sequences as lists."""
    import yaml

    if isinstance(node, yaml.MappingNode):
        return {str(k.value): (_tree(v), k.start_mark.line + 1) for k, v in node.value}
    if isinstance(node, yaml.SequenceNode):
        return [(_tree(v), v.start_mark.line + 1) for v in node.value]
    return yaml.constructor.SafeConstructor().construct_object(node)


def _plain(tree: Any) -> Any:
    if isinstance(tree, dict):
        return {k: _plain(v) for k, (v, _) in tree.items()}
    if isinstance(tree, list):
        return [_plain(v) for v, _ in tree]
    return tree


def _documents(path: Path, text: str, reader: _Reader) -> dict[str, Any]:
    try:
        import yaml
    except ImportError:
        raise reader.fail("reading it needs PyYAML: pip install 'pytest-kafka-mirror[strimzi]'") from None
    try:
        docs = [_tree(d) for d in yaml.compose_all(text, Loader=yaml.SafeLoader) if d is not None]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark is not None else ""
        raise reader.fail(f"not YAML{at}: {getattr(exc, 'problem', None) or exc}") from None
    kinds = [d for d in docs if isinstance(d, dict) and _plain(d.get("kind", (None, 0))[0]) == "KafkaMirrorMaker2"]
    if not kinds:
        found = sorted({str(_plain(d.get("kind", ("?", 0))[0])) for d in docs if isinstance(d, dict)}) or ["nothing"]
        raise reader.fail(f"no KafkaMirrorMaker2 in it (it holds {', '.join(found)})")
    if len(kinds) > 1:
        raise reader.fail(f"{len(kinds)} KafkaMirrorMaker2 resources: give a file with the one the session runs")
    return kinds[0]


def read_strimzi(path: str | Path) -> StrimziResource:
    """The resource in ``path`` as a flow (see the module docstring); ValueError (one line,
    naming the file and the field) for what cannot be read or honoured."""
    p = Path(path).expanduser().resolve()
    reader = _Reader(p)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise reader.fail("no such file") from None
    except OSError as exc:
        raise reader.fail(f"cannot be read: {exc.strerror or exc}") from None
    doc = _documents(p, text, reader)
    api = str(_plain(doc.get("apiVersion", ("", 0))[0])).rpartition("/")[2] or "v1"
    name = str(_plain(doc.get("metadata", ({}, 0))[0]).get("name", ""))
    spec, spec_line = doc.get("spec", ({}, 0))
    if not isinstance(spec, dict):
        raise reader.fail("no spec")
    target, mirrors = _clusters(reader, spec, spec_line)
    source, t_alias = str(_plain(mirrors[0][0]["source"][0]["alias"][0])), str(_plain(target[0]["alias"][0]))
    flow = f"{source}->{t_alias}"
    reader.lines.append((target[1], "clusters", f"{source}, {t_alias}"))
    reader.lines.append((mirrors[0][1], f"{flow}.enabled", "true"))
    _cluster(reader, source, mirrors[0][0]["source"], "spec.mirrors[0].source")
    _cluster(reader, t_alias, target, "spec.target" if api != "v1beta2" else f"spec.clusters ({t_alias})")
    for key, what in (("groupId", "group.id"), ("configStorageTopic", "config.storage.topic"),
                      ("offsetStorageTopic", "offset.storage.topic"), ("statusStorageTopic", "status.storage.topic")):
        if key in target[0]:
            value, line = target[0][key]
            reader.add(line, f"{t_alias}.{what}", _plain(value), f"spec.target.{key}")
    connectors = _mirror(reader, mirrors[0][0], flow, api)
    replicas = spec.get("replicas", (None, 0))[0]
    if replicas is not None and (not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 1):
        raise reader.fail(f"line {spec['replicas'][1]} spec.replicas: {replicas!r}: a number of Connect workers")
    for key in KUBERNETES:
        if key in spec:
            reader.notes.append(f"line {spec[key][1]} spec.{key}: not applied (the deployment of Strimzi's pods, "
                                "not what MirrorMaker 2 does)")
    version = spec.get("version", (None, 0))[0]
    if version is not None:
        reader.notes.append(f"line {spec['version'][1]} spec.version {version}: not applied (the release that runs is "
                            "the replicator spec's, mm2-connect:VERSION)")
    entries = {key: (line, key, value) for line, key, value in reader.lines}  # the last of a key wins
    lines = tuple(sorted(entries.values()))
    user = UserProperties(p, lines, (source, t_alias), source, t_alias, kind=KIND, connectors=connectors)
    return StrimziResource(user, name=name, api=api, replicas=replicas,
                           version=None if version is None else str(version), notes=tuple(reader.notes))


def _clusters(reader: _Reader, spec: dict[str, Any], spec_line: int) -> tuple[Any, list[Any]]:
    """``(target, mirrors)``: the Connect cluster's cluster entry and the mirrors, each
    mirror with its ``source`` cluster entry (v1beta2's aliases looked up)."""
    mirrors = spec.get("mirrors", ([], spec_line))[0]
    if not isinstance(mirrors, list) or not mirrors:
        raise reader.fail("spec.mirrors is empty: the resource mirrors nothing")
    if "target" in spec:
        target = spec["target"]
        for i, (m, line) in enumerate(mirrors):
            if "source" not in m:
                raise reader.fail(f"line {line} spec.mirrors[{i}] has no source")
    elif "clusters" in spec:
        by_alias = {_plain(c["alias"][0]): (c, line) for c, line in spec["clusters"][0] if "alias" in c}
        connect = _plain(spec.get("connectCluster", (None, 0))[0])
        if connect not in by_alias:
            raise reader.fail(f"spec.connectCluster {connect!r} is none of spec.clusters ({', '.join(by_alias)})")
        target = by_alias[connect]
        for i, (m, line) in enumerate(mirrors):
            src, dst = _plain(m.get("sourceCluster", (None, 0))[0]), _plain(m.get("targetCluster", (None, 0))[0])
            if dst != connect:
                raise reader.fail(f"line {line} spec.mirrors[{i}] copies to {dst}, not to the Connect cluster "
                                  f"{connect}: a third cluster (the plugin runs one flow, source -> target)")
            if src not in by_alias:
                raise reader.fail(f"line {line} spec.mirrors[{i}].sourceCluster {src!r} is none of spec.clusters")
            m["source"] = by_alias[src]
    else:
        raise reader.fail("its spec has neither target (kafka.strimzi.io/v1) nor clusters and connectCluster "
                          "(v1beta2)")
    if "alias" not in target[0]:
        raise reader.fail(f"line {target[1]}: the target cluster has no alias")
    first = _plain(mirrors[0][0]["source"][0].get("alias", (None, 0))[0])
    if first is None:
        raise reader.fail(f"line {mirrors[0][1]}: the first mirror's source cluster has no alias")
    for i, (m, line) in enumerate(mirrors[1:], 1):
        other = _plain(m["source"][0].get("alias", (None, 0))[0])
        why = ("a second mirror of the same flow" if other == first else
               f"a mirror from {other}, a third cluster")
        raise reader.fail(f"line {line} spec.mirrors[{i}]: {why} (the plugin runs one flow, the session's "
                          f"source -> target: the first mirror, from {first})")
    return target, mirrors


def _cluster(reader: _Reader, alias: str, entry: Any, where: str) -> None:
    """A cluster's bootstrap servers, client security and config as ``ALIAS.X`` lines."""
    cluster, line = entry
    if "bootstrapServers" in cluster:
        value, at = cluster["bootstrapServers"]
        reader.add(at, f"{alias}.bootstrap.servers", value, f"{where}.bootstrapServers")
    tls = "tls" in cluster
    auth = _plain(cluster.get("authentication", (None, 0))[0])
    if tls or auth:
        at = cluster.get("authentication", cluster.get("tls", (None, line)))[1]
        sasl = bool(auth) and auth.get("type") != "tls"
        protocol = ("SASL_SSL" if tls else "SASL_PLAINTEXT") if sasl else "SSL"
        reader.add(at, f"{alias}.security.protocol", protocol, f"{where}.tls / authentication")
        if sasl:
            reader.add(at, f"{alias}.sasl.mechanism", _SASL.get(str(auth.get("type")), str(auth.get("type"))),
                       f"{where}.authentication.type")
    config = cluster.get("config", ({}, line))[0] or {}
    for key, (value, at) in config.items():
        if key.startswith(FORBIDDEN) and not key.startswith(FORBIDDEN_EXCEPTIONS):
            reader.notes.append(f"line {at} {where}.config.{key}: ignored, as Strimzi's operator ignores it (a "
                                "forbidden option: the operator sets it)")
            continue
        reader.add(at, f"{alias}.{key}", _plain(value), f"{where}.config.{key}")


def _mirror(reader: _Reader, mirror: dict[str, Any], flow: str, api: str) -> tuple[str, ...]:
    """The mirror's connectors (their ``CLASS.X`` lines) and topic and group patterns."""
    present = []
    for spec_field, cls in CONNECTOR_FIELDS.items():
        if spec_field not in mirror:
            continue
        if cls == "MirrorHeartbeatConnector" and api == "v1":
            raise reader.fail(f"line {mirror[spec_field][1]}: heartbeatConnector is not in Strimzi's v1 API (its "
                              "operator refuses it): v1beta2 has it")
        connector, line = mirror[spec_field]
        connector = connector or {}
        state = _plain(connector.get("state", (None, 0))[0])
        if state in ("paused", "stopped") or _plain(connector.get("pause", (False, 0))[0]) is True:
            raise reader.fail(f"line {line} {spec_field} is {state or 'paused'}: the scenarios copy records "
                              "through it (give the resource it runs with)")
        present.append(cls)
        if "tasksMax" in connector:
            value, at = connector["tasksMax"]
            reader.add(at, f"{cls}.tasks.max", value, f"{spec_field}.tasksMax")
        for key, (value, at) in (connector.get("config", ({}, line))[0] or {}).items():
            reader.add(at, f"{cls}.{key}", _plain(value), f"{spec_field}.config.{key}")
        for key in ("autoRestart", "version", "listOffsets", "alterOffsets"):
            if key in connector:
                reader.notes.append(f"line {connector[key][1]} {spec_field}.{key}: not applied (the operator's "
                                    "management of the connector; the plugin checks its health between tests)")
    if not present:
        raise reader.fail("spec.mirrors[0] declares no connector (sourceConnector, checkpointConnector)")
    for spec_field, key in (("topicsPattern", "topics"), ("topicsExcludePattern", "topics.exclude"),
                            ("groupsPattern", "groups"), ("groupsExcludePattern", "groups.exclude")):
        if spec_field in mirror:
            value, at = mirror[spec_field]
            reader.add(at, f"{flow}.{key}", _plain(value), spec_field)
    return tuple(present)


def refuse_providers(resource: StrimziResource, kept: Callable[[str], bool]) -> None:
    """ValueError for a setting the plugin keeps (``kept(key as written)``) whose value one
    of Strimzi's config providers fills in."""
    for line, key, value in resource.user.lines:
        if _PROVIDER.search(value) and kept(key):
            raise ValueError(f"your {KIND} {resource.user.path}: line {line} {key}: {value!r} needs a config provider "
                             "of Strimzi's pods, which this run has not: give the value itself")
