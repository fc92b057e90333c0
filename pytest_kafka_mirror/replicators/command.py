"""``command:TEMPLATE``: any replicator started by a shell command.

The template's placeholders are filled in, each shell-quoted, and the result runs under
``/bin/sh -c`` in its own process group (a stop reaches the JVM the script starts):

=============  ================================================================
``{source}``   source bootstrap servers, e.g. ``127.0.0.1:40123``
``{target}``   target bootstrap servers
``{topics}``   the topic filter, a regex: ``^km-.*`` (the prefix regex-escaped) (a full match in Java)
``{workdir}``  a directory for the replicator's config files and state
=============  ================================================================

``{{`` and ``}}`` are literal braces.  Readiness is a probe record copied from source to
target (the command's own output is its log, quoted when it does not copy in time).
``stop()`` + ``start()`` runs the same command again in the same ``{workdir}``, so a
replicator that keeps its state there resumes from it.  Target topic names follow
``--kafka-mirror-naming``.  Recipes for uReplicator, Brooklin and Confluent Replicator
are in docs/backends.md.
"""

from __future__ import annotations

import os
import shlex
import string
from typing import TYPE_CHECKING, Any

from ..processes.managed import ManagedProcess
from ._runner import RunnerReplicator
from .base import NamingPolicy
from .mm2 import topics_regex

if TYPE_CHECKING:
    from ..clusters.base import Cluster

__all__ = ["PLACEHOLDERS", "CommandReplicator", "check_template", "render_command"]

PLACEHOLDERS = ("source", "target", "topics", "workdir")


def check_template(template: str) -> None:
    """ValueError for an empty template, bad braces or an unknown placeholder."""
    if not template.strip():
        raise ValueError("the command template is empty")
    try:
        fields = [f for _, f, spec, conv in string.Formatter().parse(template) if f is not None]
    except ValueError as exc:
        raise ValueError(f"{template!r}: {exc} (write {{{{ and }}}} for literal braces)") from None
    for f in fields:
        if f not in PLACEHOLDERS:
            raise ValueError(
                f"unknown placeholder {{{f}}} in {template!r}; accepted: "
                + ", ".join("{" + p + "}" for p in PLACEHOLDERS)
            )


def render_command(template: str, values: dict[str, str]) -> str:
    """The template with every placeholder replaced by its shell-quoted value."""
    check_template(template)
    return template.format(**{k: shlex.quote(str(values[k])) for k in PLACEHOLDERS})


class CommandReplicator(RunnerReplicator):
    """A replicator run from a command template; the plugin owns its process group."""

    def __init__(
        self,
        source: Cluster,
        target: Cluster,
        workdir: str | os.PathLike[str],
        *,
        template: str,
        topic_prefix: str,
        naming: NamingPolicy,
        startup_timeout: float,
    ) -> None:
        check_template(template)
        super().__init__(source, target, workdir, topic_prefix=topic_prefix, naming=naming, startup_timeout=startup_timeout)
        self.template = template
        self.spec = f"command:{template}"
        self.label = f"command replicator ({template.split()[0] if template.split() else template})"

    def command(self) -> str:
        return render_command(self.template, {
            "source": self.source.bootstrap_servers,
            "target": self.target.bootstrap_servers,
            "topics": topics_regex(self.topic_prefix),
            "workdir": str(self.workdir),
        })

    def status(self) -> str:
        """'': a command has no status of its own to ask for, and the start-up error
        already quotes its output (the last log lines)."""
        return ""

    def _launch(self) -> Any:
        cmd = self.command()
        (self.workdir / "command.sh").write_text(cmd + "\n")
        proc = ManagedProcess(self.label, ["/bin/sh", "-c", cmd], self.workdir / f"command-{self.starts}.log", cwd=self.workdir)
        return proc.start()
