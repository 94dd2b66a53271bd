import time
import tracemalloc
from collections import Counter
from collections.abc import Iterator
from functools import partial

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from livebridge.calls.endings import OutcomeKind
from livebridge.protocol.events import (
    AudioOut,
    Closed,
    EventBuffer,
    EventsDropped,
    Interrupted,
    SessionEvent,
    ToolCallSettled,
    TurnComplete,
)
from tests.support.hypothesis_profiles import examples
from tests.support.timing import seconds


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
        EventsDropped(1, media=1),
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
    assert await drain(buffer) == [
        EventsDropped(1, media=1),
        TurnComplete(),
        Interrupted(),
        Closed("done"),
    ]
    assert buffer.dropped == 1


async def read_one(buffer: EventBuffer, into: list[SessionEvent | None]) -> None:
    into.append(await buffer.get())


async def test_get_waits_for_the_next_event() -> None:
    buffer = EventBuffer()
    received: list[SessionEvent | None] = []
    reader = partial(read_one, buffer, received)

    async with anyio.create_task_group() as tg:
        tg.start_soon(reader)
        await anyio.wait_all_tasks_blocked()
        assert received == []
        buffer.put(Interrupted())
    assert received == [Interrupted()]


async def test_a_reader_cancelled_while_waiting_leaves_the_others_waiting() -> None:
    buffer = EventBuffer()
    received: list[SessionEvent | None] = []
    reader = partial(read_one, buffer, received)

    async with anyio.create_task_group() as tg:
        tg.start_soon(reader)
        async with anyio.create_task_group() as inner:
            inner.start_soon(reader)
            await anyio.wait_all_tasks_blocked()
            inner.cancel_scope.cancel()  # the second reader leaves while it waits
        await anyio.wait_all_tasks_blocked()
        assert received == []
        buffer.put(TurnComplete())  # the first reader is still woken, once
    assert received == [TurnComplete()]
    assert len(buffer) == 0


async def test_close_wakes_every_waiting_reader_and_wait_returns_at_once_after() -> None:
    buffer = EventBuffer()
    received: list[SessionEvent | None] = []
    reader = partial(read_one, buffer, received)

    async with anyio.create_task_group() as tg:
        for _ in range(3):
            tg.start_soon(reader)
        await anyio.wait_all_tasks_blocked()
        buffer.close()
    assert received == [None, None, None]
    with anyio.fail_after(seconds(1)):
        await buffer.wait()  # closed: nothing to wait for


async def test_wait_returns_at_once_while_an_event_or_a_drop_report_waits() -> None:
    buffer = EventBuffer(capacity=1)
    buffer.put(AudioOut(b"a"))
    with anyio.fail_after(seconds(1)):
        await buffer.wait()
    buffer.put(AudioOut(b"b"))  # the first is discarded: a drop report and "b" wait
    assert list(buffer.ready()) == [EventsDropped(1, media=1), AudioOut(b"b")]
    buffer.put(AudioOut(b"c"))
    buffer.put(AudioOut(b"d"))
    assert len(buffer) == 1
    with anyio.fail_after(seconds(1)):
        await buffer.wait()


def test_capacity_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        EventBuffer(capacity=0)


async def test_an_app_that_never_reads_keeps_memory_bounded_and_every_fate() -> None:
    buffer = EventBuffer(capacity=8, control_capacity=16)
    for i in range(20_000):
        buffer.put(AudioOut(b"x"))
        buffer.put(TurnComplete())
        if i % 100 == 0:
            buffer.put(ToolCallSettled(f"c{i}", "f", "answered", "ok", 0.0))
    fates = 200
    assert len(buffer) <= 8 + 16 + fates
    assert len(buffer._items) <= 2 * (8 + 16 + fates) + 65  # discarded entries are compacted
    events = await drain(buffer)
    settled = [e.call_id for e in events if isinstance(e, ToolCallSettled)]
    assert settled == [f"c{i}" for i in range(0, 20_000, 100)]
    dropped = sum(e.count for e in events if isinstance(e, EventsDropped))
    assert dropped == buffer.dropped == 40_000 + fates - (len(events) - 1)


async def test_puts_stay_constant_time_when_full_of_control_events() -> None:
    buffer = EventBuffer(capacity=4, control_capacity=50_000)
    for _ in range(50_000):
        buffer.put(TurnComplete())
    started = time.perf_counter()
    for _ in range(10_000):
        buffer.put(AudioOut(b"x"))  # full and no media waiting: each is dropped at once
    assert time.perf_counter() - started < seconds(1.0)  # a scan per put would take minutes
    assert buffer.dropped == 10_000


@settings(max_examples=examples(200), deadline=None)
@given(
    st.lists(
        st.sampled_from(["audio", "turn", "fate", "read", "next"]),
        max_size=300,
    ),
    st.integers(1, 6),
    st.integers(1, 6),
    st.integers(1, 400),
)
def test_random_puts_and_reads_keep_order_and_count_every_fate(
    script: list[str], capacity: int, control: int, settled: int
) -> None:
    anyio.run(check_random_script, script, capacity, control, settled)


OUTCOMES: tuple[OutcomeKind, ...] = ("ok", "error", "timeout", "rejected")


async def check_random_script(script: list[str], capacity: int, control: int, settled: int) -> None:
    buffer = EventBuffer(capacity=capacity, control_capacity=control, settled_capacity=settled)
    put: list[SessionEvent] = []
    read: list[SessionEvent] = []
    reader: Iterator[SessionEvent] | None = None  # a ``ready()`` held across puts
    for step, action in enumerate(script):
        if action == "next":
            reader = reader or buffer.ready()
            if (taken := next(reader, None)) is None:
                reader = None  # it ends when nothing waits; the next read starts another
            else:
                read.append(taken)
            continue
        if action == "read":
            if len(buffer):
                event = await buffer.get()
                assert event is not None
                read.append(event)
            continue
        new: SessionEvent
        if action == "audio":
            new = AudioOut(bytes([step % 256]))
        elif action == "turn":
            new = TurnComplete(reason=str(step))
        else:
            new = ToolCallSettled(str(step), "f", "answered", OUTCOMES[step % len(OUTCOMES)], 0.0)
        buffer.put(new)
        put.append(new)
    read += await drain(buffer)
    delivered = [e for e in read if not isinstance(e, EventsDropped)]
    positions = [put.index(e) for e in delivered]
    assert positions == sorted(positions)  # order kept
    fates = Counter(e.ending for e in put if isinstance(e, ToolCallSettled))
    kept = Counter(e.ending for e in delivered if isinstance(e, ToolCallSettled))
    reports = [e for e in read if isinstance(e, EventsDropped)]
    assert sum((Counter(e.settled) for e in reports), Counter()) == fates - kept
    dropped = sum(e.count for e in reports)
    assert dropped == len(put) - len(delivered) == buffer.dropped
    assert all(e.count == e.media + e.control + sum(e.settled.values()) for e in reports)


async def test_fates_beyond_their_capacity_are_dropped_oldest_first_and_counted() -> None:
    buffer = EventBuffer(capacity=8, settled_capacity=100)
    for i in range(1600):
        buffer.put(ToolCallSettled(f"c{i}", "f", "answered", "ok" if i % 4 else "error", 0.0))
    assert len(buffer) == 100
    events = await drain(buffer)
    assert events[0] == EventsDropped(1500, settled={"error": 375, "ok": 1125})
    assert [e.call_id for e in events[1:] if isinstance(e, ToolCallSettled)] == [
        f"c{i}" for i in range(1500, 1600)
    ]


async def test_a_reader_that_stops_early_leaves_the_rest_queued() -> None:
    buffer = EventBuffer()
    fates = [ToolCallSettled(str(i), "f", "answered", "ok", 0.0) for i in range(3)]
    for fate in fates:
        buffer.put(fate)
    for event in buffer.ready():
        assert event == fates[0]
        break
    assert len(buffer) == 2
    assert await drain(buffer) == fates[1:]


def test_a_held_reader_sees_what_arrives_after_the_buffer_compacts() -> None:
    buffer = EventBuffer(capacity=1)
    fate = ToolCallSettled("1", "f", "answered", "ok", 0.0)
    buffer.put(fate)
    reader = buffer.ready()
    assert next(reader) == fate  # the reader is suspended now, as the app handles the fate
    chunks = [AudioOut(bytes([i])) for i in range(100)]  # each discards the one before
    for chunk in chunks:
        buffer.put(chunk)
    assert list(reader) == [EventsDropped(99, media=99), chunks[-1]]


def test_an_app_that_reads_as_events_come_keeps_memory_bounded() -> None:
    buffer = EventBuffer(capacity=8, control_capacity=16)
    for i in range(20_000):
        events: list[SessionEvent] = [
            AudioOut(bytes([i % 256])),
            TurnComplete(reason=str(i)),
            Interrupted(),
        ]
        for event in events:
            buffer.put(event)
        assert list(buffer.ready()) == events
    assert len(buffer._media) <= 8
    assert len(buffer._control) <= 16
    assert buffer.dropped == 0


@pytest.mark.parametrize("kind", ["media", "control", "settled"])
def test_a_waiting_event_costs_the_buffer_no_object_of_its_own(kind: str) -> None:
    # A reference in its kind's queue and one in the order: about 16 bytes an event, where an
    # entry made per event (a one-item list) made it 80.
    count = 10_000
    made: dict[str, SessionEvent] = {
        "media": AudioOut(b"x"),
        "control": Interrupted(),
        "settled": ToolCallSettled("c", "f", "answered", "ok", 0.0),
    }
    event = made[kind]
    room = 2 * count
    buffer = EventBuffer(capacity=room, control_capacity=room, settled_capacity=room)
    buffer.put(event)  # the queues are made
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(count):
            buffer.put(event)
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(buffer) == count + 1
    assert grown / count < 24


@settings(max_examples=examples(200), deadline=None)
@given(
    st.lists(
        st.one_of(
            st.just("read"),
            st.lists(st.sampled_from(["audio", "turn", "fate", "closed"]), max_size=12),
        ),
        max_size=60,
    ),
    st.integers(1, 8),
    st.integers(1, 8),
    st.integers(1, 8),
)
def test_putting_a_run_of_events_at_once_is_putting_each_in_turn(
    script: list[str | list[str]], capacity: int, control: int, settled: int
) -> None:
    # Below every capacity they go in at once; near one, each goes in as ``put`` takes it.
    whole = EventBuffer(capacity=capacity, control_capacity=control, settled_capacity=settled)
    each = EventBuffer(capacity=capacity, control_capacity=control, settled_capacity=settled)
    read_whole: list[SessionEvent] = []
    read_each: list[SessionEvent] = []
    made = 0
    for step in script:
        if step == "read":
            read_whole += list(whole.ready())
            read_each += list(each.ready())
            continue
        run: list[SessionEvent] = []
        for kind in step:
            made += 1
            if kind == "audio":
                run.append(AudioOut(bytes([made % 256])))
            elif kind == "turn":
                run.append(TurnComplete(reason=str(made)))
            elif kind == "fate":
                run.append(ToolCallSettled(str(made), "f", "answered", "ok", 0.0))
            else:
                run.append(Closed(str(made)))
        whole.put_all(run)
        for event in run:
            each.put(event)
        assert len(whole) == len(each)
    read_whole += anyio.run(drain, whole)
    read_each += anyio.run(drain, each)
    assert read_whole == read_each
    assert whole.dropped == each.dropped


async def test_a_run_put_at_once_wakes_a_waiting_reader() -> None:
    buffer = EventBuffer()
    got: list[SessionEvent | None] = []

    async def reader() -> None:
        got.append(await buffer.get())

    async with anyio.create_task_group() as tg:
        tg.start_soon(reader)
        await anyio.wait_all_tasks_blocked()
        buffer.put_all([Interrupted(), TurnComplete()])
    assert got == [Interrupted()]
    assert list(buffer.ready()) == [TurnComplete()]


async def test_a_stream_takes_each_event_only_when_asked_and_ends_once_closed_and_drained() -> None:
    # The same puts into a twin read with ``ready``: the stream reads what it reads.
    buffer, twin = EventBuffer(capacity=4), EventBuffer(capacity=4)
    fates = [ToolCallSettled(str(i), "f", "answered", "ok", 0.0) for i in range(3)]
    for fate in fates:
        buffer.put(fate)
        twin.put(fate)
    stream, held = buffer.stream(), twin.ready()
    assert await anext(stream) == next(held) == fates[0]  # suspended: the rest stay queued
    assert len(buffer) == 2
    for i in range(100):  # past the capacity: media discarded, oldest first
        buffer.put(AudioOut(bytes([i])))
        twin.put(AudioOut(bytes([i])))
    got: list[SessionEvent] = []

    async def read() -> None:
        async for event in stream:
            got.append(event)

    async with anyio.create_task_group() as tg:
        tg.start_soon(read)
        await anyio.wait_all_tasks_blocked()  # drained: it waits for more
        assert got == list(held)
        assert any(isinstance(event, EventsDropped) for event in got)
        buffer.put(Closed("done"))
        buffer.close()
    assert got[-1] == Closed("done")  # and the stream ended after it
