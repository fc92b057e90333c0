"""``external:POLICY``: a replicator someone else runs; the spec names its topic naming.

The plugin never starts it at the session's start nor stops it at the end.  ``start()``
checks that it is copying: a probe record produced on the source must arrive on the target
under the named policy, which catches a wrong policy or topic filter before any test runs.

Its lifecycle is the user's commands (``--kafka-mirror-replicator-command VERB=COMMAND``,
verbs :data:`VERBS`): shell commands that return once done (``systemctl stop mm2``,
``kubectl delete pod mm2-0``, ``docker pause mm2``), run by the fault verbs and scenario
steps that stop, crash, pause or restart it; ``start`` is followed by the readiness probe.
A verb without a command raises :class:`ReplicatorError`, and :meth:`missing` says so
before a scenario begins (the fault verbs skip the test with it: a fault scenario must
not pass without its fault).

Its health is its Kafka Connect states (``--kafka-mirror-replicator-status``): MirrorMaker
2's status topic on the target, or a Connect cluster's REST URL (see ``connect_status``),
as for ``mm2:``: a FAILED task is quoted and checked between tests.
"""

from __future__ import annotations

import subprocess
import time
from typing import TYPE_CHECKING

from ._probe import probe_topic_name, wait_replicating
from .base import NamingPolicy, ReplicatorBase, ReplicatorError

if TYPE_CHECKING:
    from ..clusters.base import Cluster

__all__ = ["COMMAND_OPTION", "VERBS", "ExternalReplicator", "run_command"]

#: the verbs a command can be given for, with an example each (messages and --help)
VERBS = {"stop": "systemctl stop mm2", "start": "systemctl start mm2", "kill": "systemctl kill -s KILL mm2",
         "pause": "docker pause mm2", "resume": "docker unpause mm2"}
COMMAND_OPTION = "--kafka-mirror-replicator-command"
#: how long a command may take (a start's readiness probe has the startup timeout on top)
COMMAND_TIMEOUT_S = 120.0


def run_command(command: str, timeout: float) -> tuple[int | None, list[str]]:
    """Run a user's lifecycle command (``/bin/sh -c``, no stdin): ``(exit code, the lines it
    said: stderr, else stdout)``; exit code None when it did not return within ``timeout``."""
    try:
        done = subprocess.run(["/bin/sh", "-c", command], capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL, check=False)
    except subprocess.TimeoutExpired:
        return None, []
    return done.returncode, (done.stderr.strip() or done.stdout.strip() or "(no output)").splitlines()


class ExternalReplicator(ReplicatorBase):
    """A replicator the plugin names topics for, checks, and controls only through the
    user's commands (see the module docstring)."""

    controllable = False

    def __init__(
        self, source: Cluster, target: Cluster, *, naming: NamingPolicy, topic_prefix: str, startup_timeout: float,
        commands: tuple[tuple[str, str], ...] = (), status_source: str | None = None,
        session_prefix: str | None = None,
    ) -> None:
        self.source = source
        self.target = target
        self.naming = naming
        self.topic_prefix = topic_prefix
        #: the session's topic prefix (--kafka-mirror-topic-prefix): the replicator's own topic
        #: filter must take ``^PREFIX-.*``, every worker's topics (the readiness hint names it)
        self.session_prefix = session_prefix or topic_prefix
        self.startup_timeout = startup_timeout
        self.commands = dict(commands)
        self.status_source = status_source
        self.spec = f"external:{naming}"
        self.probe_topic: str = probe_topic_name(topic_prefix)
        self._running, self._paused = True, False
        #: Connect states written before this (ms) are an earlier process's, not this one's
        self._since_ms = int(time.time() * 1000)

    def target_topic(self, source_topic: str) -> str:
        return self.naming.target(source_topic)

    # -- lifecycle through the user's commands ---------------------------------------------
    def missing(self, verb: str) -> str | None:
        """Why it cannot ``verb`` (``restart``: stop, then start), None when it can."""
        verbs = ("stop", "start") if verb == "restart" else (verb,)
        absent = [v for v in verbs if v not in self.commands]
        if not absent:
            return None
        flags = " and ".join(f"{COMMAND_OPTION} {v}=COMMAND (e.g. {v}={VERBS[v]})" for v in absent)
        return (f"this needs the replicator to {verb}, and it is external ({self.spec}): the plugin controls it only "
                f"through your commands; give {flags}")

    def _run(self, verb: str) -> None:
        why = self.missing(verb)
        if why is not None:
            raise ReplicatorError(f"cannot {verb} the replicator: {why}")
        command = self.commands[verb]
        rc, said = run_command(command, COMMAND_TIMEOUT_S)
        if rc is None:
            raise ReplicatorError(f"{COMMAND_OPTION} {verb}={command!r} did not return within {COMMAND_TIMEOUT_S:g} s "
                                  "(a command must return once done: start a foreground process detached)")
        if rc != 0:
            raise ReplicatorError(f"{COMMAND_OPTION} {verb}={command!r} exited with code {rc}: " + " | ".join(said[-5:]))

    def start(self) -> None:
        """Run the start command when it was stopped (else nothing), then check it copies
        ``PREFIX-…`` topics under the named policy (probe record)."""
        t0 = time.monotonic()
        if not self._running:
            self._run("start")
            self._running, self._paused = True, False
            self._since_ms = int(time.time() * 1000)
        wait_replicating(
            self.source.bootstrap_servers, self.target.bootstrap_servers, self.probe_topic,
            self.target_topic(self.probe_topic), timeout=self.startup_timeout, what="the external replicator",
            status=self.status, replicator=self,
        )
        self.startup_seconds = time.monotonic() - t0

    def stop(self) -> None:
        self._run("stop")
        self._running, self._paused = False, False

    def kill(self) -> None:
        self._run("kill")
        self._running, self._paused = False, False

    def pause(self) -> None:
        self._run("pause")
        self._paused = True

    def resume(self) -> None:
        self._run("resume")
        self._paused = False

    @property
    def running(self) -> bool:
        return self._running  # as far as the plugin knows: start() proved it copies, a command stopped it

    @property
    def paused(self) -> bool:
        return self._paused

    # -- what it says about itself ---------------------------------------------------------
    def status(self) -> str:
        """Its Connect states (``--kafka-mirror-replicator-status``), one line; '' without a source."""
        if not self.status_source:
            return ""
        from .connect_status import describe_source

        return f"its Connect status ({self.status_source}): {describe_source(self.target, self.status_source)}"

    def health(self) -> str:
        """'' unless a connector or task FAILED since the plugin last started it (the
        session's start, or its start command): then that, quoted.  Nothing to say without
        a status source."""
        if not self._running:
            return "it was stopped through its commands and is not running again"
        if not self.status_source or self._paused:
            return ""
        from .connect_status import describe, failed, read_source

        try:
            statuses = read_source(self.target, self.status_source)
        except Exception as exc:  # noqa: BLE001 - an unreadable status is said, never raised between tests
            return f"its Connect status ({self.status_source}) cannot be read: {type(exc).__name__}: {exc}"
        broken = failed(statuses, self._since_ms)
        return f"its Connect status ({self.status_source}): {describe(broken)}" if broken else ""

    def logs(self, lines: int = 50) -> str:
        return "(external replicator: its log is not available to the plugin)" + (
            f"; {self.status()}" if self.status_source else "")

    def describe(self) -> str:
        control = ", ".join(sorted(self.commands)) or "none"
        return (f"external replicator {self.source.bootstrap_servers} -> {self.target.bootstrap_servers} "
                f"({self.naming}; commands: {control}; Connect status: {self.status_source or 'not given'})")
