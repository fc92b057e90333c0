"""librdkafka's own log lines, routed to :mod:`logging` once instead of flooding stderr.

Left alone, every confluent-kafka client prints librdkafka's messages straight to the
process's stderr (``%3|…|FAIL|rdkafka#producer-1| … Connection refused``), once per
reconnect attempt: an unreachable bootstrap printed 194 such lines after the plugin's own
clear error.  Every client the package creates takes :func:`with_logger` on its config::

    Producer(with_logger({"bootstrap.servers": servers}))

so its messages go to the logger ``pytest_kafka_mirror.kafka`` (:data:`LOGGER_NAME`):
under pytest they land in the captured log of the test ("Captured log call") like any
other log record, and ``-p no:logging`` / ``log_level`` apply.  The same message of the
same client is logged at most once per :data:`REPEAT_WINDOW` seconds; the next one after
the window says how many were left out.

confluent-kafka queues the messages of a client that has a logger and delivers them when
the client is polled (``poll()``, ``consume()``, ``flush()``); an admin client is never
polled by its own verbs, so call :func:`serve` where its messages matter (the cluster
backends do after a failed request).  Child processes (the capture, the reference mirror,
the producer processes) call :func:`log_to` once, so the messages go to their log file.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable
from typing import Any, TextIO

__all__ = ["LOGGER_NAME", "REPEAT_WINDOW", "KafkaLog", "kafka_log", "log_to", "serve", "with_logger"]

LOGGER_NAME = "pytest_kafka_mirror.kafka"
#: Seconds during which a repeated message of one client is counted instead of logged.
REPEAT_WINDOW = 30.0
#: Keys remembered before the oldest are forgotten (one per distinct message and client).
_MAX_KEYS = 2048

# Parts of a message that change between repeats of "the same" message: the time since the
# state change (made N), and librdkafka's own suppression note, which it appends to a repeat
# with a comma ("... (after 0ms in state CONNECT, 1 identical error(s) suppressed)"): left
# out, so that the repeat has the first message's key.
_VARIABLE = re.compile(r"\b\d+ ?ms\b")
_SUPPRESSED = re.compile(r",? ?\b\d+ identical error\(s\) suppressed")


class KafkaLog:
    """The ``logger`` of a confluent-kafka client configuration: forwards each message
    to a :class:`logging.Logger`, a repeated one at most once per ``window`` seconds.

    confluent-kafka calls ``log(level, "%s [%s] %s", facility, client_name, message)``
    (``level`` already a :mod:`logging` level); anything with a ``log`` method is accepted.
    """

    def __init__(self, logger: logging.Logger | None = None, *, window: float = REPEAT_WINDOW,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.logger = logger or logging.getLogger(LOGGER_NAME)
        self.window = window
        self.clock = clock
        self._lock = threading.Lock()
        #: key -> [time last logged, repeats left out since]
        self._seen: dict[tuple[Any, ...], list[float]] = {}

    def log(self, level: int, msg: str, *args: Any, **kwargs: Any) -> None:
        if len(args) == 3:
            facility, client, text = (str(a) for a in args)
        else:  # not the call confluent-kafka makes; pass it on as it is
            self.logger.log(level, msg, *args, **kwargs)
            return
        key = (client, facility, _VARIABLE.sub("N", _SUPPRESSED.sub("", text)))
        now = self.clock()
        with self._lock:
            entry = self._seen.get(key)
            if entry is not None and now - entry[0] < self.window:
                entry[1] += 1
                return
            repeats = int(entry[1]) if entry is not None else 0
            self._seen[key] = [now, 0]
            if len(self._seen) > _MAX_KEYS:
                for old in sorted(self._seen, key=lambda k: self._seen[k][0])[: _MAX_KEYS // 2]:
                    del self._seen[old]
        suffix = f" (and {repeats} more like it in the last {self.window:g} s)" if repeats else ""
        self.logger.log(level, "%s %s: %s%s", client, facility, text, suffix)

    def repeats(self, *parts: str) -> int:
        """Repeats counted, not logged (yet), of the messages whose text holds every one of
        ``parts``: what the window has kept back so far."""
        with self._lock:
            return sum(int(n) for (_, _, text), (_, n) in self._seen.items() if all(p in text for p in parts))


_shared: KafkaLog | None = None
_shared_lock = threading.Lock()


def kafka_log() -> KafkaLog:
    """The process's :class:`KafkaLog` (one, so repeats are counted across clients' lifetimes)."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = KafkaLog()
        return _shared


def with_logger(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` with the ``logger`` of :func:`kafka_log` and the client properties of the
    cluster at its ``bootstrap.servers`` (security settings, see :mod:`._clientconf`): a
    copy; the keys ``config`` gives are kept."""
    from ._clientconf import properties_for

    return {"logger": kafka_log(), **properties_for(config.get("bootstrap.servers")), **config}


def admin_client(bootstrap: str, config: dict[str, Any] | None = None) -> Any:
    """An admin client of the cluster at ``bootstrap``, :func:`with_logger`'s (``config``: more settings)."""
    from confluent_kafka.admin import AdminClient

    return AdminClient(with_logger({"bootstrap.servers": bootstrap, **(config or {})}))


def serve(client: Any) -> None:
    """Deliver the messages a client queued (an admin client is never polled otherwise)."""
    try:
        client.poll(0)
    except Exception:
        pass


def log_to(stream: TextIO, prefix: str, level: int = logging.INFO) -> None:
    """In a child process: write the Kafka clients' messages to ``stream`` (its log file),
    one line each, as ``HH:MM:SS PREFIX: kafka: MESSAGE``."""
    logger = logging.getLogger(LOGGER_NAME)
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter(f"%(asctime)s {prefix}: kafka: %(message)s", datefmt="%H:%M:%S"))
    logger.addHandler(handler)
    logger.setLevel(level)
    logger.propagate = False
