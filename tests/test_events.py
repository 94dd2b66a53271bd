import anyio
import pytest

from livebridge.events import (
    AudioOut,
    Closed,
    EventBuffer,
    EventsDropped,
    Interrupted,
    SessionEvent,
    TurnComplete,
)


async def drain(buffer: EventBuffer) -> list[SessionEvent]:
    buffer.close()
    out: list[SessionEvent] = []
    while (event := await buffer.get()) is not None:
        out.append(event)
    return out


async def test_overflow_drops_oldest_audio_and_reports_it() -> None:
    buffer = EventBuffer(capacity=3)
    for i in range(3):
        buffer.put(AudioOut(bytes([i])))
    buffer.put(AudioOut(b"\x09"))
    assert await drain(buffer) == [
        EventsDropped(1),
        AudioOut(b"\x01"),
        AudioOut(b"\x02"),
        AudioOut(b"\x09"),
    ]


async def test_control_events_are_never_dropped() -> None:
    buffer = EventBuffer(capacity=2)
    buffer.put(TurnComplete())
    buffer.put(Interrupted())
    buffer.put(AudioOut(b"late"))  # full of control events: the new audio is the one dropped
    buffer.put(Closed("done"))
    assert await drain(buffer) == [EventsDropped(1), TurnComplete(), Interrupted(), Closed("done")]
    assert buffer.dropped == 1


async def test_get_waits_for_the_next_event() -> None:
    buffer = EventBuffer()
    received: list[SessionEvent | None] = []

    async def reader() -> None:
        received.append(await buffer.get())

    async with anyio.create_task_group() as tg:
        tg.start_soon(reader)
        await anyio.wait_all_tasks_blocked()
        assert received == []
        buffer.put(Interrupted())
    assert received == [Interrupted()]


def test_capacity_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        EventBuffer(capacity=0)
