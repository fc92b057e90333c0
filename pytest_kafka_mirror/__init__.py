"""pytest-kafka-mirror: test Kafka cross-cluster mirroring for correctness and performance.

The public API (everything else is internal).  Importing this package is cheap: the
verification names are loaded on first use, so that pyspark is imported only when a
run is verified.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._warnings import PytestKafkaMirrorWarning
from .capture.witness import Witness, witness
from .clusters import Capabilities, Cluster, ClusterError
from .produce.producer import MirrorProducer, ProducerError, TopicLanes
from .replicators import FaultLedger, Knobs, NamingPolicy, Replicator, ReplicatorError
from .replicators.settings import explain
from .run import MirrorRun
from .rundir import LaneManifest, Manifest

if TYPE_CHECKING:
    from .verify import MirrorMismatchError, MirrorReport, verify_run

__version__ = "0.1.0"

__all__ = [
    "Capabilities",
    "Cluster",
    "ClusterError",
    "FaultLedger",
    "Knobs",
    "LaneManifest",
    "Manifest",
    "MirrorMismatchError",
    "MirrorProducer",
    "MirrorReport",
    "MirrorRun",
    "NamingPolicy",
    "ProducerError",
    "PytestKafkaMirrorWarning",
    "Replicator",
    "ReplicatorError",
    "TopicLanes",
    "Witness",
    "explain",
    "verify_run",
    "witness",
]

_LAZY = {"MirrorMismatchError", "MirrorReport", "verify_run"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from . import verify

        return getattr(verify, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
