"""The emulator in replay mode: a recording's server side, served to any google-genai program.

Each accepted connection plays the next recorded connection. Tool calls are issued afresh with
new ids (the recorded ids are remapped, so the emulator's contract checker follows each call
from issue to answer), cancellations and ``goAway`` go through the emulator's own steps, handles
are the emulator's own, and every other server message is sent as recorded. Where the recording
has the client answering, the replay waits (up to ``answer_timeout``) for the program's answers;
a call left unanswered is the checker's to report.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
from typing import Any

from livebridge.emulator.scenario import Conversation, Scenario
from livebridge.record import Entry, Recording, read_recording, restore_audio

__all__ = ["replay_scenario"]


def replay_scenario(
    recording: Recording | str | os.PathLike[str], *, answer_timeout: float = 10.0
) -> Scenario:
    """A scenario that serves ``recording``'s connections, one per accepted connection."""
    if not isinstance(recording, Recording):
        recording = read_recording(recording)
    connections = recording.connections()
    order = itertools.count()

    async def scenario(conv: Conversation) -> None:
        index = next(order)
        if index >= len(connections):
            await conv.close(1000, "the recording has no further connection")
            return
        ids: dict[str, str] = {}
        for entry in connections[index]:
            await _play(conv, entry, ids, answer_timeout)

    return scenario


async def _play(conv: Conversation, entry: Entry, ids: dict[str, str], wait: float) -> None:
    if entry.ev == "close" and entry.data.get("by") == "server":
        await conv.close(int(entry.data.get("code") or 1000), str(entry.data.get("reason", "")))
        return
    message: dict[str, Any] = entry.data.get("msg") or {}
    if entry.ev == "send" and "toolResponse" in message:
        recorded = [str(r.get("id")) for r in message["toolResponse"].get("functionResponses", [])]
        mapped = [ids[i] for i in recorded if i in ids]
        with contextlib.suppress(TimeoutError):  # the checker reports a call left unanswered
            await conv.wait_answers(mapped, wait)
        return
    if entry.ev != "recv":
        return
    message = restore_audio(dict(message))
    message.pop("setupComplete", None)  # the emulator sent its own
    calls = (message.pop("toolCall", None) or {}).get("functionCalls") or []
    cancelled = (message.pop("toolCallCancellation", None) or {}).get("ids") or []
    update = message.pop("sessionResumptionUpdate", None)
    go_away = message.pop("goAway", None)
    if message:
        await conv.send(message)
    if calls:
        pairs = [(str(c.get("name")), c.get("args") or {}) for c in calls]
        for old, new in zip(
            (str(c.get("id")) for c in calls), await conv.tool_call(pairs), strict=True
        ):
            ids[old] = new
    if cancelled:
        await conv.cancel([ids[i] for i in cancelled if i in ids])
    if update is not None:
        await conv.resumption_update(resumable=bool(update.get("resumable", True)))
    if go_away is not None:
        await conv.go_away(str(go_away.get("timeLeft") or "5s"))
    await asyncio.sleep(0)
