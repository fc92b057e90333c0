"""A FAKE Apache Kafka distribution, to run the kafka-home and mm2 lifecycle code for real.

No Kafka distribution can be installed on this project's machines, so the code paths of
``kafka-home:PATH`` and ``mm2:KAFKA_HOME`` (render files, format storage, start, wait for
readiness, stop by signal, capture logs) are exercised against shell scripts with the
distribution's layout and command-line interface:

* ``bin/kafka-storage.sh format -t ID -c PROPS [--standalone] [--ignore-formatted]``
  records its arguments, refuses a second format without ``--ignore-formatted`` (as the
  real one does) and writes ``meta.properties`` into ``log.dirs``;
* ``bin/kafka-server-start.sh PROPS`` records its arguments, refuses an unformatted log
  dir, reads the PLAINTEXT port from ``listeners`` and runs a **Tansu** broker there
  (SIGTERM ends it at once: Tansu's own graceful shutdown takes ~5 s);
* ``bin/connect-mirror-maker.sh mm2.properties`` records its arguments, reads the
  bootstrap servers, the ``source->target.topics`` regex and the replication policy, and
  execs the plugin's **reference mirror** with the prefix that policy implies; the
  mirror reads MM2's consumer-group settings from the same file (checkpoints, group
  offset sync, ``offset.lag.max``, heartbeats, ``groups``), so the failover checks run
  against the fake MM2 as they would against a real one.

What this proves: the plugin drives a distribution through its documented interface and
handles its processes.  What it cannot prove: that a real Kafka accepts the rendered
``server.properties`` or that a real MM2 accepts ``mm2.properties`` — the unit tests pin
those files, and ``KAFKA_MIRROR_KAFKA_HOME`` runs the real thing where one is installed.
"""

from __future__ import annotations

import os
import shlex
import stat
import sys
from pathlib import Path

__all__ = ["make_fake_kafka_home"]

_STORAGE = r"""#!/usr/bin/env bash
# FAKE kafka-storage.sh (pytest-kafka-mirror tests)
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
echo "kafka-storage.sh $*" >> "$here/calls.log"
[ "$1" = format ] || { echo "fake: only 'format' is supported" >&2; exit 2; }
shift
cid="" props="" ignore=0
while [ $# -gt 0 ]; do
  case "$1" in
    -t|--cluster-id) cid="$2"; shift 2 ;;
    -c|--config) props="$2"; shift 2 ;;
    --ignore-formatted|-g) ignore=1; shift ;;
    --standalone|-s) shift ;;
    *) echo "fake: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -n "$cid" ] && [ -f "$props" ] || { echo "fake: need -t ID -c PROPS" >&2; exit 2; }
dir="$(sed -n 's/^log\.dirs=//p' "$props")"
if [ -f "$dir/meta.properties" ]; then
  [ "$ignore" = 1 ] && { echo "All of the log directories are already formatted."; exit 0; }
  echo "Log directory $dir is already formatted." >&2; exit 1
fi
mkdir -p "$dir"
printf 'cluster.id=%s\nnode.id=%s\nversion=1\n' "$cid" "$(sed -n 's/^node\.id=//p' "$props")" > "$dir/meta.properties"
echo "Formatting $dir with metadata.version 3.9-IV0."
"""

_SERVER = r"""#!/usr/bin/env bash
# FAKE kafka-server-start.sh (pytest-kafka-mirror tests): a Tansu broker on the listener port
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
echo "kafka-server-start.sh $* LOG_DIR=${LOG_DIR:-} KAFKA_HEAP_OPTS=${KAFKA_HEAP_OPTS:-}" >> "$here/calls.log"
props="$1"
dir="$(sed -n 's/^log\.dirs=//p' "$props")"
[ -f "$dir/meta.properties" ] || { echo "fake: log dir $dir is not formatted" >&2; exit 1; }
[ -f "$here/fail-start" ] && { echo "fake: simulated start-up failure: $(cat "$here/fail-start")" >&2; exit 3; }
port="$(sed -n 's/^listeners=PLAINTEXT:\/\/127\.0\.0\.1:\([0-9]*\),.*/\1/p' "$props")"
url="tcp://127.0.0.1:$port"
echo "fake kafka: starting tansu on $url"
@TANSU@ broker --cluster-id "fake-$port" --listener-url "$url" --advertised-listener-url "$url" --storage-engine memory://tansu/ &
broker=$!
# Tansu takes ~5 s to shut down gracefully; a fake need not make every test wait for it.
trap 'kill -KILL $broker 2>/dev/null; wait $broker 2>/dev/null; echo "fake kafka: stopped"; exit 0' TERM INT
wait $broker
"""

_MM2 = r"""#!/usr/bin/env bash
# FAKE connect-mirror-maker.sh (pytest-kafka-mirror tests): the reference mirror, configured from mm2.properties
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
echo "connect-mirror-maker.sh $*" >> "$here/calls.log"
props="$1"
get() { sed -n "s/^$1 = //p" "$props" | sed 's/\\\\/\\/g' | tail -1; }
src="$(get 'source\.bootstrap\.servers')"
dst="$(get 'target\.bootstrap\.servers')"
topics="$(get 'source->target\.topics')"
policy="$(get 'replication\.policy\.class')"
sep="$(get 'replication\.policy\.separator')"
case "$policy" in
  *IdentityReplicationPolicy) prefix="" ;;
  *DefaultReplicationPolicy) prefix="source${sep:-.}" ;;
  *) echo "fake mm2: unsupported policy $policy" >&2; exit 2 ;;
esac
echo "fake mm2: $src -> $dst topics /$topics/ prefix '$prefix'"
# The reference mirror reads MM2's consumer-group settings (checkpoints, group offset sync,
# offset.lag.max, heartbeats, groups) from the same file and ignores the rest.
exec @PYTHON@ -m pytest_kafka_mirror.replicators.reference --source "$src" --target "$dst" --topics "$topics" --prefix "$prefix" --properties "$props"
"""


def _write(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def make_fake_kafka_home(root: str | os.PathLike[str], *, version: str = "3.9.0", tansu: str | None = None) -> Path:
    """Write a fake distribution under ``root`` and return its path (see the module doc)."""
    from pytest_kafka_mirror.clusters.tansu import tansu_binary

    home = Path(root) / f"fake-kafka_2.13-{version}"
    (home / "bin").mkdir(parents=True, exist_ok=True)
    (home / "libs").mkdir(exist_ok=True)
    (home / "libs" / f"kafka-clients-{version}.jar").write_bytes(b"")
    _write(home / "bin" / "kafka-storage.sh", _STORAGE)
    _write(home / "bin" / "kafka-server-start.sh", _SERVER.replace("@TANSU@", shlex.quote(tansu or tansu_binary())))
    _write(home / "bin" / "connect-mirror-maker.sh", _MM2.replace("@PYTHON@", shlex.quote(sys.executable)))
    return home


def calls(home: Path) -> list[str]:
    """The recorded invocations, one line each."""
    log = home / "calls.log"
    return log.read_text().splitlines() if log.exists() else []
