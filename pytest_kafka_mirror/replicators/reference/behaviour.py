"""How the reference mirror behaves like a real replicator: discovery, rebalances, restarts.

The reference mirror finds a new topic within a quarter second and never pauses, which no
real replicator does.  Measured with MirrorMaker 2 on the embedded brokers: it creates the
target topic, then reconfigures its tasks, and the Connect group rebalances (~5 s on
Tansu), stopping the copy of *every* topic meanwhile; a (re)start takes seconds before the
first record is copied.  uReplicator (Helix), Brooklin and Confluent Replicator (Connect)
behave alike.  A scenario that passes only against a mirror without these pauses proves
nothing, so these knobs put them into the reference mirror:

``discovery_interval``
    seconds between two scans of the source's topics (MM2: ``refresh.topics.interval.seconds``);
``discovery_delay``
    a topic found by a scan gets its target topic at once, and is copied that many
    seconds later (MM2: task reconfiguration, then the rebalance that assigns it);
``rebalance_pause``
    whenever a scan finds a new topic, the copy of every topic stops that long (the
    rebalance);
``restart_delay``
    a start (the first one and every restart) takes that long before the mirror copies
    anything (MM2: the worker joins its group and is assigned its tasks);
``max_rate``
    records/s across all its topics, at most (0: as fast as it goes): a replicator of a
    known capacity, which the capacity figures must measure (``verify/_capacity.py``).
    A token bucket holding at most a tenth of a second of records: after an idle spell
    it does not copy a burst above the rate.

Topics present at start are found by the first scan, as every replicator does: neither
delayed nor paused.  ``like=mm2`` sets all four as measured with MirrorMaker 2 on the
embedded brokers (:data:`PRESETS`); single knobs given with it override it.  The form on
the command line is the fault knobs' (``--kafka-mirror-replicator
reference:like=mm2,rebalance_pause=3,drop=0.01``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Any

__all__ = ["PRESETS", "Behaviour", "split_behaviour"]

#: What a knob that is not a number of seconds counts.
_UNITS = {"max_rate": "number of records/s (0: unthrottled)"}


@dataclass(frozen=True)
class Behaviour:
    """Timing of the reference mirror (see the module docstring); defaults: as fast as it goes."""

    discovery_interval: float = 0.25
    discovery_delay: float = 0.0
    rebalance_pause: float = 0.0
    restart_delay: float = 0.0
    max_rate: float = 0.0  # records/s across the topics; 0: unthrottled

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise ValueError(f"replicator knob {f.name}={value!r}: must be a {_UNITS.get(f.name, 'number of seconds')}"
                                 " >= 0")
        if self.discovery_interval <= 0:
            raise ValueError(f"replicator knob discovery_interval={self.discovery_interval!r}: must be > 0")

    @property
    def rebalances_on_new_topics(self) -> bool:
        """A new topic stops or delays copying: its topics are best provisioned ahead."""
        return self.rebalance_pause > 0 or self.discovery_delay > 0

    def to_dict(self) -> dict[str, float]:
        return {k: v for k, v in asdict(self).items() if v != getattr(Behaviour, k)}

    def argv(self) -> list[str]:
        """The reference mirror process's arguments for these knobs."""
        return [arg for f in fields(self) for arg in (f"--{f.name.replace('_', '-')}", str(getattr(self, f.name)))]

    def __str__(self) -> str:
        return ",".join(f"{k}={v:g}" for k, v in self.to_dict().items()) or "immediate"


#: ``like=NAME``: the knobs of a real replicator, as measured on the embedded brokers.
PRESETS: dict[str, Behaviour] = {
    # MirrorMaker 2 (Kafka 4.x Connect runtime, dedicated mode) on Tansu, with the
    # plugin's rendered refresh.topics.interval.seconds=2: the target topic existed
    # seconds before the first record was copied, each rebalance took ~5 s, and a
    # restart copied again ~15 s after the process started.
    "mm2": Behaviour(discovery_interval=2.0, discovery_delay=5.0, rebalance_pause=5.0, restart_delay=15.0),
}


def split_behaviour(text: str) -> tuple[Behaviour, str]:
    """``like=mm2,rebalance_pause=3,drop=0.01`` -> (the behaviour knobs, ``"drop=0.01"``).

    The behaviour knobs and ``like=PRESET`` are taken out; the rest (fault knobs) is
    returned as it was.  ValueError names a bad value or an unknown preset.
    """
    names = {f.name for f in fields(Behaviour)}
    values: dict[str, Any] = {}
    base = Behaviour()
    rest = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, sep, raw = (x.strip() for x in part.partition("="))
        if name == "like" and sep:
            if raw not in PRESETS:
                raise ValueError(f"replicator knob like={raw!r}: unknown preset; known: {', '.join(PRESETS)}")
            base = PRESETS[raw]
        elif name in names and sep:
            try:
                values[name] = float(raw)
            except ValueError:
                unit = _UNITS.get(name, "number of seconds").split(" (")[0]
                raise ValueError(f"replicator knob {part!r}: {raw!r} is not a {unit}") from None
        else:
            rest.append(part)
    return replace(base, **values), ",".join(rest)
