"""Stage 3, capture: the target cluster's records into columnar segments in the run directory.

- :mod:`.target`: :class:`~.target.Capture` (one process or ``capture_processes=N``).
- :mod:`.gaps`: the gap guard (a partition's offsets jumping past records never seen).
- :mod:`.witness`: witness consumer groups on the source (for the failover checks).

``python -m pytest_kafka_mirror.capture`` runs one capture process.
"""

from .target import PRODUCE_DONE, Capture, CaptureError, SeenBitmap, group_file, merge_progress

__all__ = ["PRODUCE_DONE", "Capture", "CaptureError", "SeenBitmap", "group_file", "merge_progress"]
