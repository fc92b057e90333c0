"""What a replicator's offset commits allow: the records a stop without a commit copies again.

A replicator commits how far it copied every commit interval (MirrorMaker 2: its copying
herder's ``offset.flush.interval.ms``; the legacy MirrorMaker: ``offset.commit.interval.ms``;
the reference mirror: ``--commit-interval``) and at a graceful stop.  One that dies
without committing (SIGKILL, a node lost, a stop that cannot commit) resumes from its
last commit and copies again what it copied since: at most one interval's records, and
the records it had sent but the target had not acknowledged yet (it commits only what the
target acknowledged), at most ``in_flight_s`` of them for a replicator within its latency
SLO.  While it keeps up with the producers, that is the produce rate times the topics
times the interval (plus that window); a replicator killed while it works off a backlog
copies faster than the producers write and may repeat more.

The scenarios that kill or switch a replicator mid-stream bound their duplicates with
:func:`duplicates_bound`, record the bound as a figure of the verification, and fail
with :meth:`DuplicatesBound.exceeded`, which says how the bound was derived.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["DuplicatesBound", "duplicates_bound"]


@dataclass(frozen=True)
class DuplicatesBound:
    """At most how many records a stop without a commit may copy again: what was produced
    in one commit interval of ``replicator``."""

    records: int
    rate: float  # messages/s per topic
    topics: int
    interval_s: float
    replicator: str  # its spec
    setting: str  # where the interval comes from, as in effect: "KEY=VALUE" and where it was set
    in_flight_s: float = 0.0  # the records sent but not acknowledged yet: at most this long's

    @property
    def how(self) -> str:
        """How the bound was derived, e.g. for ``run.record_figure``."""
        flight = f" + {self.in_flight_s:g} s in flight (the latency SLO)" if self.in_flight_s else ""
        return (f"{self.rate:g} msg/s x {self.topics} topic{'' if self.topics == 1 else 's'} x ({self.replicator}'s "
                f"commit interval {self.interval_s:g} s ({self.setting}){flight})")

    def exceeded(self, duplicated: int, what: str) -> str:
        """The failure message when ``duplicated`` records were copied twice ``what`` (e.g.
        "after the SIGKILL"), more than the bound."""
        return (f"{duplicated} records copied twice {what}, more than one commit interval's records allow: "
                f"{self.records} = {self.how}. A replicator resumes from its last commit, so a stop without "
                f"one repeats at most what it copied since (and what was still in flight); more means it resumed "
                f"from further back")


def duplicates_bound(replicator: Any, *, rate: float, topics: int, in_flight_s: float = 0.0) -> DuplicatesBound:
    """The records ``replicator`` may copy again when it stops without committing, while
    ``topics`` topics are produced at ``rate`` messages/s each: ``rate x topics x`` (its
    ``commit_interval_s`` + ``in_flight_s``, the records sent and not acknowledged yet when
    it stopped: a scenario's latency SLO), rounded down, with ``commit_interval_setting``
    saying where the interval comes from.  ValueError for a replicator that states no commit
    interval."""
    interval = getattr(replicator, "commit_interval_s", None)
    spec = getattr(replicator, "spec", type(replicator).__name__)
    if interval is None:
        raise ValueError(f"{spec} states no commit interval (commit_interval_s): no bound of its duplicates to derive")
    setting = getattr(replicator, "commit_interval_setting", None) or "its commit_interval_s"
    return DuplicatesBound(records=int(rate * topics * (float(interval) + in_flight_s)), rate=rate, topics=topics,
                           interval_s=float(interval), replicator=spec, setting=setting, in_flight_s=in_flight_s)
