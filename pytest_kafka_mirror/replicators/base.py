"""The replicator protocol and topic naming policies."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

__all__ = ["NamingPolicy", "Replicator", "ReplicatorError", "parse_naming"]

NAMING_ACCEPTED = "identity | prefix:PREFIX (e.g. prefix:source.)"


class ReplicatorError(RuntimeError):
    """A replicator could not be started or controlled."""


@dataclass(frozen=True)
class NamingPolicy:
    """How a source topic is named on the target (MM2's ReplicationPolicy, in short)."""

    prefix: str = ""

    def target(self, source_topic: str) -> str:
        return self.prefix + source_topic

    def __str__(self) -> str:
        return f"prefix:{self.prefix}" if self.prefix else "identity"


def parse_naming(text: str) -> NamingPolicy:
    text = text.strip()
    if text == "identity":
        return NamingPolicy()
    kind, sep, prefix = text.partition(":")
    if kind == "prefix" and sep and prefix and all(c.isalnum() or c in "._-" for c in prefix):
        return NamingPolicy(prefix)
    raise ValueError(f"unknown topic naming policy {text!r}; accepted: {NAMING_ACCEPTED}")


@runtime_checkable
class Replicator(Protocol):
    """Something that copies topics from the source cluster to the target cluster.

    Lifecycle verbs are uniform across backends: ``stop`` is SIGTERM (graceful), ``kill``
    SIGKILL, ``pause`` / ``resume`` SIGSTOP / SIGCONT (a container: ``docker pause``).
    A backend whose class sets ``controllable = False`` (``external:``) is not the
    plugin's to stop: its verbs raise ReplicatorError and the fixture leaves it running.
    """

    spec: str
    naming: NamingPolicy

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def kill(self) -> None: ...

    def pause(self) -> None: ...

    def resume(self) -> None: ...

    def target_topic(self, source_topic: str) -> str: ...

    def logs(self, lines: int = 50) -> str: ...

    def describe(self) -> str: ...
