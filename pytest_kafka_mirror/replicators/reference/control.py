"""Fault knobs at run time: the control file, a fault engine per topic, the ledger.

``--faults FILE`` is a JSON control file ``{"generation": N, "default": {knobs}, "topics":
{topic: {knobs}}}`` that the mirror re-reads whenever it changes.  After applying a
generation it writes its ledger of injected faults to ``--ledger FILE`` and then
``FILE.ack`` holding N, so a controller knows the new knobs are in force before it
produces.  Topics without active knobs have no engine: the copy loop takes its fast path.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ...rundir import write_json_atomic
from .._checkpoints import KnobView
from .knobs import CHECKPOINT_KNOBS, FaultEngine, Knobs, Ledger, MirrorRecord, ledger_dump

__all__ = ["FaultControl"]


def _checkpoint_knobs(k: Knobs) -> tuple[Any, ...]:
    return tuple(getattr(k, name) for name in CHECKPOINT_KNOBS)


#: Ledger entries of records that never reach the target.
DROPPING_KNOBS = ("drop", "lose_producer", "stop_tail")


class FaultControl:
    """The knobs in force per topic, their engines and ledgers."""

    def __init__(self, control: Path | None, ledger: Path | None, send: Callable[[MirrorRecord], None],
                 log: Callable[[str], None]) -> None:
        self.control = control
        self.ledger_path = ledger
        self.send = send
        self.log = log
        self.defaults = Knobs()
        self.per_topic: dict[str, Knobs] = {}
        #: topics with active record knobs -> their engine (the copy loop feeds them)
        self.engines: dict[str, FaultEngine] = {}
        self.ledgers: dict[str, Ledger] = {}
        self.in_force: dict[str, Knobs] = {}
        self.generation = 0
        self._sig: tuple[int, int] | None = None
        #: what the checkpoint task reads (its knobs, and since when each topic's are in force)
        self.view = KnobView(Knobs(), {}, {None: time.monotonic()})

    def dropped(self) -> dict[str, int]:
        """Test records the fault knobs kept from the target so far, per knob (``drop``,
        ``lose_producer``, ``stop_tail``: the held-back tail of a replaced engine)."""
        out: dict[str, int] = {}
        for ledger in self.ledgers.values():
            for knob in DROPPING_KNOBS:
                n = sum(len(seqs) for seqs in ledger.seqs.get(knob, {}).values())
                if n:
                    out[knob] = out.get(knob, 0) + n
        return out

    def dropped_words(self) -> str:
        """``, dropped 40 by fault knobs (drop 40)``, or nothing when none were."""
        dropped = self.dropped()
        if not dropped:
            return ""
        each = ", ".join(f"{knob} {n}" for knob, n in sorted(dropped.items()))
        return f", dropped {sum(dropped.values())} by fault knobs ({each})"

    def set_engine(self, topic: str, partitions: int) -> None:
        """Give ``topic`` the knobs now in force, releasing what the old engine buffered."""
        knobs = self.per_topic.get(topic, self.defaults)
        if self.in_force.get(topic, Knobs()) == knobs and (topic in self.engines or not knobs.active):
            return
        old = self.engines.pop(topic, None)
        if old is not None:
            for rec in old.release():
                self.send(rec)
            self.ledgers[topic].discard_held(old)
        self.in_force[topic] = knobs
        if knobs.active:
            ledger = self.ledgers.setdefault(topic, Ledger())
            self.engines[topic] = FaultEngine(topic, knobs, partitions, ledger)
            self.log(f"faults on {topic}: {knobs}")
        elif old is not None:
            self.log(f"faults off on {topic}")

    def write_ledger(self) -> None:
        if self.ledger_path is not None:
            tables = {t: (self.in_force.get(t, Knobs()), ledger, self.engines.get(t)) for t, ledger in self.ledgers.items()}
            write_json_atomic(self.ledger_path, ledger_dump(tables, self.generation))

    def read(self, assigned: Mapping[str, int]) -> None:
        """Apply the control file if it changed (``assigned``: topic -> partitions mirrored)."""
        if self.control is None:
            return
        try:
            st = os.stat(self.control)
        except OSError:
            return
        sig = (st.st_mtime_ns, st.st_ino)
        if sig == self._sig:
            return
        self._sig = sig
        try:
            data = json.loads(self.control.read_text())
            new_defaults = Knobs.from_dict(data.get("default", {}))
            new_topics = {t: Knobs.from_dict(k) for t, k in data.get("topics", {}).items()}
        except (OSError, ValueError, TypeError) as exc:
            self.log(f"ignoring unreadable fault control file {self.control}: {exc}")
            return
        self._update_view(new_defaults, new_topics)
        self.defaults, self.per_topic = new_defaults, new_topics
        for topic, partitions in assigned.items():
            self.set_engine(topic, partitions)
        self.generation = int(data.get("generation", 0))
        self.write_ledger()
        write_json_atomic(self.control.with_name(self.control.name + ".ack"), self.generation)

    def _update_view(self, defaults: Knobs, topics: dict[str, Knobs]) -> None:
        """When each topic's checkpoint knobs took effect (stop_checkpoints_after counts from there)."""
        now = time.monotonic()
        old = self.view
        since: dict[str | None, float] = {
            None: old.since.get(None, now) if _checkpoint_knobs(old.defaults) == _checkpoint_knobs(defaults) else now}
        for t, k in topics.items():
            same = t in old.per_topic and _checkpoint_knobs(old.knobs(t)) == _checkpoint_knobs(k)
            since[t] = old.since.get(t, now) if same else now
        self.view = KnobView(defaults, topics, since)

    def release_all(self) -> None:
        """A graceful stop sends what the fault stages still buffer (delays, reorder
        windows); a held-back tail stays unsent."""
        for engine in self.engines.values():
            for out in engine.release():
                self.send(out)
