"""The capture's consumer watched: a fetch that stops while the target grows is restarted.

An ``assign()``-ed librdkafka consumer can stop fetching for good after its broker restarts
(reported against librdkafka 2.5, confluentinc/librdkafka#5153: "resolved by restarting the
affected consumer").  Measured here, confluent-kafka 2.16, a CI run on Apache Kafka 4.3.1:
the target broker restarted 5 s into the run and the capture read nothing more for 77 s,
its read positions stuck at 1,504 while the target's end offsets grew to 15,715 and
MirrorMaker 2 went on copying; the run failed with 14,064 records unseen.  Seven of eight
runs of the same scenario (and every other run of it before) read on within a few seconds.

:class:`StallWatch` takes the target's end offsets the capture samples once a second (its
own lag, ``process._EndOffsets``) and its read positions (the next offset of each
partition, :attr:`.gaps.GapGuard.next`).  A partition is *stalled* when, over samples
spanning :data:`STALL_S` seconds, its position did not move while its end offset grew past
where it was when the position last moved, and stays more than one offset ahead of it (one:
a transaction's closing marker, which a consumer never receives).  Then the capture closes
its consumer and reads every partition on with a new one, from the same next offsets
(nothing is read twice or skipped), logs why, and keeps it in its status
(``consumer_restarts``).  A partition's wait doubles after each restart (to
:data:`MAX_WAIT_S`) and is back to :data:`STALL_S` once it moves: a fetch that cannot move for another
reason (a transaction open longer than that, whose records ``read_committed`` holds back)
costs a restart now and then, never a record.

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
    end: int  # the partition's end offset when the position was first seen
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
        self.restarts: list[dict[str, Any]] = []

    def check(self, ends: Mapping[Partition, int]) -> str | None:
        """A new sample of the end offsets: why the consumer should be restarted, or None."""
        now = self.clock()
        stuck: list[tuple[Partition, int, int, float]] = []
        for part, end in ends.items():
            position = self.positions.get(part)
            if position is None:
                continue
            seen = self.seen.get(part)
            if seen is None or seen.position != position:
                self.seen[part] = _Seen(position, end, self.stall)  # reading: a later stall is a new one
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
        for part, *_ in stuck:
            seen = self.seen[part]
            seen.behind_since, seen.wait = now, min(seen.wait * 2, MAX_WAIT_S)  # the new consumer's time
        shown = ", ".join(f"{t}/{p} at offset {pos:,} (target's end {end:,})" for (t, p), pos, end, _ in stuck[:3])
        more = f" and {len(stuck) - 3} more" if len(stuck) > 3 else ""
        longest = max(s for *_, s in stuck)
        why = (f"{len(stuck)} partition(s) read nothing for {longest:.1f} s while the target grew: {shown}{more}; "
               "a new consumer reads on from the same offsets")
        self.restarts.append({"at": round(time.time(), 3), "partitions": len(stuck),
                              "behind": sum(end - pos for _, pos, end, _ in stuck), "why": why})
        return why
