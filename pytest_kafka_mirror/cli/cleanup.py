"""``kafka-mirror cleanup``: what sessions left on clusters the plugin does not run.

A session deletes exactly the topics and witness groups it created (``provisioning``);
what came back after that (a replicator's consumer still assigned to them, a broker with
``auto.create.topics.enable=true``), or what a killed session never deleted, stays.
This command lists every topic of the plugin's prefix (``PREFIX-…``, and the copies a
replicator named ``ALIAS.PREFIX-…``) and every consumer group ``PREFIX-…`` on the given
clusters; it deletes nothing unless given ``--yes``, and then deletes them with the
loop of ``clusters/removal.py`` (delete, wait, check again, delete what came back) and
says what stayed and why.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from typing import Any

from ..clusters.removal import ROUNDS, WAIT
from ..config import OPTIONS_BY_NAME
from .stages import _add_client_options, _register_client_config, _seconds

__all__ = ["add_cleanup_command", "plugin_names"]

#: exit statuses (commands.EXIT_BAD_INPUT; not imported: commands imports this module)
EXIT_STAYED, EXIT_BAD_INPUT = 1, 2


def plugin_names(names: set[str], prefix: str, *, copies: bool = True) -> list[str]:
    """The names of ``names`` that are the plugin's under ``prefix``: ``PREFIX-…`` and,
    with ``copies``, a replicator's copies of them named ``ALIAS.PREFIX-…`` (MirrorMaker 2's
    DefaultReplicationPolicy, once or over several hops)."""
    pattern = re.compile(rf"(?:[^.]+\.)*{re.escape(prefix)}-" if copies else rf"{re.escape(prefix)}-")
    return sorted(n for n in names if pattern.match(n))


class _Refused(Exception):
    """A cluster that does not answer or refuses a listing: one line, exit 2."""


def _clusters(args: argparse.Namespace) -> list[Any]:
    """The given clusters, each answering (:class:`_Refused` naming the one that does not)."""
    from ..clusters.base import ClusterError
    from ..clusters.bootstrap import BootstrapCluster

    clusters = []
    for servers in dict.fromkeys(args.bootstrap):  # each once, in the order given
        cluster = BootstrapCluster("cluster", servers, connect_timeout=args.connect_timeout,
                                   given_by="--bootstrap (HOST:PORT[,...])")
        try:
            cluster.start()
        except ClusterError as exc:
            raise _Refused(str(exc)) from None
        clusters.append(cluster)
    return clusters


def _found(cluster: Any, prefix: str) -> tuple[list[str], list[str], str]:
    """(topics, consumer groups, why the groups could not be listed) of ``prefix`` on ``cluster``."""
    from ..clusters.removal import GROUPS, TOPICS

    admin = cluster.admin()
    try:
        topics = plugin_names(TOPICS.listing(admin), prefix)
    except Exception as exc:
        raise _Refused(f"{cluster.bootstrap_servers}: cannot list its topics: {_one_line(exc)}") from None
    try:
        groups, why = plugin_names(GROUPS.listing(admin), prefix, copies=False), ""
    except Exception as exc:  # a cluster may refuse ListGroups to this account: the topics still go
        groups, why = [], _one_line(exc)
    return topics, groups, why


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _listed(clusters: list[Any], prefix: str) -> list[Any]:
    """Print what each cluster holds of ``prefix``; the removals of it."""
    from ..clusters.removal import GROUPS, TOPICS, Removal

    removals = []
    for cluster in clusters:
        address = cluster.bootstrap_servers
        topics, groups, why = _found(cluster, prefix)
        if not topics and not groups:
            print(f"{address}: nothing of prefix {prefix}")
        else:
            print(f"{address}: {len(topics)} topic(s) and {len(groups)} consumer group(s) of prefix {prefix}:")
            for kind, names in (("topic", topics), ("group", groups)):
                for name in names:
                    print(f"  {kind} {name}")
        if why:
            print(f"{address}: its consumer groups could not be listed ({why}); they are left alone")
        removals += [Removal(cluster, names, kind, address, address)
                     for kind, names in ((TOPICS, topics), (GROUPS, groups)) if names]
    return removals


def _cmd_cleanup(args: argparse.Namespace) -> int:
    from ..clusters.removal import remove, stayed_lines

    if not _register_client_config(args, "cleanup"):
        return EXIT_BAD_INPUT
    try:
        removals = _listed(_clusters(args), args.topic_prefix)
    except _Refused as exc:
        print(f"kafka-mirror cleanup: {_one_line(exc)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if not removals:
        return 0
    if not args.yes:
        print("nothing deleted; --yes deletes them")
        return 0
    remove(removals, rounds=ROUNDS, wait=WAIT)
    for r in removals:
        print(r.said())
    stayed = stayed_lines(removals)
    for line in stayed:
        print(line)
    return EXIT_STAYED if stayed or any(r.failed for r in removals) else 0


def add_cleanup_command(sub: Any, add_option: Callable[..., None]) -> None:
    """``cleanup`` on ``kafka-mirror``'s subparsers (``add_option``: how ``commands`` adds
    one of the plugin's options to a command)."""
    c = sub.add_parser(
        "cleanup", help="list (with --yes: delete) the plugin's topics and consumer groups left on clusters",
        description="List every topic of the plugin's prefix (PREFIX-..., and a replicator's copies ALIAS.PREFIX-...) "
                    "and every consumer group PREFIX-... (the failover witnesses') on the given clusters; nothing is "
                    "deleted without --yes. With --yes each is deleted, then the clusters are checked again for a "
                    f"few seconds and what came back is deleted again, up to {ROUNDS} times (a consumer still "
                    "assigned to a deleted topic recreates it on a broker with auto.create.topics.enable=true); what "
                    "stayed is named with the reason. Run it when no session uses the prefix: it deletes by name "
                    "pattern. Exit status: 0 nothing left (or a dry run), 1 something stayed or could not be "
                    "deleted, 2 bad input or an unreachable cluster.")
    c.add_argument("--bootstrap", required=True, action="append", metavar="HOST:PORT[,...]",
                   help="a cluster (its bootstrap servers); repeat for each cluster, e.g. source and target; the "
                        "--client-config properties go to the clients of every one")
    add_option(c, "--topic-prefix", OPTIONS_BY_NAME["topic-prefix"])
    c.add_argument("--yes", action="store_true", help="delete them (without it: list them only)")
    c.add_argument("--connect-timeout", type=_seconds, default=10.0, metavar="SECONDS",
                   help="limit for each cluster to answer. Default: %(default)r")
    _add_client_options(c, "given")
    c.set_defaults(func=_cmd_cleanup)

