"""A daemon thread that does one round of work every ``interval`` seconds until stopped
(the legacy MirrorMaker's topic follower, the reference mirror's topic-config sync)."""

from __future__ import annotations

import threading
from collections.abc import Callable

__all__ = ["Periodic"]


class Periodic:
    """Calls ``round()`` every ``interval`` s (first at once, or after one interval when
    ``wait_first``); an exception is passed to ``on_error`` and the next round comes."""

    def __init__(self, name: str, interval: float, round: Callable[[], object], on_error: Callable[[Exception], None],
                 *, wait_first: bool = False) -> None:
        self.name = name
        self.interval = interval
        self.round = round
        self.on_error = on_error
        self.wait_first = wait_first
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)

    def _run(self) -> None:
        if self.wait_first and self._stop.wait(self.interval):
            return
        while not self._stop.is_set():
            try:
                self.round()
            except Exception as exc:  # a broker that does not answer now may next time
                self.on_error(exc)
            self._stop.wait(self.interval)
