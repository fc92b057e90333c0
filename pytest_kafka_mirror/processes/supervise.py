"""A supervisor that keeps one command alive exactly as long as a watched process lives.

``python -m pytest_kafka_mirror.processes.supervise --watch PID --ready FILE -- COMMAND...``

Clusters shared by the xdist workers of one run are started by whichever worker needs
them first, but must outlive that worker and must not outlive the run.  A child's
``PR_SET_PDEATHSIG`` ties it to its parent, which is the wrong process here, so the
worker starts this supervisor in a session of its own; the supervisor starts the command
(tied to itself by PDEATHSIG) and ends it when the watched process (the xdist controller)
is gone, when it gets SIGTERM, or when the command exits; it stops the command with
``--stop-signal`` (the command's own, as :class:`~.managed.ManagedProcess` has it).  The controller stops it at the
end of the run; if the controller is SIGKILLed the supervisor notices within
``--interval`` seconds.
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import time
from pathlib import Path

from .managed import _pdeathsig, _pid_alive

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="kafka-mirror-supervise")
    ap.add_argument("--watch", type=int, required=True, help="pid whose end ends the command")
    ap.add_argument("--interval", type=float, default=0.5)
    ap.add_argument("--ready", type=Path, help="file to write the command's pid into once started")
    ap.add_argument("--stop-signal", type=int, default=int(signal.SIGTERM),
                    help="the signal that stops the command (Tansu: SIGINT; it waits for its clients on SIGTERM)")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    args = ap.parse_args(argv)
    cmd = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not cmd:
        ap.error("no command given after --")
    stopping = False

    def on_term(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    child = subprocess.Popen(cmd, preexec_fn=_pdeathsig, stdin=subprocess.DEVNULL)
    if args.ready:
        args.ready.write_text(str(child.pid))
    reason = "stopped"
    while not stopping:
        if child.poll() is not None:
            reason = f"command exited with {child.returncode}"
            break
        if not _pid_alive(args.watch):
            reason = f"watched process {args.watch} is gone"
            break
        time.sleep(args.interval)
    if child.poll() is None:
        child.send_signal(args.stop_signal)
        try:
            child.wait(5)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait(5)
    print(f"kafka-mirror-supervise: {reason}; {' '.join(cmd[:2])} ended", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
