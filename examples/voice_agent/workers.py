"""``--workers N``: run N worker processes of the voice agent sharing one Redis.

Each worker is this same server on its own ports (``--port P`` → P, P+1, ...; 0 stays "any
free"), all with the same ``--redis`` URL, so a browser reconnecting to any worker continues its
conversation. Put a load balancer in front (any that proxies WebSockets; no sticky sessions
needed) and let Prometheus scrape every worker's metrics port. With ``--emulator`` the emulator
runs in a process of its own that every worker uses (an in-process one would not share its
sessions). Each output line is prefixed with where it comes from; SIGINT/SIGTERM stops all.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = ["run_workers"]

SERVER = Path(__file__).resolve().parent / "server.py"
EMULATOR_KEYS = ("GOOGLE_GEMINI_BASE_URL", "SSL_CERT_FILE", "GEMINI_API_KEY")


async def run_workers(
    count: int, argv: Sequence[str], *, emulator: bool, port: int, metrics: int
) -> int:
    """Start ``count`` workers (and the emulator), relay their output, stop them on a signal."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    processes: list[tuple[str, asyncio.subprocess.Process]] = []
    if emulator:
        emu = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "livebridge.cli.main", "emulator", stdout=asyncio.subprocess.PIPE
        )
        assert emu.stdout is not None
        found: dict[str, str] = {}
        while not all(key in found for key in EMULATOR_KEYS):  # its environment lines
            line = (await emu.stdout.readline()).decode().strip()
            if not line:
                raise SystemExit("the emulator did not start")
            key, _, value = line.partition("=")
            found[key] = value
        env.update(found)
        processes.append(("emulator", emu))
    passed = [arg for arg in argv if arg != "--emulator"]
    for index in range(count):
        worker = await asyncio.create_subprocess_exec(
            sys.executable,
            str(SERVER),
            *passed,
            "--workers=1",
            f"--port={port + index if port else 0}",
            f"--metrics-port={metrics + index if metrics else 0}",
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        processes.append((f"worker {index + 1}", worker))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    async with asyncio.TaskGroup() as tg:
        for name, process in processes:
            tg.create_task(_relay(name, process))
        await stop.wait()
        workers = [p for name, p in processes if name != "emulator"]
        for process in workers:
            if process.returncode is None:
                process.send_signal(signal.SIGINT)
        await asyncio.gather(*(process.wait() for process in workers))
        for name, process in processes:
            if name == "emulator" and process.returncode is None:
                process.send_signal(signal.SIGTERM)  # prints its verdict
    return max((process.returncode or 0) for _, process in processes)


async def _relay(name: str, process: asyncio.subprocess.Process) -> None:
    assert process.stdout is not None
    async for line in process.stdout:
        print(f"{name}: {line.decode().rstrip()}", flush=True)
    await process.wait()
