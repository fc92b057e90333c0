"""Faults on a timeline (:mod:`.schedule`), the replication link's delay proxy
(:mod:`.linkproxy`) and its loss and bandwidth shaping (:mod:`.netem`).

The verbs scenarios use (``at``, ``kill``, ``start``, ``pause``, ``delay``, ``loss``, ...)
are importable from here: ``from pytest_kafka_mirror.faults import at, kill``.
"""

from .schedule import *
from .schedule import __all__  # noqa: F401
