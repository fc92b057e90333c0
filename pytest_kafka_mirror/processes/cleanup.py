"""Stopping what a session detached (:func:`~.managed.detached`): the supervisors listed in
a registry file and the containers they own.  Apart from :mod:`.managed` because it needs
both the process layer and the container layer (:mod:`.docker`), which builds on it."""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

from .docker import remove_named_containers
from .managed import _pid_alive, wait_until

__all__ = ["stop_registered"]


def stop_registered(registry: Path, timeout: float = 10.0) -> list[int]:
    """SIGTERM every supervisor listed in ``registry`` (see :func:`detached`; each stops its
    command with the command's own stop signal), SIGKILL the process groups of those still
    alive after ``timeout``, and remove the containers listed there; returns
    the pids that were running."""
    try:
        entries = registry.read_text().split()
    except OSError:
        return []
    containers = [e.split(":", 1)[1] for e in entries if e.startswith("container:")]
    pids = [int(e) for e in entries if e.isdigit()]
    if containers:
        remove_named_containers(containers)
    running = []
    for pid in pids:
        try:
            # the supervisor alone: it stops its command with that command's own stop signal
            # (Tansu's SIGINT); its whole group gets the SIGKILL below if it does not end
            os.kill(pid, signal.SIGTERM)
            running.append(pid)
        except (ProcessLookupError, PermissionError):
            pass
    with contextlib.suppress(TimeoutError):  # then SIGKILL what is left
        wait_until(lambda: not any(_pid_alive(pid) for pid in running), timeout, "the stopped processes to exit")
    for pid in running:
        if _pid_alive(pid):
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    return running
