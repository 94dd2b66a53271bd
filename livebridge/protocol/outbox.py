"""The app's input waiting for the socket, and what happens to microphone audio meanwhile.

Sans-I/O. The writer asks ``take()`` for the next item; while a BLOCKING call waits for its
answer, audio follows the ``audio_during_blocking`` policy: ``hold`` keeps up to
``held_audio_seconds`` of it (oldest discarded beyond) and sends it right after the answer,
``send`` streams it anyway, ``drop`` discards it.

Bounded: the queue holds at most ``limit_bytes`` of input (audio bytes, text characters); past
that ``full`` is true and the session makes ``send_*`` wait until the writer catches up
(backpressure), so a server that stops reading cannot grow the process.
"""

from __future__ import annotations

from collections import deque
from typing import Literal

from livebridge.protocol.transport import Audio, ClientItem, Frames, Signal, Text, ToolAnswers

AudioPolicy = Literal["send", "hold", "drop"]


def item_size(item: ClientItem) -> int:
    """What ``item`` counts against the outbox limit (at least 1)."""
    if isinstance(item, Audio):
        return max(1, len(item.pcm))
    if isinstance(item, Text):
        return max(1, len(item.text))
    if isinstance(item, Signal):
        return 1
    if isinstance(item, Frames):
        return max(1, len(item.messages))
    return max(1, len(item.responses))


class Outbox:
    """Input in the order the app sent it, with held audio going first once a call is answered."""

    __slots__ = (
        "_held",
        "_held_bytes",
        "_queue",
        "_queued",
        "audio_dropped",
        "held_audio_seconds",
        "limit_bytes",
        "policy",
    )

    def __init__(
        self,
        policy: AudioPolicy = "hold",
        held_audio_seconds: float = 10.0,
        limit_bytes: int = 1024 * 1024,
    ) -> None:
        if limit_bytes < 1:
            raise ValueError("the outbox limit must be at least 1 byte")
        self.policy: AudioPolicy = policy
        self.held_audio_seconds = held_audio_seconds
        self.limit_bytes = limit_bytes
        self.audio_dropped = 0
        # Created on first use: an empty deque preallocates a block, and most sessions never
        # queue (audio goes straight to the socket) or hold anything.
        self._queue: deque[ClientItem] | None = None
        self._queued = 0
        self._held: deque[Audio] | None = None
        self._held_bytes = 0

    def __bool__(self) -> bool:
        return bool(self._queue or self._held)

    @property
    def full(self) -> bool:
        """The queue reached ``limit_bytes``: senders should wait for the writer."""
        return self._queued >= self.limit_bytes

    def push(self, item: ClientItem) -> None:
        queue = self._queue
        if queue is None:
            queue = self._queue = deque()
        queue.append(item)
        self._queued += item_size(item)

    def push_front(self, item: ClientItem) -> None:
        """Put back an item whose send failed, ahead of everything else."""
        if isinstance(item, ToolAnswers | Frames):
            raise ValueError("tool answers are requeued by the ledger, not the outbox")
        queue = self._queue
        if queue is None:
            queue = self._queue = deque()
        queue.appendleft(item)
        self._queued += item_size(item)

    def take(self, *, blocking: bool) -> ClientItem | None:
        """The next item to send; ``blocking``: a BLOCKING call is waiting for its answer."""
        held = self._held
        if not blocking and held:
            audio = held.popleft()
            self._held_bytes -= len(audio.pcm)
            return audio
        queue = self._queue
        while queue:
            item = queue.popleft()
            self._queued -= item_size(item)
            if not isinstance(item, Audio) or not blocking or self.policy == "send":
                return item
            if self.policy == "hold":
                self._hold(item)
            else:
                self.audio_dropped += 1
        return None

    def _hold(self, audio: Audio) -> None:
        held = self._held
        if held is None:
            held = self._held = deque()
        held.append(audio)
        self._held_bytes += len(audio.pcm)
        limit = self.held_audio_seconds * audio.rate * 2
        while self._held_bytes > limit and held:
            self._held_bytes -= len(held.popleft().pcm)
            self.audio_dropped += 1
