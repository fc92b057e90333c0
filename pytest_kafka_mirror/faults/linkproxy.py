"""The link-delay process: a TCP forwarder that delays every byte by a configurable time.

Run as ``python -m pytest_kafka_mirror.faults.linkproxy --listen PORT --upstream HOST:PORT
--control FILE``.  It sits between a replicator and the Kafka-aware ``tansu proxy`` of a
:class:`~pytest_kafka_mirror.faults.schedule.Link` (which advertises this process's port, so every
connection of the replicator's clients passes here), and holds each chunk of data for
``delay_ms`` ± ``jitter_ms`` before forwarding it, in both directions.

TCP is a byte stream, so a chunk is never released before the chunk in front of it:
jitter varies the spacing but never reorders data (as netem's delay with jitter does when
``rate`` keeps packets in order).  Settings are re-read from the control file on SIGHUP;
the process then writes ``<control>.ack`` with the generation it applied, so the
controller knows the new delay is in force before it records a fault marker.

It runs as its own process so its timing does not wait on the test process's GIL (the
producer busy-loops there).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import sys
import time
from pathlib import Path
from typing import Any

__all__ = ["main"]

CHUNK = 65536


class _Settings:
    def __init__(self) -> None:
        self.delay_ms = 0.0
        self.jitter_ms = 0.0
        self.generation = 0
        self.rng = random.Random(0)

    def load(self, path: Path) -> None:
        data: dict[str, Any] = json.loads(path.read_text())
        self.delay_ms = max(0.0, float(data.get("delay_ms", 0.0)))
        self.jitter_ms = max(0.0, float(data.get("jitter_ms", 0.0)))
        self.rng = random.Random(int(data.get("seed", 0)))
        self.generation = int(data.get("generation", 0))

    def hold(self) -> float:
        """Seconds to hold the next chunk."""
        d = self.delay_ms
        if self.jitter_ms:
            d += self.rng.uniform(-self.jitter_ms, self.jitter_ms)
        return max(0.0, d) / 1000.0


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, settings: _Settings) -> None:
    """Copy reader -> writer, each chunk released at its due time, in order."""
    queue: asyncio.Queue[tuple[float, bytes] | None] = asyncio.Queue()

    async def release() -> None:
        while True:
            item = await queue.get()
            if item is None:
                break
            due, data = item
            wait = due - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            writer.write(data)
            await writer.drain()

    sender = asyncio.create_task(release())
    last_due = 0.0
    try:
        while True:
            data = await reader.read(CHUNK)
            if not data:
                break
            # Never before the chunk ahead of it: a byte stream cannot be reordered.
            last_due = max(last_due, time.monotonic() + settings.hold())
            queue.put_nowait((last_due, data))
    except (ConnectionError, OSError):
        pass
    finally:
        queue.put_nowait(None)
        try:
            await sender
        except (ConnectionError, OSError):
            pass
        try:
            writer.close()
        except (ConnectionError, OSError):
            pass


async def _serve(args: argparse.Namespace) -> None:
    settings = _Settings()
    control = Path(args.control)
    if control.exists():
        settings.load(control)
    up_host, _, up_port = args.upstream.rpartition(":")
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()

    def reload() -> None:
        try:
            settings.load(control)
        except (OSError, ValueError) as exc:
            print(f"linkproxy: cannot load {control}: {exc}", flush=True)
            return
        Path(f"{control}.ack").write_text(str(settings.generation))
        print(
            f"linkproxy: generation {settings.generation}: delay {settings.delay_ms} ms "
            f"jitter {settings.jitter_ms} ms",
            flush=True,
        )

    loop.add_signal_handler(signal.SIGHUP, reload)
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)

    async def handle(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            up_r, up_w = await asyncio.open_connection(up_host, int(up_port))
        except OSError as exc:
            print(f"linkproxy: upstream {args.upstream} refused: {exc}", flush=True)
            client_w.close()
            return
        for w in (client_w, up_w):
            sock = w.get_extra_info("socket")
            if sock is not None:
                import socket

                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        await asyncio.gather(_pipe(client_r, up_w, settings), _pipe(up_r, client_w, settings))

    server = await asyncio.start_server(handle, "127.0.0.1", args.listen, reuse_address=True)
    Path(f"{control}.ready").write_text(str(os.getpid()))
    print(f"linkproxy: 127.0.0.1:{args.listen} -> {args.upstream}", flush=True)
    async with server:
        await stop.wait()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="kafka-mirror-linkproxy")
    ap.add_argument("--listen", type=int, required=True)
    ap.add_argument("--upstream", required=True, help="HOST:PORT to forward to")
    ap.add_argument("--control", required=True, help="JSON settings file, re-read on SIGHUP")
    asyncio.run(_serve(ap.parse_args(argv)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
