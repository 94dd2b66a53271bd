"""A worker process for the failover tests: one LiveSession of a conversation stored in Redis
or PostgreSQL.

    python -m tests.support.store_process STORE_URL CONVERSATION TEXT RUNS_FILE [--greet] [--hang]
        [--wait-lease] [--prefix=TABLES]

A ``postgresql://`` STORE_URL is a ``PostgresStore`` (tables under ``--prefix``), any other a
``RedisStore``.
It points google-genai at the emulator through the environment (the lines ``livebridge
emulator`` prints), sends TEXT, prints one JSON line per tool call event, and exits 0 after
the model's turn completes (``--greet``: after a first turn, so a handle is stored).
``book_table`` (not idempotent) appends a line to RUNS_FILE each time its body runs (city,
pid, its idempotency key and fence); with ``--hang`` it then waits forever (to be killed
mid-call). A live lease of another worker: one line on stderr and exit 3, or with
``--wait-lease`` retry until it lapses.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import anyio
from google import genai
from google.genai import types

from livebridge import LiveSession, ToolRegistry
from livebridge.calls.call import CallContext
from livebridge.errors import ConversationBusyError, LivebridgeError
from livebridge.protocol.events import ToolCallSettled, ToolCallStarted, TurnComplete
from livebridge.store import PostgresStore, RedisStore, Store
from tests.support.timing import seconds

#: Long enough that a worker started right after another was killed (Python, the SDK and a
#: store connection to load, on a busy machine) still finds its lease held.
LEASE_TTL = seconds(10.0)


def say(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


def registry(runs: str, hang: bool) -> ToolRegistry:
    tools = ToolRegistry()

    @tools.tool(timeout=60.0)
    async def book_table(city: str, context: CallContext) -> dict[str, Any]:
        """Book a table for tonight (not idempotent: it charges a deposit)."""
        with open(runs, "a") as file:  # noqa: ASYNC230 (on disk before the test kills us)
            file.write(f"{city} {os.getpid()} {context.idempotency_key} {context.fence}\n")
            file.flush()
            os.fsync(file.fileno())
        say(event="running", city=city)
        if hang:
            await anyio.sleep_forever()
        return {"booked": city}

    return tools


async def greet(session: LiveSession, store: Store, conversation: str) -> None:
    """Say hello, and wait until the handle issued after that turn is in the store."""
    await session.send_text("Hello")
    async for event in session.events():
        if isinstance(event, TurnComplete):
            break
    with anyio.fail_after(seconds(30)):
        while (await store.load(conversation)).handle is None:  # noqa: ASYNC110 (Redis)
            await anyio.sleep(0.01)
    say(event="greeted")


async def main(argv: list[str]) -> int:
    url, conversation, text, runs = [a for a in argv if not a.startswith("--")]
    flags = {a for a in argv if a.startswith("--")}
    tables = [a.partition("=")[2] for a in flags if a.startswith("--prefix=")]
    store: Store
    if url.startswith("postgresql://"):
        store = PostgresStore(url, lease_ttl=LEASE_TTL, prefix=(tables or ["livebridge"])[0])
    else:
        store = RedisStore(url, lease_ttl=LEASE_TTL)
    config = types.LiveConnectConfig(response_modalities=[types.Modality.TEXT])
    tools = registry(runs, "--hang" in flags)
    stored = (await store.load(conversation)).handle
    say(event="loaded", handle=stored.handle if stored else None)
    try:
        while True:
            try:
                async with LiveSession.connect(
                    genai.Client(),
                    model="gemini-live",
                    tools=tools,
                    config=config,
                    store=store,
                    conversation=conversation,
                ) as session:
                    if "--greet" in flags:  # a first turn: the service issues a handle
                        await greet(session, store, conversation)
                    await session.send_text(text)
                    async for event in session.events():
                        if isinstance(event, ToolCallStarted):
                            say(event="started", call_id=event.call_id, name=event.name)
                        elif isinstance(event, ToolCallSettled):
                            say(
                                event="settled",
                                call_id=event.call_id,
                                outcome=event.ending,
                                error=dict(event.error) if event.error else None,
                            )
                        elif isinstance(event, TurnComplete):
                            say(event="turn_complete")
                            return 0
                return 1
            except ConversationBusyError as exc:
                if "--wait-lease" not in flags:
                    print(f"busy: {exc}", file=sys.stderr, flush=True)
                    return 3
                say(event="busy", retry_after=exc.retry_after)
                await anyio.sleep(max(exc.retry_after, 0.05))
    except LivebridgeError as exc:
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        return 1
    finally:
        await store.aclose()


if __name__ == "__main__":
    sys.exit(anyio.run(main, sys.argv[1:]))
