"""Kernel-level link faults on one loopback port: packet loss and a bandwidth cap.

The kernels this runs on may have no ``netem`` qdisc, so faults are built from what is
there (DESIGN: faults):

* loss: an iptables ``statistic`` match that drops a random share of the TCP segments to
  and from one port (both directions, so data and ACKs are lost alike);
* bandwidth: an HTB class on ``lo`` with a u32 filter on the port (both directions).

Both need root (CAP_NET_ADMIN); :func:`shaping_unavailable` says why they cannot be used
so scenarios skip with that reason.  Every rule carries a comment / its own filter
priority so it can be removed exactly, and :func:`remove_all` clears whatever this
process added (called at exit too).  HTB needs one root qdisc on ``lo`` shared by every
shaped port of every test process on the machine, so its changes run under a file lock
and the root is removed with its last class.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import subprocess
import threading
from pathlib import Path

from filelock import FileLock

__all__ = ["ShapingError", "PortShaper", "remove_all", "shaping_unavailable"]

DEV = "lo"
_LOCK = Path(os.environ.get("KAFKA_MIRROR_TC_LOCK", "/tmp/kafka-mirror-tc.lock"))
_COMMENT = "kafka-mirror"
_active: set[PortShaper] = set()
_active_lock = threading.Lock()


class ShapingError(RuntimeError):
    """A kernel link fault could not be applied or removed."""


def _run(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    try:
        res = subprocess.run(argv, capture_output=True, text=True, timeout=15)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ShapingError(f"{' '.join(argv)}: {exc}") from None
    if check and res.returncode != 0:
        raise ShapingError(f"{' '.join(argv)} failed ({res.returncode}): {res.stderr.strip() or res.stdout.strip()}")
    return res


def shaping_unavailable(kind: str = "loss") -> str | None:
    """Why ``kind`` ("loss" or "bandwidth") cannot be used here, or None when it can."""
    if os.geteuid() != 0:
        return f"link {kind} needs root (CAP_NET_ADMIN) to change iptables / tc rules; this process runs as uid {os.geteuid()}"
    tool = "iptables" if kind == "loss" else "tc"
    if shutil.which(tool) is None:
        pkg = "iptables" if kind == "loss" else "iproute2"
        return f"link {kind} needs the '{tool}' command (Debian package {pkg})"
    probe = ("iptables", "-w", "5", "-L", "OUTPUT", "-n") if kind == "loss" else ("tc", "qdisc", "show", "dev", DEV)
    res = _run(*probe, check=False)
    if res.returncode != 0:
        return f"link {kind}: '{' '.join(probe)}' failed: {res.stderr.strip()}"
    return None


def _tc_lock() -> FileLock:
    """One process at a time changes the HTB classes of the loopback device."""
    return FileLock(_LOCK)


def _classes() -> set[int]:
    out = _run("tc", "class", "show", "dev", DEV, check=False).stdout
    return {int(m.group(1), 16) for m in re.finditer(r"class htb 1:([0-9a-f]+)", out)}


class PortShaper:
    """Loss and bandwidth faults on the TCP traffic of one loopback port."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.loss_percent = 0.0
        self.kbit: float | None = None
        self._minor: int | None = None

    # -- loss ------------------------------------------------------------------------------
    def _loss_rules(self, percent: float) -> list[list[str]]:
        p = f"{percent / 100.0:.6f}"
        tag = f"{_COMMENT} port {self.port}"
        return [
            ["INPUT", "-i", DEV, "-p", "tcp", f"--{d}", str(self.port), "-m", "statistic", "--mode", "random",
             "--probability", p, "-m", "comment", "--comment", tag, "-j", "DROP"]
            for d in ("dport", "sport")
        ]

    def set_loss(self, percent: float) -> None:
        """Drop ``percent`` % of the segments to and from the port (0 removes the rule)."""
        if not 0 <= percent <= 100:
            raise ValueError(f"loss must be a percentage between 0 and 100, got {percent!r}")
        self._clear_loss()
        if percent > 0:
            for rule in self._loss_rules(percent):
                _run("iptables", "-w", "5", "-I", *rule)
            self.loss_percent = percent
            self._register()

    def _clear_loss(self) -> None:
        if self.loss_percent > 0:
            for rule in self._loss_rules(self.loss_percent):
                _run("iptables", "-w", "5", "-D", *rule, check=False)
            self.loss_percent = 0.0

    # -- bandwidth -----------------------------------------------------------------------
    def set_bandwidth(self, kbit: float | None) -> None:
        """Cap the port's traffic at ``kbit`` kbit/s each way (None removes the cap)."""
        if kbit is not None and kbit <= 0:
            raise ValueError(f"bandwidth must be a positive number of kbit/s, got {kbit!r}")
        with _tc_lock():
            self._clear_bandwidth_locked()
            if kbit is None:
                return
            if "htb 1:" not in _run("tc", "qdisc", "show", "dev", DEV).stdout:
                # default 0: unclassified traffic is not shaped at all.
                _run("tc", "qdisc", "add", "dev", DEV, "root", "handle", "1:", "htb", "default", "0")
            used = _classes()
            minor = next(m for m in range(0x10, 0xFFF0) if m not in used)
            rate = f"{kbit:g}kbit"
            _run("tc", "class", "add", "dev", DEV, "parent", "1:", "classid", f"1:{minor:x}", "htb",
                 "rate", rate, "ceil", rate, "burst", "16k", "cburst", "16k")
            self._minor = minor
            for d in ("dport", "sport"):
                # The filter priority is the class minor: deleting that priority removes
                # exactly this port's filters.
                _run("tc", "filter", "add", "dev", DEV, "parent", "1:", "protocol", "ip", "prio", str(minor),
                     "u32", "match", "ip", d, str(self.port), "0xffff", "flowid", f"1:{minor:x}")
            self.kbit = kbit
        self._register()

    def _clear_bandwidth_locked(self) -> None:
        if self._minor is None:
            return
        _run("tc", "filter", "del", "dev", DEV, "parent", "1:", "prio", str(self._minor), check=False)
        _run("tc", "class", "del", "dev", DEV, "classid", f"1:{self._minor:x}", check=False)
        self._minor = None
        self.kbit = None
        if not _classes():
            _run("tc", "qdisc", "del", "dev", DEV, "root", check=False)

    # -- lifecycle -----------------------------------------------------------------------
    def _register(self) -> None:
        with _active_lock:
            _active.add(self)

    def clear(self) -> None:
        """Remove every rule this shaper added (idempotent)."""
        self._clear_loss()
        if self._minor is not None:
            with _tc_lock():
                self._clear_bandwidth_locked()
        with _active_lock:
            _active.discard(self)

    def describe(self) -> str:
        parts = []
        if self.loss_percent:
            parts.append(f"loss {self.loss_percent:g} %")
        if self.kbit:
            parts.append(f"bandwidth {self.kbit:g} kbit/s")
        return ", ".join(parts) or "clean"


def remove_all() -> None:
    """Clear every shaper of this process (fixture teardown backstop, and at exit)."""
    with _active_lock:
        shapers = list(_active)
    for s in shapers:
        try:
            s.clear()
        except ShapingError:
            pass


atexit.register(remove_all)
