"""Replay a recorded session's server side to an app's tools, and report where the app diverged.

``replay(recording, tools)`` starts the emulator in replay mode (``Emulator(replay=...)``, see
``livebridge.emulator.gemini.replay`` and ``livebridge.emulator.openai_live.replay``: the side
the recording's vendor descriptor names) and connects a real ``LiveSession`` to it over TLS, as
the app would connect to the service. The emulator plays each recorded connection's server messages
(at the recorded pace, or as fast as the app's answers allow), issues the recorded tool calls
under fresh ids with its contract checker following each, and compares the app's answers with
the recorded ones. The report talks about the recording: each divergence names its line and the
recorded call id.

- ``unanswered``: a recorded answer the app never sent (within the answer timeout, or because
  the session left the connection before the replay reached it);
- ``kind_changed``: an answer whose kind changed (``ok`` <-> ``error``);
- ``value_changed``: an answer of the same kind whose values changed (an error's ``type``),
  naming the first fields that differ; ``ignore_fields`` are not compared (a name at any depth,
  or a dotted path from the answer's root: see ``livebridge.recording.report.differences``);
- ``batch_split``: calls answered together in the recording, apart now (or the other way);
- ``slow``: an answer over ``SLOW_FACTOR`` times the recorded latency plus ``SLOW_MARGIN``;
- ``unexpected_answer``: an answer to a call the recording never answered, or a second answer;
- ``handle_changed``: a reconnection that resumed another handle than the recorded one;
- ``connection_missing``: a recorded connection the app never opened (it did not reconnect
  within ``RECONNECT_WAIT`` seconds, or the answer timeout if longer, after leaving the one
  before).

A recording is read streamed and bounded, each field's type checked (``livebridge.recording.read``):
a bad one is a one-line ``RecordingError`` and exit 2 from ``livebridge replay``. At the
recorded pace a gap between entries longer than ``MAX_GAP`` seconds is played as ``MAX_GAP``.
"""

from __future__ import annotations

import contextlib
import functools
import os
import time
from collections.abc import Collection
from typing import TYPE_CHECKING, Any, Protocol

import anyio

from livebridge.calls.policy import CallPolicy
from livebridge.calls.tools import ToolRegistry
from livebridge.errors import RecordingError
from livebridge.recording.read import Recording, read_recording
from livebridge.recording.report import (
    RECONNECT_WAIT,
    Pace,
    ReplayReport,
)
from livebridge.vendors import DESCRIPTORS

if TYPE_CHECKING:
    from livebridge.emulator import Emulator

__all__ = [
    "assert_replays",
    "replay",
]


async def replay(
    recording: Recording | str | os.PathLike[str],
    tools: ToolRegistry,
    *,
    pace: Pace = "fast",
    policy: CallPolicy | None = None,
    answer_timeout: float | None = None,
    ignore_fields: Collection[str] = (),
    config: Any = None,
    deadline: float = 300.0,
) -> ReplayReport:
    """Play ``recording`` to ``tools`` through a real ``LiveSession`` on the emulator in replay
    mode; the report of what diverged. ``answer_timeout``: see ``default_answer_timeout``.
    After ``deadline`` seconds the replay stops and what it did not reach is reported."""
    from livebridge import profiles
    from livebridge.emulator import Emulator
    from livebridge.errors import SessionEndedError
    from livebridge.live.options import SessionOptions
    from livebridge.live.session import LiveSession

    if not isinstance(recording, Recording):
        recording = read_recording(recording)
    vendor = next(v for v in DESCRIPTORS if v.name == recording.vendor)
    if vendor.replay_model is None:
        raise RecordingError(
            f"{recording.path}: a recording of a {vendor.title} session, which replay does not play"
        )
    emulator = Emulator(
        replay=recording, pace=pace, answer_timeout=answer_timeout, ignore_fields=ignore_fields
    )
    player = emulator.replay
    assert player is not None
    if config is None and vendor.replay_config is not None:
        config = dict(vendor.replay_config)
    # A recording does not say its model: the documented defaults of its vendor's backend.
    profile = profiles.profile_for(vendor.replay_model, vendor.backend)
    async with emulator:
        session_cm = LiveSession.connect(
            emulator.client(),
            model=vendor.replay_model,
            tools=tools,
            config=config,
            policy=policy,
            options=SessionOptions(profile=profile),
        )
        # A session that ends on its own stops the replay early: what was missed is reported.
        with contextlib.suppress(SessionEndedError):
            async with session_cm as session, anyio.create_task_group() as tg:

                async def drain() -> None:
                    async for _ in session.events():
                        pass
                    tg.cancel_scope.cancel()

                tg.start_soon(drain)
                await _until_played(emulator, player, time.monotonic() + deadline)
                tg.cancel_scope.cancel()
        with contextlib.suppress(TimeoutError):
            await emulator.settled()
    return player.finish()


class _Player(Protocol):
    """What a replay side shows while it plays (each vendor's emulator side has one)."""

    done: bool
    between: float | None
    answer_timeout: float


async def _until_played(emulator: Emulator, player: _Player, deadline: float) -> None:
    """Until the recording was played to its end, the ``deadline`` (monotonic) passed, or the
    app left a connection and did not open the next recorded one within ``RECONNECT_WAIT`` (or
    the answer timeout, if longer): what was not reached is reported."""
    while not player.done:
        until = deadline
        if player.between is not None:
            wait = max(player.answer_timeout, RECONNECT_WAIT)
            until = min(until, player.between + wait)
        if time.monotonic() >= until:
            return
        changed = functools.partial(_moved_on, player, player.between)
        with contextlib.suppress(TimeoutError):
            await emulator.wait_for(changed, timeout=until - time.monotonic())


def _moved_on(player: _Player, between: float | None) -> bool:
    return player.done or player.between != between


def assert_replays(
    recording: Recording | str | os.PathLike[str],
    tools: ToolRegistry,
    *,
    pace: Pace = "fast",
    answer_timeout: float | None = None,
    ignore_fields: Collection[str] = (),
) -> ReplayReport:
    """For tests: ``replay`` from sync code (the CLI's path); ``AssertionError`` with the
    report if the app diverged. From async code, ``await replay(...)`` instead."""

    async def run() -> ReplayReport:
        return await replay(
            recording, tools, pace=pace, answer_timeout=answer_timeout, ignore_fields=ignore_fields
        )

    report = anyio.run(run)
    if not report.ok:
        raise AssertionError(report.render())
    return report


# -- the command ----------------------------------------------------------------------------------
