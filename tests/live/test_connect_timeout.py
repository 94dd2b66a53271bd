"""A service that accepts the connection, answers pings and never answers the session setup.

The emulator (a real TLS server) drops its ``setupComplete`` / ``session.updated``: opening the
session, first or resumed, ends after ``SessionOptions.connect_timeout`` with a
``ConnectTimeoutError`` naming the host, and the connection to the service is closed. Without
the bound the SDK waits for ever: each test is bounded itself.
"""

from __future__ import annotations

import time
from typing import Any

import anyio
import pytest

import livebridge
from livebridge import LiveSession, SessionOptions
from livebridge.emulator import Conversation, Emulator, Faults
from livebridge.errors import ConnectTimeoutError, SessionEndedError
from tests.support.gemini_sessions import open_session
from tests.support.timing import seconds

#: How long a test may take before it counts as hanging.
BOUND = seconds(30.0)
TIMEOUT = 0.5


def _no_setup_complete(payload: dict[str, Any]) -> bool:
    return "setupComplete" in payload


def _host(emu: Emulator) -> str:
    return emu.base_url.split("://", 1)[1].rstrip("/")


async def test_a_setup_never_answered_is_a_connect_timeout_naming_the_host() -> None:
    options = SessionOptions(connect_timeout=TIMEOUT)
    async with Emulator(faults=Faults(drop=_no_setup_complete)) as emu:
        began = time.monotonic()
        with anyio.fail_after(BOUND), pytest.raises(ConnectTimeoutError) as raised:
            async with open_session(emu, livebridge.ToolRegistry(), options=options):
                pass  # pragma: no cover (never opens)
        assert time.monotonic() - began < BOUND / 2
        with anyio.fail_after(BOUND):
            await emu.settled()  # the service side of the connection is closed
    error = raised.value
    assert isinstance(error, livebridge.LiveSessionError)
    assert error.host == _host(emu) and error.host in str(error)
    assert error.timeout == TIMEOUT and "0.5 s" in str(error)
    assert "connect_timeout" in str(error)


async def test_a_resumption_never_answered_ends_the_session_with_the_timeout() -> None:
    setups = 0

    def second_setup(payload: dict[str, Any]) -> bool:
        nonlocal setups
        setups += "setupComplete" in payload
        return "setupComplete" in payload and setups > 1

    async def scenario(conv: Conversation) -> None:
        await conv.expect_turn()
        await conv.resumption_update()
        conv.session.abort()

    options = SessionOptions(connect_timeout=TIMEOUT, reconnect_attempts=1)
    async with Emulator(scenario, faults=Faults(drop=second_setup)) as emu:
        with anyio.fail_after(BOUND), pytest.raises(SessionEndedError) as raised:
            async with open_session(emu, livebridge.ToolRegistry(), options=options) as session:
                await session.send_text("hello")
                await anyio.sleep_forever()
        with anyio.fail_after(BOUND):
            await emu.settled()
    assert setups == 2  # the first connection, then the one resumption allowed, timed out
    assert "gave up after 1 reconnects" in raised.value.reason
    assert isinstance(raised.value.error, ConnectTimeoutError)


async def test_openai_a_session_update_never_answered_is_a_connect_timeout() -> None:
    def no_session_updated(payload: dict[str, Any]) -> bool:
        return payload.get("type") == "session.updated"

    async with Emulator(protocol="openai", faults=Faults(drop=no_session_updated)) as emu:
        with anyio.fail_after(BOUND), pytest.raises(ConnectTimeoutError) as raised:
            async with LiveSession.connect(
                emu.openai_client(),
                model="gpt-realtime",
                tools=livebridge.ToolRegistry(),
                options=SessionOptions(connect_timeout=TIMEOUT),
            ):
                pass  # pragma: no cover (never opens)
        with anyio.fail_after(BOUND):
            await emu.settled()
    assert raised.value.host == _host(emu) and "session.update" in str(raised.value)
