"""Cluster backends, chosen by a spec string (``--kafka-mirror-source`` / ``-target``).

=========================  ==================================================
``tansu``                  embedded Tansu broker process (default)
``bootstrap:HOST:PORT,…``  an existing cluster, no lifecycle
=========================  ==================================================

A backend is one module implementing :class:`~.base.Cluster`; adding one means adding
a module and one entry in :data:`BACKENDS`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass

from .base import Capabilities, Cluster, ClusterError

__all__ = ["Capabilities", "Cluster", "ClusterError", "ClusterSpec", "make_cluster", "parse_cluster_spec"]

_HOSTPORT = re.compile(r"^[A-Za-z0-9._\-]+:\d{1,5}$|^\[[0-9a-fA-F:]+\]:\d{1,5}$")

ACCEPTED = "tansu | bootstrap:HOST:PORT[,HOST:PORT...]"


@dataclass(frozen=True)
class ClusterSpec:
    kind: str
    arg: str = ""

    def __str__(self) -> str:
        return f"{self.kind}:{self.arg}" if self.arg else self.kind


def parse_cluster_spec(text: str) -> ClusterSpec:
    """Parse a cluster spec; raises ValueError naming the accepted forms."""
    text = text.strip()
    kind, _, arg = text.partition(":")
    if kind == "tansu" and not arg:
        return ClusterSpec("tansu")
    if kind == "bootstrap":
        servers = [s.strip() for s in arg.split(",") if s.strip()]
        if not servers:
            raise ValueError(f"{text!r}: bootstrap needs at least one HOST:PORT; accepted: {ACCEPTED}")
        for s in servers:
            if not _HOSTPORT.match(s) or not 0 < int(s.rsplit(":", 1)[1]) < 65536:
                raise ValueError(f"{text!r}: {s!r} is not HOST:PORT; accepted: {ACCEPTED}")
        return ClusterSpec("bootstrap", ",".join(servers))
    raise ValueError(f"unknown cluster spec {text!r}; accepted: {ACCEPTED}")


def _tansu(name: str, spec: ClusterSpec, workdir: str) -> Cluster:
    from .tansu import TansuCluster

    return TansuCluster(name, workdir)


def _bootstrap(name: str, spec: ClusterSpec, workdir: str) -> Cluster:
    from .bootstrap import BootstrapCluster

    return BootstrapCluster(name, spec.arg)


BACKENDS: dict[str, Callable[[str, ClusterSpec, str], Cluster]] = {
    "tansu": _tansu,
    "bootstrap": _bootstrap,
}


def make_cluster(name: str, spec: ClusterSpec | str, workdir: str | os.PathLike[str]) -> Cluster:
    """Build (not start) the cluster a spec names."""
    if isinstance(spec, str):
        spec = parse_cluster_spec(spec)
    return BACKENDS[spec.kind](name, spec, os.fspath(workdir))
