"""A replicator that is yours, in the tests: started outside the plugin, as your platform
would, and controlled by a script standing in for ``systemctl``
(``ctl.py DIR start|stop|kill|pause|resume``), whose commands the session is given
(``--kafka-mirror-replicator-command VERB=COMMAND``)."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = ["YourReplicator"]

#: ``start`` runs ``DIR/argv`` (one argument a line) detached; when one of its arguments is
#: ``DIR/ready``, it returns once the replicator created that file.  ``stop`` / ``kill``
#: return once the process is gone.
CTL = '''
import os, signal, subprocess, sys, time
from pathlib import Path

here = Path(sys.argv[1]); verb = sys.argv[2]
pid_file = here / "replicator.pid"
if verb == "start":
    ready = here / "ready"
    ready.unlink(missing_ok=True)
    argv = (here / "argv").read_text().split("\\n")
    with open(here / "replicator.log", "ab") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, cwd=here)
    pid_file.write_text(str(proc.pid))
    if str(ready) not in argv:
        sys.exit(0)
    for _ in range(300):
        if ready.exists():
            sys.exit(0)
        time.sleep(0.1)
    sys.exit("the replicator did not get ready")
pid = int(pid_file.read_text())
sig = {"stop": signal.SIGTERM, "kill": signal.SIGKILL, "pause": signal.SIGSTOP, "resume": signal.SIGCONT}[verb]
os.kill(pid, sig)
if verb in ("stop", "kill"):
    for _ in range(600):
        try:
            os.kill(pid, 0)
            if Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z":
                break
        except (ProcessLookupError, FileNotFoundError):
            break
        time.sleep(0.1)
'''

VERBS = ("stop", "start", "kill", "pause", "resume")


class YourReplicator:
    """``argv`` run by the control script in ``state`` (its log ``replicator.log`` there)."""

    def __init__(self, state: Path, argv: Sequence[str]) -> None:
        state.mkdir(parents=True, exist_ok=True)
        (state / "argv").write_text("\n".join(argv))
        (state / "ctl.py").write_text(CTL)
        self.state = state
        self.log = state / "replicator.log"
        self.pid_file = state / "replicator.pid"
        self._base = " ".join(shlex.quote(str(a)) for a in (sys.executable, state / "ctl.py", state))

    @staticmethod
    def ready_file(state: Path) -> Path:
        """The file a replicator is told to create once it copies (``start`` waits for it)."""
        return state / "ready"

    def command(self, verb: str) -> str:
        return f"{self._base} {verb}"

    def options(self) -> list[str]:
        """The session's options for its lifecycle: every verb's command."""
        return [f"--kafka-mirror-replicator-command={verb}={self.command(verb)}" for verb in VERBS]

    def start(self) -> None:
        done = subprocess.run(self.command("start"), shell=True, check=False)
        assert done.returncode == 0, self.log.read_text()[-2000:] if self.log.exists() else "(no log)"

    def discard(self) -> None:
        """SIGKILL it wherever the tests left it (the end of a fixture)."""
        if self.pid_file.exists():
            try:
                os.kill(int(self.pid_file.read_text()), signal.SIGKILL)
            except ProcessLookupError:
                pass
