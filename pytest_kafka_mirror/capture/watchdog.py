"""The capture's consumer watched: a fetch that stops while the target grows is restarted.

An ``assign()``-ed librdkafka consumer can stop fetching for good after its broker restarts
(reported against librdkafka 2.5, confluentinc/librdkafka#5153: "resolved by restarting the
affected consumer").  Measured here, confluent-kafka 2.16, a CI run on Apache Kafka 4.3.1:
the target broker restarted 5 s into the run and the capture read nothing more for 77 s,
its read positions stuck at 1,504 while the target's end offsets grew to 15,715 and
MirrorMaker 2 went on copying; the run failed with 14,064 records unseen.  Every other run
of that scenario read on within a few seconds (eight of eight the same day, one core kept busy).

:class:`StallWatch` takes the target's end offsets the capture samples once a second (its
own lag, ``process._EndOffsets``) and its read positions (the next offset of each
partition, :attr:`.gaps.GapGuard.next`).  A partition is *stalled* when, over samples
spanning :data:`STALL_S` seconds, its position did not move while its end offset stood past
where it was in the sample before the position got there (records the consumer has not
read, not one it had just read), more than one offset ahead of the position (one: a
transaction's closing marker, which a consumer never receives).  Then the capture closes
its consumer and reads every partition on with a new one, from the same next offsets
(nothing is read twice or skipped), logs why, and keeps it in its status
(``consumer_restarts``).  Another restart for the same position wants the end offset
to grow again, and waits twice as long (to :data:`MAX_WAIT_S`); a partition that moves
starts over.  So offsets a consumer never receives (an aborted transaction's records at the
end of the log) cost one restart at the most, and a fetch held back for another reason (a
transaction open longer than the wait, whose records ``read_committed`` holds back) a
restart now and then; never a record.

Where the target's end offsets are not sampled (Tansu's are wrong after multi-record
batches) nothing is watched.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["MAX_WAIT_S", "STALL_S", "StallWatch"]

#: Seconds of samples showing a partition stalled before its consumer is restarted.
STALL_S = 5.0
#: The longest the wait grows to after restarts that did not help.
MAX_WAIT_S = 60.0

Partition = tuple[str, int]


@dataclass
class _Seen:
    position: int
    #: the end offset the position is measured against: the sample's before the one that
    #: first showed this position (the records the consumer had not read yet then), or the
    #: end offset at the last restart
    end: int
    wait: float  # how long a stall is watched before a restart
    behind_since: float | None = None  # the first sample showing it stalled


class StallWatch:
    """Decides when the capture's consumer has stalled (module docstring)."""

    def __init__(self, positions: Mapping[Partition, int], *, stall: float = STALL_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.positions = positions  # live: the consume loop's next offsets
        self.stall = stall
        self.clock = clock
        self.seen: dict[Partition, _Seen] = {}
        self.last_end: dict[Partition, int] = {}  # each partition's end offset in the sample before
        self.restarts: list[dict[str, Any]] = []

    def check(self, ends: Mapping[Partition, int]) -> str | None:
        """A new sample of the end offsets: why the consumer should be restarted, or None."""
        now = self.clock()
        stuck: list[tuple[Partition, int, int, float]] = []
        for part, end in ends.items():
            position = self.positions.get(part)
            before, self.last_end[part] = self.last_end.get(part, end), end
            if position is None:
                continue
            seen = self.seen.get(part)
            if seen is None or seen.position != position:
                # reading (a later stall is a new one); measured from the sample before, so a
                # burst the consumer stopped in front of counts as growth
                self.seen[part] = _Seen(position, min(before, end), self.stall)
                continue
            if end > seen.end and end > position + 1:
                if seen.behind_since is None:
                    seen.behind_since = now
                elif now - seen.behind_since >= seen.wait:
                    stuck.append((part, position, end, now - seen.behind_since))
            else:
                seen.behind_since = None
        if not stuck:
            return None
        for part, _, end, _ in stuck:  # another restart wants the target to grow again, and a longer wait
            seen = self.seen[part]
            seen.end, seen.behind_since, seen.wait = end, None, min(seen.wait * 2, MAX_WAIT_S)
        shown = ", ".join(f"{t}/{p} at offset {pos:,} (target's end {end:,})" for (t, p), pos, end, _ in stuck[:3])
        more = f" and {len(stuck) - 3} more" if len(stuck) > 3 else ""
        longest = max(s for *_, s in stuck)
        why = (f"{len(stuck)} partition(s) read nothing for {longest:.1f} s while the target grew: {shown}{more}; "
               "a new consumer reads on from the same offsets")
        self.restarts.append({"at": round(time.time(), 3), "partitions": len(stuck),
                              "behind": sum(end - pos for _, pos, end, _ in stuck), "why": why})
        return why
