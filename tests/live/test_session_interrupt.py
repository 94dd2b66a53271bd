"""A turn interrupted with a BLOCKING call pending and no ``toolCallCancellation``.

The service has been seen to do this. The server did not withdraw the call, so the session keeps
running it and answers it once; when the model asks again on the next turn (a new id, the same
call) while the first still runs, that is a re-issue: the handler does not run twice, and both
ids are answered with its one result.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import anyio

import livebridge
from livebridge.emulator import Emulator
from livebridge.protocol.events import Interrupted, SessionEvent, ToolCallSettled, ToolCallStarted
from tests.support.gemini_sessions import client_messages, collect_until, open_session


async def test_interrupted_without_cancellation_runs_the_call_once_and_answers_every_id() -> None:
    release = anyio.Event()
    runs: Counter[str] = Counter()
    tools = livebridge.ToolRegistry()

    @tools.tool
    async def get_weather(city: str) -> dict[str, str]:
        """Weather for a city (held until the test lets it finish)."""
        runs[city] += 1
        if city == "Oslo":
            await release.wait()
        return {"city": city, "sky": "clear"}

    started: list[ToolCallStarted] = []
    settled: list[ToolCallSettled] = []

    def note(event: SessionEvent) -> None:
        if isinstance(event, ToolCallStarted):
            started.append(event)
        elif isinstance(event, ToolCallSettled):
            settled.append(event)

    def watch(done: type[SessionEvent] | None = None) -> Callable[[SessionEvent], bool]:
        def check(event: SessionEvent) -> bool:
            note(event)
            return done is not None and isinstance(event, done)

        return check

    async with (
        Emulator(cancel_on_interrupt=False, reissue_next_turn=True) as emu,
        open_session(emu, tools) as session,
    ):
        await session.send_text("What is the weather in Oslo?")
        await collect_until(session, watch(ToolCallStarted))
        await session.send_activity_start()  # barge-in: interrupted, no cancellation
        await collect_until(session, watch(Interrupted))
        await session.send_text("And in Lisbon?")

        def reissued(event: SessionEvent) -> bool:
            note(event)
            return [s.args for s in started].count({"city": "Oslo"}) == 2

        await collect_until(session, reissued)
        release.set()

        def all_settled(event: SessionEvent) -> bool:
            note(event)
            return len(started) >= 3 and len(settled) == len(started)

        await collect_until(session, all_settled)
        await emu.wait_for(lambda: len(answered_ids(emu)) >= 3)

    assert runs == {"Oslo": 1, "Lisbon": 1}  # the re-issue did not run the handler again
    ids = [s.call_id for s in started]
    assert len(set(ids)) == len(ids) == 3
    assert Counter(s.call_id for s in settled) == Counter(ids)  # one fate per call
    assert Counter(answered_ids(emu)) == Counter(ids)  # every id answered, none twice
    responses = [r for m in client_messages(emu, "toolResponse") for r in m["functionResponses"]]
    assert all(r["response"].get("output") for r in responses)  # the one result, not an error
    assert emu.violations == []


def answered_ids(emu: Emulator) -> list[str]:
    return [r["id"] for m in client_messages(emu, "toolResponse") for r in m["functionResponses"]]
