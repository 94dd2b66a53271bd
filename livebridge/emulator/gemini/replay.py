"""The emulator in replay mode: a recording's server side, served to any google-genai program.

Each accepted connection plays the next recorded connection. Tool calls are issued afresh with
new ids (the recorded ids are remapped, so the emulator's contract checker follows each call
from issue to answer), cancellations and ``goAway`` go through the emulator's own steps, handles
are the emulator's own (mapped back to the recorded ones), and every other server message is
sent as recorded: at once (``pace="fast"``) or at the recording's relative times
(``pace="recorded"``, counted from the connection's start and from each recorded answer).
Where the recording has the client answering, the replay waits (up to ``answer_timeout``) for
the program's answers and compares them with the recorded ones; ``ReplayScenario.finish()``
gives the report (``livebridge.recording.replay.ReplayReport``), in the recording's ids and lines.

A recording of calls without ids (Vertex AI) is replayed too: each such call is named
``nameless-call-N`` in call order, as the session names it, and each recorded answer without an
id belongs to the oldest call of its function not yet finally answered. The replay issues every
call with an id (the app's tools, not the backend's framing, are what it compares).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import os
import time
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

import msgspec

from livebridge.emulator.replaying import Clock, Replay, error_text
from livebridge.emulator.replaying import kind as kind_of
from livebridge.emulator.scenario import Conversation
from livebridge.emulator.shared import Shared
from livebridge.recording.read import Entry, Recording, read_recording, restore_audio
from livebridge.recording.report import (
    Pace,
)


def _name_nameless(entries: list[Entry]) -> None:
    """Give recorded calls without an id, and their answers, the key the session used."""
    named = itertools.count(1)
    waiting: dict[str, list[str]] = {}  # function -> its nameless calls' keys, oldest first
    for index, entry in enumerate(entries):
        about_tools = b'"functionCalls"' in entry.raw or b'"functionResponses"' in entry.raw
        if entry.ev not in ("recv", "send") or not about_tools:
            continue
        record = msgspec.json.decode(entry.raw)
        message = record.get("msg") if isinstance(record, dict) else None
        if not isinstance(message, dict):
            continue
        changed = False
        if entry.ev == "recv":
            for call in (message.get("toolCall") or {}).get("functionCalls") or []:
                if isinstance(call, dict) and not isinstance(call.get("id"), str):
                    call["id"] = f"nameless-call-{next(named)}"
                    waiting.setdefault(str(call.get("name")), []).append(call["id"])
                    changed = True
        else:
            for answer in (message.get("toolResponse") or {}).get("functionResponses") or []:
                if isinstance(answer, dict) and not isinstance(answer.get("id"), str):
                    keys = waiting.get(str(answer.get("name"))) or []
                    if not keys:
                        continue  # an answer to no call: left as recorded, reported unexpected
                    answer["id"] = keys[0]
                    changed = True
                    if not answer.get("willContinue"):
                        keys.pop(0)
        if changed:
            entries[index] = dataclasses.replace(entry, raw=msgspec.json.encode(record))


@dataclass(frozen=True, slots=True)
class _Answer:
    message: int  # which client ``toolResponse`` of the replay carried it
    at: float  # monotonic, as the transcript's
    kind: str  # ok | error
    detail: str  # the error, shortened
    body: Any  # the answer's ``response``, compared with the recorded one
    name: str | None
    line: int  # the last recorded line played when it arrived


class ReplayScenario(Replay):
    """A scenario serving ``recording``'s connections, one per accepted connection, that judges
    the client's answers against the recorded ones (``Emulator(replay=...)`` builds it)."""

    def __init__(
        self,
        recording: Recording | str | os.PathLike[str],
        *,
        pace: Pace = "fast",
        answer_timeout: float | None = None,
        ignore_fields: Collection[str] = (),
    ) -> None:
        if not isinstance(recording, Recording):
            recording = read_recording(recording)
        _name_nameless(recording.entries)
        super().__init__(
            recording, pace=pace, answer_timeout=answer_timeout, ignore_fields=ignore_fields
        )
        self._handles: dict[str, str] = {}  # the emulator's handle -> the recorded one
        # A streamed (NON_BLOCKING) call has several answers: the n-th recorded one is
        # compared with the n-th the client sent.
        for entry in recording.entries:
            message = entry.data.get("msg") or {}
            if entry.ev == "recv":
                for call in (message.get("toolCall") or {}).get("functionCalls") or []:
                    self._calls[str(call.get("id"))] = entry
            elif entry.ev == "send":
                for answer in (message.get("toolResponse") or {}).get("functionResponses") or []:
                    self._answered.setdefault(str(answer.get("id")), []).append(entry)
        self._shared: Shared | None = None
        self._cursor = 0
        self._messages = 0

    async def __call__(self, conv: Conversation) -> None:
        index = next(self._order)
        if index >= len(self._connections):
            await conv.close(1000, "the recording has no further connection")
            return
        self._shared = conv.session.shared
        self.between = None
        self.report.connections += 1
        entries = self._connections[index]
        clock = Clock(self.pace, entries[0].t)
        for position, entry in enumerate(entries):
            self._played[index] = position
            self._line = entry.line
            await self._play(conv, entry, clock)
        self._played[index] = len(entries)
        if index == len(self._connections) - 1:
            self.done = True
        else:
            self.between = time.monotonic()
        self._shared.notify()

    # -- playing --------------------------------------------------------------------------------

    async def _play(self, conv: Conversation, entry: Entry, clock: Clock) -> None:
        if entry.ev == "open":
            self._check_handle(conv, entry)
            return
        if entry.ev == "close" and entry.data.get("by") == "server":
            await clock.until(entry.t)
            await conv.close(int(entry.data.get("code") or 1000), str(entry.data.get("reason", "")))
            return
        message: dict[str, Any] = entry.data.get("msg") or {}
        if entry.ev == "send" and "toolResponse" in message:
            await self._expect(conv, entry)
            clock.sync(entry.t)
            return
        if entry.ev != "recv":
            return
        await clock.until(entry.t)
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
            issued = await conv.tool_call(pairs)
            for call, new in zip(calls, issued, strict=True):
                self._issued[str(call.get("id"))] = new
                self._recorded[new] = str(call.get("id"))
                self._issued_at[new] = conv.known_calls[new].issued_at
        if cancelled:
            await conv.cancel([self._issued[i] for i in cancelled if i in self._issued])
        if update is not None:
            handle = await conv.resumption_update(resumable=bool(update.get("resumable", True)))
            if handle and update.get("newHandle"):
                self._handles[handle] = str(update["newHandle"])
        if go_away is not None:
            await conv.go_away(str(go_away.get("timeLeft") or "5s"))
        await asyncio.sleep(0)

    def _check_handle(self, conv: Conversation, entry: Entry) -> None:
        recorded = entry.data.get("handle") or None
        resumed = conv.resumed_from
        if resumed is None and recorded is None:
            return
        mapped = self._handles.get(resumed) if resumed else None
        if mapped == recorded:
            return
        if resumed is None:
            detail = f"opened a fresh connection, recorded resuming {recorded}"
        elif recorded is None:
            detail = f"resumed {mapped or resumed}, recorded a fresh connection"
        else:
            detail = (
                f"resumed {mapped or 'a handle the recording never issued'}, recorded {recorded}"
            )
        self._diverge("handle_changed", entry.line, None, None, detail)

    # -- judging --------------------------------------------------------------------------------

    async def _expect(self, conv: Conversation, entry: Entry) -> None:
        """Wait for the client's answers to one recorded ``toolResponse``, and compare."""
        responses = entry.data["msg"]["toolResponse"].get("functionResponses") or []
        wanted = self._numbered(entry, responses)  # (recorded id, n) of each response
        known = conv.known_calls
        waiting = [(self._issued[i], n) for i, n in wanted if self._issued.get(i, "") in known]

        def arrived() -> bool:
            self._scan()
            return all(len(self._answers.get(i, ())) > n or not known[i].open for i, n in waiting)

        with contextlib.suppress(TimeoutError):  # the checker reports a call left unanswered
            await conv.session.wait_until(arrived, self.answer_timeout)
        self._scan()
        messages: set[int] = set()
        found: list[str] = []  # the recorded ids of the answers that came
        for response, (recorded_id, n) in zip(responses, wanted, strict=True):
            answer = self._judge(
                entry, recorded_id, n, response.get("name"), response.get("response")
            )
            if answer is not None:
                messages.add(answer.message)
                found.append(recorded_id)
        together = sorted(
            self._recorded.get(i, i)
            for i, answers in self._answers.items()
            for answer in answers
            if answer.message in messages
        )
        if len(messages) > 1 or together != sorted(found):
            recorded_ids = [i for i, _ in wanted]
            self._diverge(
                "batch_split",
                entry.line,
                None,
                None,
                f"recorded one answer for {', '.join(recorded_ids)}; replayed in "
                f"{len(messages)} message(s) with {', '.join(together)}",
            )

    def _numbered(self, entry: Entry, responses: list[Any]) -> list[tuple[str, int]]:
        """Each response's recorded id and its place among that call's recorded answers."""
        numbered: list[tuple[str, int]] = []
        for response in responses:
            recorded_id = str(response.get("id"))
            earlier = [e for e in self._answered.get(recorded_id, []) if e.line < entry.line]
            numbered.append(
                (recorded_id, len(earlier) + sum(i == recorded_id for i, _ in numbered))
            )
        return numbered

    def _scan(self) -> None:
        """Take the client's new ``toolResponse`` messages from the emulator's transcript."""
        if self._shared is None:
            return
        transcript, dropped = self._shared.transcript, self._shared.dropped
        end = dropped + len(transcript)  # the cursor counts every entry, kept or dropped
        for item in transcript[max(0, self._cursor - dropped) :]:
            if item.direction != "client" or "toolResponse" not in item.message:
                continue
            self._messages += 1
            for response in item.message["toolResponse"].get("functionResponses") or []:
                if not isinstance(response, dict):
                    continue
                body = response.get("response")
                kind = kind_of(body)
                detail = error_text(body) if kind == "error" else ""
                answer = _Answer(
                    self._messages, item.at, kind, detail, body, response.get("name"), self._line
                )
                self._answers.setdefault(str(response.get("id")), []).append(answer)
        self._cursor = end

    def _scan_now(self) -> None:
        self._scan()

    def _name_of(self, recorded_id: str | None, answer: Any) -> str | None:
        name: str | None = answer.name
        return name

    def _owed(self, entries: list[Entry]) -> list[tuple[Entry, tuple[str, int], str | None]]:
        owed: list[tuple[Entry, tuple[str, int], str | None]] = []
        for entry in entries:
            message = entry.data.get("msg") or {}
            if entry.ev != "send" or "toolResponse" not in message:
                continue
            responses = message["toolResponse"].get("functionResponses") or []
            for response, numbered in zip(responses, self._numbered(entry, responses), strict=True):
                owed.append((entry, numbered, response.get("name")))
        return owed
