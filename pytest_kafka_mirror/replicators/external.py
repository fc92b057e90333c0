"""``external:POLICY``: a replicator someone else runs; the spec names its topic naming.

The plugin cannot start, stop or signal it: ``kill``, ``pause``, ``resume`` and
``restart`` raise :class:`ReplicatorError` (a fault scenario must not pass without its
fault), and the fixture does not stop it at teardown.  ``start()`` only checks that it
is copying: a probe record produced on the source must arrive on the target under the
named policy, which catches a wrong policy or topic filter before any test runs.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from ._probe import probe_topic_name, wait_replicating
from .base import NamingPolicy, ReplicatorBase, ReplicatorError

if TYPE_CHECKING:
    from ..clusters.base import Cluster

__all__ = ["ExternalReplicator"]


class ExternalReplicator(ReplicatorBase):
    """A replicator the plugin only checks and names topics for (see the module docstring)."""

    controllable = False

    def __init__(
        self, source: Cluster, target: Cluster, *, naming: NamingPolicy, topic_prefix: str, startup_timeout: float
    ) -> None:
        self.source = source
        self.target = target
        self.naming = naming
        self.topic_prefix = topic_prefix
        self.startup_timeout = startup_timeout
        self.spec = f"external:{naming}"
        self.probe_topic: str = probe_topic_name(topic_prefix)

    def target_topic(self, source_topic: str) -> str:
        return self.naming.target(source_topic)

    def start(self) -> None:
        """Check it copies ``PREFIX-…`` topics under the named policy (probe record)."""
        t0 = time.monotonic()
        wait_replicating(
            self.source.bootstrap_servers, self.target.bootstrap_servers, self.probe_topic,
            self.target_topic(self.probe_topic),
            timeout=self.startup_timeout, what="the external replicator",
        )
        self.startup_seconds = time.monotonic() - t0

    def _uncontrolled(self, verb: str) -> ReplicatorError:
        return ReplicatorError(
            f"cannot {verb} the replicator: it is external (--kafka-mirror-replicator {self.spec}) and the plugin "
            "does not control its processes. Run this scenario with a replicator the plugin starts (reference, "
            "mm2:…, command:…), or skip it with pytest.mark.skipif on the replicator spec."
        )

    def stop(self) -> None:
        raise self._uncontrolled("stop")

    def kill(self) -> None:
        raise self._uncontrolled("kill")

    def pause(self) -> None:
        raise self._uncontrolled("pause")

    def resume(self) -> None:
        raise self._uncontrolled("resume")

    def restart(self) -> None:
        raise self._uncontrolled("restart")

    @property
    def running(self) -> bool:
        return True  # as far as the plugin knows; start() proved it copies

    def logs(self, lines: int = 50) -> str:
        return "(external replicator: its log is not available to the plugin)"

    def describe(self) -> str:
        return f"external replicator {self.source.bootstrap_servers} -> {self.target.bootstrap_servers} ({self.naming})"
