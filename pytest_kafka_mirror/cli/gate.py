"""``kafka-mirror gate OLD NEW [-- PYTEST ARGS]``: what a platform team does before a
replicator upgrade, in one command.

1. run the scenarios (pytest, with the arguments after ``--``) against replicator ``OLD``
   and store the session as the baseline (``--kafka-mirror-save gate-OLD-STAMP``);
2. run them against ``NEW``, compared with that baseline and gated by the checks
   (``--kafka-mirror-compare=BASELINE --kafka-mirror-compare-fail=...``), stored too;
3. exit as the second session does: 0 when every test passed and no figure regressed,
   1 otherwise; the pytest sessions print their summaries and the comparison themselves.

``OLD`` and ``NEW`` are replicator specs (``mm2:3.9.1``, ``mm2:4.3.1``, a ``command:``
template, ...), also your own releases with your mm2.properties
(``mm2:/opt/kafka-3.9.1,properties=mm2.properties``), or replicators you run
(``external:POLICY`` with ``--old-command`` / ``--new-command VERB=COMMAND`` and
``--old-status`` / ``--new-status``: each session gets its side's; between the sessions the
gate runs OLD's ``stop`` and NEW's ``start`` command, the upgrade); each session stores its run as
``gate-LABEL-STAMP`` (:func:`spec_label`).  A baseline whose tests fail is still a baseline (it says what the old
release did: the comparison needs its figures), but a baseline session that did not run
(a usage error, no tests, an interruption) stops the gate.  Without ``--compare-fail`` the
checks are :data:`DEFAULT_CHECKS`: the figures that must not get worse whatever the
timing of a run (loss, failover loss, translations past the end of the log, rewinds), and
what the replicator can carry: its copy rate and its highest sustainable rate may not drop
by more than 20 % (a capacity the report gives only as a lower bound, or not at all, is
never failed, and the comparison says so);
a candidate whose failover checks checked less than the baseline's (groups, translations,
heartbeats) fails whatever the checks (``report/compare.py``'s ``CHECKED``);
latency, rates and re-reads move between two runs of the same release on a busy machine,
so gate on them by choice (e.g. ``--compare-fail failover_rereads_max:0`` to see a change of
offset translation, as MirrorMaker 2's 3.5 brought with KAFKA-12468).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..config import OPTIONS_BY_NAME

__all__ = ["DEFAULT_CHECKS", "add_gate_command", "gate_labels", "gate_sessions", "spec_label"]

#: what must not get worse from OLD to NEW when no --compare-fail is given
DEFAULT_CHECKS = ("missing:0", "failover_skipped:0", "failover_beyond_end_max:0", "failover_rewinds:0",
                  "copy_rate:20%", "max_sustainable_rate:20%")
#: pytest's exit codes that mean the session ran its tests (passed / some failed)
RAN = (0, 1)
#: exit status of bad input (commands.EXIT_BAD_INPUT; not imported: commands imports this module)
EXIT_BAD_INPUT = 2


def _slug(spec: str) -> str:
    return re.sub(r"[^A-Za-z0-9.]+", "-", spec).strip("-")[:40]


def spec_label(spec: str) -> str:
    """A readable, file-name-safe name of a replicator spec for its stored run: the spec
    itself (``mm2-4.3.1``, ``reference-drop-0.1-seed-3``), but a release from a directory
    by its version (``mm2:/opt/kafka-3.9.1`` -> ``mm2-3.9.1``: a path says little and a long
    one would be cut) and your mm2.properties by its file name
    (``mm2:/opt/kafka-3.9.1,properties=/etc/mm2/prod.properties`` -> ``mm2-3.9.1-prod.properties``).
    The stored run keeps the whole spec (its settings' ``replicator``)."""
    from ..replicators import parse_replicator_spec

    try:
        parsed = parse_replicator_spec(spec)
    except ValueError:
        return _slug(spec)
    release = parsed.release_arg
    if (parsed.kind in ("mm2", "mm2-connect", "mm1") and release and not release[:1].isdigit()
            and not release.startswith("container:")):
        from ..clusters.kafka_dist import release_at

        try:
            release = release_at(release, need="mm1" if parsed.kind == "mm1" else "mm2").version_text
        except ValueError:
            release = Path(release).name
    label = _slug(f"{parsed.kind}:{release}" if release else parsed.kind)
    if parsed.properties_file is not None:
        label += "-" + _slug(Path(parsed.properties_file).name)
    return label


def gate_labels(old: str, new: str) -> tuple[str, str]:
    """The stored runs' names of OLD and NEW (:func:`spec_label`), never the same: two specs
    that read alike (two directories of one version, two files of one name) get ``-old`` /
    ``-new``."""
    a, b = spec_label(old), spec_label(new)
    return (a, b) if a != b else (f"{a}-old", f"{b}-new")


def side_options(commands: Sequence[str], status: str | None) -> list[str]:
    """One side's session options for an ``external:`` replicator: its lifecycle commands
    and where its Connect states are read."""
    return [*(f"--kafka-mirror-replicator-command={c}" for c in commands),
            *([f"--kafka-mirror-replicator-status={status}"] if status else [])]


def gate_sessions(old: str, new: str, pytest_args: Sequence[str], *, checks: Sequence[str], storage: Path,
                  stamp: str, old_options: Sequence[str] = (), new_options: Sequence[str] = (),
                  ) -> tuple[list[str], Callable[[Path], list[str]]]:
    """The baseline session's command line, and the candidate's for a stored baseline.
    The specs go to pytest as they were given (a relative path means the same there: the
    sessions run in this directory); ``old_options`` / ``new_options``: one side's own
    (:func:`side_options`)."""
    base = [sys.executable, "-m", "pytest", *pytest_args, f"--kafka-mirror-storage={storage}"]
    old_label, new_label = gate_labels(old, new)
    baseline = [*base, f"--kafka-mirror-replicator={old}", *old_options, f"--kafka-mirror-save=gate-{old_label}-{stamp}"]

    def candidate(stored: Path) -> list[str]:
        return [*base, f"--kafka-mirror-replicator={new}", *new_options, f"--kafka-mirror-save=gate-{new_label}-{stamp}",
                f"--kafka-mirror-compare={stored}", *(f"--kafka-mirror-compare-fail={c}" for c in checks)]

    return baseline, candidate


def _stored(storage: Path, name: str) -> Path | None:
    from ..report.storage import FileStorage

    found = [p for p in FileStorage(storage).runs() if p.stem.endswith(f"_{name}")]
    return found[-1] if found else None


def _say(text: str) -> None:
    print(f"kafka-mirror gate: {text}", file=sys.stderr, flush=True)


#: the pytest arguments a side's own option replaces
_SIDE_FLAGS = ("--kafka-mirror-replicator-command", "--kafka-mirror-replicator-status")


def _check_args(args: argparse.Namespace) -> str | None:
    """One line for bad input, before anything runs; None when fine."""
    from ..config import _replicator_command, _replicator_status
    from ..replicators import parse_replicator_spec
    from ..report.compare import parse_compare_fail

    for role, spec in (("OLD", args.old), ("NEW", args.new)):
        try:
            kind = parse_replicator_spec(spec).kind
        except ValueError as exc:
            return f"{role} {exc}"
        flag = f"--{role.lower()}"
        commands, status = getattr(args, f"{role.lower()}_command"), getattr(args, f"{role.lower()}_status")
        if (commands or status) and kind != "external":
            given = f"{flag}-command" if commands else f"{flag}-status"
            return (f"{given}: {role} is {spec}, which the plugin starts and controls itself; {flag}-command and "
                    f"{flag}-status are for an external: replicator you run")
        for command in commands:
            try:
                _replicator_command(command)
            except ValueError as exc:
                return f"{flag}-command: {exc}"
        if status:
            try:
                _replicator_status(status)
            except ValueError as exc:
                return f"{flag}-status: {exc}"
    sided = args.old_command or args.new_command or args.old_status or args.new_status
    shared = [a.split("=", 1)[0] for a in args.pytest_args if a.split("=", 1)[0] in _SIDE_FLAGS]
    if sided and shared:
        return (f"the pytest arguments give {shared[0]} to both sessions, and --old-/--new- options give each its "
                "own: give them per side only")
    for check in args.compare_fail:
        try:
            parse_compare_fail(check)
        except ValueError as exc:
            return f"--compare-fail {check}: {exc}"
    if any(a.startswith("--kafka-mirror-replicator=") or a == "--kafka-mirror-replicator" for a in args.pytest_args):
        return "the pytest arguments name a replicator (--kafka-mirror-replicator): the gate sets it, OLD then NEW"
    return None


def _cmd_gate(args: argparse.Namespace) -> int:
    problem = _check_args(args)
    if problem:
        print(f"kafka-mirror gate: {problem}", file=sys.stderr)
        return EXIT_BAD_INPUT
    storage = Path(args.storage).resolve()
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    checks = args.compare_fail or list(DEFAULT_CHECKS)
    baseline_argv, candidate_argv = gate_sessions(
        args.old, args.new, args.pytest_args, checks=checks, storage=storage, stamp=stamp,
        old_options=side_options(args.old_command, args.old_status),
        new_options=side_options(args.new_command, args.new_status))
    t0 = time.monotonic()
    _say(f"1/2: the baseline, {args.old}: {' '.join(baseline_argv[1:])}")
    rc_old = subprocess.run(baseline_argv, check=False).returncode
    stored = _stored(storage, f"gate-{gate_labels(args.old, args.new)[0]}-{stamp}")
    if rc_old not in RAN or stored is None:
        _say(f"the baseline session on {args.old} exited {rc_old} and stored "
             f"{'nothing' if stored is None else stored}: nothing to compare with, the gate stops")
        return rc_old if rc_old not in RAN else 1
    _say(f"baseline stored: {stored} ({'every test passed' if rc_old == 0 else 'some tests failed: still a baseline'}, "
         f"{time.monotonic() - t0:.0f} s)")
    if args.new_command and not any(c.split("=", 1)[0].strip() == "stop" for c in args.old_command):
        _say(f"no --old-command stop=...: {args.old} keeps running while {args.new} is tested (both copy)")
    for role, commands, verb in (("OLD", args.old_command, "stop"), ("NEW", args.new_command, "start")):
        problem = _switch(role, commands, verb)
        if problem:
            _say(f"{problem}: the gate stops (the baseline is stored: {stored})")
            return 1
    _say(f"2/2: the candidate, {args.new}, gated by {' '.join(checks)}")
    rc_new = subprocess.run(candidate_argv(stored), check=False).returncode
    verdict = {0: "passed: no test failed and no figure regressed"}.get(
        rc_new, "FAILED: a test failed or a figure regressed (see the comparison above)" if rc_new == 1
        else f"the candidate session exited {rc_new}")
    _say(f"{args.old} -> {args.new}: {verdict} ({time.monotonic() - t0:.0f} s in all)")
    return rc_new


def _switch(role: str, commands: Sequence[str], verb: str) -> str | None:
    """Between the sessions, the upgrade itself for ``external:`` replicators: OLD's
    ``stop`` command, then NEW's ``start`` (each when given); what went wrong, or None."""
    from ..config import _replicator_command
    from ..replicators.external import run_command

    given = dict(_replicator_command(c) for c in commands)
    if verb not in given:
        return None
    _say(f"switching: {role}'s {verb} command: {given[verb]}")
    rc, said = run_command(given[verb], 300)
    if rc is None:
        return f"{role}'s {verb} command did not return within 300 s"
    if rc != 0:
        return f"{role}'s {verb} command exited {rc}: {said[-1]}"
    return None


def add_gate_command(sub: Any) -> None:
    """The ``gate`` command on ``kafka-mirror``'s subparsers."""
    g = sub.add_parser(
        "gate", help="gate a replicator upgrade: the scenarios on OLD (stored), then on NEW compared with them",
        description=(__doc__ or "").split("\n\n", 1)[1].split("``OLD`` and")[0].strip().replace("``", ""),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        usage=("kafka-mirror gate OLD NEW [--compare-fail EXPR]... [--storage DIR] [--old-command VERB=COMMAND]... "
               "[--new-command VERB=COMMAND]... [--old-status S] [--new-status S] [-- PYTEST ARGS...]"))
    g.add_argument("old", metavar="OLD", help="the replicator in use, e.g. mm2:3.9.1")
    g.add_argument("new", metavar="NEW", help="the candidate, e.g. mm2:4.3.1")
    g.add_argument("--compare-fail", action="append", default=[], metavar="EXPR",
                   help="fail when a figure of NEW regressed against OLD: FIGURE:N%% (relative) or FIGURE:N "
                        f"(absolute); repeatable. Default: {' '.join(DEFAULT_CHECKS).replace('%', '%%')}")
    g.add_argument("--storage", default=os.environ.get(OPTIONS_BY_NAME["storage"].env) or ".kafka-mirror",
                   help="where both sessions are stored (relative to the current directory). Default: %(default)r")
    for role, which in (("old", "OLD"), ("new", "NEW")):
        g.add_argument(f"--{role}-command", action="append", default=[], metavar="VERB=COMMAND",
                       help=f"{which} is an external: replicator you run: its lifecycle command for VERB (stop, start, "
                            f"kill, pause, resume), given to its session as --kafka-mirror-replicator-command; "
                            f"repeatable. " + ("Its stop command is run after its session (the upgrade: OLD stops)"
                                               if role == "old" else
                                               "Its start command is run before its session (the upgrade: NEW "
                                               "starts; it is left running)"))
        g.add_argument(f"--{role}-status", metavar="TOPIC|URL",
                       help=f"where {which}'s Connect states are read (--kafka-mirror-replicator-status of its session)")
    g.epilog = "PYTEST ARGS, after --: the pytest arguments of both sessions (scenarios, -m, -n, cluster options)"
    g.set_defaults(func=_cmd_gate, pytest_args=[])
