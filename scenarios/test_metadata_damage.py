"""Metadata damage: a replicator that removes or rewrites the records' headers or key.

Transforms and header converters are common in real MirrorMaker 2 / Connect deployments,
and an upgrade can change a default.  What each scenario expects is the exact diagnosis,
not "nothing arrived":

* ``km.t`` removed (``DropHeaders``): every record arrives and counts (delivery, order,
  duplicates); the report's damage class says ``km.t missing`` on each of them, the
  latency figures count them as having no produce time, and ``assert_ok()`` fails naming
  the damage in its first line.  The body format is untouched (its metadata is in the value);
* every header re-encoded as text (MM2 with ``header.converter=SimpleHeaderConverter``:
  byte headers become base64): the records arrive, too damaged to match; the first line
  says so, then the loss follows;
* the key removed: the headers format still knows the lane (``km.l``), the body format
  does not (its lane is the key): damaged, and in the body format unmatched;
* a header added: harmless, the run passes.

How the damage is made: on MirrorMaker 2 by the Connect transform or converter named in
each case's ``replicator_properties`` (the test gets an MM2 of its own); on the reference
mirror by the matching fault knob, whose ledger gives the exact count; other replicators
skip, with the reason.  Where no Connect transform can do it with MM2's byte-array
converters, MM2 skips too: removing a key, and adding a header (``InsertHeader`` writes a
string header, which kills MM2 4.3.1's tasks: "Invalid schema type for
ByteArrayConverter: STRING").

Measured on Apache Kafka + MM2 4.3.1 (600 records per case): ``km.t`` dropped, headers
format: received 600 of 600, metadata damaged 600 (km.t missing 600), untimed 600; body
format: clean, p99 184 ms.  Headers as text (base64), headers format: metadata damaged 600,
all unmatched (km.l, km.s, km.t altered on 600; km.p as base64 still reads as a producer
id), unseen 600; body format: clean.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from pytest_kafka_mirror.verify import MirrorMismatchError

RATE = 200  # messages/s per topic
DURATION = 3  # seconds
SIZE = 256


@dataclass(frozen=True)
class Damage:
    knobs: dict[str, Any]  # the reference mirror's knobs
    ledger: str  # its ledger entry
    mm2: dict[str, str] | None  # MM2 properties doing the same; None: no transform can
    why_not: str = ""


def _transform(name: str, kind: str, **config: str) -> dict[str, str]:
    """A Connect transform of the flow's connectors: MM2 passes ``FLOW.transforms.*`` to them
    whole (a top-level ``transforms.NAME.type`` never reaches them: 4.3.1 rejects the config,
    "Missing required configuration transforms.NAME.type")."""
    flow = "source->target."
    props = {f"{flow}transforms": name, f"{flow}transforms.{name}.type": f"org.apache.kafka.connect.transforms.{kind}"}
    props.update({f"{flow}transforms.{name}.{key.replace('_', '.')}": value for key, value in config.items()})
    return props


DAMAGES = {
    "km.t-dropped": Damage({"strip_header": ("km.t",)}, "strip_header", _transform("dropts", "DropHeaders", headers="km.t")),
    "headers-as-text": Damage({"rewrite_header": ("km.p", "km.l", "km.s", "km.t")}, "rewrite_header",
                              {"header.converter": "org.apache.kafka.connect.storage.SimpleHeaderConverter"}),
    "key-dropped": Damage({"drop_key": True}, "drop_key", None,
                          "no Connect transform removes a key under MM2's byte-array converters"),
    # InsertHeader adds a string header, which MM2's ByteArrayConverter cannot write: 4.3.1
    # kills every task ("Invalid schema type for ByteArrayConverter: STRING"); with another
    # header converter every header is re-encoded (headers-as-text).
    "header-added": Damage({"add_header": "mirror.added"}, "add_header", None,
                           "InsertHeader's string header kills MM2's tasks under its ByteArrayConverter "
                           "(Invalid schema type for ByteArrayConverter: STRING)"),
}


#: the cases whose records arrive too damaged to match: none counts as an arrival, so the
#: drain always runs to its end; 10 s after the last record produced is ample for a copy
#: that takes milliseconds (a record cut by it would break the exact count, never pass)
UNMATCHED = {("headers-as-text", "headers"), ("key-dropped", "body")}


def _cases() -> list[Any]:
    """One case per damage and format; those MM2 can do get an MM2 of their own."""
    return [pytest.param(name, fmt, id=f"{name}-{fmt}",
                         marks=([pytest.mark.kafka_mirror(replicator_properties=damage.mm2)] if damage.mm2 else [])
                         + ([pytest.mark.kafka_mirror(drain_timeout=10)] if (name, fmt) in UNMATCHED else [])
                         # the body format carries its metadata in the value: CI checks it nightly on real MM2
                         + ([pytest.mark.nightly] if fmt == "body" else []))
            for name, damage in DAMAGES.items() for fmt in ("headers", "body")]


def _injector(mirror_env: Any, damage: Damage) -> str:
    """Who makes the damage happen ("mm2", "reference"); skips, before any topic is made,
    where nobody can."""
    from pytest_kafka_mirror.replicators.mm2 import MirrorMaker2
    from pytest_kafka_mirror.replicators.reference import ReferenceReplicator

    rep = mirror_env.replicator
    if isinstance(rep, ReferenceReplicator):
        return "reference"
    if isinstance(rep, MirrorMaker2):
        if damage.mm2 is None:
            pytest.skip(f"MirrorMaker 2: {damage.why_not}")
        return "mm2"
    pytest.skip(f"{type(rep).__name__}: damage is injected by MM2's Connect transforms or the reference "
                f"mirror's knobs only")


@pytest.mark.kafka_mirror_topics(1, partitions=2)  # on a shared replicator that provisions the session's topics
@pytest.mark.parametrize(("damage", "record_format"), _cases())
def test_metadata_damage(mirror_env, mirror_topics, mirror_producer, mirror_verifier, damage, record_format):
    spec = DAMAGES[damage]
    by = _injector(mirror_env, spec)
    topics = mirror_topics(1, partitions=2)
    if by == "reference":
        from pytest_kafka_mirror.replicators import Knobs

        mirror_env.replicator.set_faults(topics, Knobs(**spec.knobs))
    run = mirror_producer(topics, rate=RATE, duration=DURATION, format=record_format, message_size=SIZE)
    report = mirror_verifier(run)
    sent = RATE * DURATION
    assert report.expected == sent
    if by == "reference":  # what the knob did, exactly
        injected = mirror_env.replicator.ledger().count(topics[0], spec.ledger)
    else:  # a transform acts on every record (headers: when it has any to act on)
        injected = report.received + report.damaged_unmatched

    headers = record_format == "headers"
    if damage == "header-added" or (not headers and damage != "key-dropped"):
        # harmless, or nothing to damage: the body format's metadata is in the value
        assert report.metadata_damaged == 0
        report.assert_ok()
        if by == "reference":
            assert injected == (sent if damage == "header-added" else 0)
        return

    assert report.metadata_damaged == injected == sent
    with pytest.raises(MirrorMismatchError) as e:
        report.assert_ok(allow_duplicates=True)
    first = str(e.value).splitlines()[0]
    assert f": {sent} records of ours arrived with damaged metadata (" in first, first
    if damage == "km.t-dropped":
        assert report.damage == {"km.t": {"missing": sent, "altered": 0}}
        assert report.received == report.distinct == sent and report.damaged_unmatched == 0
        assert report.latency.untimed == sent and report.latency.count == 0
        assert first.endswith(f"(km.t missing on {sent}), each still identified")
        report.assert_ok(allow_metadata_damage=True)
    elif damage == "headers-as-text":
        assert report.damaged_unmatched == sent and report.lost + report.unseen == sent
        for name in ("km.l", "km.s", "km.t"):  # km.p as base64 may still look like a producer id
            assert report.damage[name] == {"missing": 0, "altered": sent}
        assert "too damaged to match to a record sent" in first
    else:  # key-dropped
        assert report.damage == {"key": {"missing": sent, "altered": 0}}
        if headers:  # km.l names the lane
            assert report.received == sent and report.damaged_unmatched == 0
            report.assert_ok(allow_metadata_damage=True)
        else:  # the key was the lane
            assert report.damaged_unmatched == sent and report.lost + report.unseen == sent
