"""What the caller has heard: frames, marks, the play head and barge-in, on a plain clock."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from livebridge.phone.playout import FRAME_BYTES, FRAME_SECONDS, MAX_MARKS, Playout
from tests.support.hypothesis_profiles import examples


def test_audio_goes_out_in_whole_20_ms_frames() -> None:
    playout = Playout()
    assert playout.audio(b"\x01" * 100, now=0.0) == []
    frames = playout.audio(b"\x02" * 300, now=0.0)
    assert [len(f) for f in frames] == [FRAME_BYTES, FRAME_BYTES]
    tail, name = playout.end_utterance(now=0.0)
    assert [len(f) for f in tail] == [FRAME_BYTES]  # 80 bytes padded with silence
    assert tail[0].endswith(b"\xff" * 80)
    assert name == "u1.1"
    assert abs(playout.unheard(0.0) - 3 * FRAME_SECONDS) < 1e-9


def test_a_mark_echo_says_the_utterance_was_heard_and_how_late() -> None:
    playout = Playout()
    playout.audio(b"\x01" * FRAME_BYTES * 50, now=10.0)  # one second
    _, name = playout.end_utterance(now=10.0)
    assert name is not None
    assert playout.pending(name)
    assert abs(playout.played(10.5) - 0.5) < 1e-9
    echo = playout.echoed(name, now=11.25)
    assert echo is not None
    assert echo.utterance == 1
    assert abs(echo.lag - 0.25) < 1e-9
    assert not playout.pending(name)
    assert playout.echoed(name, now=11.3) is None  # once
    assert playout.unheard(11.25) == 0.0


def test_no_mark_for_a_turn_without_audio() -> None:
    assert Playout().end_utterance(now=0.0) == ([], None)


def test_barge_in_says_what_was_played_and_drops_the_marks() -> None:
    playout = Playout()
    playout.audio(b"\x01" * FRAME_BYTES * 100, now=0.0)  # two seconds
    _, name = playout.mark(now=0.0)
    barge = playout.interrupt(now=0.5)
    assert barge is not None
    assert abs(barge.played - 0.5) < 1e-9
    assert abs(barge.unheard - 1.5) < 1e-9
    assert barge.marks == (name,)
    assert not playout.pending(name)
    assert playout.echoed(name, now=0.6) is None  # Twilio's echo of a cleared mark
    assert playout.interrupt(now=0.7) is None  # nothing left to clear


def test_a_barge_in_after_everything_played_sends_no_clear() -> None:
    playout = Playout()
    playout.audio(b"\x01" * FRAME_BYTES, now=0.0)
    _, name = playout.end_utterance(now=0.0)
    playout.echoed(name or "", now=0.05)
    assert playout.interrupt(now=1.0) is None


def test_marks_in_flight_are_bounded() -> None:
    playout = Playout()
    names = [playout.mark(now=0.0)[1] for _ in range(MAX_MARKS + 5)]
    assert not playout.pending(names[0])
    assert playout.pending(names[-1])


@settings(max_examples=examples(200), deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["audio", "end", "mark", "echo", "interrupt"]),
            st.integers(0, 2000),
            st.floats(0.0, 0.5),
        ),
        max_size=60,
    )
)
def test_the_play_head_stays_consistent(steps: list[tuple[str, int, float]]) -> None:
    playout = Playout()
    now = 0.0
    sent: list[str] = []
    for kind, size, advance in steps:
        now += advance
        if kind == "audio":
            assert all(len(f) == FRAME_BYTES for f in playout.audio(b"\x01" * size, now))
        elif kind in ("end", "mark"):
            frames, name = playout.end_utterance(now) if kind == "end" else playout.mark(now)
            assert all(len(f) == FRAME_BYTES for f in frames)
            if name is not None:
                sent.append(name)
        elif kind == "echo" and sent:
            name = sent.pop(0)
            echo = playout.echoed(name, now)
            assert echo is None or echo.lag >= 0.0
            assert not playout.pending(name)
        elif kind == "interrupt":
            barge = playout.interrupt(now)
            assert not any(playout.pending(n) for n in sent)
            if barge is not None:
                assert barge.unheard >= 0.0 and barge.played >= 0.0
        assert playout.unheard(now) >= 0.0
        assert playout.played(now) >= 0.0
