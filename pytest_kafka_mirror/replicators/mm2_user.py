"""Your own ``mm2.properties`` as the base of an ``mm2:`` replicator (``mm2:...,properties=FILE``).

A platform team that runs its own MirrorMaker 2 wants the scenarios (and the upgrade gate)
to run *its* configuration, not the plugin's template.  With ``,properties=FILE`` the
plugin reads that file (as MM2 does: ``java.util.Properties``, ISO 8859-1), keeps every
line of it and changes only what it must to run against the session's clusters and topics:

* **the clusters**: the file's ``clusters =`` line and its one enabled flow ``A->B`` say
  which alias is the source (``A``) and which the target (``B``).  Every key of ``A`` and
  ``B`` is renamed to the flow's own aliases (``source`` / ``target``: ``primary.consumer.X``
  runs as ``source.consumer.X``, ``primary->backup.tasks.max`` as
  ``source->target.tasks.max``), because the plugin's scenarios, their markers'
  ``replicator_properties``, the failover checks and the topologies name the session's
  clusters so; a remote topic is then ``source.TOPIC`` (your policy, the session's alias).
  ``clusters``, the bootstrap servers and the client security (``security.protocol``,
  ``sasl.*``, ``ssl.*``) are the session's: a line that would reach one of your clusters
  (any other ``bootstrap.servers``, a cluster the flow does not have) is dropped;
* **the flow**: its ``enabled`` line (and the reverse one off), its topic filter (the
  session's ``^PREFIX-...`` topics) and its ``groups`` (the tests' witness groups, named
  like their topics);
* **what MM2 creates on the test clusters**: the replication factor of every topic it
  creates (a test cluster has one broker, yours three), and each MM2's own Connect group
  and internal topics (else every MM2 on these clusters joins one group), and a free REST
  port where your file gives one;
* what the embedded Tansu broker needs (on Tansu clusters only).

Your ``replication.policy.*`` is kept: the target topic names are derived from it, as
for the plugin's own template.  A setting your file does not have comes from the plugin's
template (``refresh.topics.interval.seconds=2``, ``tasks.max=4`` ...: the scenarios'
timing assumes them); give it in your file to have yours.  Every change is a
:class:`Change` (logged at INFO, shown in the session header), and
:class:`~.settings.EffectiveSettings` quotes a line of your file as ``your mm2.properties
(FILE)`` and a change as ``the plugin (REASON)``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .._clientconf import masked, properties_entries
from .settings import MM2_PROPERTY_DEFAULTS

__all__ = ["CONNECTORS", "PROPERTIES_SUFFIX", "Based", "Change", "UserProperties", "apply_user_properties", "connector_scoped", "describe_based",
           "read_user_properties", "split_properties_suffix"]

#: the spec suffix that names your mm2.properties: ``mm2:4.3.1,properties=mm2.properties``
PROPERTIES_SUFFIX = ",properties="
#: Connect worker keys MM2 applies at the top level *over* each herder's own
#: (``MirrorMakerConfig.workerConfig``: ``offset.storage*``, ``status.storage*``, ``config.storage*``)
_TOP_WORKER_KEYS = frozenset(f"{kind}.storage.{what}" for kind in ("offset", "status", "config")
                             for what in ("topic", "replication.factor"))
#: a client's security settings: MM2 gives a cluster's (or the top level's) to each of its clients
_SECURITY = re.compile(r"(?:(?:consumer|producer|admin)\.)?(?:security\.protocol|security\.providers|sasl\.|ssl\.)")


#: MM2's three connectors, by the names dedicated MM2 gives them (its source offsets are stored by name)
CONNECTORS = ("MirrorSourceConnector", "MirrorCheckpointConnector", "MirrorHeartbeatConnector")


def connector_scoped(key: str) -> str | None:
    """The connector a ``MirrorSourceConnector.X`` / ``MirrorCheckpointConnector.X`` /
    ``MirrorHeartbeatConnector.X`` key is for (its class's simple name), else None: on a
    Connect cluster (``mm2-connect:``) that connector's ``X`` alone."""
    head = key.split(".", 1)[0]
    return head if head in CONNECTORS and "." in key else None


def split_properties_suffix(arg: str) -> tuple[str, str | None]:
    """``("4.3.1", "mm2.properties")`` of ``4.3.1,properties=mm2.properties``; ``(arg, None)``
    without the suffix.  The first ``,properties=`` splits: a file name may hold commas."""
    release, sep, path = arg.partition(PROPERTIES_SUFFIX)
    return (release, path) if sep else (arg, None)


@dataclass(frozen=True)
class UserProperties:
    """The lines of your mm2.properties (the last of a key wins, as in Java) and the flow they describe."""

    path: Path
    #: (line number, key, value) in file order
    lines: tuple[tuple[int, str, str], ...]
    #: every alias of its ``clusters =`` line
    clusters: tuple[str, ...]
    #: the flow it enables: ``source_alias -> target_alias``
    source_alias: str
    target_alias: str
    #: what it is, as messages name it (a Strimzi resource is read as one: replicators/strimzi.py)
    kind: str = "mm2.properties"
    #: the connectors it declares, by class (simple name), each configured on its own (a
    #: Strimzi resource's); empty: MM2's three, from the flow's keys
    connectors: tuple[str, ...] = ()

    @property
    def origin(self) -> str:
        """What a setting quoted from it says it came from."""
        return f"your {self.kind} ({self.path})"

    def renamed(self, key: str, aliases: tuple[str, str]) -> str | None:
        """``key`` with your flow's aliases renamed to ``aliases`` (the session's flow);
        None for a key of a cluster the flow does not have (it is dropped)."""
        mapping = {self.source_alias: aliases[0], self.target_alias: aliases[1]}
        for x in sorted(self.clusters, key=len, reverse=True):  # the longest alias first: "dc1" before "dc"
            for y in self.clusters:
                if x != y and key.startswith(f"{x}->{y}."):
                    if x not in mapping or y not in mapping:
                        return None
                    return f"{mapping[x]}->{mapping[y]}.{key[len(x) + len(y) + 3:]}"
        for x in sorted(self.clusters, key=len, reverse=True):
            if key.startswith(x + "."):
                return f"{mapping[x]}.{key[len(x) + 1:]}" if x in mapping else None
        return key


def read_user_properties(path: str | Path) -> UserProperties:
    """Your mm2.properties and the one flow it enables; ValueError (one line, naming the
    file) when it cannot be read or mapped onto the session's source and target."""
    p = Path(path).expanduser().resolve()
    try:
        # Kafka's tools read .properties files as ISO 8859-1 (Utils.loadProps): so does this
        text = p.read_text(encoding="iso-8859-1")
    except FileNotFoundError:
        raise ValueError(f"your mm2.properties {p}: no such file") from None
    except OSError as exc:
        raise ValueError(f"your mm2.properties {p} cannot be read: {exc.strerror or exc}") from None
    try:
        entries = {key: (line, key, value.strip()) for line, key, value, _ in properties_entries(text)}
    except ValueError as exc:
        raise ValueError(f"your mm2.properties {p}: {exc}") from None
    lines = tuple(sorted(entries.values()))
    values = {k: v for _, k, v in lines}
    clusters = tuple(dict.fromkeys(a.strip() for a in values.get("clusters", "").split(",") if a.strip()))
    example = "e.g. clusters = primary, backup and primary->backup.enabled = true"
    if len(clusters) < 2:
        said = f"clusters = {values['clusters']}" if "clusters" in values else "no clusters line"
        raise ValueError(f"your mm2.properties {p} has {said}: the plugin runs your file's one flow between the "
                         f"session's source and target and needs its two cluster aliases ({example})")
    # MM2 runs a flow X->Y of two aliases of clusters with X->Y.enabled = true (Boolean.parseBoolean)
    flows = [(x, y) for x in clusters for y in clusters
             if x != y and values.get(f"{x}->{y}.enabled", "").lower() == "true"]
    for key, value in values.items():
        m = re.fullmatch(r"([^.]+?)->([^.]+)\.enabled", key)
        missing = [alias for alias in (m.groups() if m else ()) if alias not in clusters]
        if m and missing and value.lower() == "true":
            raise ValueError(f"your mm2.properties {p} enables {m.group(1)}->{m.group(2)}, but {' and '.join(missing)} "
                             f"{'is' if len(missing) == 1 else 'are'} not in its clusters = {', '.join(clusters)}")
    if not flows:
        raise ValueError(f"your mm2.properties {p} enables no flow of clusters = {', '.join(clusters)} (MM2's "
                         f"default is off): enable the one the session is to run ({example})")
    if len(flows) > 1:
        raise ValueError(f"your mm2.properties {p} enables {len(flows)} flows ({', '.join(f'{a}->{b}' for a, b in flows)}): "
                         "the plugin runs one flow, the session's source -> target; give it a file that enables one")
    (a, b), = flows
    return UserProperties(p, lines, clusters, a, b)


@dataclass(frozen=True)
class Change:
    """One line of your file the plugin changed: ``action`` is ``replaced`` (the plugin's
    value in effect), ``removed`` (left out) or ``shadowed`` (kept, and a flow's key the
    plugin sets wins over it)."""

    line: int
    written: str  # the key as your file has it
    value: str  # its value there
    key: str  # the key as MM2 gets it (your aliases renamed)
    action: str
    now: str | None  # the value in effect (None: removed)
    reason: str
    by: str = ""  # a shadowed line: the key that wins over it

    def describe(self, values: bool = True) -> str:
        """One line: ``line 3 primary.bootstrap.servers=...: replaced by source.bootstrap.servers=... (REASON)``;
        secrets masked; without ``values`` only the keys (the session header, before the clusters exist)."""
        was = f"{self.written}={masked({self.written: self.value})[self.written]}" if values else self.written
        if self.action == "removed":
            return f"line {self.line} {was}: removed ({self.reason})"
        what = self.by or self.key
        if not values and what == self.written:
            return f"line {self.line} {was}: {self.action} ({self.reason})"
        now = f"{what}={masked({what: self.now or ''})[what]}" if values else what
        return f"line {self.line} {was}: {self.action} by {now} ({self.reason})"


@dataclass
class Based:
    """The properties MM2 runs with when your file is the base, and what the plugin did to it."""

    properties: dict[str, str]
    #: key in effect -> where it came from (your file, or the plugin and why); keys rendered
    #: from the template where your file is silent are not in it
    origins: dict[str, str]
    changes: list[Change] = field(default_factory=list)
    #: (your key, the key in effect) of each line whose aliases were renamed
    renamed: list[tuple[str, str]] = field(default_factory=list)
    #: template keys your file does not set, as rendered
    added: list[str] = field(default_factory=list)
    #: the flow's aliases your file's were renamed to
    aliases: tuple[str, str] = ("source", "target")
    #: a connector's key (``MirrorCheckpointConnector.X``) -> the override that replaced it
    overridden: dict[str, str] = field(default_factory=dict)


def _must_drop(key: str, aliases: tuple[str, str]) -> str:
    """Why a key of your file (aliases renamed) cannot stay, or ``""``."""
    scoped = key
    for alias in aliases:
        if key.startswith(alias + "."):
            scoped = key[len(alias) + 1:]
    if key.endswith("bootstrap.servers"):
        return "it would point a client at a cluster that is not the session's"
    if _SECURITY.match(scoped):
        return "your clusters' client security: the session's clusters have their own"
    if key in _TOP_WORKER_KEYS:
        return (f"MM2 applies a top-level {key} over each herder's own: this MM2 keeps its own Connect topics on the "
                "session's clusters, with the replication factor they allow")
    return ""


def apply_user_properties(user: UserProperties, template: Mapping[str, str], required: Mapping[str, str],
                          aliases: tuple[str, str]) -> Based:
    """Your lines (aliases renamed to ``aliases``) over the plugin's ``template``, with the
    keys of ``required`` (key -> why) at the template's values whatever your file says.

    The result keeps your file's order, a replaced line in its place, then what the plugin adds."""
    flows = (f"{aliases[0]}->{aliases[1]}", f"{aliases[1]}->{aliases[0]}")
    out = Based({}, {}, aliases=aliases)
    for line, written, value in user.lines:
        key = user.renamed(written, aliases)
        if key is None:
            head = written.split(".", 1)[0].split("->")
            alias = " and ".join(x for x in head if x not in (user.source_alias, user.target_alias)) or head[0]
            out.changes.append(Change(line, written, value, written, "removed", None,
                                      f"your cluster {alias} is not in the flow the session runs: nothing may reach it"))
            continue
        if key != written:
            out.renamed.append((written, key))
        if key in required:
            now = template[key]
            out.properties[key] = now
            if now == value:
                out.origins[key] = user.origin  # the plugin needs what your line says
            else:
                out.changes.append(Change(line, written, value, key, "replaced", now, required[key]))
            continue
        why = _must_drop(key, aliases)
        if why:
            out.changes.append(Change(line, written, value, key, "removed", None, why))
            continue
        out.properties[key] = value
        out.origins[key] = user.origin
        by = next((f"{flow}.{key}" for flow in flows if f"{flow}.{key}" in required), "")
        if by and template[by] != value:
            out.changes.append(Change(line, written, value, key, "shadowed", template[by], required[by], by=by))
    for key, value in template.items():
        if key not in out.properties:
            out.properties[key] = value
            if key not in required:
                out.added.append(key)
    for key, why in required.items():
        out.origins.setdefault(key, f"the plugin ({why})")
    return out


def describe_based(based: Based, user: UserProperties, *, values: bool = True) -> list[str]:
    """What the plugin did to your file, one line each: how many lines it kept, the flow's
    aliases, each changed line (:meth:`Change.describe`), what it added where your file is
    silent.  ``values``: the changed lines' values (False: the keys only, as the session
    header shows them before the clusters exist)."""
    a, b = based.aliases
    kept = len(user.lines) - len(based.changes)
    head = f"your {user.kind} {user.path}: {kept} of its {len(user.lines)} settings kept"
    if (user.source_alias, user.target_alias) != (a, b):
        head += (f"; your flow {user.source_alias}->{user.target_alias} runs as {a}->{b}, the session's "
                 f"(your {user.source_alias}.*, {user.target_alias}.* keys as {a}.*, {b}.*: {len(based.renamed)} renamed)")
    lines = [head]
    lines += [f"changed by the plugin: {change.describe(values)}" for change in based.changes]
    # what your MM2 would not do with your file alone: an added key that is MM2's default changes nothing
    defaults = {k.format(source=a, target=b): v for k, v in MM2_PROPERTY_DEFAULTS.items()}
    added = {k: based.properties[k] for k in based.added if k in based.properties and defaults.get(k) != based.properties[k]}
    shown = []
    for key, value in masked(added).items():
        # a key every declared connector sets for itself is not what any of them runs with
        own = [c for c in user.connectors if f"{c}.{key}" in based.properties]
        if own and len(own) == len(user.connectors):
            continue
        shown.append(f"{key}={value}" + (f" (not for {', '.join(own)}: its own {key} wins)" if own else ""))
    if shown:
        lines.append("added by the plugin where your file is silent and MM2's default differs (the scenarios' test "
                     "settings; set them in your file to have yours): " + ", ".join(shown))
    return lines
