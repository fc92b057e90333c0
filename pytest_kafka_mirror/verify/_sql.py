"""The verification's queries as SQL text.

Built as a chain of DataFrame calls, a query costs a classic session's driver a py4j round
trip per call (a list of columns makes one per element) and an analysis of the whole plan
below every step.  A 10k-record verification made some 1,400 such calls that way, about
0.7 s of its main thread.  As one SQL text over the frames it reads, a query is parsed and
analysed once, in a handful of calls.  Over Spark Connect it is one request.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["Queries"]


class Queries:
    """``queries(text, name=frame)``: ``text`` as a frame, where ``{name}`` reads ``frame``
    (literal braces doubled).  Each frame is a temporary view of a unique name from its
    first query until :meth:`close`, so concurrent jobs of one session never see each
    other's views.  A ``str`` in place of a frame is SQL text, substituted as it is (a
    relation in parentheses, itself reading ``{name}`` of the other frames given).

    ``SparkSession.sql(text, name=frame)`` does the same per query, but drops its views
    right after, and dropping a view uncaches the frame it names (``Catalog.dropTempView``):
    the job's cached first copies would be gone after the first query that read them.
    :meth:`close` drops them once the job has released its caches.
    """

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark
        self._views: dict[int, tuple[DataFrame, str]] = {}  # the frame is kept: its id stays unique

    def __call__(self, text: str, **frames: DataFrame | str) -> DataFrame:
        views = {key: self._view(frame) for key, frame in frames.items() if not isinstance(frame, str)}
        relations = {key: frame.format(**views) for key, frame in frames.items() if isinstance(frame, str)}
        return self.spark.sql(text.format(**views, **relations))

    def _view(self, frame: DataFrame) -> str:
        known = self._views.get(id(frame))
        if known is not None:
            return known[1]
        name = f"kafka_mirror_{uuid.uuid4().hex}"
        frame.createOrReplaceTempView(name)
        self._views[id(frame)] = (frame, name)
        return name

    def close(self) -> None:
        """Drop the views (and so uncache their frames, if cached)."""
        catalog = self.spark.catalog
        while self._views:
            _, (_, name) = self._views.popitem()
            catalog.dropTempView(name)
