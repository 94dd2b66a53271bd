"""The GPT-Live side in replay mode: a recording's server events, served to any openai program.

Each accepted connection plays the next recorded connection (GPT-Live has no resumption: a
recording of one session holds one). The session's own ``session.started`` answers the app's
``session.start``; then every recorded server event is sent as recorded, at once
(``pace="fast"``) or at the recording's relative times (``pace="recorded"``), except that each
backend call is issued under a fresh ``call_id`` and the backend's state follows the recorded
responses (running, open calls, a failed response's dropped calls), so the emulator's gate and
verdicts judge the app as they do live. The session does not start responses of its own: a
recorded continuation plays once the app sent its ``response.create``.

Where the recording has the client answering, the replay waits (up to ``answer_timeout``) for
the app's ``function_call_output`` items and the ``response.create`` after them, and compares:
each answer's fate (``ok`` or ``error``) and values, and the grouping (the outputs one
``response.create`` followed, recorded and replayed). ``LiveReplay.finish()`` gives the report
(``livebridge.recording.report.ReplayReport``), in the recording's ids and lines.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import time
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from livebridge.emulator.openai_live.session import LiveServerSession, new_id
from livebridge.emulator.replaying import Clock, Replay, error_text, kind
from livebridge.recording.read import Entry, Recording, read_recording
from livebridge.recording.report import (
    Pace,
)

#: The recorder's reduced audio fields: ``audioBytes`` stands for this field's base64.
_AUDIO = {"session.output_audio.delta": "delta", "session.input_audio.append": "audio"}
#: A backend response's terminal events: a failed or incomplete one drops its open calls.
_ENDS = {
    "response.completed": "completed",
    "response.failed": "failed",
    "response.incomplete": "incomplete",
}


@dataclass(frozen=True, slots=True)
class _Answer:
    at: float  # monotonic, as the transcript's
    kind: str  # ok | error
    detail: str  # the error, shortened
    body: Any  # the output's JSON, compared with the recorded one
    batch: int  # how many response.create the app had sent before it
    line: int  # the last recorded line played when it arrived


def _output(item: dict[str, Any]) -> Any:
    """A ``function_call_output``'s ``output``: JSON text on this wire, read back."""
    text = item.get("output")
    try:
        return json.loads(text) if isinstance(text, str) else text
    except ValueError:
        return text


def _item(message: dict[str, Any], kind_of_item: str) -> dict[str, Any] | None:
    """The item of a recorded client ``response.item.create``, if it is of ``kind_of_item``."""
    item = message.get("item") if message.get("type") == "response.item.create" else None
    return item if isinstance(item, dict) and item.get("type") == kind_of_item else None


def _call(message: dict[str, Any]) -> dict[str, Any] | None:
    """The ``function_call`` item a recorded ``response.output_item.done`` carries."""
    event = message.get("event") if message.get("type") == "response.event" else None
    if not isinstance(event, dict) or event.get("type") != "response.output_item.done":
        return None
    item = event.get("item")
    return item if isinstance(item, dict) and item.get("type") == "function_call" else None


def _restored(message: dict[str, Any]) -> dict[str, Any]:
    """``message`` with a reduced audio field turned back into that many zero bytes."""
    field = _AUDIO.get(str(message.get("type")))
    size = message.get("audioBytes")
    if field is not None and isinstance(size, int):
        message = {k: v for k, v in message.items() if k != "audioBytes"}
        message[field] = base64.b64encode(bytes(size)).decode()
    return message


def _moot_calls(recording: Recording) -> frozenset[str]:
    """The recorded call ids of backend responses that ended failed or incomplete (a call
    belongs to the newest running response of its delegation, as the emulator counts it)."""
    running: dict[str, Any] = {}  # response id -> its delegation, in order of creation
    calls: dict[str, list[str]] = {}  # response id -> its calls
    moot: set[str] = set()
    for entry in recording.entries:
        message = entry.data.get("msg") or {}
        if entry.ev != "recv" or message.get("type") != "response.event":
            continue
        delegation = message.get("delegation_id")
        event = message.get("event") or {}
        response = event.get("response")
        response_id = str(response.get("id")) if isinstance(response, dict) else ""
        call = _call(message)
        if event.get("type") == "response.created":
            running[response_id] = delegation
        elif event.get("type") in _ENDS:
            running.pop(response_id, None)
            if _ENDS[str(event.get("type"))] != "completed":
                moot.update(calls.pop(response_id, []))
        elif call is not None:
            mine = [r for r, d in running.items() if d == delegation]
            owner = mine[-1] if mine else next(reversed(running), "")
            calls.setdefault(owner, []).append(str(call.get("call_id")))
    return frozenset(moot)


class LiveReplay(Replay):
    """A GPT-Live scenario serving ``recording``'s connections, one per accepted connection,
    that judges the app's answers against the recorded ones (``Emulator(replay=...)`` builds
    it for a GPT-Live recording)."""

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
        super().__init__(
            recording, pace=pace, answer_timeout=answer_timeout, ignore_fields=ignore_fields
        )
        self._names: dict[str, str] = {}  # recorded id -> its function
        for entry in recording.entries:
            message = entry.data.get("msg") or {}
            call = _call(message) if entry.ev == "recv" else None
            output = _item(message, "function_call_output") if entry.ev == "send" else None
            if call is not None:
                self._calls[str(call.get("call_id"))] = entry
                self._names[str(call.get("call_id"))] = str(call.get("name"))
            elif output is not None:
                self._answered.setdefault(str(output.get("call_id")), []).append(entry)
        self._moot = _moot_calls(recording)  # recorded ids whose response failed
        self._live: LiveServerSession | None = None
        self._cursor = 0
        self._creates = 0  # response.create the app sent, on this connection

    async def __call__(self, live: LiveServerSession) -> None:
        index = next(self._order)
        if index >= len(self._connections):
            await live.ws.close(1000, "the recording has no further connection")
            return
        live.replaying = True
        self._live, self._cursor, self._creates = live, 0, 0
        self.between = None
        self.report.connections += 1
        entries = self._connections[index]
        with contextlib.suppress(TimeoutError):  # an app that never starts: all unanswered
            await live.wait_until(lambda: live.started or live.finished, self.answer_timeout)
        clock = Clock(self.pace, entries[0].t)
        batch: list[Entry] = []  # recorded outputs since the last recorded response.create
        for position, entry in enumerate(entries):
            self._played[index] = position
            self._line = entry.line
            if live.finished:
                break
            message: dict[str, Any] = entry.data.get("msg") or {}
            if entry.ev == "recv":
                await clock.until(entry.t)
                await self._serve(live, message)
            elif entry.ev == "send" and _item(message, "function_call_output") is not None:
                batch.append(entry)
            elif entry.ev == "send" and message.get("type") == "response.create":
                await self._expect(live, batch, entry)
                clock.sync(entry.t)
                batch = []
            elif entry.ev == "close" and entry.data.get("by") == "server":
                await clock.until(entry.t)
                code = int(entry.data.get("code") or 1000)
                reason = str(entry.data.get("reason") or "")
                await live.ws.close(code, reason)
        else:
            self._played[index] = len(entries)
        if batch:  # outputs no recorded create followed
            await self._expect(live, batch, None)
        if index == len(self._connections) - 1:
            self.done = True
        else:
            self.between = time.monotonic()
        live.shared.notify()

    # -- playing --------------------------------------------------------------------------------

    async def _serve(self, live: LiveServerSession, message: dict[str, Any]) -> None:
        """One recorded server event, its call ids fresh and the backend's state following."""
        kind_of_event = message.get("type")
        if kind_of_event in ("session.started", "session.closed"):
            return  # the session sends its own
        message = _restored({k: v for k, v in message.items() if k != "event_id"})
        if kind_of_event == "session.delegation.created":
            delegation = message.get("delegation") or {}
            if delegation.get("target") == "client":
                live.client_delegations.setdefault(str(delegation.get("id")), [])
            await live.send(message)
            return
        if kind_of_event != "response.event":
            await live.send(message)
            return
        delegation = message.get("delegation_id")
        event = dict(message.get("event") or {})
        backend = live.backend
        response = event.get("response")
        response_id = str(response.get("id")) if isinstance(response, dict) else ""
        if event.get("type") == "response.created":
            live.start_response(response_id, delegation)
        elif event.get("type") in _ENDS:
            backend.running.pop(response_id, None)
            if _ENDS[str(event.get("type"))] != "completed":
                live.drop_calls_of(response_id)
        item = event.get("item")
        if isinstance(item, dict) and item.get("type") == "function_call":
            recorded = str(item.get("call_id"))
            issued = self._issued.get(recorded) or new_id("call")
            self._issued[recorded], self._recorded[issued] = issued, recorded
            event["item"] = {**item, "call_id": issued}
            if event.get("type") == "response.output_item.done":
                live.open_call(issued, self._running_response(live, delegation))
                self._issued_at[issued] = time.monotonic()
        await live.nested(delegation, event)
        await live.changed()

    @staticmethod
    def _running_response(live: LiveServerSession, delegation: Any) -> str:
        """The running response a call belongs to: the newest of its delegation."""
        running = [r for r, d in live.backend.running.items() if d == delegation]
        return running[-1] if running else next(reversed(live.backend.running), "")

    # -- judging --------------------------------------------------------------------------------

    async def _expect(
        self, live: LiveServerSession, batch: list[Entry], create: Entry | None
    ) -> None:
        """Wait for the app's outputs to one recorded batch (and, with ``create``, the
        ``response.create`` after them), and compare."""
        wanted = self._numbered(batch)
        waiting = [
            (self._issued[i], n) for i, n in wanted if i in self._issued and i not in self._moot
        ]

        def arrived() -> bool:
            self._scan(live)
            if live.finished:
                return True
            answers = [self._answers.get(i, []) for i, _ in waiting]
            if not all(len(a) > n for a, (_, n) in zip(answers, waiting, strict=True)):
                return False
            last = max((a[n].batch for a, (_, n) in zip(answers, waiting, strict=True)), default=-1)
            return create is None or self._creates > last

        with contextlib.suppress(TimeoutError):  # an unanswered call is reported below
            await live.wait_until(arrived, self.answer_timeout)
        self._scan(live)
        batches: set[int] = set()
        found: list[str] = []
        for entry, (recorded_id, n) in zip(batch, wanted, strict=True):
            if recorded_id in self._moot:
                self._judge_moot(entry, recorded_id, n)
                continue
            body = _output(_item(entry.data["msg"], "function_call_output") or {})
            answer = self._judge(entry, recorded_id, n, self._names.get(recorded_id), body)
            if answer is not None:
                batches.add(answer.batch)
                found.append(recorded_id)
        together = sorted(
            self._recorded.get(i, i)
            for i, answers in self._answers.items()
            for answer in answers
            if answer.batch in batches and self._recorded.get(i, i) not in self._moot
        )
        if found and (len(batches) > 1 or together != sorted(found)):
            line = create.line if create is not None else batch[-1].line
            self._diverge(
                "batch_split",
                line,
                None,
                None,
                f"recorded one response.create after {', '.join(i for i, _ in wanted)}; "
                f"replayed {len(batches)} with {', '.join(together)}",
            )

    def _judge_moot(self, entry: Entry, recorded_id: str, n: int) -> None:
        """A moot call's recorded answer: compared if the app answered it too, else let be."""
        answers = self._answers.get(self._issued.get(recorded_id, ""), [])
        if len(answers) > n:
            body = _output(_item(entry.data["msg"], "function_call_output") or {})
            self._judge(entry, recorded_id, n, self._names.get(recorded_id), body)
        else:
            self._judged.add((recorded_id, n))

    def _unexpected(self, recorded_id: str) -> bool:
        return recorded_id not in self._moot

    def _numbered(self, batch: list[Entry]) -> list[tuple[str, int]]:
        """Each recorded output's call id and its place among that call's recorded outputs."""
        numbered: list[tuple[str, int]] = []
        for entry in batch:
            item = _item(entry.data["msg"], "function_call_output") or {}
            recorded_id = str(item.get("call_id"))
            earlier = [e for e in self._answered.get(recorded_id, []) if e.line < entry.line]
            numbered.append((recorded_id, len(earlier)))
        return numbered

    def _scan(self, live: LiveServerSession) -> None:
        """Take the app's new outputs and continuations from the emulator's transcript."""
        shared = live.shared
        transcript, dropped = shared.transcript, shared.dropped
        end = dropped + len(transcript)  # the cursor counts every entry, kept or dropped
        for item in transcript[max(0, self._cursor - dropped) :]:
            if item.direction != "client" or item.session != live.id:
                continue
            if item.message.get("type") == "response.create":
                self._creates += 1
                continue
            output = _item(item.message, "function_call_output")
            if output is None:
                continue
            body = _output(output)
            answer_kind = kind(body)
            detail = error_text(body) if answer_kind == "error" else ""
            answer = _Answer(item.at, answer_kind, detail, body, self._creates, self._line)
            self._answers.setdefault(str(output.get("call_id")), []).append(answer)
        self._cursor = end

    def _scan_now(self) -> None:
        if self._live is not None:
            self._scan(self._live)

    def _name_of(self, recorded_id: str | None, answer: Any) -> str | None:
        return self._names.get(recorded_id) if recorded_id is not None else None

    def _owed(self, entries: list[Entry]) -> list[tuple[Entry, tuple[str, int], str | None]]:
        batch = [
            e
            for e in entries
            if e.ev == "send" and _item(e.data.get("msg") or {}, "function_call_output")
        ]
        return [
            (entry, numbered, self._names.get(numbered[0]))
            for entry, numbered in zip(batch, self._numbered(batch), strict=True)
        ]
