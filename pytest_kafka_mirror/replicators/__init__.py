"""Replicator backends, chosen by a spec string (``--kafka-mirror-replicator``).

====================  ==============================================================
``reference``         the built-in consume/produce mirror, run as its own process (default)
``reference:KNOBS``   the same, injecting faults into every topic, e.g.
                      ``reference:drop=0.01,seed=7`` (see :class:`Knobs`)
====================  ==============================================================
"""

from __future__ import annotations

from dataclasses import dataclass

from ._knobs import FaultLedger, Knobs, parse_knobs
from .base import NamingPolicy, Replicator, ReplicatorError, parse_naming

__all__ = ["FaultLedger", "Knobs", "NamingPolicy", "Replicator", "ReplicatorError", "ReplicatorSpec", "parse_knobs",
           "parse_naming", "parse_replicator_spec"]

ACCEPTED = "reference | reference:KNOBS (e.g. reference:drop=0.01,seed=7)"


@dataclass(frozen=True)
class ReplicatorSpec:
    kind: str
    arg: str = ""

    @property
    def faults(self) -> Knobs:
        """The fault knobs of a ``reference:KNOBS`` spec (none for other specs)."""
        return parse_knobs(self.arg) if self.kind == "reference" and self.arg else Knobs()

    def __str__(self) -> str:
        return f"{self.kind}:{self.arg}" if self.arg else self.kind


def parse_replicator_spec(text: str) -> ReplicatorSpec:
    text = text.strip()
    kind, _, arg = text.partition(":")
    if kind == "reference":
        if arg:
            try:
                parse_knobs(arg)
            except ValueError as exc:
                raise ValueError(f"replicator spec {text!r}: {exc}") from None
        return ReplicatorSpec("reference", arg)
    raise ValueError(f"unknown replicator spec {text!r}; accepted: {ACCEPTED}")
