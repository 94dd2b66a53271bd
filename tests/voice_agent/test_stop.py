"""Stop from the browser: every call still running is settled and reported before the close."""

from __future__ import annotations

import asyncio
import json

from .voice_client import BrowserClient, start_server, tone


async def test_stop_mid_call_reports_every_outcome_then_closes_normally() -> None:
    server = start_server()
    try:
        client = await BrowserClient.open(server.ws_url)
        await client.wait_for(lambda: bool(client.of_type("ready")))
        await client.stream(tone(1.0) + tone(0.6, loud=False))
        # find_events (NON_BLOCKING, 1.5 s) is still running once the blocking calls settled.
        await client.wait_for(
            lambda: bool(client.of_type("turn_complete")) and bool(client.open_calls)
        )
        running = set(client.open_calls)
        await client.ws.send(json.dumps({"type": "stop"}))
        await client.wait_for(lambda: client.closed is not None)
        stats = server.stats()
    finally:
        final = await asyncio.to_thread(server.stop)

    assert client.closed == (1000, "conversation ended")
    assert client.open_calls == set()  # each running call's outcome arrived before the close
    settled = {event["id"]: event["outcome"] for event in client.of_type("tool_settled")}
    assert running <= set(settled) and {settled[i] for i in running} <= {"ok", "cancelled"}
    kinds = [event["type"] for event in client.events]
    assert kinds[-1] == "closed" and kinds.index("closed") > max(
        index for index, kind in enumerate(kinds) if kind == "tool_settled"
    )
    assert stats["calls_settled"] == stats["calls_started"] == len(settled)
    assert final["violations"] == [] and final["session_errors"] == 0
