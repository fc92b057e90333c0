"""Falling behind: when a throttled producer warns that it cannot reach its rate.

The producer's *lag* is how late, in seconds, the record it is about to send is relative
to its due time.  It warns once (:class:`PytestKafkaMirrorWarning`, ``cannot reach ...
msg/s``) only when it really cannot keep up: the lag stayed above :data:`LAG_LIMIT_S` for
:data:`LAG_WINDOW_S` without interruption and is no smaller at the end of that window than
at its start (:class:`_LagWatch`).  A brief stall, or a backlog the producer is absorbing
(its lag shrinking, as after a burst of a rate profile), is not reported; it shows in the
schedule slip and in ``stats["max_lag_s"]``.  (An earlier rule, the records-behind count of a
whole run, compared with a quarter second of the rate *after* a step down, warned about a
producer that had kept up.)
"""

from __future__ import annotations

from collections import deque

from .._warnings import PytestKafkaMirrorWarning
from .profile import RateProfile

__all__ = ["LAG_LIMIT_S", "LAG_WINDOW_S", "lag_warning"]

#: Seconds behind the schedule that count as falling behind; less is scheduling noise (a
#: context switch, a GC pause, a loaded machine) that the next passes absorb.
LAG_LIMIT_S = 0.25
#: Seconds the lag must stay above :data:`LAG_LIMIT_S`, without shrinking, before the
#: producer warns that it cannot keep up.
LAG_WINDOW_S = 2.0


class _LagWatch:
    """Tells a producer that cannot keep up from one that stalled briefly or is catching up.

    Fed once per send pass with the lag (seconds the next record to send is past its due
    time), the run's elapsed seconds and the records sent so far.  :meth:`add` returns the
    window's first sample once the lag has been above ``limit`` for ``window`` seconds
    without interruption and is at least as large as it was ``window`` seconds ago: a lag
    that is sustained or growing.  A lag that drops under the limit starts the watch again,
    and a shrinking one (a backlog being absorbed) never triggers it, however large.
    """

    __slots__ = ("above_since", "behind", "limit", "longest_above", "max_lag", "samples", "window")

    def __init__(self, limit: float = LAG_LIMIT_S, window: float = LAG_WINDOW_S) -> None:
        self.limit, self.window = limit, window
        # (elapsed, lag, sent) while above the limit: the newest sample at or before the
        # window's start, then every later one
        self.samples: deque[tuple[float, float, int]] = deque()
        self.above_since: float | None = None
        self.max_lag = 0.0
        self.longest_above = 0.0
        #: second of the schedule -> the largest lag in it, for the seconds above ``limit``
        #: (``stats["behind_s"]``: the capacity figures tell the producer's pace from the replicator's)
        self.behind: dict[int, float] = {}

    def add(self, elapsed: float, lag: float, sent: int) -> tuple[float, float, int] | None:
        if lag > self.max_lag:
            self.max_lag = lag
        s = self.samples
        if lag <= self.limit:
            self.close(elapsed)
            return None
        second = int(elapsed)
        if lag > self.behind.get(second, 0.0):
            self.behind[second] = lag
        if self.above_since is None:
            self.above_since = elapsed
        s.append((elapsed, lag, sent))
        start = elapsed - self.window
        while len(s) > 1 and s[1][0] <= start:
            s.popleft()
        first = s[0]
        if first[0] <= start and lag >= first[1]:
            return first
        return None

    def close(self, elapsed: float) -> None:
        """The lag is under the limit again (or the run is over) at ``elapsed``."""
        if self.above_since is not None:
            self.longest_above = max(self.longest_above, elapsed - self.above_since)
        self.samples.clear()
        self.above_since = None


def lag_warning(producer_id: str, profile: RateProfile, topics: int, watch: _LagWatch, since: tuple[float, float, int],
                elapsed: float, lag: float, sent: int) -> PytestKafkaMirrorWarning:
    """The "cannot reach" warning: the rate due and the rate sent over the window, the lag now
    and then, and since when it has been above the limit."""
    then, lag_then, sent_then = since
    span = max(elapsed - then, 1e-9)
    due_rate = (profile.allowed(elapsed) - profile.allowed(then)) / span
    sent_rate = (sent - sent_then) / topics / span
    above = watch.above_since if watch.above_since is not None else then
    return PytestKafkaMirrorWarning(
        f"producer {producer_id} cannot reach {due_rate:.4g} msg/s per topic on {topics} topic(s): "
        f"it sent {sent_rate:.4g} msg/s per topic over the last {span:.1f} s and is {lag:.2f} s behind its "
        f"schedule ({lag_then:.2f} s {span:.1f} s earlier; more than {watch.limit:g} s behind for "
        f"{elapsed - above:.1f} s, since {above:.1f} s into the run). Lower the rate, use fewer/larger "
        "messages, or use several producer processes (processes=N)."
    )
