"""The emulator in a process of its own, running the benchmark scenarios.

``python -m benchmarks.server RESULTS`` prints one JSON line (``base_url``, ``ca_file``) once it
serves, and serves until its standard input closes. The client picks the scenario through the
model name it connects with (see ``model_name``); the emulator clocks tool turnaround itself and
appends one JSON line per measured turn to ``RESULTS``. ``serve()`` runs it from a benchmark.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import ssl
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from google import genai
from google.genai import types

from livebridge import client_args
from livebridge.emulator import Conversation, Emulator

TOOL = "work"
FRAME_SECONDS = 0.04
OUT_RATE = 24_000


def model_name(scenario: str, *params: object) -> str:
    """The model a client connects with to get ``scenario`` with ``params``."""
    return "-".join(["bench", scenario, *(str(p).replace("-", "_") for p in params)])


def declaration() -> types.Tool:
    """The one tool every benchmark client declares: ``work(i: int)``."""
    schema = {"type": "object", "properties": {"i": {"type": "integer"}}, "required": ["i"]}
    function = types.FunctionDeclaration(
        name=TOOL, description="Benchmark work.", parameters_json_schema=schema
    )
    return types.Tool(function_declarations=[function])


def stamp_of(pcm: bytes) -> float:
    """When the server scheduled the audio frame ``pcm`` (its first 8 bytes)."""
    value: float = struct.unpack_from("<d", pcm)[0]
    return value


async def answered(conv: Conversation, ids: list[str]) -> None:
    """Wait until every call of ``ids`` has its own answer.

    (``Conversation.wait_answers`` would return at the first answer: the checker takes it as
    superseding every other open call.)
    """
    calls = conv.session.checker.calls
    await conv.session.wait_until(lambda: all(calls[i].state == "answered" for i in ids))


class Scenarios:
    """Every benchmark's side of the conversation, chosen by the connection's model name."""

    def __init__(self, results: Path) -> None:
        self.results = results

    async def __call__(self, conv: Conversation) -> None:
        kind, *params = conv.setup.model.removeprefix("models/").split("-")[1:]
        if kind in ("turnaround", "throughput"):
            calls, turns, label = int(params[0]), int(params[1]), params[2]
            await self.turns(conv, calls, turns, f"{kind}:{label}:{calls}")
        elif kind == "sessions":
            await self.stream(conv, float(params[0]))
        else:  # "idle": the connection stays open and quiet
            await asyncio.Event().wait()

    async def turns(self, conv: Conversation, calls: int, turns: int, key: str) -> None:
        """``turns`` turns of ``calls`` parallel calls; records toolCall sent -> last answer."""
        lines = []
        for turn in range(turns):
            started = time.monotonic()
            ids = await conv.tool_call([(TOOL, {"i": turn * calls + i}) for i in range(calls)])
            await answered(conv, ids)
            lines.append(json.dumps({"key": key, "seconds": time.monotonic() - started}))
            if turn == turns - 1:
                with self.results.open("a") as out:
                    out.write("\n".join(lines) + "\n")
            await conv.turn_complete()

    async def stream(self, conv: Conversation, call_every: float) -> None:
        """Model audio at real time (24 kHz, 40 ms frames) and one tool call every so often.

        Each frame starts with its scheduled send time (``stamp_of``), so the client measures
        how late it got it. Frames go straight onto the socket, and the transcript is emptied as
        it goes: the emulator's own per-frame bookkeeping would cost more than the clients.
        """
        session = conv.session
        silence = bytes(int(OUT_RATE * FRAME_SECONDS) * 2 - 8)
        head = b'{"serverContent":{"modelTurn":{"role":"model","parts":[{"inlineData":'
        head += b'{"mimeType":"audio/pcm;rate=24000","data":"'
        tail = b'"}}]}}}'
        calls = asyncio.ensure_future(self.calls_every(conv, call_every))
        try:
            start = time.monotonic()
            frame = 0
            while True:
                due = start + frame * FRAME_SECONDS
                pcm = struct.pack("<d", due) + silence
                await session.ws.send(head + base64.b64encode(pcm) + tail)
                if frame % 50 == 0:
                    session.shared.transcript.clear()
                frame += 1
                await asyncio.sleep(max(0.0, start + frame * FRAME_SECONDS - time.monotonic()))
        finally:
            calls.cancel()

    async def calls_every(self, conv: Conversation, seconds: float) -> None:
        turn = 0
        while True:
            await asyncio.sleep(seconds)
            ids = await conv.tool_call([(TOOL, {"i": turn})])
            await answered(conv, ids)
            await conv.turn_complete()
            turn += 1


async def _serve(results: Path) -> None:
    emulator = Emulator(scenario=Scenarios(results), check_audio_during_blocking=False)
    async with emulator:
        print(json.dumps({"base_url": emulator.base_url, "ca_file": emulator.ca_file}), flush=True)
        await asyncio.to_thread(sys.stdin.read)


@dataclass(frozen=True, slots=True)
class Server:
    """A running server process: where it listens, what it trusts, where results go."""

    base_url: str
    ca_file: str
    results: Path
    pid: int

    def client(self, *, tuned: bool = True) -> genai.Client:
        """The google-genai client pointed at this server (one per process, as in production).

        ``tuned``: websockets get ``livebridge.client_args()`` (no permessage-deflate); else the
        SDK's defaults (deflate offered, which the emulator accepts).
        """
        return _client(self.base_url, self.ca_file, tuned)

    def ssl_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=self.ca_file)

    def env(self) -> dict[str, str]:
        return {"BENCH_BASE_URL": self.base_url, "BENCH_CA_FILE": self.ca_file}

    def take_results(self) -> list[dict[str, Any]]:
        """The turns recorded so far (and forget them)."""
        if not self.results.exists():
            return []
        lines = self.results.read_text().splitlines()
        self.results.unlink()
        return [json.loads(line) for line in lines if line]


@cache
def _client(base_url: str, ca_file: str, tuned: bool) -> genai.Client:
    context = ssl.create_default_context(cafile=ca_file)
    args = client_args(ssl=context) if tuned else {"ssl": context}
    options = types.HttpOptions(base_url=base_url, async_client_args=args)
    return genai.Client(api_key="test", http_options=options)


def server_from_env() -> Server:
    """The server a parent benchmark process started (for probe subprocesses)."""
    return Server(os.environ["BENCH_BASE_URL"], os.environ["BENCH_CA_FILE"], Path(os.devnull), 0)


def pin_to_one_core() -> int | None:
    """Pin this process to the first core it may use; returns that core (None if not possible)."""
    if not hasattr(os, "sched_setaffinity"):
        return None
    cores = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cores[0]})
    return cores[0]


def _threads(pid: int) -> list[int]:
    """The ids of ``pid``'s threads (just ``pid`` where ``/proc`` does not list them)."""
    tasks = Path(f"/proc/{pid}/task")
    return [int(t.name) for t in tasks.iterdir()] if tasks.is_dir() else [pid]


@contextmanager
def serve(directory: Path) -> Iterator[Server]:
    """Start the server process (on the cores the client does not use) and stop it after."""
    results = directory / "turns.jsonl"
    process = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.server", str(results)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        ready = json.loads(process.stdout.readline())
        if hasattr(os, "sched_setaffinity"):
            others = sorted(os.sched_getaffinity(0))[1:]
            if others:  # every thread: one made before this (its stdin reader) keeps its own
                os.sched_setaffinity(process.pid, set(others))  # first: new threads inherit it
                for thread in _threads(process.pid):
                    os.sched_setaffinity(thread, set(others))
        yield Server(ready["base_url"], ready["ca_file"], results, process.pid)
    finally:
        if process.stdin is not None:
            process.stdin.close()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stdout is not None:
            process.stdout.close()


if __name__ == "__main__":
    asyncio.run(_serve(Path(sys.argv[1])))
