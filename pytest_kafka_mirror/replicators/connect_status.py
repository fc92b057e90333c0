"""Kafka Connect's status topic: what MirrorMaker 2 (any Connect cluster) says about itself.

Every Connect worker writes the state of its connectors and tasks to the status topic
(``status.storage.topic``; MM2's herder ``A->B``: ``mm2-status.A.internal`` on B, or the
instance's own name, see ``mm2.worker_properties``), as ``KafkaStatusBackingStore``
does it:

* key ``status-connector-NAME`` or ``status-task-NAME-ID`` (a string; ``NAME`` may hold
  ``-``, the task id is after the last one); ``status-topic-...`` keys (active topics)
  are not states and are skipped;
* value JSON ``{"state": "RUNNING", "trace": null, "worker_id": "source->target",
  "generation": 3}`` (the worker's internal JsonConverter has ``schemas.enable=false``;
  a converter with schemas wraps it as ``{"schema": ..., "payload": {...}}``, read too);
  ``state`` is UNASSIGNED, RUNNING, PAUSED, STOPPED, FAILED (``trace``: the Java stack
  trace), RESTARTING;
* a null value (tombstone) deletes the entry; a connector's deletes its tasks too.

The latest record of a key wins, as in Connect.  :func:`read_status_topic` reads the
topic with ``assign()`` from offset 0 up to the end offsets where the broker's high
watermarks are right (real Kafka), else until no record arrived for ``quiet`` seconds
(bounded by ``timeout``): the embedded broker's high watermarks are not a completeness
test.  :func:`describe` makes one line of it, e.g. ``MirrorSourceConnector RUNNING,
task 0 FAILED: org.apache.kafka...: boom; MirrorCheckpointConnector UNASSIGNED``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ConnectStatus",
    "describe",
    "describe_source",
    "describe_status_topic",
    "failed",
    "latest_statuses",
    "parse_status_key",
    "parse_status_value",
    "read_source",
    "read_status_rest",
    "read_status_topic",
]

CONNECTOR_PREFIX = "status-connector-"
TASK_PREFIX = "status-task-"
#: a trace is quoted by its first line, cut to this many characters
TRACE_CHARS = 300


@dataclass(frozen=True)
class ConnectStatus:
    """The latest state of one connector (``task`` None) or one of its tasks."""

    connector: str
    task: int | None
    state: str
    trace: str | None = None
    worker_id: str = ""
    generation: int = 0
    #: when the status record was written (its timestamp, epoch milliseconds; 0: unknown)
    written_ms: int = 0

    @property
    def first_trace_line(self) -> str:
        """The trace's first line, and its root cause (the last ``Caused by:``) when it has
        one: Connect wraps what went wrong ("Unrecoverable exception from producer send
        callback"), the cause says what it was (``RecordTooLargeException: ...``)."""
        lines = (self.trace or "").strip().splitlines()
        if not lines:
            return ""
        line = _cut(lines[0])
        causes = [x.strip()[len("Caused by:"):].strip() for x in lines if x.strip().startswith("Caused by:")]
        return f"{line}; caused by {_cut(causes[-1])}" if causes else line

    def describe(self) -> str:
        """``RUNNING`` or ``FAILED: <first trace line>[; caused by <root cause>]``."""
        return f"{self.state}: {self.first_trace_line}" if self.first_trace_line else self.state


def _cut(line: str) -> str:
    return line if len(line) <= TRACE_CHARS else line[: TRACE_CHARS - 3] + "..."


def parse_status_key(key: str) -> tuple[str, int | None] | None:
    """``(connector, task)`` of a status key, ``task`` None for a connector; None for
    any other key (topic statuses, garbage)."""
    if key.startswith(CONNECTOR_PREFIX):
        name = key[len(CONNECTOR_PREFIX):]
        return (name, None) if name else None
    if key.startswith(TASK_PREFIX):
        name, sep, task = key[len(TASK_PREFIX):].rpartition("-")
        if sep and name and task.isdigit():
            return name, int(task)
    return None


def parse_status_value(value: bytes | str | None) -> dict[str, Any] | None:
    """The status fields of a value (plain or schema-wrapped JSON); None for a tombstone.
    ValueError when it is not a Connect status."""
    if value is None:
        return None
    try:
        doc = json.loads(value)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"not JSON ({exc})") from None
    if isinstance(doc, dict) and "payload" in doc and "schema" in doc:
        doc = doc["payload"]
    if not isinstance(doc, dict) or not isinstance(doc.get("state"), str):
        raise ValueError(f"no 'state' in {str(value)[:80]!r}")
    return doc


def _status(connector: str, task: int | None, value: bytes | str | None, written_ms: int = 0) -> ConnectStatus | None:
    try:
        doc = parse_status_value(value)
    except ValueError as exc:
        return ConnectStatus(connector, task, "UNREADABLE", trace=str(exc), written_ms=written_ms)
    if doc is None:
        return None
    generation = doc.get("generation")
    return ConnectStatus(
        connector, task, doc["state"], trace=doc.get("trace") or None,
        worker_id=str(doc.get("worker_id") or ""), generation=generation if isinstance(generation, int) else 0,
        written_ms=written_ms,
    )


def latest_statuses(records: Iterable[tuple[Any, ...]]) -> list[ConnectStatus]:
    """The states left by ``(key, value[, timestamp ms])`` records in topic order: connectors in a fixed
    order (MirrorMaker 2's source, checkpoint and heartbeat connectors, then the others by
    name: a status topic has several partitions, and the order records of different keys
    are read in is not defined), each followed by its tasks by id (tasks without a
    connector record too)."""
    connectors: dict[str, ConnectStatus | None] = {}
    tasks: dict[str, dict[int, ConnectStatus]] = {}
    for raw_key, value, *stamp in records:
        key = raw_key.decode("utf-8", "replace") if isinstance(raw_key, bytes) else raw_key
        parsed = parse_status_key(key or "")
        if parsed is None:
            continue
        connector, task = parsed
        status = _status(connector, task, value, int(stamp[0]) if stamp else 0)
        if task is None:
            if status is None:  # the connector was deleted, and its tasks with it
                connectors.pop(connector, None)
                tasks.pop(connector, None)
            else:
                connectors[connector] = status
        else:
            connectors.setdefault(connector, None)
            if status is None:
                tasks.get(connector, {}).pop(task, None)
            else:
                tasks.setdefault(connector, {})[task] = status
    out: list[ConnectStatus] = []
    for connector, status in sorted(connectors.items(), key=lambda item: _connector_rank(item[0])):
        if status is not None:
            out.append(status)
        out.extend(tasks.get(connector, {})[t] for t in sorted(tasks.get(connector, {})))
    return out


#: MirrorMaker 2's connectors, in the order a description names them.
_MM2_CONNECTORS = ("MirrorSourceConnector", "MirrorCheckpointConnector", "MirrorHeartbeatConnector")


def _connector_rank(connector: str) -> tuple[int, str]:
    """By MM2's order, whatever the prefix of the name (Strimzi's ``S->T.MirrorSourceConnector``)."""
    cls = connector.rpartition(".")[2]
    known = _MM2_CONNECTORS.index(cls) if cls in _MM2_CONNECTORS else len(_MM2_CONNECTORS)
    return known, connector


def _task_part(tasks: list[ConnectStatus]) -> list[str]:
    """Tasks with the same state and no trace in one item: ``tasks 0-3 RUNNING``."""
    parts: list[str] = []
    run: list[tuple[int, str]] = []  # consecutive task ids with one state, no trace

    def flush() -> None:
        if run:
            ids = f"task {run[0][0]}" if len(run) == 1 else f"tasks {run[0][0]}-{run[-1][0]}"
            parts.append(f"{ids} {run[0][1]}")
            run.clear()

    for t in tasks:
        task = t.task if t.task is not None else -1
        if t.first_trace_line:
            flush()
            parts.append(f"task {task} {t.describe()}")
            continue
        if run and (t.state != run[-1][1] or task != run[-1][0] + 1):
            flush()
        run.append((task, t.state))
    flush()
    return parts


def describe(statuses: list[ConnectStatus], topic: str = "the status topic") -> str:
    """One line: ``Conn RUNNING, task 0 FAILED: trace; Other UNASSIGNED``."""
    if not statuses:
        return f"no status records in {topic}"
    items: list[str] = []
    order = sorted(dict.fromkeys(s.connector for s in statuses), key=_connector_rank)
    for connector in order:
        own = [s for s in statuses if s.connector == connector and s.task is None]
        head = f"{connector} {own[0].describe()}" if own else f"{connector} (no connector status)"
        tasks = _task_part([s for s in statuses if s.connector == connector and s.task is not None])
        if not tasks and own and own[0].state == "RUNNING":
            tasks = ["no tasks"]  # e.g. a source connector whose topic filter matches nothing yet
        items.append(", ".join([head, *tasks]))
    return "; ".join(items)


def failed(statuses: Iterable[ConnectStatus], since_ms: int = 0) -> list[ConnectStatus]:
    """The FAILED connectors and tasks among ``statuses`` whose state was written at or
    after ``since_ms`` (a worker's start: a failure written by an earlier process of the
    same Connect group is not this one's, and a task that runs again writes RUNNING)."""
    return [s for s in statuses if s.state == "FAILED" and s.written_ms >= since_ms]


def read_status_topic(
    config: dict[str, Any], topic: str, *, timeout: float = 5.0, quiet: float = 0.5, settle: float = 2.0,
    to_end_offsets: bool = False,
) -> list[tuple[bytes | None, bytes | None, int]] | None:
    """Every ``(key, value, timestamp ms)`` of ``topic``, in offset order per partition; None when the
    topic does not exist, at most ``timeout`` seconds.  With ``to_end_offsets`` (a broker
    whose high watermarks are right: :attr:`~..clusters.base.Capabilities.accurate_watermarks`)
    it reads every partition up to the end offset it had when the read began; otherwise until
    nothing new came for ``quiet`` seconds (``settle`` before the first record: connecting
    takes a moment), which a loaded machine can cut short.  KafkaException when the
    cluster does not answer."""
    from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

    from .._kafkalog import with_logger

    consumer = Consumer(with_logger({
        **config, "group.id": f"kafka-mirror-status-{time.time_ns()}", "enable.auto.commit": False,
        "enable.partition.eof": False, "allow.auto.create.topics": False,
        "fetch.queue.backoff.ms": 1, "fetch.wait.max.ms": 10, "socket.connection.setup.timeout.ms": 5000,
    }))
    try:
        t0 = time.monotonic()
        meta = consumer.list_topics(topic, timeout=timeout).topics.get(topic)
        if meta is None or (meta.error is not None and meta.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
            return None
        if meta.error is not None:
            raise KafkaException(meta.error)
        partitions = sorted(meta.partitions)
        ends: dict[int, int] | None = None
        if to_end_offsets:
            left = max(0.5, timeout - (time.monotonic() - t0))
            ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=left)[1] for p in partitions}
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        return _consume_status(consumer, t0, timeout, ends, quiet, settle)
    finally:
        consumer.close()


def _consume_status(
    consumer: Any, t0: float, timeout: float, ends: dict[int, int] | None, quiet: float, settle: float
) -> list[tuple[bytes | None, bytes | None, int]]:
    """The records an assigned ``consumer`` reads: up to ``ends`` (partition -> end offset)
    when given, else until ``quiet`` seconds without one; never past ``timeout``."""
    records: list[tuple[bytes | None, bytes | None, int]] = []
    todo = {p: end for p, end in (ends or {}).items() if end > 0}
    last = time.monotonic()
    while True:
        now = time.monotonic()
        if now - t0 >= timeout:
            return records
        if ends is not None and not todo:
            return records
        if ends is None and now - last >= (quiet if records else settle):
            return records
        for msg in consumer.consume(500, 0.01):
            if msg.error() is None:
                records.append((msg.key(), msg.value(), msg.timestamp()[1]))
                last = time.monotonic()
                end = todo.get(msg.partition())
                if end is not None and msg.offset() + 1 >= end:
                    del todo[msg.partition()]


def describe_status_topic(
    config: dict[str, Any], topic: str, *, timeout: float = 5.0, to_end_offsets: bool = False
) -> str:
    """:func:`describe` of ``topic``'s latest states; never raises (errors are the text)."""
    try:
        records = read_status_topic(config, topic, timeout=timeout, to_end_offsets=to_end_offsets)
    except Exception as exc:
        return f"cannot read {topic} from {config.get('bootstrap.servers')}: {exc}"
    if records is None:
        return f"no topic {topic} (the Connect worker never created it: it did not get that far)"
    return describe(latest_statuses(records), topic)


def read_status_rest(url: str, *, timeout: float = 5.0) -> list[ConnectStatus]:
    """The states of every connector and task of the Connect cluster at ``url`` (its REST
    API: ``GET /connectors?expand=status``), in :func:`latest_statuses`' order.  OSError or
    ValueError when it does not answer as Connect does."""
    import urllib.request

    with urllib.request.urlopen(f"{url.rstrip('/')}/connectors?expand=status", timeout=timeout) as answer:
        doc = json.loads(answer.read())
    if not isinstance(doc, dict):
        raise ValueError(f"{url}: not a Connect REST API (GET /connectors?expand=status gave {str(doc)[:80]!r})")
    now_ms = int(time.time() * 1000)  # the REST API gives the states as they are now
    records: list[tuple[str, str, int]] = []
    for name, entry in doc.items():
        status = (entry or {}).get("status") or {}
        connector = status.get("connector") or {}
        records.append((f"{CONNECTOR_PREFIX}{name}", json.dumps(connector), now_ms))
        for task in status.get("tasks") or []:
            records.append((f"{TASK_PREFIX}{name}-{task.get('id')}", json.dumps(task), now_ms))
    return latest_statuses(records)


def read_source(cluster: Any, source: str, *, timeout: float = 5.0) -> list[ConnectStatus]:
    """The latest states from ``source``: a Connect REST URL (``http://``, ``https://``), or
    a status topic on ``cluster`` (read to its end offsets where its watermarks are right).
    Raises what the read raises; a missing topic is no states."""
    if source.startswith(("http://", "https://")):
        return read_status_rest(source, timeout=timeout)
    try:
        exact = cluster.capabilities().accurate_watermarks is True
    except Exception:  # noqa: BLE001 - an unprobeable cluster: read until quiet
        exact = False
    records = read_status_topic(cluster.client_config(), source, timeout=timeout, to_end_offsets=exact)
    return latest_statuses(records or [])


def describe_source(cluster: Any, source: str, *, timeout: float = 5.0) -> str:
    """:func:`describe` of :func:`read_source`; never raises (errors are the text)."""
    try:
        return describe(read_source(cluster, source, timeout=timeout), source)
    except Exception as exc:  # noqa: BLE001 - said, not raised
        return f"cannot read {source}: {type(exc).__name__}: {exc}"
