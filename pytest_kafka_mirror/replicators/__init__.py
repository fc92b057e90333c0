"""Replicator backends, chosen by a spec string (``--kafka-mirror-replicator``).

=============  ====================================================================
``reference``  the built-in consume/produce mirror, run as its own process (default)
=============  ====================================================================
"""

from __future__ import annotations

from dataclasses import dataclass

from .base import NamingPolicy, Replicator, ReplicatorError, parse_naming

__all__ = ["NamingPolicy", "Replicator", "ReplicatorError", "ReplicatorSpec", "parse_naming", "parse_replicator_spec"]

ACCEPTED = "reference"


@dataclass(frozen=True)
class ReplicatorSpec:
    kind: str
    arg: str = ""

    def __str__(self) -> str:
        return f"{self.kind}:{self.arg}" if self.arg else self.kind


def parse_replicator_spec(text: str) -> ReplicatorSpec:
    text = text.strip()
    kind, _, arg = text.partition(":")
    if kind == "reference" and not arg:
        return ReplicatorSpec("reference")
    raise ValueError(f"unknown replicator spec {text!r}; accepted: {ACCEPTED}")
