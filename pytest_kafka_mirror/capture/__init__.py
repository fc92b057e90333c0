"""Stage 3, capture: the target cluster's records into columnar segments in the run directory.

- :mod:`.target`: :class:`~.target.Capture`, the controller (one process or ``capture_processes=N``).
- :mod:`.process`: one capture process: the consume loop, the partition assignment, the stop decision.
- :mod:`.rows`: a consumed batch to segment rows (the hot loop), seen bitmaps, live figures.
- :mod:`.segments`: the segment writer thread (rows to Parquet, bounded, drained on stop).
- :mod:`.gaps`: the gap guard (a partition's offsets jumping past records never seen).
- :mod:`.witness`: witness consumer groups on the source (for the failover checks).

``python -m pytest_kafka_mirror.capture`` runs one capture process.
"""

from .target import PRODUCE_DONE, Capture, CaptureError, SeenBitmap, group_file, merge_progress

__all__ = ["PRODUCE_DONE", "Capture", "CaptureError", "SeenBitmap", "group_file", "merge_progress"]
