"""The duplicates a replicator's offset commits allow (``replicators/commits.py``): the bound
the SIGKILL, upgrade and multi-node scenarios hold their duplicates to, and its message."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_kafka_mirror.replicators import DuplicatesBound, duplicates_bound


def test_the_bound_is_one_commit_interval_of_the_produce_rate(tmp_path: Path) -> None:
    from pytest_kafka_mirror.replicators.reference import ReferenceReplicator

    ref = ReferenceReplicator("a:1", "b:2", tmp_path, topics="^km-")
    bound = duplicates_bound(ref, rate=300, topics=2)
    assert bound == DuplicatesBound(records=600, rate=300, topics=2, interval_s=1.0, replicator=ref.spec,
                                    setting="--commit-interval 1")
    assert bound.how == f"300 msg/s x 2 topics x ({ref.spec}'s commit interval 1 s (--commit-interval 1))"
    assert duplicates_bound(ref, rate=150, topics=1).how.startswith("150 msg/s x 1 topic x ")
    # and what it had in flight, the records sent in the latency SLO's seconds and not acknowledged yet
    with_flight = duplicates_bound(ref, rate=300, topics=2, in_flight_s=2.0)
    assert with_flight.records == 1800 and with_flight.how.endswith("(--commit-interval 1) + 2 s in flight (the "
                                                                    "latency SLO))")


def test_the_message_says_the_bound_and_how_it_was_derived() -> None:
    class Replicator:
        spec = "mm2:4.3.1"
        commit_interval_s = 2.5
        commit_interval_setting = "target.offset.flush.interval.ms=2500"

    bound = duplicates_bound(Replicator(), rate=300, topics=2)
    assert bound.records == 1500
    assert bound.exceeded(1712, "after the SIGKILL").startswith(
        "1712 records copied twice after the SIGKILL, more than one commit interval's records allow: 1500 = 300 msg/s "
        "x 2 topics x (mm2:4.3.1's commit interval 2.5 s (target.offset.flush.interval.ms=2500)). ")


def test_a_replicator_without_a_commit_interval_has_no_bound() -> None:
    class External:
        spec = "external:identity"

    with pytest.raises(ValueError, match=r"external:identity states no commit interval"):
        duplicates_bound(External(), rate=300, topics=2)


def test_the_legacy_mirrormaker_states_the_option_it_is_started_with() -> None:
    from pytest_kafka_mirror.replicators.mm1 import LegacyMirrorMaker, render_mm1

    mm1 = LegacyMirrorMaker.__new__(LegacyMirrorMaker)  # never started: the rendered options only
    _, _, mm1.options = render_mm1(source_bootstrap="a:1", target_bootstrap="b:2", group_id="g")
    assert (mm1.commit_interval_s, mm1.commit_interval_setting) == (1.0, "--offset.commit.interval.ms 1000")
    mm1.options = {}
    assert mm1.commit_interval_setting == "offset.commit.interval.ms=60000, MirrorMaker's default"
