"""Faults on a timeline (:mod:`.schedule`), the replication link's delay proxy
(:mod:`.linkproxy`) and its loss and bandwidth shaping (:mod:`.netem`).

The verbs scenarios use (``at``, ``kill``, ``start``, ``pause``, ``delay``, ``loss``, ...)
are importable from here, as before the split.
"""

from .schedule import *
from .schedule import __all__  # noqa: F401
